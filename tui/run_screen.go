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
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/search"
)

// Screen (d): the running search.

// runState is one search, from start to DoneEvent.
type runState struct {
	req     Request
	cancel  context.CancelFunc
	events  <-chan search.Event
	started time.Time
	ended   time.Time // when the DoneEvent (or the end of the stream) came

	total, done int
	eta         time.Duration
	etaAt       time.Time // when eta was reported; the countdown goes on from there

	plan  []search.Planned // the space as the runner planned it
	rows  []runRow
	index map[string]int // candidate key → row
	live  map[int]*liveRun
	// prev keeps each GPU's last candidate with samples, drawn until the
	// next one's first step arrives (an engine may take a while to start).
	prev map[int]*liveRun
	// chartGPU is the GPU whose running candidate the chart shows; it
	// follows the latest start unless the person picked one (pinned).
	chartGPU int
	pinned   bool
	mem      map[int]search.MemoryEvent

	pausedAt time.Time      // when the stop question paused the search (zero: running)
	last     *engine.Result // the latest finished candidate
	lastOK   *engine.Result // the latest one that succeeded
	confirm  bool           // "stop the search?" is asked
	stopping bool
	finished bool
	cursor   int
	offset   int
}

// Candidate states on the run screen.
const (
	stQueued  = "queued"
	stRunning = "running"
	stDone    = "done"
	stFailed  = "failed"
)

type runRow struct {
	cand   presets.Candidate
	state  string
	gpu    int
	round  int
	result *engine.Result
}

// liveRun is what one GPU is doing now.
type liveRun struct {
	cand    presets.Candidate
	round   int
	steps   int
	samples []engine.StepSample
	ended   bool
}

// maxSamples bounds the chart's memory; it shows at most its width anyway.
const maxSamples = 512

func newRunState(req Request, now time.Time) *runState {
	return &runState{req: req, started: now, index: map[string]int{}, live: map[int]*liveRun{}, prev: map[int]*liveRun{}, mem: map[int]search.MemoryEvent{}}
}

// startSearch starts the search of the plan's valid candidates.
func (m *Model) startSearch(plan []search.Planned) tea.Cmd {
	req := m.request()
	ctx, cancel := context.WithCancel(m.opts.Context)
	m.run = newRunState(req, m.opts.Now())
	m.run.cancel = cancel
	m.done = nil
	// Until the runner's PlanEvent arrives, the table shows what Plan said.
	m.run.setPlan(plan)
	m.resScr = resultsScreen{}
	cmd := m.goTo(screenRun)
	m.setStatus("starting the search…")
	return tea.Batch(cmd, startCmd(ctx, m.backend, req), tick())
}

func (r *runState) setPlan(plan []search.Planned) {
	r.plan = plan
	r.rows, r.index = nil, map[string]int{}
	for _, p := range plan {
		if !p.Valid() {
			continue
		}
		r.index[p.Candidate.Key()] = len(r.rows)
		r.rows = append(r.rows, runRow{cand: p.Candidate, state: stQueued})
	}
}

// row finds (or adds) the row of a candidate.
func (r *runState) row(c presets.Candidate) *runRow {
	i, ok := r.index[c.Key()]
	if !ok {
		i = len(r.rows)
		r.index[c.Key()] = i
		r.rows = append(r.rows, runRow{cand: c, state: stQueued})
	}
	return &r.rows[i]
}

func (m *Model) onStarted(msg startedMsg) tea.Cmd {
	if m.run == nil {
		return nil
	}
	if msg.err != nil {
		m.run.finished = true
		m.run.cancel()
		m.setError(fmt.Errorf("search did not start: %w", msg.err))
		return nil
	}
	m.run.events = msg.events
	m.setStatus("search running")
	return waitForEvent(msg.events)
}

