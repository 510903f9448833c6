package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/progress"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"cgtune/presets"
	"cgtune/search"
)

// Screen (d): the running search.

// runScreen follows the session's running search: its candidates, the
// step times of the one running, the GPUs' memory; it asks before it
// stops the search.
type runScreen struct {
	*common
	*session

	prog    progress.Model
	confirm bool // "stop the search?" is asked
	// chartGPU is the GPU whose running candidate the chart shows; it
	// follows the latest start unless the person picked one (pinned).
	chartGPU int
	pinned   bool
	cursor   int
	offset   int
}

func newRunScreen(c *common, s *session) *runScreen {
	return &runScreen{common: c, session: s}
}

// setStyles makes the progress bar anew in the styles now.
func (s *runScreen) setStyles() {
	opts := []progress.Option{progress.WithWidth(40)}
	if s.st.Plain {
		// No colour: the bar has to be readable from its characters alone.
		opts = append(opts, progress.WithFillCharacters('█', '░'))
	} else {
		opts = append(opts, progress.WithColors(s.st.BarFull), progress.WithFillCharacters('█', '░'))
	}
	w := s.prog.Width()
	s.prog = progress.New(opts...)
	if s.st.Plain {
		s.prog.FullColor, s.prog.EmptyColor = nil, nil
	} else {
		s.prog.EmptyColor = s.st.BarEmpty
	}
	if w > 0 {
		s.prog.SetWidth(w)
	}
}

// start runs the search of req, the session's search from now on; the
// screen starts afresh.
func (s *runScreen) start(req Request, plan []search.Planned) tea.Cmd {
	ctx, cancel := context.WithCancel(s.opts.Context)
	s.run = newRunState(req, s.opts.Now())
	s.run.cancel = cancel
	s.done = nil
	// Until the runner's PlanEvent arrives, the table shows what Plan said.
	s.run.setPlan(plan)
	s.confirm, s.chartGPU, s.pinned, s.cursor, s.offset = false, 0, false, 0, 0
	s.setStatus("starting the search…")
	return tea.Batch(startCmd(ctx, s.backend, req), tick())
}

func (s *runScreen) enter() tea.Cmd { return nil }

func (s *runScreen) typing() bool { return false }

func (s *runScreen) Update(msg tea.Msg) (tea.Cmd, handoff) {
	switch msg := msg.(type) {
	case startedMsg:
		return s.onStarted(msg), nil
	case eventMsg:
		return s.onEvent(msg)
	case tickMsg:
		if s.run != nil && !s.run.finished {
			return tick(), nil
		}
	case tea.KeyPressMsg:
		return s.key(msg)
	}
	return nil, nil
}

func (s *runScreen) onStarted(msg startedMsg) tea.Cmd {
	if s.run == nil {
		return nil
	}
	if msg.err != nil {
		s.run.finished = true
		s.run.cancel()
		s.setError(fmt.Errorf("search did not start: %w", msg.err))
		return nil
	}
	s.run.events = msg.events
	s.setStatus("search running")
	return waitForEvent(msg.events)
}

// onEvent takes one event of the search and asks for the next; the
// DoneEvent hands over to the results.
func (s *runScreen) onEvent(msg eventMsg) (tea.Cmd, handoff) {
	r := s.run
	if r == nil {
		return nil, nil
	}
	if msg.closed {
		s.onClosed()
		return nil, nil
	}
	next := waitForEvent(r.events)
	now := s.opts.Now()
	switch ev := msg.ev.(type) {
	case search.PlanEvent:
		r.setPlan(ev.Space)
		r.total = ev.Total
	case search.StartEvent:
		r.onStart(ev)
		if !s.pinned {
			s.chartGPU = ev.GPU
		}
	case search.SampleEvent:
		r.onSample(ev)
	case search.ResultEvent:
		r.onResult(ev, now)
		if res := ev.Result; res.Failed() {
			s.setStatus("%s failed on GPU %d (%s)", res.Candidate.Name(), ev.GPU, res.ErrKind)
		}
	case search.MemoryEvent:
		r.mem[ev.GPU] = ev
	case search.WorkerEvent:
		s.setError(fmt.Errorf("GPU %d: %s", ev.GPU, ev.Message))
	case search.PrepareEvent:
		s.setStatus("%s", ev.Message)
	case search.DoneEvent:
		d := ev
		s.done = &d
		r.finished, r.ended = true, now
		s.backend.Pause(false)
		return next, goTo{screenResults}
	}
	return next, nil
}

