package tui

import (
	"fmt"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"cgtune/engine"
	"cgtune/search"
	"cgtune/stepmodel"
)

// The results screen's ranking table, why the winner won, and the details
// of a candidate: its times, graphs and memory in the job.

// reasonLines say why the winner won (ties, memory, fit) and how it
// compares with the recipe's own setting, whole, wrapped to w.
// An estimate says what it rests on (search.Basis) and when it cannot
// tell the candidates apart (search.OneTie).
func (s *resultsScreen) reasonLines(w int) []string {
	why := search.Reason(s.done.Ranking, s.rankOptions())
	if ref := s.done.Reference.Describe(s.done.Winner); ref != "" {
		why += ". Reference: " + ref
	}
	lines := styleLines(s.st.Muted, wrap("Why: "+why, w))
	if one := search.OneTie(s.done.Ranking); one != "" {
		lines = append(lines, styleLines(s.st.Warn, wrap(one, w))...)
	}
	if basis := search.Basis(s.done.Ranking); basis != "" {
		lines = append(lines, styleLines(s.st.Warn, wrap(basis, w))...)
	}
	return lines
}

// rankingWidth is the width the ranking table needs for its longest name
// (a derived row's "≈ " included) with every column.
func (s *resultsScreen) rankingWidth() int {
	longest := 0
	for _, rk := range s.ranking() {
		longest = max(longest, ansi.StringWidth(rk.Result.Candidate.Name()))
	}
	return longest + 2 + 2 + 7 + 6 + 7 + 9 + 6 + 4 + 3 + 2*8
}

