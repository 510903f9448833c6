package tui

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/search"
)

// Small renderers shared by the screens: aligned columns, a bar chart, a
// gauge, number formats. They are pure functions of their arguments.

func padRight(s string, w int) string {
	if n := ansi.StringWidth(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

func padLeft(s string, w int) string {
	if n := ansi.StringWidth(s); n < w {
		return strings.Repeat(" ", w-n) + s
	}
	return s
}

func truncate(s string, w int) string {
	if w <= 0 {
		return ""
	}
	return ansi.Truncate(s, w, "…")
}

// truncateLeft keeps the end of s (a path's file name) within w cells.
func truncateLeft(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.TruncateLeft(s, ansi.StringWidth(s)-w+1, "…")
}

func wrap(s string, w int) string {
	if w <= 0 {
		return s
	}
	return ansi.Wrap(s, w, " ")
}

// wrapAtSpaces wraps plain text to w cells, breaking only between words
// (not after a hyphen, as wrap does: "--job-te" stays whole, so a copied
// flag or path still works); a word longer than a line is split over
// lines rather than cut.
func wrapAtSpaces(s string, w int) string {
	if w <= 0 {
		return s
	}
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			switch {
			case line == "":
				line = word
			case ansi.StringWidth(line)+1+ansi.StringWidth(word) <= w:
				line += " " + word
			default:
				out = append(out, line)
				line = word
			}
			for ansi.StringWidth(line) > w {
				out = append(out, ansi.Truncate(line, w, ""))
				line = ansi.TruncateLeft(line, w, "")
			}
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// styleLines splits text into its lines, each rendered in style (lipgloss
// would pad a block's lines to one width).
func styleLines(style lipgloss.Style, text string) []string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = style.Render(l)
	}
	return lines
}

// hanging wraps text to w after a bullet, the continuation lines indented
// under the text.
func hanging(bullet, text string, w int) string {
	ind := strings.Repeat(" ", ansi.StringWidth(bullet))
	lines := strings.Split(wrap(text, w-len(ind)), "\n")
	for i := range lines {
		if i == 0 {
			lines[i] = bullet + lines[i]
		} else {
			lines[i] = ind + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// column is one column of a table: a fixed width, or flex (the rest of
// the line, at least min cells).
type column struct {
	title string
	width int
	flex  bool
	right bool
}

// table lays out rows in aligned columns, two spaces apart.
type table struct {
	cols   []column
	widths []int
}

func newTable(w int, cols ...column) table {
	t := table{cols: cols, widths: make([]int, len(cols))}
	fixed := 0
	flex := 0
	for i, c := range cols {
		t.widths[i] = c.width
		if c.flex {
			flex++
		} else {
			fixed += c.width
		}
	}
	fixed += 2 * (len(cols) - 1)
	if flex > 0 {
		rest := max(w-fixed, 0) / flex
		for i, c := range cols {
			if c.flex {
				t.widths[i] = max(rest, c.width)
			}
		}
	}
	return t
}

// row aligns cells (which may be styled) into the columns.
func (t table) row(cells ...string) string {
	parts := make([]string, len(t.cols))
	for i := range t.cols {
		c := ""
		if i < len(cells) {
			c = cells[i]
		}
		c = truncate(c, t.widths[i])
		if t.cols[i].right {
			parts[i] = padLeft(c, t.widths[i])
		} else {
			parts[i] = padRight(c, t.widths[i])
		}
	}
	return strings.TrimRight(strings.Join(parts, "  "), " ")
}

// offset is the cell at which column i starts.
func (t table) offset(i int) int {
	o := 0
	for _, w := range t.widths[:i] {
		o += w + 2
	}
	return o
}

func (t table) header(st Styles) string {
	cells := make([]string, len(t.cols))
	for i, c := range t.cols {
		cells[i] = c.title
	}
	return st.Header.Render(t.row(cells...))
}

// scrollWindow returns the first row to show so that cursor stays within
// a window of h rows starting near offset.
func scrollWindow(offset, cursor, n, h int) int {
	if h <= 0 {
		return 0
	}
	if cursor < offset {
		offset = cursor
	}
	if cursor >= offset+h {
		offset = cursor - h + 1
	}
	return max(min(offset, n-h), 0)
}

var eighths = []rune(" ▁▂▃▄▅▆▇█")

// barChart draws values as vertical bars h rows high, one column each,
// the last w values, scaled between a floor a little under the minimum and
// the maximum so step-to-step variation shows. styleOf colours a column.
func barChart(vals []float64, w, h int, styleOf func(i int) lipgloss.Style) []string {
	if len(vals) > w {
		off := len(vals) - w
		vals = vals[off:]
		inner := styleOf
		styleOf = func(i int) lipgloss.Style { return inner(i + off) }
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	floor := lo - (hi-lo)*0.25
	if hi == lo {
		floor = lo * 0.5
	}
	floor = math.Max(floor, 0)
	rows := make([]strings.Builder, h)
	for i, v := range vals {
		level := 1.0
		if hi > floor {
			level = (v - floor) / (hi - floor)
		}
		n := int(math.Round(level * float64(h*8)))
		n = max(n, 1)
		st := styleOf(i)
		for r := range h {
			fill := min(max(n-(h-1-r)*8, 0), 8)
			rows[r].WriteString(st.Render(string(eighths[fill])))
		}
	}
	out := make([]string, h)
	for r := range rows {
		out[r] = rows[r].String()
	}
	return out
}

// gauge is a horizontal bar of w cells filled to frac.
func gauge(frac float64, w int, full, empty lipgloss.Style) string {
	frac = math.Min(math.Max(frac, 0), 1)
	n := int(math.Round(frac * float64(w)))
	return full.Render(strings.Repeat("█", n)) + empty.Render(strings.Repeat("░", w-n))
}

// fmtDur is a short duration: 45s, 3m12s, 1h05m.
func fmtDur(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour && d%time.Minute == 0:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// fmtMs formats a time in milliseconds with the precision it deserves.
func fmtMs(ms float64) string {
	switch {
	case ms <= 0:
		return "—"
	case ms < 10:
		return fmt.Sprintf("%.2f", ms)
	case ms < 1000:
		return fmt.Sprintf("%.1f", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.0f", ms)
	}
	return fmtDur(time.Duration(ms * float64(time.Millisecond)))
}

// fmtJob is a job-level time: seconds with a decimal, or minutes.
func fmtJob(ms float64) string {
	switch {
	case ms <= 0:
		return "—"
	case ms < 60_000:
		return fmt.Sprintf("%.1fs", ms/1000)
	}
	return fmtDur(time.Duration(ms * float64(time.Millisecond)))
}

func fmtGiB(mib int64) string { return fmt.Sprintf("%.1f", float64(mib)/1024) }

func fmtSpeedup(x float64) string {
	if x <= 0 {
		return "—"
	}
	// Three decimals: graphs often win by a few per cent, which two
	// decimals would round away.
	return fmt.Sprintf("%.3f×", x)
}

// nameWidth is the width of a candidate column: the longest name (with its
// warm-up), at most most cells, at least 16.
func nameWidth(cands []presets.Candidate, most int) int {
	w := len("CANDIDATE")
	for _, c := range cands {
		w = max(w, ansi.StringWidth(c.Name()))
	}
	return max(min(w, most), 16)
}

// nameCell is a candidate's name cut to w cells without losing its
// warm-up: the label gives way, " w3" stays.
func nameCell(c presets.Candidate, w int) string {
	name := c.Name()
	if ansi.StringWidth(name) <= w || !c.Graphed() {
		return truncate(name, w)
	}
	suffix := fmt.Sprintf(" w%d", c.Warmup)
	return truncate(c.Label(), w-len(suffix)) + suffix
}

// jobMemory is what a result needs per GPU in the real job and the memory
// it is compared with: the memory model's breakdown when the engine made
// one, else the run's peak with its graph memory scaled to the job against
// gpuMiB (the job GPU's memory; 0 when unknown). what says which.
func jobMemory(r engine.Result, gpuMiB int64) (need, total int64, what string) {
	if b := r.Memory.Breakdown; b != nil {
		return b.Total, b.GPUMiB, "per GPU in the job"
	}
	return search.JobPeakMiB(r), gpuMiB, "peak in the job"
}

// nextIn returns the element after cur in list (wrapping); the first when
// cur is not in it.
func nextIn[T comparable](list []T, cur T, step int) T {
	if len(list) == 0 {
		return cur
	}
	i := slices.Index(list, cur)
	if i < 0 {
		return list[0]
	}
	return list[((i+step)%len(list)+len(list))%len(list)]
}
