package tui

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/report"
	"cgtune/search"
)

// Screen (e): the ranking, the overrides, writing them and saving the run
// as a team preset.

type promptKind int

const (
	promptNone promptKind = iota
	promptPath
	promptReport
	promptName
	promptOverwrite       // a preset of that name exists
	promptOverwriteFile   // the overrides file exists
	promptOverwriteReport // the report exists
)

type resultsScreen struct {
	cursor int
	offset int
	format int // index into presets.Formats
	prompt promptKind
	input  string
	// pending is the preset waiting for the overwrite answer.
	pending presets.TeamPreset
	// pendingFile is the overrides file waiting for the overwrite answer.
	pendingFile writtenMsg
	// pendingReport is the report waiting for the overwrite answer.
	pendingReport reportMsg
	// val is the validation on real jobs (validate_pane.go).
	val validationPane
	// overrides are the candidates' overrides by candidate key, derived
	// once per search (search.WinnerOverrides plans captures).
	overrides map[string]presets.Overrides
}

// formatExt is the file extension of each override format, for the
// default path of the write prompt.
var formatExt = map[string]string{"yaml": "yaml", "dotlist": "dotlist", "python": "py", "flags": "flags", "json": "json"}

// enterResults shows the results from their top, the status saying how
// the search ended.
func (m *Model) enterResults() tea.Cmd {
	m.resScr.cursor, m.resScr.offset = 0, 0
	switch d := m.done; {
	case d == nil:
	case d.Err != "":
		m.setError(fmt.Errorf("search failed: %s", d.Err))
	case d.Winner == nil && d.Interrupted && len(d.Ranking) == 0:
		m.setStatus("search stopped%s: no candidate had finished", m.runsSoFar())
	case d.Winner == nil:
		m.setError(errors.New("no candidate succeeded"))
	case d.Interrupted:
		m.setStatus("search stopped early%s: the ranking holds the candidates that finished", m.runsSoFar())
	case m.run != nil && m.run.stopping:
		// The stop came after the last run: nothing was cut short.
		m.setStatus("the search had finished all %d runs before the stop took effect: %s wins", m.run.done, candName(d.Winner.Result.Candidate))
	default:
		m.setStatus("search finished: %s wins", candName(d.Winner.Result.Candidate))
	}
	return nil
}

// runsSoFar is " after N of M runs" for a stopped search, "" when the
// runner had not planned them yet.
func (m *Model) runsSoFar() string {
	if m.run == nil || m.run.total == 0 {
		return ""
	}
	return fmt.Sprintf(" after %d of %d runs", m.run.done, m.run.total)
}

// ranking is the DoneEvent's ranking in rank order.
func (m *Model) ranking() []search.Ranked {
	if m.done == nil {
		return nil
	}
	r := slices.Clone(m.done.Ranking)
	// Unranked entries (rank 0: failed runs) go last, in the order the
	// search gives them (impl, scopes, then warm-ups as numbers).
	order := func(x search.Ranked) int {
		if x.Rank <= 0 {
			return math.MaxInt
		}
		return x.Rank
	}
	slices.SortStableFunc(r, func(a, b search.Ranked) int { return cmp.Compare(order(a), order(b)) })
	return r
}

// rankOptions are the options the ranking on screen was made with.
func (m *Model) rankOptions() search.RankOptions {
	req := m.request()
	if m.run != nil {
		req = m.run.req
	}
	o := search.RankOptions{TrainIters: req.TrainIters, JobGPUMemoryMiB: jobGPUMiB(req), Tie: m.tie}
	if m.done != nil {
		o.Emulation, o.KnownToFitMiB = m.done.Emulation, m.done.KnownToFitMiB
		o.ReferenceKey = m.done.ReferenceKey()
	}
	return o
}

// retie ranks the results again under the next tie band.
func (m *Model) retie() {
	m.tie = nextIn(Ties, m.tie, 1)
	if m.done == nil {
		return
	}
	m.done.Ranking = search.Rerank(m.done.Ranking, m.rankOptions())
	m.done.Winner = search.Winner(m.done.Ranking)
	m.resScr.cursor, m.resScr.offset = 0, 0
	win := "no winner"
	if w := m.done.Winner; w != nil {
		win = candName(w.Result.Candidate) + " wins"
	}
	m.setStatus("ranked again with a tie band of %s: %s", tieText(m.tie), win)
}