// rankingTable is the ranking in h lines: its header, then the rows from
// the scroll offset, the cursor's row among them.
func (s *resultsScreen) rankingTable(w, h int) string {
	st := s.st
	r := s.ranking()
	cols := s.rankingColumns(w, r)
	var b strings.Builder
	b.WriteString(cols.t.header(st) + "\n")
	rows := max(h-1, 1)
	heights := s.rowHeights(cols)
	s.offset = scrollRows(s.offset, s.cursor, rows, heights)
	used := 0
	for i := s.offset; i < len(r); i++ {
		lines := s.rankingRow(cols, r[i], i == s.cursor)
		if used+len(lines) > rows {
			break
		}
		used += len(lines)
		b.WriteString(strings.Join(lines, "\n") + "\n")
	}
	if len(r) == 0 {
		b.WriteString(st.Faint.Render("no candidate finished") + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// rowHeights are the lines each ranking row takes in the columns.
func (s *resultsScreen) rowHeights(c rankingCols) []int {
	r := s.ranking()
	out := make([]int, len(r))
	for i, rk := range r {
		out[i] = len(c.nameLines(rk))
	}
	return out
}

// rankingCols is the ranking table's columns, the ones a window's width
// leaves.
type rankingCols struct {
	t                             table
	vsCol, capture, graph, jobCol bool
}

// rankingColumns lays the ranking out in w cells. The name column is as
// wide as the names (with their warm-up and a "≈ " for derived rows); a
// narrow window gives up, in order, the capture time, the job time, the
// graph memory and the speed-up over the recipe's setting (the details
// have them all) before a name goes on over two lines. No name is cut.
func (s *resultsScreen) rankingColumns(w int, r []search.Ranked) rankingCols {
	longest := len("CANDIDATE")
	for _, rk := range r {
		name := rk.Result.Candidate.Name()
		if rk.Derived {
			name = "≈ " + name
		}
		longest = max(longest, ansi.StringWidth(name))
	}
	c := rankingCols{capture: w >= 100, jobCol: true, graph: true, vsCol: true}
	drops := []*bool{&c.capture, &c.jobCol, &c.graph, &c.vsCol}
	for _, d := range drops {
		if c.fixedWidth()+longest <= w {
			break
		}
		*d = false
	}
	cols := []column{
		{title: "#", width: 2, right: true},
		{title: "CANDIDATE", width: max(min(longest, w-c.fixedWidth()), 12)},
		{title: "STEP ms", width: 7, right: true},
		{title: "×EAGER", width: 6, right: true},
	}
	if c.vsCol {
		cols = append(cols, column{title: "×RECIPE", width: 7, right: true})
	}
	if c.capture {
		cols = append(cols, column{title: "CAPT ms", width: 7, right: true})
	}
	if c.graph {
		cols = append(cols, column{title: "GRAPH MiB", width: 9, right: true})
	}
	if c.jobCol {
		cols = append(cols, column{title: "JOB", width: 6, right: true})
	}
	cols = append(cols,
		column{title: "FITS", width: 4},
		column{title: "TIE", width: 3, flex: true},
	)
	c.t = newTable(w, cols...)
	return c
}

// fixedWidth is the width of the columns shown other than the name, with
// the gaps between all of them.
func (c rankingCols) fixedWidth() int {
	n, cols := 2+7+6+4+3, 6 // #, step, ×eager, fits, tie; and the name
	for _, col := range []struct {
		on bool
		w  int
	}{{c.vsCol, 7}, {c.capture, 7}, {c.graph, 9}, {c.jobCol, 6}} {
		if col.on {
			n += col.w
			cols++
		}
	}
	return n + 2*(cols-1)
}

// row takes every column's cell and lays out the shown columns'.
func (c rankingCols) row(all ...string) string {
	out := all[:4:4]
	for i, on := range []bool{c.vsCol, c.capture, c.graph, c.jobCol} {
		if on {
			out = append(out, all[4+i])
		}
	}
	return c.t.row(append(out, all[8:]...)...)
}

// nameLines are a row's name ("≈ " before a derived one) in the name
// column: one line, or broken after a comma or a space over as many as
// it takes, so that it is never cut.
func (c rankingCols) nameLines(rk search.Ranked) []string {
	name := rk.Result.Candidate.Name()
	if rk.Derived {
		name = "≈ " + name
	}
	w := c.t.widths[1]
	if ansi.StringWidth(name) <= w {
		return []string{name}
	}
	return strings.Split(ansi.Wrap(name, w, ", "), "\n")
}

// rankingRow is a candidate's row: ★ for the winner, ≈ for a derived one,
// its times against eager and the recipe's setting, its graph memory,
// job time, whether it fits and its tie group; a long name goes on on
// the lines under it.
func (s *resultsScreen) rankingRow(c rankingCols, rk search.Ranked, cur bool) []string {
	st := s.st
	res := rk.Result
	names := c.nameLines(rk)
	rank := fmt.Sprintf("%d", rk.Rank)
	if rk.Rank <= 0 {
		rank = "–"
	}
	if res.Candidate.Key() == s.winnerKey() {
		rank = "★"
	}
	style := lipgloss.NewStyle()
	var line string
	if res.Failed() {
		// The failure spans the number columns: its kind is what to read.
		style = st.Err
		line = padRight(c.t.row(rank, names[0]), c.t.offset(2)) + "failed: " + string(res.ErrKind)
	} else {
		line = c.row(rank, names[0], fmtMs(res.Step.Median), fmtSpeedup(res.Speedup), s.vsRecipe(rk), fmtMs(res.CaptureMs),
			fmt.Sprintf("%d", res.Memory.JobGraphMiB()), fmtJob(rk.JobMs), fitsText(rk), tieCell(rk))
		switch {
		case cur:
			style = st.Cursor
		case !rk.Fits:
			style = st.Warn
		}
	}
	if cur && st.Plain {
		line = "›" + strings.TrimPrefix(line, " ")
	}
	out := []string{style.Render(line)}
	for _, n := range names[1:] {
		out = append(out, style.Render(strings.Repeat(" ", c.t.offset(1))+n))
	}
	return out
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
	// A value too long for its line goes on under itself, never cut.
	kv := func(k, v string) string {
		parts := strings.Split(wrapAtSpaces(v, max(w-10, 10)), "\n")
		for i, p := range parts {
			label := ""
			if i == 0 {
				label = k
			}
			parts[i] = st.Label.Render(padRight(label, 10)) + st.Value.Render(p)
		}
		return strings.Join(parts, "\n")
	}
	var lines []string
	if res.Failed() {
		return append(lines, styleLines(st.Err, wrap(string(res.ErrKind)+": "+res.Err, w))...)
	}
	lines = append(lines,
		kv("step", stepText(res)),
		kv("eager", fmt.Sprintf("%s ms → %s", fmtMs(res.Eager.Median), fmtSpeedup(res.Speedup))),
	)
	if drop := s.recommendation(rk).DropsTokens; drop != "" {
		// Next to the speed-up: what the recipe gives up for it.
		lines = append(lines, styleLines(st.Warn, hanging("⚠ ", drop, w))...)
	}
	lines = append(lines,
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
		lines = append(lines, kv("note", rk.Note))
	}
	for _, n := range res.Notes {
		lines = append(lines, styleLines(st.Faint, hanging("· ", n, w))...)
	}
	// One line per element: the pane scrolls by lines.
	return strings.Split(strings.Join(lines, "\n"), "\n")
}

// breakdownText is every term the breakdown's total adds, in GiB: the
// larger of the activations and the optimizer step's temporaries, and the
// allocator's reserve with the configuration it is for.
func breakdownText(b *stepmodel.MemoryBreakdown) string {
	parts := []string{"weights " + fmtGiB(b.Weights), "grads " + fmtGiB(b.Gradients), "optimizer " + fmtGiB(b.Optimizer)}
	if b.ExpertStash > 0 {
		parts = append(parts, "expert stash "+fmtGiB(b.ExpertStash))
	}
	if step := b.MainGrads + b.StateCopies; step > b.Activations {
		parts = append(parts, "optimizer step "+fmtGiB(step))
	} else {
		parts = append(parts, "activations "+fmtGiB(b.Activations))
	}
	parts = append(parts, "graphs "+fmtGiB(b.Graphs), "allocator slack "+fmtGiB(b.Slack)+" ("+b.Allocator()+")", "context "+fmtGiB(b.Context)+" GiB")
	return strings.Join(parts, " · ")
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
		text := breakdownText(b)
		for _, l := range strings.Split(wrapAtSpaces(text, max(w-10, 10)), "\n") {
			lines = append(lines, st.Label.Render(padRight("", 10))+st.Muted.Render(l))
		}
	}
	// The gauge (and the warning) lead the first line; the words wrap
	// under the words.
	lead := ""
	text := fmt.Sprintf("%s GiB %s", fmtGiB(need), what)
	if total > 0 {
		frac := float64(need) / float64(total)
		lead = gauge(frac, min(max((w-10)/5, 8), 20), st.Gauge(frac), st.GaugeEmpty()) + " "
		text = fmt.Sprintf("%s of %s GiB %s", fmtGiB(need), fmtGiB(total), what)
	}
	if res.Source == engine.SourceEstimated {
		text += " · estimated"
	}
	warn := ""
	if !rk.Fits {
		warn = "⚠ will not fit: "
	}
	leadW := ansi.StringWidth(lead)
	for i, p := range strings.Split(wrapAtSpaces(warn+text, max(w-10-leadW, 10)), "\n") {
		label, first := "in job", lead
		if i > 0 {
			label, first = "", strings.Repeat(" ", leadW)
		}
		if i == 0 && warn != "" {
			p = st.Warn.Render(warn) + strings.TrimPrefix(p, warn)
		}
		lines = append(lines, st.Label.Render(padRight(label, 10))+first+p)
	}
	return lines
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
