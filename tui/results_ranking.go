package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/search"
)

// The results screen's ranking table, why the winner won, and the details
// of a candidate: its times, graphs and memory in the job.

// reasonLines say why the winner won (ties, memory, fit), at most n lines.
func (s *resultsScreen) reasonLines(w, n int) []string {
	st := s.st
	why := search.Reason(s.done.Ranking, s.rankOptions())
	if ref := s.done.Reference.Describe(s.done.Winner); ref != "" {
		why += ". Reference: " + ref
	}
	lines := strings.Split(wrap("Why: "+why, w), "\n")
	if len(lines) > n {
		// The last line shown says there is more, even a full one.
		lines = lines[:n]
		lines[n-1] = ansi.Truncate(lines[n-1], w-1, "") + "…"
	}
	for i := range lines {
		lines[i] = st.Muted.Render(lines[i])
	}
	return lines
}

// memoryLine is the selected candidate's memory in the job, for the
// narrow layout (the wide one shows it in the details): the total against
// the job GPU, a warning when it will not fit, and the memory model's
// breakdown on a second line when the engine made one.
func (s *resultsScreen) memoryLine(w int) []string {
	rk, ok := s.shownCandidate()
	if !ok || rk.Result.Failed() {
		return nil
	}
	st := s.st
	req := s.ranRequest()
	need, total, what := jobMemory(rk.Result, jobGPUMiB(req))
	text := fmt.Sprintf("%s GiB %s", fmtGiB(need), what)
	if total > 0 {
		text = fmt.Sprintf("%s of %s GiB %s", fmtGiB(need), fmtGiB(total), what)
	}
	b := rk.Result.Memory.Breakdown
	if b == nil {
		text += fmt.Sprintf(" (graphs %s GiB)", fmtGiB(rk.Result.Memory.JobGraphMiB()))
	}
	if rk.Result.Source == engine.SourceEstimated {
		text += " · estimated"
	}
	var lines []string
	if rk.Fits {
		lines = append(lines, st.Muted.Render(truncate("Memory "+text, w)))
	} else {
		lines = append(lines, st.Warn.Render(truncate("⚠ will not fit the job's GPU: "+text, w)))
	}
	if b != nil {
		lines = append(lines, st.Faint.Render(truncate(fmt.Sprintf("  weights %s · grads %s · optimizer %s · activations %s · graphs %s · context %s GiB",
			fmtGiB(b.Weights), fmtGiB(b.Gradients), fmtGiB(b.Optimizer), fmtGiB(b.Activations), fmtGiB(b.Graphs), fmtGiB(b.Context)), w)))
	}
	return lines
}

// fitLines keeps the first h lines, ending in … when some were left out.
func fitLines(lines []string, h, w int) []string {
	out := make([]string, 0, h)
	for i, l := range lines {
		if i >= h {
			break
		}
		if i == h-1 && len(lines) > h {
			l = "…"
		}
		out = append(out, truncate(l, w))
	}
	return out
}

// rankingWidth is the width the ranking table needs for its longest name
// (a derived row's "≈ " included) with every column.
func (s *resultsScreen) rankingWidth() int {
	longest := 0
	for _, rk := range s.ranking() {
		longest = max(longest, ansi.StringWidth(candName(rk.Result.Candidate)))
	}
	return longest + 2 + 2 + 7 + 6 + 7 + 9 + 6 + 4 + 3 + 2*8
}