// shownCandidate is the candidate whose overrides are shown: the one under
// the cursor (the winner at first).
func (m *Model) shownCandidate() (search.Ranked, bool) {
	r := m.ranking()
	if len(r) == 0 {
		return search.Ranked{}, false
	}
	c := min(m.resScr.cursor, len(r)-1)
	return r[c], true
}

func (m *Model) format() string { return presets.Formats[m.resScr.format] }

// overridesText renders the shown candidate's overrides in the format.
func (m *Model) overridesText() ([]byte, error) {
	rk, ok := m.shownCandidate()
	if !ok {
		return nil, errors.New("no result to emit")
	}
	if rk.Result.Failed() {
		return nil, fmt.Errorf("%s failed (%s); it has no overrides worth emitting", rk.Result.Candidate.Label(), rk.Result.ErrKind)
	}
	// The overrides of the model and MB version the search ran with.
	req := m.request()
	if m.run != nil {
		req = m.run.req
	}
	data, err := m.candidateOverrides(req, rk.Result.Candidate).Render(m.format())
	if err != nil || rk.Result.Source != engine.Estimated {
		return data, err
	}
	// What is written from an estimate says so.
	data, _ = presets.Annotate(data, m.format(), search.EstimateNote(rk.Result))
	return data, nil
}

// candidateOverrides are candidate c's overrides for the search of req,
// with the settings of --set it needs.
func (m *Model) candidateOverrides(req Request, c presets.Candidate) presets.Overrides {
	s := &m.resScr
	if o, ok := s.overrides[c.Key()]; ok {
		return o
	}
	o := search.WinnerOverrides(search.Target{Model: req.Model, Layout: req.Layout, MBridge: req.MBridge, Sets: m.opts.Sets}, c)
	if s.overrides == nil {
		s.overrides = map[string]presets.Overrides{}
	}
	s.overrides[c.Key()] = o
	return o
}

func (m *Model) defaultPath() string {
	if m.opts.EmitPath != "" {
		return m.opts.EmitPath
	}
	return "./cgtune-overrides." + formatExt[m.format()]
}

var presetNameBad = regexp.MustCompile(`[^a-z0-9._-]+`)

// defaultPresetName is model-gpu, made a valid preset name.
func (m *Model) defaultPresetName() string {
	n := strings.ToLower(m.sel.model.Name + "-" + m.sel.layout.GPU)
	n = presetNameBad.ReplaceAllString(n, "-")
	return strings.TrimLeft(n, "._-")
}

func (m *Model) resultsKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	s := &m.resScr
	if s.prompt != promptNone {
		return m.promptKey(msg)
	}
	if s.val.phase != valOff {
		return m.validationKey(msg)
	}
	switch {
	case key.Matches(msg, k.Up):
		s.cursor = max(s.cursor-1, 0)
	case key.Matches(msg, k.Down):
		s.cursor = min(s.cursor+1, max(len(m.ranking())-1, 0))
	case key.Matches(msg, k.Format):
		s.format = (s.format + 1) % len(presets.Formats)
	case key.Matches(msg, k.Write):
		if _, err := m.overridesText(); err != nil {
			m.setError(err)
			return nil
		}
		s.prompt, s.input = promptPath, m.defaultPath()
	case key.Matches(msg, k.Report):
		s.prompt, s.input = promptReport, "./cgtune-report.md"
	case key.Matches(msg, k.Save):
		s.prompt, s.input = promptName, m.defaultPresetName()
	case key.Matches(msg, k.Tie):
		m.retie()
	case key.Matches(msg, k.Validate):
		m.openValidateForm()
	case key.Matches(msg, k.New):
		return m.goTo(screenSpace)
	case key.Matches(msg, k.Back):
		m.screen = screenRun
	}
	return nil
}