func (m *Model) onEvent(msg eventMsg) tea.Cmd {
	r := m.run
	if r == nil {
		return nil
	}
	if msg.closed {
		if !r.finished {
			r.ended = m.opts.Now()
		}
		r.finished = true
		r.cancel()
		if m.done == nil {
			m.setError(errors.New("the search ended without a result"))
		}
		return nil
	}
	next := waitForEvent(r.events)
	now := m.opts.Now()
	switch ev := msg.ev.(type) {
	case search.PlanEvent:
		r.setPlan(ev.Space)
		r.total = ev.Total
	case search.StartEvent:
		row := r.row(ev.Candidate)
		row.state, row.gpu, row.round = stRunning, ev.GPU, ev.Round
		if old := r.live[ev.GPU]; old != nil && len(old.samples) > 0 {
			r.prev[ev.GPU] = old
		}
		r.live[ev.GPU] = &liveRun{cand: ev.Candidate, round: ev.Round, steps: ev.Steps}
		if !r.pinned {
			r.chartGPU = ev.GPU
		}
	case search.SampleEvent:
		lr := r.live[ev.GPU]
		if lr == nil {
			lr = &liveRun{}
			r.live[ev.GPU] = lr
		}
		lr.samples = append(lr.samples, ev.Sample)
		if len(lr.samples) > maxSamples {
			lr.samples = slices.Clone(lr.samples[len(lr.samples)-maxSamples:])
		}
	case search.ResultEvent:
		res := ev.Result
		row := r.row(res.Candidate)
		row.result, row.gpu, row.round = &res, ev.GPU, ev.Round
		row.state = stDone
		if res.Failed() {
			row.state = stFailed
		}
		if lr := r.live[ev.GPU]; lr != nil {
			lr.ended = true
		}
		r.done, r.total, r.eta, r.etaAt = ev.Done, ev.Total, ev.ETA, now
		r.last = &res
		if !res.Failed() {
			r.lastOK = &res
		}
		if res.Failed() {
			m.setStatus("%s failed on GPU %d (%s)", res.Candidate.Label(), ev.GPU, res.ErrKind)
		}
	case search.MemoryEvent:
		r.mem[ev.GPU] = ev
	case search.WorkerEvent:
		m.setError(fmt.Errorf("GPU %d: %s", ev.GPU, ev.Message))
	case search.PrepareEvent:
		m.setStatus("%s", ev.Message)
	case search.DoneEvent:
		d := ev
		m.done = &d
		r.finished, r.ended = true, now
		m.backend.Pause(false)
		return tea.Batch(next, m.showResults())
	}
	return next
}

func (m *Model) runKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	r := m.run
	if r == nil {
		return nil
	}
	if r.finished {
		switch {
		case key.Matches(msg, k.Next):
			return m.showResults()
		case key.Matches(msg, k.Back):
			// Back to the space, to change it and search again.
			return m.goTo(screenSpace)
		case key.Matches(msg, k.Quit):
			return tea.Quit
		}
		return m.runScroll(msg)
	}
	if r.confirm {
		switch {
		case key.Matches(msg, k.Confirm):
			r.confirm, r.stopping = false, true
			r.cancel()
			m.resume()
			m.setStatus("stopping: the running candidates end, finished results are kept…")
		case key.Matches(msg, k.Deny):
			r.confirm = false
			m.resume()
			m.setStatus("search running")
		}
		return nil
	}
	switch {
	case msg.String() == "ctrl+c" && r.stopping:
		// A second ctrl+c while stopping: the person does not want to wait.
		return tea.Quit
	case (key.Matches(msg, k.Stop) || key.Matches(msg, k.Back)) && !r.stopping:
		// While the question is open no new candidate starts; the
		// running ones finish.
		r.confirm, r.pausedAt = true, m.opts.Now()
		m.backend.Pause(true)
		m.setStatus("paused: no new candidate starts until you answer")
		return nil
	case key.Matches(msg, k.Chart):
		gpus := r.liveGPUs()
		if len(gpus) > 0 {
			r.chartGPU, r.pinned = nextIn(gpus, r.chartGPU, 1), true
		}
		return nil
	}
	return m.runScroll(msg)
}

// resume lets the paused search go on; the ETA's countdown did not run
// while it was paused.
func (m *Model) resume() {
	r := m.run
	if !r.pausedAt.IsZero() {
		r.etaAt = r.etaAt.Add(m.opts.Now().Sub(r.pausedAt))
		r.pausedAt = time.Time{}
	}
	m.backend.Pause(false)
}

func (m *Model) runScroll(msg tea.KeyPressMsg) tea.Cmd {
	r := m.run
	switch {
	case key.Matches(msg, m.keys.Up):
		r.cursor = max(r.cursor-1, 0)
	case key.Matches(msg, m.keys.Down):
		r.cursor = min(r.cursor+1, max(len(r.rows)-1, 0))
	}
	return nil
}

func (r *runState) liveGPUs() []int {
	var gpus []int
	for g := range r.live {
		gpus = append(gpus, g)
	}
	slices.Sort(gpus)
	return gpus
}