// onClosed ends the search when its events end; without a DoneEvent
// before, it says so.
func (s *runScreen) onClosed() {
	r := s.run
	if !r.finished {
		r.ended = s.opts.Now()
	}
	r.finished = true
	r.cancel()
	if s.done == nil {
		s.setError(errors.New("the search ended without a result"))
	}
}

func (s *runScreen) key(msg tea.KeyPressMsg) (tea.Cmd, handoff) {
	switch {
	case s.run == nil:
		return nil, nil
	case s.run.finished:
		return s.finishedKey(msg)
	case s.confirm:
		s.answerStop(msg)
		return nil, nil
	}
	return s.runningKey(msg), nil
}

// finishedKey: the results, or back to the space to search again.
func (s *runScreen) finishedKey(msg tea.KeyPressMsg) (tea.Cmd, handoff) {
	k := s.keys
	switch {
	case key.Matches(msg, k.Next):
		return nil, goTo{screenResults}
	case key.Matches(msg, k.Back):
		// Back to the space, to change it and search again.
		return nil, goTo{screenSpace}
	case key.Matches(msg, k.Quit):
		return tea.Quit, nil
	}
	s.scroll(msg)
	return nil, nil
}

// answerStop takes the answer to "stop the search?".
func (s *runScreen) answerStop(msg tea.KeyPressMsg) {
	switch {
	case key.Matches(msg, s.keys.Confirm):
		s.confirm, s.run.stopping = false, true
		s.run.cancel()
		s.resume()
		s.setStatus("stopping: the running candidates end, finished results are kept…")
	case key.Matches(msg, s.keys.Deny):
		s.confirm = false
		s.resume()
		s.setStatus("search running")
	}
}

// runningKey: stop (asked first), the chart's GPU, scrolling.
func (s *runScreen) runningKey(msg tea.KeyPressMsg) tea.Cmd {
	k := s.keys
	r := s.run
	switch {
	case msg.String() == "ctrl+c" && r.stopping:
		// A second ctrl+c while stopping: the person does not want to wait.
		return tea.Quit
	case (key.Matches(msg, k.Stop) || key.Matches(msg, k.Back)) && !r.stopping:
		// While the question is open no new candidate starts; the
		// running ones finish.
		s.confirm, r.pausedAt = true, s.opts.Now()
		s.backend.Pause(true)
		s.setStatus("paused: no new candidate starts until you answer")
	case key.Matches(msg, k.Chart):
		if gpus := r.liveGPUs(); len(gpus) > 0 {
			s.chartGPU, s.pinned = nextIn(gpus, s.chartGPU, 1), true
		}
	default:
		s.scroll(msg)
	}
	return nil
}

// resume lets the paused search go on; the ETA's countdown did not run
// while it was paused.
func (s *runScreen) resume() {
	r := s.run
	if !r.pausedAt.IsZero() {
		r.etaAt = r.etaAt.Add(s.opts.Now().Sub(r.pausedAt))
		r.pausedAt = time.Time{}
	}
	s.backend.Pause(false)
}

func (s *runScreen) scroll(msg tea.KeyPressMsg) {
	switch {
	case key.Matches(msg, s.keys.Up):
		s.cursor = max(s.cursor-1, 0)
	case key.Matches(msg, s.keys.Down):
		s.cursor = min(s.cursor+1, max(len(s.run.rows)-1, 0))
	}
}

func (s *runScreen) helpKeys() helpKeys {
	k := s.keys
	r := s.run
	switch {
	case r == nil:
		return helpKeys{}
	case r.finished:
		return helpKeys{short: []key.Binding{withHelp(k.Next, "enter", "results"), withHelp(k.Back, "esc", "space"), withHelp(k.Up, "↑/↓", "scroll"), k.Quit}}
	case s.confirm:
		return helpKeys{short: []key.Binding{withHelp(k.Confirm, "y", "stop, keep results"), withHelp(k.Deny, "n", "keep running")}}
	case r.stopping:
		return helpKeys{short: []key.Binding{withHelp(k.Quit, "ctrl+c", "quit now")}}
	}
	return helpKeys{short: []key.Binding{withHelp(k.Stop, "q/esc", "stop search"), k.Chart, withHelp(k.Up, "↑/↓", "scroll"), k.Help}}
}