// promptKey edits the one-line prompt: typing appends, backspace and
// ctrl+w delete, ctrl+u clears, enter accepts, esc cancels.
func (m *Model) promptKey(msg tea.KeyPressMsg) tea.Cmd {
	s := &m.resScr
	switch s.prompt {
	case promptOverwrite, promptOverwriteFile, promptOverwriteReport:
		switch {
		case key.Matches(msg, m.keys.Confirm) && s.prompt == promptOverwrite:
			s.prompt = promptNone
			return saveCmd(m.backend, s.pending, true)
		case key.Matches(msg, m.keys.Confirm) && s.prompt == promptOverwriteFile:
			s.prompt = promptNone
			f := s.pendingFile
			return writeCmd(m.backend, f.path, f.format, f.data, true)
		case key.Matches(msg, m.keys.Confirm):
			s.prompt = promptNone
			return reportCmd(m.backend, s.pendingReport.path, s.pendingReport.in, true)
		case key.Matches(msg, m.keys.Deny):
			s.prompt = promptNone
			m.setStatus("nothing written: the old file stays")
		}
		return nil
	}
	switch msg.String() {
	case "esc":
		s.prompt = promptNone
		m.setStatus("cancelled")
		return nil
	case "enter":
		return m.acceptPrompt()
	case "backspace":
		if r := []rune(s.input); len(r) > 0 {
			s.input = string(r[:len(r)-1])
		}
		return nil
	case "ctrl+u":
		s.input = ""
		return nil
	case "ctrl+w":
		t := strings.TrimRight(s.input, " /")
		if i := strings.LastIndexAny(t, " /"); i >= 0 {
			s.input = t[:i+1]
		} else {
			s.input = ""
		}
		return nil
	}
	if msg.Text != "" {
		s.input += msg.Text
	}
	return nil
}

// onPaste appends pasted text to the prompt (one line), or to the field
// of the validation form under the cursor.
func (m *Model) onPaste(text string) {
	if m.resScr.val.phase == valForm {
		m.formPaste(text)
		return
	}
	if p := m.resScr.prompt; p == promptPath || p == promptName || p == promptReport {
		m.resScr.input += strings.TrimSpace(strings.SplitN(text, "\n", 2)[0])
	}
}

func (m *Model) acceptPrompt() tea.Cmd {
	s := &m.resScr
	in := strings.TrimSpace(s.input)
	switch s.prompt {
	case promptPath:
		if in == "" {
			m.setError(errors.New("give a file path"))
			return nil
		}
		data, err := m.overridesText()
		if err != nil {
			m.setError(err)
			return nil
		}
		s.prompt = promptNone
		m.setStatus("writing %s…", in)
		return writeCmd(m.backend, in, m.format(), data, false)
	case promptReport:
		if in == "" {
			m.setError(errors.New("give a file path"))
			return nil
		}
		s.prompt = promptNone
		m.setStatus("writing the report %s…", in)
		return reportCmd(m.backend, in, m.reportInput(), false)
	case promptName:
		if !presets.ValidName(in) {
			m.setError(fmt.Errorf("%q is not a preset name (allowed: [a-z0-9][a-z0-9._-]*)", in))
			return nil
		}
		p, err := m.teamPreset(in)
		if err != nil {
			m.setError(err)
			return nil
		}
		s.prompt = promptNone
		m.setStatus("saving preset %s…", in)
		return saveCmd(m.backend, p, false)
	}
	return nil
}

// teamPreset is the whole run as a team preset: model, layout, space, MB
// version and, when a candidate won, the measured (or estimated) result.
func (m *Model) teamPreset(name string) (presets.TeamPreset, error) {
	req := m.request()
	if m.run != nil {
		req = m.run.req // what actually ran, not what the toggles say now
	}
	p := presets.TeamPreset{
		Version: presets.FileVersion,
		Name:    name,
		GPU:     req.Layout.GPU,
		Layout:  req.Layout,
		// The space as the model runs it: spellings Megatron reads alike
		// are saved once.
		Space:   search.CanonicalSpace(req.Model, req.Space),
		MBridge: req.MBridge,
	}
	if _, err := presets.LookupModel(req.Model.Name); err == nil && !m.sel.inline {
		p.Model = req.Model.Name
	} else {
		mod := req.Model.Clone()
		p.ModelInline = &mod
	}
	engineName := "measured"
	if req.Estimate {
		engineName = "estimated"
	}
	p.Description = fmt.Sprintf("cgtune %s search (%s, budget %s) of %s on %s", req.Strategy, engineName, budgetText(req.Budget, req.Strategy), req.Model.Name, req.Layout.GPU)
	if m.done != nil && m.done.Winner != nil {
		res := m.done.Winner.Result
		r := &presets.Result{
			Winner:        res.Candidate,
			StepMS:        res.Step.Median,
			EagerStepMS:   res.Eager.Median,
			Speedup:       res.Speedup,
			MemoryMiB:     float64(res.Memory.JobGraphMiB()),
			Engine:        res.Source,
			GPUName:       res.Device.Name,
			DriverVersion: res.Device.Driver,
			CgtuneVersion: m.opts.Version,
			MeasuredAt:    m.opts.Now(),
		}
		if r.Engine == "" {
			r.Engine = engineName
		}
		if r.GPUName == "" && len(req.GPUs) > 0 {
			for _, g := range m.gpus {
				if g.Index == req.GPUs[0] {
					r.GPUName = g.Name
				}
			}
		}
		if r.DriverVersion == "" {
			r.DriverVersion = m.driver.Version
		}
		if r.Winner.Scopes == nil {
			r.Winner.Scopes = []string{}
		}
		p.Result = r
	}
	if err := p.Validate(); err != nil {
		return presets.TeamPreset{}, fmt.Errorf("cannot save the run as a preset: %w", err)
	}
	return p, nil
}