func (m *Model) runHelp() helpKeys {
	k := m.keys
	r := m.run
	switch {
	case r == nil:
		return helpKeys{}
	case r.finished:
		return helpKeys{short: []key.Binding{withHelp(k.Next, "enter", "results"), withHelp(k.Back, "esc", "space"), withHelp(k.Up, "↑/↓", "scroll"), k.Quit}}
	case r.confirm:
		return helpKeys{short: []key.Binding{withHelp(k.Confirm, "y", "stop, keep results"), withHelp(k.Deny, "n", "keep running")}}
	case r.stopping:
		return helpKeys{short: []key.Binding{withHelp(k.Quit, "ctrl+c", "quit now")}}
	}
	return helpKeys{short: []key.Binding{withHelp(k.Stop, "q/esc", "stop search"), k.Chart, withHelp(k.Up, "↑/↓", "scroll"), k.Help}}
}

// --- view ---------------------------------------------------------------

func (m *Model) runView(w, h int) string {
	r := m.run
	if r == nil {
		return m.st.Faint.Render("no search yet")
	}
	st := m.st
	var top strings.Builder
	top.WriteString(m.progressLine(w) + "\n")
	if r.confirm {
		top.WriteString(st.Warn.Render(truncate("Stop the search? Paused: nothing new starts. Finished candidates are kept and ranked. (y/n)", w)) + "\n")
	} else {
		top.WriteString(m.runSummary() + "\n")
	}
	topLines := 2

	if w >= 140 && h >= 30 {
		// Wide: the table on the left; the chart, the memory gauges and
		// the last result on the right.
		leftW := w * 11 / 20
		rightW := w - leftW - 3
		var right []string
		right = append(right, m.chartLines(rightW, 10)...)
		right = append(right, "", st.Title.Render("GPU memory"))
		right = append(right, m.memoryLines(rightW, false)...)
		if d := m.lastResultLines(rightW); len(d) > 0 {
			right = append(right, "")
			right = append(right, d...)
		}
		left := m.runTable(leftW, h-topLines-1)
		return top.String() + "\n" + sideBySide(left, leftW, strings.Join(right, "\n"), 3)
	}
	// Narrow: table, chart, gauges stacked; the chart gets what the table
	// does not need.
	memLines := m.memoryLines(w, true)
	extra := 2 + m.chartExtraLines(w) // title, phase strip, legend if apart
	rest := h - topLines - len(memLines) - extra
	chartH := min(max(rest-(len(r.rows)+1), 3), 8)
	chart := m.chartLines(w, chartH)
	tableH := h - topLines - len(chart) - len(memLines)
	var b strings.Builder
	b.WriteString(top.String())
	b.WriteString(m.runTable(w, tableH) + "\n")
	b.WriteString(strings.Join(chart, "\n") + "\n")
	b.WriteString(strings.Join(memLines, "\n"))
	return b.String()
}