// --- view ---------------------------------------------------------------

func (s *runScreen) View(w, h int) string {
	if s.run == nil {
		return s.st.Faint.Render("no search yet")
	}
	top := s.progressLine(w) + "\n"
	if s.confirm {
		top += s.st.Warn.Render(truncate("Stop the search? Paused: nothing new starts. Finished candidates are kept and ranked. (y/n)", w)) + "\n"
	} else {
		top += s.runSummary() + "\n"
	}
	const topLines = 2
	if w >= 140 && h >= 30 {
		return top + "\n" + s.wideView(w, h-topLines)
	}
	return top + s.narrowView(w, h-topLines)
}

// wideView has the table on the left; the chart, the memory gauges and
// the last result on the right.
func (s *runScreen) wideView(w, h int) string {
	leftW := w * 11 / 20
	rightW := w - leftW - 3
	var right []string
	right = append(right, s.chartLines(rightW, 10)...)
	right = append(right, "", s.st.Title.Render("GPU memory"))
	right = append(right, s.memoryLines(rightW, false)...)
	if d := s.lastResultLines(rightW); len(d) > 0 {
		right = append(right, "")
		right = append(right, d...)
	}
	left := s.runTable(leftW, h-1)
	return sideBySide(left, leftW, strings.Join(right, "\n"), 3)
}

// narrowView stacks the table, the chart and the gauges; the chart gets
// what the table does not need.
func (s *runScreen) narrowView(w, h int) string {
	memLines := s.memoryLines(w, true)
	extra := 2 + s.chart().extraLines(w) // title, phase strip, legend if apart
	rest := h - len(memLines) - extra
	chartH := min(max(rest-(len(s.run.rows)+1), 3), 8)
	chart := s.chartLines(w, chartH)
	tableH := h - len(chart) - len(memLines)
	return s.runTable(w, tableH) + "\n" + strings.Join(chart, "\n") + "\n" + strings.Join(memLines, "\n")
}

// lastResultLines describe the latest finished candidate in full.
func (s *runScreen) lastResultLines(w int) []string {
	r := s.run
	st := s.st
	if r.last == nil {
		return nil
	}
	res := r.last
	kv := func(k, v string) string { return truncate(st.Label.Render(padRight(k, 9))+st.Value.Render(v), w) }
	lines := []string{st.Title.Render("Last result") + "  " + st.Muted.Render(fmt.Sprintf("%s · %s", res.Candidate.Name(), res.Source))}
	if res.Failed() {
		lines = append(lines, st.Err.Render(truncate(string(res.ErrKind)+": "+res.Err, w)))
		return lines
	}
	lines = append(lines,
		kv("step", stepText(*res)),
		kv("eager", fmt.Sprintf("%s ms → %s", fmtMs(res.Eager.Median), fmtSpeedup(res.Speedup))),
		kv("capture", captureText(*res)),
		kv("memory", memoryText(*res)),
		kv("device", res.Device.Name),
	)
	if res.Scaling != "" {
		lines = append(lines, kv("scaling", res.Scaling))
	}
	for _, n := range res.Notes {
		lines = append(lines, st.Faint.Render(truncate("· "+n, w)))
	}
	return lines
}

