package tui

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/report"
	"cgtune/search"
)

// The results screen's files: the overrides (w), the report (r) and the
// run as a team preset (p), each through a one-line prompt, asking before
// it replaces one.

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

func (s *resultsScreen) defaultPath() string {
	if s.opts.EmitPath != "" {
		return s.opts.EmitPath
	}
	return "./cgtune-overrides." + formatExt[s.format()]
}

var presetNameBad = regexp.MustCompile(`[^a-z0-9._-]+`)

// defaultPresetName is model-gpu, made a valid preset name.
func (s *resultsScreen) defaultPresetName() string {
	n := strings.ToLower(s.sel.model.Name + "-" + s.sel.layout.GPU)
	n = presetNameBad.ReplaceAllString(n, "-")
	return strings.TrimLeft(n, "._-")
}

// promptKey edits the one-line prompt: typing appends, backspace and
// ctrl+w delete, ctrl+u clears, enter accepts, esc cancels.
func (s *resultsScreen) promptKey(msg tea.KeyPressMsg) tea.Cmd {
	switch s.prompt {
	case promptOverwrite, promptOverwriteFile, promptOverwriteReport:
		return s.answerOverwrite(msg)
	}
	switch msg.String() {
	case "esc":
		s.prompt = promptNone
		s.setStatus("cancelled")
		return nil
	case "enter":
		return s.acceptPrompt()
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

// answerOverwrite takes the answer to "... exists. Overwrite it?": yes
// writes what waited for it.
func (s *resultsScreen) answerOverwrite(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, s.keys.Confirm) && s.prompt == promptOverwrite:
		s.prompt = promptNone
		return saveCmd(s.backend, s.pending, true)
	case key.Matches(msg, s.keys.Confirm) && s.prompt == promptOverwriteFile:
		s.prompt = promptNone
		f := s.pendingFile
		return writeCmd(s.backend, f.path, f.format, f.data, true)
	case key.Matches(msg, s.keys.Confirm):
		s.prompt = promptNone
		return reportCmd(s.backend, s.pendingReport.path, s.pendingReport.in, true)
	case key.Matches(msg, s.keys.Deny):
		s.prompt = promptNone
		s.setStatus("nothing written: the old file stays")
	}
	return nil
}

// onPaste appends pasted text to the prompt (one line), or to the field
// of the validation form under the cursor.
func (s *resultsScreen) onPaste(text string) {
	if s.val.typing() {
		s.val.paste(text)
		return
	}
	if p := s.prompt; p == promptPath || p == promptName || p == promptReport {
		s.input += strings.TrimSpace(strings.SplitN(text, "\n", 2)[0])
	}
}

// acceptPrompt writes what the prompt asked for.
func (s *resultsScreen) acceptPrompt() tea.Cmd {
	in := strings.TrimSpace(s.input)
	switch s.prompt {
	case promptPath:
		return s.writeOverrides(in)
	case promptReport:
		return s.writeReport(in)
	case promptName:
		return s.savePreset(in)
	}
	return nil
}

func (s *resultsScreen) writeOverrides(path string) tea.Cmd {
	if path == "" {
		s.setError(errors.New("give a file path"))
		return nil
	}
	data, err := s.overridesText()
	if err != nil {
		s.setError(err)
		return nil
	}
	s.prompt = promptNone
	s.setStatus("writing %s…", path)
	return writeCmd(s.backend, path, s.format(), data, false)
}

func (s *resultsScreen) writeReport(path string) tea.Cmd {
	if path == "" {
		s.setError(errors.New("give a file path"))
		return nil
	}
	s.prompt = promptNone
	s.setStatus("writing the report %s…", path)
	return reportCmd(s.backend, path, s.reportInput(), false)
}

func (s *resultsScreen) savePreset(name string) tea.Cmd {
	if !presets.ValidName(name) {
		s.setError(fmt.Errorf("%q is not a preset name (allowed: [a-z0-9][a-z0-9._-]*)", name))
		return nil
	}
	p, err := s.teamPreset(name)
	if err != nil {
		s.setError(err)
		return nil
	}
	s.prompt = promptNone
	s.setStatus("saving preset %s…", name)
	return saveCmd(s.backend, p, false)
}