func (s *resultsScreen) rankingTable(w, h int) string {
	st := s.st
	r := s.ranking()
	cols := s.rankingColumns(w, r)
	var b strings.Builder
	b.WriteString(cols.t.header(st) + "\n")
	rows := max(h-1, 1)
	s.offset = scrollWindow(s.offset, s.cursor, len(r), rows)
	for i := s.offset; i < len(r) && i < s.offset+rows; i++ {
		line := s.rankingRow(cols, r[i], i == s.cursor)
		b.WriteString(line + "\n")
	}
	if len(r) == 0 {
		b.WriteString(st.Faint.Render("no candidate finished") + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// rankingCols is the ranking table's columns, the ones a window's width
// leaves.
type rankingCols struct {
	t                    table
	vsCol, capture, wide bool
}

// rankingColumns lays the ranking out in w cells. The name column is as
// wide as the names (with their warm-up and a "≈ " for derived rows); in
// a narrow window the capture column goes first, then graph memory and
// job time (the lines under the table and the details have them), before
// the names are cut.
func (s *resultsScreen) rankingColumns(w int, r []search.Ranked) rankingCols {
	var cands []presets.Candidate
	for _, rk := range r {
		cands = append(cands, rk.Result.Candidate)
	}
	c := rankingCols{capture: w >= 100, wide: w >= 70, vsCol: w >= 80}
	cols := []column{
		{title: "#", width: 2, right: true},
		{title: "CANDIDATE"},
		{title: "STEP ms", width: 7, right: true},
		{title: "×EAGER", width: 6, right: true},
	}
	if c.vsCol {
		cols = append(cols, column{title: "×RECIPE", width: 7, right: true})
	}
	if c.capture {
		cols = append(cols, column{title: "CAPT ms", width: 7, right: true})
	}
	if c.wide {
		cols = append(cols, column{title: "GRAPH MiB", width: 9, right: true}, column{title: "JOB", width: 6, right: true})
	}
	cols = append(cols,
		column{title: "FITS", width: 4},
		column{title: "TIE", width: 3, flex: true},
	)
	fixed := 2 * (len(cols) - 1)
	for _, col := range cols {
		fixed += col.width
	}
	cols[1].width = nameWidth(cands, w-fixed-2) + 2
	c.t = newTable(w, cols...)
	return c
}

// row takes every column's cell and lays out the shown columns'.
func (c rankingCols) row(all ...string) string {
	out := all[:4:4]
	if c.vsCol {
		out = append(out, all[4])
	}
	if c.capture {
		out = append(out, all[5])
	}
	if c.wide {
		out = append(out, all[6], all[7])
	}
	return c.t.row(append(out, all[8:]...)...)
}

// rankingRow is a candidate's row: ★ for the winner, ≈ for a derived one,
// its times against eager and the recipe's setting, its graph memory,
// job time, whether it fits and its tie group.
func (s *resultsScreen) rankingRow(c rankingCols, rk search.Ranked, cur bool) string {
	st := s.st
	res := rk.Result
	prefix := ""
	if rk.Derived {
		prefix = "≈ "
	}
	candW := c.t.widths[1]
	label := prefix + nameCell(res.Candidate, candW-len([]rune(prefix)))
	rank := fmt.Sprintf("%d", rk.Rank)
	if rk.Rank <= 0 {
		rank = "–"
	}
	if res.Candidate.Key() == s.winnerKey() {
		rank = "★"
	}
	var line string
	if res.Failed() {
		line = st.Err.Render(c.row(rank, label, "failed", "", "", "", string(res.ErrKind), "", "—", ""))
	} else {
		line = c.row(rank, label, fmtMs(res.Step.Median), fmtSpeedup(res.Speedup), s.vsRecipe(rk), fmtMs(res.CaptureMs),
			fmt.Sprintf("%d", res.Memory.JobGraphMiB()), fmtJob(rk.JobMs), fitsText(rk), tieCell(rk))
		switch {
		case cur:
			line = st.Cursor.Render(line)
		case !rk.Fits:
			line = st.Warn.Render(line)
		}
	}
	if cur && st.Plain {
		line = "›" + strings.TrimPrefix(line, " ")
	}
	return line
}

// winnerKey is the winner's candidate key, "" when none won.
func (s *resultsScreen) winnerKey() string {
	if s.done.Winner == nil {
		return ""
	}
	return s.done.Winner.Result.Candidate.Key()
}

// vsRecipe is a row's speed-up over the recipe's own setting; "ref" on
// that setting's row.
func (s *resultsScreen) vsRecipe(rk search.Ranked) string {
	vs := "—"
	if rk.VsReference > 0 {
		vs = fmtSpeedup(rk.VsReference)
	}
	if rk.Result.Candidate.Key() == s.done.ReferenceKey() {
		vs = "ref"
	}
	return vs
}

func fitsText(rk search.Ranked) string {
	if !rk.Fits {
		return "NO"
	}
	return "yes"
}

// tieCell is "=N" for a row tied with the N-th tie group.
func tieCell(rk search.Ranked) string {
	if rk.Tie > 0 {
		return fmt.Sprintf("=%d", rk.Tie)
	}
	return ""
}

// resultDetail describes one ranked candidate in full.
func (s *resultsScreen) resultDetail(rk search.Ranked, w int) []string {
	st := s.st
	res := rk.Result
	kv := func(k, v string) string { return truncate(st.Label.Render(padRight(k, 10))+st.Value.Render(v), w) }
	rank := fmt.Sprintf("#%d", rk.Rank)
	if rk.Rank <= 0 {
		rank = "failed"
	}
	lines := []string{st.Title.Render("Details") + "  " + st.Muted.Render(fmt.Sprintf("%s %s · %s", rank, candName(res.Candidate), res.Source))}
	if res.Failed() {
		return append(lines, st.Err.Render(wrap(string(res.ErrKind)+": "+res.Err, w)))
	}
	lines = append(lines,
		kv("step", stepText(res)),
		kv("eager", fmt.Sprintf("%s ms → %s", fmtMs(res.Eager.Median), fmtSpeedup(res.Speedup))),
		kv("capture", captureText(res)),
		kv("memory", memoryText(res)),
	)
	lines = append(lines, s.breakdownLines(rk, w)...)
	lines = append(lines,
		kv("job", fmt.Sprintf("%s for the whole job · fits: %v", fmtJob(rk.JobMs), rk.Fits)),
		kv("device", strings.TrimSpace(res.Device.Name+" "+res.Device.Driver)),
	)
	if res.Scaling != "" {
		lines = append(lines, kv("scaling", res.Scaling))
	}
	if rk.Note != "" {
		for i, l := range strings.Split(wrap(rk.Note, w-10), "\n") {
			k := ""
			if i == 0 {
				k = "note"
			}
			lines = append(lines, kv(k, l))
		}
	}
	for _, n := range res.Notes {
		lines = append(lines, st.Faint.Render(hanging("· ", n, w)))
	}
	return lines
}

// breakdownLines show where a candidate's memory in the job goes: the
// memory model's breakdown when the engine made one, else its peak against
// the job GPU; a warning when it will not fit.
func (s *resultsScreen) breakdownLines(rk search.Ranked, w int) []string {
	st := s.st
	res := rk.Result
	req := s.ranRequest()
	need, total, what := jobMemory(res, jobGPUMiB(req))
	var lines []string
	if b := res.Memory.Breakdown; b != nil {
		lines = append(lines, truncate(st.Label.Render(padRight("", 10))+st.Muted.Render(fmt.Sprintf(
			"weights %s · grads %s · optimizer %s · activations %s · graphs %s · context %s GiB", fmtGiB(b.Weights), fmtGiB(b.Gradients),
			fmtGiB(b.Optimizer), fmtGiB(b.Activations), fmtGiB(b.Graphs), fmtGiB(b.Context))), w))
	}
	text := fmt.Sprintf("%s GiB %s", fmtGiB(need), what)
	if total > 0 {
		frac := float64(need) / float64(total)
		barW := 20
		text = gauge(frac, barW, st.Gauge(frac), st.GaugeEmpty()) + " " +
			fmt.Sprintf("%s of %s GiB %s", fmtGiB(need), fmtGiB(total), what)
	}
	if res.Source == engine.SourceEstimated {
		text += " · estimated"
	}
	line := st.Label.Render(padRight("in job", 10))
	if !rk.Fits {
		line += st.Warn.Render("⚠ will not fit ")
	}
	return append(lines, truncate(line+text, w))
}

// stepText is the step time with its spread; an estimate has none.
func stepText(r engine.Result) string {
	if r.Source == engine.SourceEstimated {
		return fmt.Sprintf("%s ms (estimated: one computed step, no spread)", fmtMs(r.Step.Median))
	}
	return fmt.Sprintf("%s ms (p10 %s · p90 %s · %d steps)", fmtMs(r.Step.Median), fmtMs(r.Step.P10), fmtMs(r.Step.P90), r.Step.N)
}

func captureText(r engine.Result) string {
	s := fmt.Sprintf("%s ms · %d graphs · %d nodes", fmtMs(r.CaptureMs), r.Graphs, r.Nodes)
	if r.WarmupMs > 0 {
		s += fmt.Sprintf(" · warm-up %s ms", fmtMs(r.WarmupMs))
	}
	return s
}

func memoryText(r engine.Result) string {
	m := r.Memory
	s := fmt.Sprintf("graphs %d MiB per rank in the job", m.JobGraphMiB())
	if m.GraphMiB != m.JobGraphMiB() {
		s += fmt.Sprintf(" (the run measured %d MiB)", m.GraphMiB)
	}
	if m.DevicePeakMiB > 0 {
		s += fmt.Sprintf(" · device peak %d MiB", m.DevicePeakMiB)
	}
	return s
}

// candName is the label with the warm-up, which only matters when graphed.
func candName(c presets.Candidate) string {
	if !c.Graphed() {
		return c.Label()
	}
	return fmt.Sprintf("%s w%d", c.Label(), c.Warmup)
}