func (s *runScreen) progressLine(w int) string {
	r := s.run
	frac := 0.0
	if r.total > 0 {
		frac = float64(r.done) / float64(r.total)
	}
	now := s.opts.Now()
	if r.finished && !r.ended.IsZero() {
		now = r.ended // the clock stops with the search
	}
	elapsed := now.Sub(r.started)
	text := fmt.Sprintf(" %d/%d runs · %s elapsed", r.done, r.total, fmtDur(elapsed))
	if r.total == 0 && !r.finished {
		// The runner has not said how many runs it plans yet (it may be
		// measuring what it needs first).
		text = fmt.Sprintf(" planning the runs · %s elapsed", fmtDur(elapsed))
	}
	switch {
	case r.finished && s.done != nil && s.done.Interrupted:
		text += " · stopped"
	case r.finished:
		text += " · done"
	case r.done > 0 && !r.pausedAt.IsZero():
		text += " · paused, ETA " + fmtDur(r.etaLeft(r.pausedAt))
	case r.done > 0:
		text += " · ETA " + fmtDur(r.etaLeft(now))
	default:
		text += " · ETA —"
	}
	label := "Progress "
	// A copy sized for this frame: View leaves the model as it was.
	bar := s.prog
	bar.SetWidth(max(w-len(label)-ansi.StringWidth(text), 10))
	return s.st.Label.Render(label) + bar.ViewAs(frac) + s.st.Muted.Render(text)
}

func (s *runScreen) runSummary() string {
	r := s.run
	st := s.st
	var failed, finished int
	for _, row := range r.rows {
		switch row.state {
		case stDone:
			finished++
		case stFailed:
			failed++
		}
	}
	line := fmt.Sprintf("%d candidates · %d measured · %d failed · %s · budget %s", len(r.rows), finished, failed, r.req.Strategy, budgetText(r.req.Budget, r.req.Strategy))
	if r.req.Estimate {
		line = strings.Replace(line, "measured", "estimated", 1)
	}
	if r.stopping && !r.finished {
		return st.Warn.Render("stopping… " + line)
	}
	return st.Muted.Render(line)
}