func (m *Model) onWritten(msg writtenMsg) {
	switch {
	case errors.Is(msg.err, ErrFileExists):
		m.resScr.pendingFile, m.resScr.prompt = msg, promptOverwriteFile
		m.setStatus("%s exists", msg.path)
		return
	case msg.err != nil:
		m.setError(fmt.Errorf("write %s: %w", msg.path, msg.err))
		return
	}
	note := ""
	if rk, ok := m.shownCandidate(); ok && rk.Result.Source == engine.Estimated {
		note = ", marked ESTIMATED"
		if msg.format == "json" {
			note = "; JSON has no comments: the file does not say it is an estimate"
		}
	}
	m.setStatus("wrote %s (%s, %d lines%s)", msg.written, msg.format, msg.lines, note)
}

// reportInput is the finished search as the report shows it.
func (m *Model) reportInput() report.Input {
	req := m.request()
	var plan []search.Planned
	if m.run != nil {
		req, plan = m.run.req, m.run.plan
	}
	engineName := "cuda"
	if req.Estimate {
		engineName = "estimate"
	}
	in := report.Input{
		Version: m.opts.Version, Now: m.opts.Now(), Model: req.Model, Layout: req.Layout, MBridge: req.MBridge,
		Engine: engineName, Strategy: req.Strategy, TrainIters: req.TrainIters, Tie: m.tie,
		JobGPUMemoryMiB: jobGPUMiB(req), Plan: plan, Format: m.format(),
	}
	if m.done != nil {
		in.Done = *m.done
		if w := m.done.Winner; w != nil {
			if data, err := m.candidateOverrides(req, w.Result.Candidate).Render(m.format()); err == nil {
				in.Overrides = data
			}
		}
	}
	return in
}

func (m *Model) onReport(msg reportMsg) {
	switch {
	case errors.Is(msg.err, ErrFileExists):
		m.resScr.pendingReport, m.resScr.prompt = msg, promptOverwriteReport
		m.setStatus("%s exists", msg.path)
	case msg.err != nil:
		m.setError(fmt.Errorf("report %s: %w", msg.path, msg.err))
	case msg.plot == "":
		m.setStatus("wrote the report %s (no candidate finished: no plot)", msg.written)
	default:
		m.setStatus("wrote the report %s and its plot %s", msg.written, msg.plot)
	}
}

func (m *Model) onSaved(msg savedMsg) tea.Cmd {
	switch {
	case errors.Is(msg.err, ErrPresetExists):
		p, err := m.teamPreset(msg.name)
		if err != nil {
			m.setError(err)
			return nil
		}
		m.resScr.pending, m.resScr.prompt = p, promptOverwrite
		m.setStatus("preset %s exists", msg.name)
	case msg.err != nil:
		m.setError(fmt.Errorf("save preset %s: %w", msg.name, msg.err))
	default:
		m.setStatus("saved preset %s to %s", msg.name, msg.path)
		// The list on the model screen should show it from now on.
		return fetchPresets(m.backend)
	}
	return nil
}

func (m *Model) resultsHelp() helpKeys {
	k := m.keys
	if m.resScr.val.phase != valOff {
		return m.validationHelp()
	}
	switch m.resScr.prompt {
	case promptPath, promptName, promptReport:
		return helpKeys{short: []key.Binding{withHelp(k.Next, "enter", "ok"), withHelp(k.Back, "esc", "cancel"), withHelp(k.Back, "ctrl+u", "clear")}}
	case promptOverwrite, promptOverwriteFile, promptOverwriteReport:
		return helpKeys{short: []key.Binding{withHelp(k.Confirm, "y", "overwrite"), withHelp(k.Deny, "n", "keep the old one")}}
	}
	short := []key.Binding{k.Write, k.Format, k.Report, k.Save, k.Validate, k.Tie, withHelp(k.Up, "↑/↓", "candidate"), k.New, withHelp(k.Back, "esc", "run"), k.Quit}
	return helpKeys{short: short, full: [][]key.Binding{
		{withHelp(k.Up, "↑/↓", "show a candidate's overrides"), k.Format, withHelp(k.Tie, "t", "rank again with the next tie band")},
		{k.Write, k.Report, k.Save, withHelp(k.Validate, "v", "validate on real training jobs")},
		{k.New, withHelp(k.Back, "esc", "back to the run"), k.Quit, k.Help},
	}}
}