// teamPreset is the whole run as a team preset: model, layout, space, MB
// version and, when a candidate won, the measured (or estimated) result.
func (s *resultsScreen) teamPreset(name string) (presets.TeamPreset, error) {
	req := s.ranRequest() // what actually ran, not what the toggles say now
	// The --set values go into the layout: the preset ranks under the
	// conditions the search ran with.
	layout, left := recipe.Target{Model: req.Model, Layout: req.Layout, MBridge: req.MBridge, Sets: s.opts.Sets}.PresetLayout()
	p := presets.TeamPreset{
		Version: presets.FileVersion,
		Name:    name,
		GPU:     req.Layout.GPU,
		Layout:  layout,
		// The space as the model runs it: spellings Megatron reads alike
		// are saved once.
		Space:   search.CanonicalSpace(req.Model, req.Space),
		MBridge: req.MBridge,
	}
	if _, err := presets.LookupModel(req.Model.Name); err == nil && !s.sel.inline {
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
	if len(left) > 0 {
		p.Description += fmt.Sprintf("; the search also had %s, which a preset cannot hold", strings.Join(left, ", "))
	}
	if s.done != nil && s.done.Winner != nil {
		p.Result = s.presetResult(req, engineName)
	}
	if err := p.Validate(); err != nil {
		return presets.TeamPreset{}, fmt.Errorf("cannot save the run as a preset: %w", err)
	}
	return p, nil
}

// presetResult is the winner as a preset stores it: its times, memory,
// engine and the GPU and driver it ran on.
func (s *resultsScreen) presetResult(req Request, engineName string) *presets.Outcome {
	res := s.done.Winner.Result
	r := &presets.Outcome{
		Winner:        res.Candidate,
		StepMS:        res.Step.Median,
		EagerStepMS:   res.Eager.Median,
		Speedup:       res.Speedup,
		MemoryMiB:     float64(res.Memory.JobGraphMiB()),
		Engine:        string(res.Source),
		GPUName:       res.Device.Name,
		DriverVersion: res.Device.Driver,
		CgtuneVersion: s.opts.Version,
		MeasuredAt:    s.opts.Now(),
	}
	if r.Engine == "" {
		r.Engine = engineName
	}
	if r.GPUName == "" && len(req.GPUs) > 0 {
		for _, g := range s.gpus {
			if g.Index == req.GPUs[0] {
				r.GPUName = g.Name
			}
		}
	}
	if r.DriverVersion == "" {
		r.DriverVersion = s.driver.Version
	}
	if r.Winner.Scopes == nil {
		r.Winner.Scopes = []string{}
	}
	return r
}

func (s *resultsScreen) onWritten(msg writtenMsg) {
	switch {
	case errors.Is(msg.err, ErrFileExists):
		s.pendingFile, s.prompt = msg, promptOverwriteFile
		s.setStatus("%s exists", msg.path)
		return
	case msg.err != nil:
		s.setError(fmt.Errorf("write %s: %w", msg.path, msg.err))
		return
	}
	note := ""
	if rk, ok := s.shownCandidate(); ok && rk.Result.Source == engine.SourceEstimated {
		note = ", marked ESTIMATED"
		if msg.format == "json" {
			note = "; JSON has no comments: the file does not say it is an estimate"
		}
	}
	s.setStatus("wrote %s (%s, %d lines%s)", msg.written, msg.format, msg.lines, note)
}

// reportInput is the finished search as the report shows it.
func (s *resultsScreen) reportInput() report.Input {
	req := s.ranRequest()
	var plan []search.Planned
	if s.run != nil {
		plan = s.run.plan
	}
	engineName := "cuda"
	if req.Estimate {
		engineName = "estimate"
	}
	in := report.Input{
		Version: s.opts.Version, Now: s.opts.Now(), Model: req.Model, Layout: req.Layout, MBridge: req.MBridge,
		Engine: engineName, Strategy: req.Strategy, TrainIters: req.TrainIters, Tie: s.tie,
		JobGPUMemoryMiB: jobGPUMiB(req), Plan: plan, Format: s.format(),
	}
	if s.done != nil {
		in.Done = *s.done
		if w := s.done.Winner; w != nil {
			o := s.recommendation(*w)
			if data, err := o.Render(s.format()); err == nil {
				in.Overrides, in.DropsTokens = data, o.DropsTokens
			}
		}
	}
	return in
}

func (s *resultsScreen) onReport(msg reportMsg) {
	if msg.err == nil && msg.written != "" && !slices.Contains(s.reports, msg.written) {
		s.reports = append(s.reports, msg.written)
	}
	switch {
	case errors.Is(msg.err, ErrFileExists):
		s.pendingReport, s.prompt = msg, promptOverwriteReport
		s.setStatus("%s exists", msg.path)
	case msg.err != nil:
		s.setError(fmt.Errorf("report %s: %w", msg.path, msg.err))
	case msg.again:
		s.setStatus("ranked again with a tie band of %s: %s; rewrote the report %s to match", tieText(s.tie), winsText(s.done), msg.written)
	case msg.plot == "":
		s.setStatus("wrote the report %s (no candidate finished: no plot)", msg.written)
	default:
		s.setStatus("wrote the report %s and its plot %s", msg.written, msg.plot)
	}
}

func (s *resultsScreen) onSaved(msg savedMsg) tea.Cmd {
	switch {
	case errors.Is(msg.err, ErrPresetExists):
		p, err := s.teamPreset(msg.name)
		if err != nil {
			s.setError(err)
			return nil
		}
		s.pending, s.prompt = p, promptOverwrite
		s.setStatus("preset %s exists", msg.name)
	case msg.err != nil:
		s.setError(fmt.Errorf("save preset %s: %w", msg.name, msg.err))
	default:
		s.setStatus("saved preset %s to %s", msg.name, msg.path)
		// The list on the model screen should show it from now on.
		return fetchPresets(s.backend)
	}
	return nil
}

// promptLines are the bottom of the screen: a prompt when one is open,
// its question on a line and what is typed on the lines under it, whole
// (a long path goes on over lines, every character shown); else the
// winner.
func (s *resultsScreen) promptLines(w int) []string {
	st := s.st
	switch s.prompt {
	case promptPath:
		what := "Write " + s.format() + " overrides"
		if rk, ok := s.shownCandidate(); ok {
			what += " of " + rk.Result.Candidate.Name()
		}
		return s.inputLines(what+" to:", w)
	case promptReport:
		return s.inputLines("Write the report (Markdown, its plot beside it) to:", w)
	case promptName:
		return s.inputLines("Save the run as team preset:", w)
	case promptOverwrite:
		return styleLines(st.Warn, wrapAtSpaces(fmt.Sprintf("Preset %s exists. Overwrite it? (y/n)", s.pending.Name), w))
	case promptOverwriteFile:
		return styleLines(st.Warn, wrapAtSpaces(fmt.Sprintf("%s exists. Overwrite it? (y/n)", s.pendingFile.path), w))
	case promptOverwriteReport:
		return styleLines(st.Warn, wrapAtSpaces(fmt.Sprintf("%s exists. Overwrite it and its plot? (y/n)", s.pendingReport.path), w))
	}
	if d := s.done; d != nil && d.Winner != nil {
		return []string{st.OK.Render(s.winnerLine(w))}
	}
	return styleLines(st.Faint, wrapAtSpaces("no winner: every candidate failed, none fits, or the search stopped before one finished", w))
}

// inputLines are a prompt's question and, under it, what is typed and the
// cursor, cut into lines of w cells (never shortened).
func (s *resultsScreen) inputLines(question string, w int) []string {
	st := s.st
	lines := styleLines(st.Prompt, wrapAtSpaces(question, w))
	text := []rune(s.input + "▏")
	for len(text) > w {
		// Break after a "/" in the line's second half, else at the width.
		cut := w
		for j := w - 1; j >= w/2; j-- {
			if text[j] == '/' {
				cut = j + 1
				break
			}
		}
		lines = append(lines, string(text[:cut]))
		text = text[cut:]
	}
	last := string(text)
	if strings.HasSuffix(last, "▏") {
		last = strings.TrimSuffix(last, "▏") + st.Accent.Render("▏")
	}
	return append(lines, last)
}

// winnerLine sums the winner up in w cells: its step time against eager,
// and where it was measured (or what it was estimated for) when that fits.
func (s *resultsScreen) winnerLine(w int) string {
	res := s.done.Winner.Result
	line := fmt.Sprintf("★ %s: %s ms/step against %s eager (%s)", res.Candidate.Name(), fmtMs(res.Step.Median), fmtMs(res.Eager.Median), fmtSpeedup(res.Speedup))
	where := ""
	if res.Source == engine.SourceEstimated {
		where = " · ESTIMATE for " + strings.TrimSuffix(res.Device.Name, " (estimated)")
	} else if res.Device.Name != "" {
		where = " · measured on " + res.Device.Name
	}
	switch {
	case ansi.StringWidth(line+where) <= w:
		return line + where
	case res.Source == engine.SourceEstimated && ansi.StringWidth(line+" · ESTIMATE") <= w:
		// An estimate says so even where the GPU's name does not fit.
		return line + " · ESTIMATE"
	case ansi.StringWidth(line) <= w:
		return line
	}
	return fmt.Sprintf("★ %s: %s× eager", res.Candidate.Name(), strings.TrimSuffix(fmtSpeedup(res.Speedup), "×"))
}