// runTable is the candidates in h lines, a row each: state, step time,
// speed-up, graph memory and what is going on.
func (s *runScreen) runTable(w, h int) string {
	r := s.run
	// A narrow window drops the graph memory column (the results show it)
	// before it cuts the names.
	graphCol := w >= 80
	t := s.tableOf(w, graphCol)
	var b strings.Builder
	b.WriteString(t.header(s.st) + "\n")
	rows := max(h-1, 1)
	// Follow the running candidates unless the person scrolls.
	cursor := s.cursor
	if !r.finished {
		for i, row := range r.rows {
			if row.state == stRunning {
				cursor = max(cursor, i)
			}
		}
	}
	s.offset = scrollWindow(s.offset, cursor, len(r.rows), rows)
	for i := s.offset; i < len(r.rows) && i < s.offset+rows; i++ {
		row := r.rows[i]
		cells, style := s.rowCells(row, t.widths[1])
		if !graphCol {
			cells = append(cells[:4], cells[5])
		}
		b.WriteString(style.Render(t.row(cells...)) + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// tableOf is the table's columns in w cells, the names as wide as the
// longest.
func (s *runScreen) tableOf(w int, graphCol bool) table {
	var cands []presets.Candidate
	for _, row := range s.run.rows {
		cands = append(cands, row.cand)
	}
	cols := []column{
		{title: "", width: 1},
		{title: "CANDIDATE"},
		{title: "STEP ms", width: 8, right: true},
		{title: "×EAGER", width: 6, right: true},
	}
	if graphCol {
		cols = append(cols, column{title: "GRAPH MiB", width: 9, right: true})
	}
	cols = append(cols, column{title: "NOTE", width: 10, flex: true})
	fixed := 2 + 2*(len(cols)-1) // the NOTE column keeps 12 cells
	for _, c := range cols {
		fixed += c.width
	}
	cols[1].width = nameWidth(cands, w-fixed)
	return newTable(w, cols...)
}

// rowCells are a row's mark, name (candW wide), step time, speed-up,
// graph memory and note, and the row's style.
func (s *runScreen) rowCells(row runRow, candW int) ([]string, lipgloss.Style) {
	st := s.st
	var mark, step, sp, graph, note string
	style := lipgloss.NewStyle()
	switch row.state {
	case stQueued:
		mark, style = "·", st.Faint
	case stRunning:
		mark, style = "▶", st.Accent
		note = s.runningNote(row)
	case stDone:
		mark = "✓"
		res := row.result
		step, sp, graph = fmtMs(res.Step.Median), fmtSpeedup(res.Speedup), strconv.FormatInt(res.Memory.JobGraphMiB(), 10)
		if row.round > 1 {
			note = fmt.Sprintf("round %d", row.round)
		}
	case stFailed:
		mark, style = "✗", st.Err
		note = string(row.result.ErrKind) + ": " + row.result.Err
	}
	return []string{mark, nameCell(row.cand, candW), step, sp, graph, note}, style
}

// runningNote says where a running candidate runs, in which round, and
// how far its measured steps have come.
func (s *runScreen) runningNote(row runRow) string {
	note := fmt.Sprintf("GPU %d", row.gpu)
	if row.round > 1 {
		note += fmt.Sprintf(" · round %d", row.round)
	}
	if lr := s.run.live[row.gpu]; lr != nil && lr.cand.Key() == row.cand.Key() && !lr.ended {
		note += fmt.Sprintf(" · step %d/%d", measuredSteps(lr.samples), lr.steps)
	}
	return note
}

// chart is the step chart of the candidate on the chart GPU: the one
// running there, else the last one there that had samples.
func (s *runScreen) chart() stepChart {
	r := s.run
	c := stepChart{run: r.live[s.chartGPU], gpu: s.chartGPU, what: "estimated step time", estimate: r.req.Estimate}
	if !r.req.Estimate {
		c.what = "step time"
	}
	if (c.run == nil || len(c.run.samples) == 0) && r.prev[s.chartGPU] != nil {
		c.run, c.what = r.prev[s.chartGPU], "previous candidate"
	}
	return c
}

func (s *runScreen) chartLines(w, h int) []string { return s.chart().lines(s.st, w, h) }

// memoryLines are the NVML gauges, one line per GPU of the search;
// labelled when they have no title above them.
func (s *runScreen) memoryLines(w int, labelled bool) []string {
	r := s.run
	st := s.st
	if r.req.Estimate {
		return s.estimatedMemoryLines(w, labelled)
	}
	gpus := slices.Clone(r.req.GPUs)
	for g := range r.mem {
		if !slices.Contains(gpus, g) {
			gpus = append(gpus, g)
		}
	}
	slices.Sort(gpus)
	var lines []string
	for _, g := range gpus {
		label := st.Label.Render(fmt.Sprintf("GPU %-2d ", g))
		ev, ok := r.mem[g]
		if !ok {
			lines = append(lines, label+st.Faint.Render("no reading yet"+r.runningOn(g)))
			continue
		}
		text := fmt.Sprintf(" %s/%s GiB · util %3d%%%s", fmtGiB(ev.UsedMiB), fmtGiB(ev.TotalMiB), ev.UtilGPU, r.runningOn(g))
		frac := 0.0
		if ev.TotalMiB > 0 {
			frac = float64(ev.UsedMiB) / float64(ev.TotalMiB)
		}
		barW := max(min(w-7-len(text), 50), 8)
		lines = append(lines, label+gauge(frac, barW, st.Gauge(frac), st.GaugeEmpty())+st.Muted.Render(text))
	}
	return lines
}

// estimatedMemoryLines are the memory panel of an estimated search: what
// the latest estimate says the candidate needs in the real job (the memory
// model's total when the engine made one, else the run's peak scaled to
// the job), against the job GPU's memory.
func (s *runScreen) estimatedMemoryLines(w int, labelled bool) []string {
	r, st := s.run, s.st
	label := st.Label.Render("GPU est ")
	if labelled {
		label = st.Label.Render("Memory  ")
	}
	if r.lastOK == nil {
		return []string{label + st.Faint.Render("estimated: waiting for the first estimate")}
	}
	need, total, what := jobMemory(*r.lastOK, jobGPUMiB(r.req))
	text := fmt.Sprintf(" %s/%s GiB %s · %s · estimated", fmtGiB(need), fmtGiB(total), what, r.lastOK.Candidate.Name())
	frac := 0.0
	if total > 0 {
		frac = float64(need) / float64(total)
	}
	barW := max(min(w-8-ansi.StringWidth(text), 50), 8)
	return []string{label + gauge(frac, barW, st.Gauge(frac), st.GaugeEmpty()) + st.Muted.Render(truncate(text, w-8-barW))}
}