// --- view ---------------------------------------------------------------

func (m *Model) resultsView(w, h int) string {
	st := m.st
	d := m.done
	if d == nil {
		return st.Faint.Render("no results yet")
	}
	if m.resScr.val.phase != valOff {
		return m.validationView(w, h)
	}
	var head strings.Builder
	title := st.Title.Render("Ranking")
	sub := fmt.Sprintf("%d ranked", len(d.Ranking))
	if d.Runs > 0 {
		sub += fmt.Sprintf(" · %d runs", d.Runs)
	}
	estimated := m.estimate || (m.run != nil && m.run.req.Estimate)
	if d.GPUTimeMs > 0 && !estimated {
		// An estimate spends no GPU time; a measured search says what it spent.
		sub += " · GPU time " + fmtJob(d.GPUTimeMs)
	}
	if m.run != nil {
		sub += " · " + m.run.req.Strategy
	}
	sub += " · tie " + tieText(m.tie)
	if slices.ContainsFunc(d.Ranking, func(r search.Ranked) bool { return r.Derived }) {
		sub += " · ≈ derived"
		if w >= 100 {
			sub += ", not run itself"
		}
	}
	line := title + "  " + st.Muted.Render(sub)
	if m.estimate || (m.run != nil && m.run.req.Estimate) {
		line += "  " + st.Estimate.Render(" ESTIMATE ")
	}
	head.WriteString(truncate(line, w) + "\n")
	headLines := 1
	switch {
	case d.Err != "":
		head.WriteString(st.Err.Render(wrap("✗ search failed: "+d.Err, w)) + "\n")
		headLines++
	case d.Interrupted:
		head.WriteString(st.Warn.Render("stopped early: only the candidates that finished are ranked") + "\n")
		headLines++
	}
	if d.RunDir != "" && h >= 30 {
		head.WriteString(st.Faint.Render("run folder "+d.RunDir) + "\n")
		headLines++
	}

	prompt := m.promptLine(w)
	if w >= 140 {
		// Wide: ranking, why, the candidate's details and the search's
		// notes on the left; the overrides on the right.
		// The ranking gets the room its names need, the overrides at
		// least 48 cells.
		leftW := min(max(w*11/20, m.rankingWidth()), w-48-3)
		rightW := w - leftW - 3
		ov := m.overridesLines(rightW)
		why := m.reasonLines(leftW, 4)
		left := m.rankingTable(leftW, min(len(d.Ranking)+1, h-headLines-14-len(why)))
		left += "\n\n" + strings.Join(why, "\n")
		if rk, ok := m.shownCandidate(); ok {
			left += "\n\n" + strings.Join(m.resultDetail(rk, leftW), "\n")
		}
		if len(d.Notes) > 0 {
			left += "\n\n" + st.Title.Render("Search")
			for _, n := range d.Notes {
				left += "\n" + st.Muted.Render(hanging("· ", n, leftW))
			}
		}
		right := strings.Join(fitLines(ov, h-headLines-2, rightW), "\n")
		body := head.String() + sideBySide(left, leftW, right, 3)
		return fitBlock(body, w, h-1) + "\n" + prompt
	}
	// Narrow: the table, the reason, the memory lines and the overrides
	// share the height. The table's header and cursor row come first,
	// then the overrides whole (what the person came for), a line of the
	// reason, the memory lines, the gaps, the rest of the reason and the
	// table.
	avail := h - 1 - headLines
	take := func(want int) int {
		n := max(min(want, avail), 0)
		avail -= n
		return n
	}
	whyMax := 3
	if h < 18 {
		whyMax = 2
	}
	rows := len(d.Ranking) + 1
	ov := m.overridesPane(w, h < 30)
	mem := m.memoryLine(w)
	tableH := take(min(rows, 2))
	ovH := take(len(ov))
	whyN := take(1)
	memN := take(len(mem))
	gapTable, gapOv := take(1), take(1)
	whyN += take(whyMax - whyN)
	tableH += take(rows - tableH)
	var b strings.Builder
	b.WriteString(head.String())
	b.WriteString(m.rankingTable(w, max(tableH, 1)) + "\n")
	b.WriteString(strings.Repeat("\n", gapTable))
	if whyN > 0 {
		b.WriteString(strings.Join(m.reasonLines(w, whyN), "\n") + "\n")
	}
	if memN > 0 {
		b.WriteString(strings.Join(mem[:memN], "\n") + "\n")
	}
	b.WriteString(strings.Repeat("\n", gapOv))
	b.WriteString(strings.Join(fitLines(ov, ovH, w), "\n"))
	return fitBlock(b.String(), w, h-1) + "\n" + prompt
}