// lastResultLines describe the latest finished candidate in full.
func (m *Model) lastResultLines(w int) []string {
	r := m.run
	st := m.st
	if r.last == nil {
		return nil
	}
	res := r.last
	kv := func(k, v string) string { return truncate(st.Label.Render(padRight(k, 9))+st.Value.Render(v), w) }
	lines := []string{st.Title.Render("Last result") + "  " + st.Muted.Render(fmt.Sprintf("%s · %s", candName(res.Candidate), res.Source))}
	if res.Failed() {
		lines = append(lines, st.Err.Render(truncate(res.ErrKind+": "+res.Err, w)))
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

func (m *Model) progressLine(w int) string {
	r := m.run
	frac := 0.0
	if r.total > 0 {
		frac = float64(r.done) / float64(r.total)
	}
	now := m.opts.Now()
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
	case r.finished && m.done != nil && m.done.Interrupted:
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
	bar := m.prog
	bar.SetWidth(max(w-len(label)-ansi.StringWidth(text), 10))
	return m.st.Label.Render(label) + bar.ViewAs(frac) + m.st.Muted.Render(text)
}

// etaLeft is the time the search still needs: the runner's estimate counted
// down since it was made, or, when that is the larger, what the runs so far
// took each (the runner's first estimates know nothing of start-up costs).
func (r *runState) etaLeft(now time.Time) time.Duration {
	left := max(r.eta-now.Sub(r.etaAt), 0)
	if r.done > 0 && r.total > r.done {
		perRun := r.etaAt.Sub(r.started) / time.Duration(r.done)
		left = max(left, perRun*time.Duration(r.total-r.done)-now.Sub(r.etaAt))
	}
	return max(left, time.Second)
}

func (m *Model) runSummary() string {
	r := m.run
	st := m.st
	var failed, finished int
	for _, row := range r.rows {
		switch row.state {
		case stDone:
			finished++
		case stFailed:
			failed++
		}
	}
	s := fmt.Sprintf("%d candidates · %d measured · %d failed · %s · budget %s", len(r.rows), finished, failed, r.req.Strategy, budgetText(r.req.Budget, r.req.Strategy))
	if r.req.Estimate {
		s = strings.Replace(s, "measured", "estimated", 1)
	}
	if r.stopping && !r.finished {
		return st.Warn.Render("stopping… " + s)
	}
	return st.Muted.Render(s)
}

func (m *Model) runTable(w, h int) string {
	r := m.run
	st := m.st
	var cands []presets.Candidate
	for _, row := range r.rows {
		cands = append(cands, row.cand)
	}
	// A narrow window drops the graph memory column (the results show it)
	// before it cuts the names.
	graphCol := w >= 80
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
	candW := cols[1].width
	t := newTable(w, cols...)
	var b strings.Builder
	b.WriteString(t.header(st) + "\n")
	rows := max(h-1, 1)
	// Follow the running candidates unless the person scrolls.
	cursor := r.cursor
	if !r.finished {
		for i, row := range r.rows {
			if row.state == stRunning {
				cursor = max(cursor, i)
			}
		}
	}
	r.offset = scrollWindow(r.offset, cursor, len(r.rows), rows)
	for i := r.offset; i < len(r.rows) && i < r.offset+rows; i++ {
		row := r.rows[i]
		var mark, step, sp, graph, note string
		style := lipgloss.NewStyle()
		switch row.state {
		case stQueued:
			mark, style = "·", st.Faint
		case stRunning:
			mark, style = "▶", st.Accent
			note = fmt.Sprintf("GPU %d", row.gpu)
			if row.round > 1 {
				note += fmt.Sprintf(" · round %d", row.round)
			}
			if lr := r.live[row.gpu]; lr != nil && lr.cand.Key() == row.cand.Key() && !lr.ended {
				note += fmt.Sprintf(" · step %d/%d", measuredSteps(lr.samples), lr.steps)
			}
		case stDone:
			mark = "✓"
			res := row.result
			step, sp, graph = fmtMs(res.Step.Median), fmtSpeedup(res.Speedup), strconv.FormatInt(res.Memory.GraphMiB, 10)
			if row.round > 1 {
				note = fmt.Sprintf("round %d", row.round)
			}
		case stFailed:
			mark, style = "✗", st.Err
			note = row.result.ErrKind + ": " + row.result.Err
		}
		cells := []string{mark, nameCell(row.cand, candW), step, sp}
		if graphCol {
			cells = append(cells, graph)
		}
		b.WriteString(style.Render(t.row(append(cells, note)...)) + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// warmupText is the warm-up column: meaningless without a graph.
func warmupText(c presets.Candidate) string {
	if !c.Graphed() {
		return "—"
	}
	return strconv.Itoa(c.Warmup)
}

func measuredSteps(s []engine.StepSample) int {
	n := 0
	for _, x := range s {
		if x.Phase == engine.PhaseMeasure {
			n++
		}
	}
	return n
}

// chartLegend names the phase letters of the chart's strip.
const chartLegend = "e eager · w warm-up · c capture · m measured"

// chartAxisW is the width of the chart's value axis.
const chartAxisW = 8

// chartExtraLines is 1 when the legend does not fit beside the phase strip
// and takes a line of its own.
func (m *Model) chartExtraLines(w int) int {
	if m.legendApart(w) {
		return 1
	}
	return 0
}

func (m *Model) legendApart(w int) bool {
	r := m.run
	lr := r.live[r.chartGPU]
	if lr == nil || len(lr.samples) == 0 {
		lr = r.prev[r.chartGPU]
	}
	n := 0
	if lr != nil {
		n = len(lr.samples)
	}
	plotW := max(w-chartAxisW, 4)
	bw := min(max(plotW/max(min(n, plotW), 1), 1), 3)
	return chartAxisW+min(n, plotW)*bw+2+len([]rune(chartLegend)) > w
}

// chartLines draws the step times of the candidate on the chart GPU: a
// title, h rows of bars with the range on the left, and a strip of phase
// letters (e eager, w warm-up, c capture, m measured) so the chart reads
// without colour too. The capture step is off the scale: it is many steps
// long, and on the same scale the step-to-step variation would not show.
func (m *Model) chartLines(w, h int) []string {
	r := m.run
	st := m.st
	lr := r.live[r.chartGPU]
	what := "estimated step time"
	if !r.req.Estimate {
		what = "step time"
	}
	if (lr == nil || len(lr.samples) == 0) && r.prev[r.chartGPU] != nil {
		lr = r.prev[r.chartGPU]
		what = "previous candidate"
	}
	if lr == nil || len(lr.samples) == 0 {
		lines := []string{st.Title.Render("Step time") + "  " + st.Faint.Render("waiting for the first step…")}
		for range h + 1 + m.chartExtraLines(w) {
			lines = append(lines, "")
		}
		return lines
	}
	last := lr.samples[len(lr.samples)-1]
	plotW := max(w-chartAxisW, 4)
	shown := lr.samples
	if len(shown) > plotW {
		shown = shown[len(shown)-plotW:]
	}
	// Few samples get wider bars, so a short run still reads as a chart.
	bw := min(max(plotW/max(len(shown), 1), 1), 3)
	lo, hi := 0.0, 0.0
	capture := 0.0
	scaled := 0
	for _, s := range shown {
		if s.Phase == engine.PhaseCapture {
			capture = max(capture, s.StepMs)
			continue
		}
		if scaled == 0 {
			lo, hi = s.StepMs, s.StepMs
		}
		lo, hi = min(lo, s.StepMs), max(hi, s.StepMs)
		scaled++
	}
	if scaled == 0 {
		lo, hi = capture, capture
	}
	vals := make([]float64, 0, len(shown)*bw)
	phases := make([]string, 0, len(shown)*bw)
	for _, s := range shown {
		v := s.StepMs
		if s.Phase == engine.PhaseCapture {
			v = hi // drawn full height, its value is in the title
		}
		for range bw {
			vals = append(vals, v)
			phases = append(phases, s.Phase)
		}
	}
	info := fmt.Sprintf("%s on GPU %d · %s · last %s ms", candName(lr.cand), r.chartGPU, what, fmtMs(last.StepMs))
	if capture > 0 && scaled > 0 {
		info += fmt.Sprintf(" · capture %s ms, off the scale", fmtMs(capture))
	}
	title := st.Title.Render("Step time") + "  " + st.Muted.Render(info)
	phaseStyle := func(i int) lipgloss.Style { return st.Phase[phases[i]] }
	bars := barChart(vals, plotW, h, phaseStyle)
	lines := []string{truncate(title, w)}
	for i, b := range bars {
		axis := ""
		switch i {
		case 0:
			axis = fmtMs(hi)
		case len(bars) - 1:
			axis = fmtMs(lo)
		}
		lines = append(lines, st.Faint.Render(padLeft(axis, chartAxisW-2)+" ┤")+b)
	}
	var strip strings.Builder
	for _, p := range phases {
		c := "?"
		if p != "" {
			c = p[:1]
		}
		strip.WriteString(st.Phase[p].Render(c))
	}
	stripLine := st.Faint.Render(padLeft("", chartAxisW-2)+"  ") + strip.String()
	if m.legendApart(w) {
		return append(lines, truncate(stripLine, w), st.Faint.Render(truncate(padLeft("", chartAxisW)+chartLegend, w)))
	}
	return append(lines, stripLine+st.Faint.Render("  "+chartLegend))
}

// memoryLines are the NVML gauges, one line per GPU of the search;
// labelled when they have no title above them.
func (m *Model) memoryLines(w int, labelled bool) []string {
	r := m.run
	st := m.st
	if r.req.Estimate {
		return m.estimatedMemoryLines(w, labelled)
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

// runningOn names the candidate running on GPU g, for its gauge (several
// GPUs run candidates at once); "" when it runs none.
func (r *runState) runningOn(g int) string {
	for _, row := range r.rows {
		if row.state == stRunning && row.gpu == g {
			return " · ▶ " + row.cand.Label()
		}
	}
	return ""
}

// estimatedMemoryLines are the memory panel of an estimated search: what
// the latest estimate says the candidate needs in the real job (the memory
// model's total when the engine made one, else the run's peak scaled to
// the job), against the job GPU's memory.
func (m *Model) estimatedMemoryLines(w int, labelled bool) []string {
	r, st := m.run, m.st
	label := st.Label.Render("GPU est ")
	if labelled {
		label = st.Label.Render("Memory  ")
	}
	if r.lastOK == nil {
		return []string{label + st.Faint.Render("estimated: waiting for the first estimate")}
	}
	need, total, what := jobMemory(*r.lastOK, jobGPUMiB(r.req))
	text := fmt.Sprintf(" %s/%s GiB %s · %s · estimated", fmtGiB(need), fmtGiB(total), what, candName(r.lastOK.Candidate))
	frac := 0.0
	if total > 0 {
		frac = float64(need) / float64(total)
	}
	barW := max(min(w-8-ansi.StringWidth(text), 50), 8)
	return []string{label + gauge(frac, barW, st.Gauge(frac), st.GaugeEmpty()) + st.Muted.Render(truncate(text, w-8-barW))}
}