// reasonLines say why the winner won (ties, memory, fit), at most n lines.
func (m *Model) reasonLines(w, n int) []string {
	st := m.st
	why := search.Reason(m.done.Ranking, m.rankOptions())
	if ref := m.done.Reference.Describe(m.done.Winner); ref != "" {
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
func (m *Model) memoryLine(w int) []string {
	rk, ok := m.shownCandidate()
	if !ok || rk.Result.Failed() {
		return nil
	}
	st := m.st
	req := m.request()
	if m.run != nil {
		req = m.run.req
	}
	need, total, what := jobMemory(rk.Result, jobGPUMiB(req))
	text := fmt.Sprintf("%s GiB %s", fmtGiB(need), what)
	if total > 0 {
		text = fmt.Sprintf("%s of %s GiB %s", fmtGiB(need), fmtGiB(total), what)
	}
	b := rk.Result.Memory.Breakdown
	if b == nil {
		text += fmt.Sprintf(" (graphs %s GiB)", fmtGiB(rk.Result.Memory.JobGraphMiB()))
	}
	if rk.Result.Source == engine.Estimated {
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
func (m *Model) rankingWidth() int {
	longest := 0
	for _, rk := range m.ranking() {
		longest = max(longest, ansi.StringWidth(candName(rk.Result.Candidate)))
	}
	return longest + 2 + 2 + 7 + 6 + 7 + 9 + 6 + 4 + 3 + 2*8
}

func (m *Model) rankingTable(w, h int) string {
	st := m.st
	r := m.ranking()
	var cands []presets.Candidate
	for _, rk := range r {
		cands = append(cands, rk.Result.Candidate)
	}
	// The name column is as wide as the names (with their warm-up and a
	// "≈ " for derived rows); in a narrow window the capture column goes
	// first, then graph memory and job time (the lines under the table
	// and the details have them), before the names are cut.
	capture, wide, vsCol := w >= 100, w >= 70, w >= 80
	cols := []column{
		{title: "#", width: 2, right: true},
		{title: "CANDIDATE"},
		{title: "STEP ms", width: 7, right: true},
		{title: "×EAGER", width: 6, right: true},
	}
	if vsCol {
		cols = append(cols, column{title: "×RECIPE", width: 7, right: true})
	}
	if capture {
		cols = append(cols, column{title: "CAPT ms", width: 7, right: true})
	}
	if wide {
		cols = append(cols, column{title: "GRAPH MiB", width: 9, right: true}, column{title: "JOB", width: 6, right: true})
	}
	cols = append(cols,
		column{title: "FITS", width: 4},
		column{title: "TIE", width: 3, flex: true},
	)
	fixed := 2 * (len(cols) - 1)
	for _, c := range cols {
		fixed += c.width
	}
	candW := nameWidth(cands, w-fixed-2) + 2
	cols[1].width = candW
	t := newTable(w, cols...)
	// cells takes every column's cell and keeps the shown columns'.
	cells := func(c ...string) []string {
		out := c[:4:4]
		if vsCol {
			out = append(out, c[4])
		}
		if capture {
			out = append(out, c[5])
		}
		if wide {
			out = append(out, c[6], c[7])
		}
		return append(out, c[8:]...)
	}
	var b strings.Builder
	b.WriteString(t.header(st) + "\n")
	rows := max(h-1, 1)
	s := &m.resScr
	s.offset = scrollWindow(s.offset, s.cursor, len(r), rows)
	winner := ""
	if m.done.Winner != nil {
		winner = m.done.Winner.Result.Candidate.Key()
	}
	for i := s.offset; i < len(r) && i < s.offset+rows; i++ {
		rk := r[i]
		res := rk.Result
		prefix := ""
		if rk.Derived {
			prefix = "≈ "
		}
		label := prefix + nameCell(res.Candidate, candW-len([]rune(prefix)))
		rank := fmt.Sprintf("%d", rk.Rank)
		if rk.Rank <= 0 {
			rank = "–"
		}
		if res.Candidate.Key() == winner {
			rank = "★"
		}
		cur := i == s.cursor
		var line string
		if res.Failed() {
			line = t.row(cells(rank, label, "failed", "", "", "", res.ErrKind, "", "—", "")...)
			line = st.Err.Render(line)
		} else {
			fits := "yes"
			if !rk.Fits {
				fits = "NO"
			}
			tie := ""
			if rk.Tie > 0 {
				tie = fmt.Sprintf("=%d", rk.Tie)
			}
			vs := "—"
			if rk.VsReference > 0 {
				vs = fmtSpeedup(rk.VsReference)
			}
			if res.Candidate.Key() == m.done.ReferenceKey() {
				vs = "ref"
			}
			line = t.row(cells(rank, label, fmtMs(res.Step.Median), fmtSpeedup(res.Speedup), vs, fmtMs(res.CaptureMs),
				fmt.Sprintf("%d", res.Memory.JobGraphMiB()), fmtJob(rk.JobMs), fits, tie)...)
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
		b.WriteString(line + "\n")
	}
	if len(r) == 0 {
		b.WriteString(st.Faint.Render("no candidate finished") + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// resultDetail describes one ranked candidate in full.
func (m *Model) resultDetail(rk search.Ranked, w int) []string {
	st := m.st
	res := rk.Result
	kv := func(k, v string) string { return truncate(st.Label.Render(padRight(k, 10))+st.Value.Render(v), w) }
	rank := fmt.Sprintf("#%d", rk.Rank)
	if rk.Rank <= 0 {
		rank = "failed"
	}
	lines := []string{st.Title.Render("Details") + "  " + st.Muted.Render(fmt.Sprintf("%s %s · %s", rank, candName(res.Candidate), res.Source))}
	if res.Failed() {
		return append(lines, st.Err.Render(wrap(res.ErrKind+": "+res.Err, w)))
	}
	lines = append(lines,
		kv("step", stepText(res)),
		kv("eager", fmt.Sprintf("%s ms → %s", fmtMs(res.Eager.Median), fmtSpeedup(res.Speedup))),
		kv("capture", captureText(res)),
		kv("memory", memoryText(res)),
	)
	lines = append(lines, m.breakdownLines(rk, w)...)
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
func (m *Model) breakdownLines(rk search.Ranked, w int) []string {
	st := m.st
	res := rk.Result
	req := m.request()
	if m.run != nil {
		req = m.run.req
	}
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
	if res.Source == engine.Estimated {
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
	if r.Source == engine.Estimated {
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
	s := fmt.Sprintf("graphs %d MiB", r.Memory.GraphMiB)
	if r.Memory.GraphFullJobMiB > 0 && r.Memory.GraphFullJobMiB != r.Memory.GraphMiB {
		s += fmt.Sprintf(", %d MiB at job scale", r.Memory.GraphFullJobMiB)
	}
	if r.Memory.DevicePeakMiB > 0 {
		s += fmt.Sprintf(" · device peak %d MiB", r.Memory.DevicePeakMiB)
	}
	return s
}

// overridesLines are the format tabs and the rendered overrides, laid out
// to w so that what is copied from the pane still parses: a long comment
// goes on over lines that start with "# " again, and a dotlist or flags
// line breaks between tokens with a shell continuation ("\").
func (m *Model) overridesLines(w int) []string { return m.overridesPane(w, false) }

// overridesPane is overridesLines; brief leaves out the comments (where
// the file comes from, why a setting is there), for a short pane: the
// overrides themselves are what has to show.
func (m *Model) overridesPane(w int, brief bool) []string {
	st := m.st
	var tabs []string
	for i, f := range presets.Formats {
		switch {
		case i == m.resScr.format && st.Plain:
			tabs = append(tabs, "["+f+"]")
		case i == m.resScr.format:
			tabs = append(tabs, st.StepActive.Render(" "+f+" "))
		default:
			tabs = append(tabs, st.Muted.Render(" "+f+" "))
		}
	}
	title := "Overrides"
	if rk, ok := m.shownCandidate(); ok {
		title += " · " + candName(rk.Result.Candidate)
		if m.done.Winner != nil && rk.Result.Candidate.Key() == m.done.Winner.Result.Candidate.Key() {
			title += " (winner)"
		}
	}
	tabLine := strings.Join(tabs, "") + st.Faint.Render("  f")
	lines := []string{st.Title.Render(title) + "  " + tabLine}
	switch short := st.Title.Render("Overrides") + "  " + tabLine; {
	case ansi.StringWidth(lines[0]) <= w:
	case brief && ansi.StringWidth(short) <= w:
		// A short pane keeps the line: the ranking's cursor row names
		// the candidate.
		lines = []string{short}
	default:
		// The tabs go under the title rather than lose a format.
		lines = []string{truncate(st.Title.Render(title), w), tabLine}
	}
	data, err := m.overridesText()
	if err != nil {
		return append(lines, st.Faint.Render(err.Error()))
	}
	body := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if brief {
		// A short pane keeps the overrides themselves: every comment
		// (where the file comes from, why a setting is there) gives way.
		var kept []string
		for _, l := range body {
			if !strings.HasPrefix(strings.TrimSpace(l), "#") {
				kept = append(kept, l)
			}
		}
		if len(kept) > 0 {
			body = kept
		}
	}
	for _, l := range body {
		for _, part := range copyableLines(l, m.format(), w-2) {
			lines = append(lines, "  "+st.Value.Render(part))
		}
	}
	return lines
}

// copyableLines lays one line of rendered overrides out in lines of at
// most w cells that mean the same when copied: comments continue as
// comments, shell tokens continue with a backslash, and a token longer
// than the line is left whole (cutting it would change it).
func copyableLines(l, format string, w int) []string {
	if ansi.StringWidth(l) <= w || w < 8 {
		return []string{l}
	}
	if strings.HasPrefix(l, "#") {
		body := strings.TrimSpace(strings.TrimPrefix(l, "#"))
		parts := strings.Split(wrap(body, w-2), "\n")
		for i := range parts {
			parts[i] = "# " + parts[i]
		}
		return parts
	}
	if format != "dotlist" && format != "flags" {
		return []string{l} // YAML, Python and JSON lines are short; never break one
	}
	var out []string
	cur := ""
	for _, tok := range strings.Fields(l) {
		switch {
		case cur == "":
			cur = tok
		case ansi.StringWidth(cur)+1+ansi.StringWidth(tok)+2 <= w:
			cur += " " + tok
		default:
			out = append(out, cur+" \\")
			cur = tok
		}
	}
	return append(out, cur)
}

// promptLine is the bottom line of the screen: a prompt when one is open.
func (m *Model) promptLine(w int) string {
	st := m.st
	s := &m.resScr
	switch s.prompt {
	case promptPath:
		what := "Write " + m.format() + " overrides"
		if rk, ok := m.shownCandidate(); ok {
			what += " of " + candName(rk.Result.Candidate)
		}
		return truncate(st.Prompt.Render(what+" to: ")+s.input+st.Accent.Render("▏"), w)
	case promptReport:
		return truncate(st.Prompt.Render("Write the report (Markdown, its plot beside it) to: ")+s.input+st.Accent.Render("▏"), w)
	case promptName:
		return truncate(st.Prompt.Render("Save the run as team preset: ")+s.input+st.Accent.Render("▏"), w)
	case promptOverwrite:
		return truncate(st.Warn.Render(fmt.Sprintf("Preset %s exists. Overwrite it? (y/n)", s.pending.Name)), w)
	case promptOverwriteFile:
		return truncate(st.Warn.Render(fmt.Sprintf("%s exists. Overwrite it? (y/n)", s.pendingFile.path)), w)
	case promptOverwriteReport:
		return truncate(st.Warn.Render(fmt.Sprintf("%s exists. Overwrite it and its plot? (y/n)", s.pendingReport.path)), w)
	}
	if d := m.done; d != nil && d.Winner != nil {
		res := d.Winner.Result
		line := fmt.Sprintf("★ %s: %s ms/step against %s eager (%s)", candName(res.Candidate), fmtMs(res.Step.Median), fmtMs(res.Eager.Median), fmtSpeedup(res.Speedup))
		if res.Source == engine.Estimated {
			line += " · ESTIMATE for " + strings.TrimSuffix(res.Device.Name, " (estimated)")
		} else if res.Device.Name != "" {
			line += " · measured on " + res.Device.Name
		}
		return st.OK.Render(truncate(line, w))
	}
	return st.Faint.Render(truncate("no winner: every candidate failed, none fits, or the search stopped before one finished", w))
}

// candName is the label with the warm-up, which only matters when graphed.
func candName(c presets.Candidate) string {
	if !c.Graphed() {
		return c.Label()
	}
	return fmt.Sprintf("%s w%d", c.Label(), c.Warmup)
}
