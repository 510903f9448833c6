package tui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"cgtune/engine"
	"cgtune/engine/job"
	"cgtune/presets"
	"cgtune/search"
)

// The results screen's validation pane: "v" runs the search's top
// candidates and the eager baseline as real training jobs (the command is
// shown and confirmed first: a preset's command is shared input), follows
// each job's state and log tail, then compares the real iteration times
// with cgtune's predictions.

// validateTop is how many graphed candidates "v" validates.
const validateTop = 3

type valPhase int

const (
	valOff     valPhase = iota
	valForm             // the form asks how to run the jobs (validate_form.go)
	valConfirm          // the command is shown; y runs it
	valStarting
	valRunning
	valDone
)

// validationPane is the validation on real jobs, from the form that asks
// how to run them to the comparison with the predictions.
type validationPane struct {
	*common

	phase      valPhase
	form       *validateForm
	req        ValidateRequest
	cancel     context.CancelFunc
	cancelling bool
	targets    []job.Target
	dir        string
	updates    <-chan ValidationUpdate
	jobs       map[string]*jobView // by candidate key
	done       int
	outcome    *search.JobOutcome
	err        error
}

func newValidationPane(c *common) validationPane { return validationPane{common: c} }

// jobView is what the pane knows of one job: its last update (the log
// tail kept from the last update that had one) and its result once done.
type jobView struct {
	u       job.Update
	result  *engine.Result
	resumed bool
}

// open opens the form for the search that ended in d and asks what it
// would run, or says why there is nothing to validate.
func (p *validationPane) open(d *search.DoneEvent) tea.Cmd {
	switch {
	case d == nil || d.RunDir == "":
		p.setError(errors.New("this search has no run folder to validate"))
	case d.Winner == nil:
		p.setError(errors.New("no candidate succeeded: nothing to validate"))
	default:
		*p = validationPane{common: p.common, phase: valForm, form: newValidateForm(p.opts, d.RunDir)}
		p.setStatus("enter shows the command before anything runs")
		return p.form.replan(p.opts.Context, p.backend)
	}
	return nil
}

// typing reports whether the form has the keyboard.
func (p *validationPane) typing() bool { return p.phase == valForm }

// validating reports whether jobs are being started or run: then q and
// ctrl+c cancel them instead of quitting.
func (p *validationPane) validating() bool {
	return p.phase == valStarting || p.phase == valRunning
}

// paste puts pasted text into the form's field under the cursor.
func (p *validationPane) paste(text string) { p.form.paste(text) }

func (p *validationPane) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case validatePlanMsg:
		if p.form != nil {
			p.form.onPlan(msg)
		}
	case validateStartedMsg:
		return p.onStarted(msg)
	case validateMsg:
		return p.onUpdate(msg)
	case tea.KeyPressMsg:
		return p.key(msg)
	}
	return nil
}

func (p *validationPane) key(msg tea.KeyPressMsg) tea.Cmd {
	k := p.keys
	switch p.phase {
	case valForm:
		return p.formKey(msg)
	case valConfirm:
		switch {
		case msg.String() == "y":
			ctx, cancel := context.WithCancel(p.opts.Context)
			p.phase, p.cancel = valStarting, cancel
			p.setStatus("starting the jobs…")
			return validateCmd(ctx, p.backend, p.req)
		case key.Matches(msg, k.Deny):
			p.phase = valOff
			p.setStatus("nothing started")
		}
	case valStarting, valRunning:
		if key.Matches(msg, k.Back) || key.Matches(msg, k.Quit) {
			return p.cancelJobs(msg)
		}
	case valDone:
		if key.Matches(msg, k.Back) || key.Matches(msg, k.Validate) {
			p.phase = valOff
			p.setStatus("")
		}
	}
	return nil
}

// formKey: esc closes the form, enter checks it and shows the command;
// the other keys edit it (a new Top asks again what it would run).
func (p *validationPane) formKey(msg tea.KeyPressMsg) tea.Cmd {
	f := p.form
	switch msg.String() {
	case "esc":
		p.phase = valOff
		p.setStatus("nothing started")
	case "enter":
		if f.planErr != nil {
			// Nothing the form holds can run: say why, start nothing.
			p.setError(fmt.Errorf("validate: %w", f.planErr))
			return nil
		}
		if field, why, bad := f.firstProblem(); bad {
			f.field = field
			p.setError(fmt.Errorf("%s: %s", formLabels[field], why))
			return nil
		}
		p.req, p.phase = f.request(), valConfirm
		p.setStatus("read the command before it runs")
	default:
		f.key(msg, p.keys)
		return f.replan(p.opts.Context, p.backend)
	}
	return nil
}

// cancelJobs cancels the queued and running jobs; a second ctrl+c quits.
func (p *validationPane) cancelJobs(msg tea.KeyPressMsg) tea.Cmd {
	if p.cancelling {
		if msg.String() == "ctrl+c" {
			return tea.Quit // a second ctrl+c: the program's context cancels the jobs
		}
		return nil
	}
	p.cancelling = true
	p.cancel()
	p.setStatus("cancelling the jobs…")
	return nil
}

func (p *validationPane) onStarted(msg validateStartedMsg) tea.Cmd {
	if msg.err != nil {
		p.cancel()
		p.phase = valOff
		p.setError(fmt.Errorf("validate: %w", msg.err))
		return nil
	}
	p.phase, p.targets, p.dir, p.updates = valRunning, msg.v.Targets, msg.v.Dir, msg.v.Updates
	p.jobs = map[string]*jobView{}
	for _, t := range p.targets {
		p.jobs[t.Candidate.Key()] = &jobView{u: job.Update{Candidate: t.Candidate}}
	}
	if !p.cancelling {
		skipped := ""
		for _, sk := range msg.v.Skipped {
			skipped += fmt.Sprintf("; skipped %s: %s", sk.Candidate.Name(), sk.Why)
		}
		p.setStatus("%d jobs through the %s launcher; esc cancels them%s", len(p.targets), p.req.Launcher, skipped)
	}
	return waitForValidation(msg.v.Updates)
}

// onUpdate takes one update of the jobs and asks for the next.
func (p *validationPane) onUpdate(msg validateMsg) tea.Cmd {
	if msg.closed {
		p.finish()
		return nil
	}
	u := msg.u
	switch ev := u.Event.(type) {
	case job.JobEvent:
		j := p.job(ev.Update.Candidate)
		tail := j.u.Tail
		j.u = ev.Update
		if len(j.u.Tail) == 0 {
			j.u.Tail = tail
		}
	case job.JobDone:
		j := p.job(ev.Result.Candidate)
		r := ev.Result
		j.result, j.resumed = &r, ev.Resumed
		p.done = ev.Done
	}
	if u.Outcome != nil {
		p.outcome = u.Outcome
	}
	if u.Err != nil {
		p.err = u.Err
	}
	return waitForValidation(p.updates)
}

// finish ends the validation when its updates end, saying how.
func (p *validationPane) finish() {
	if p.outcome == nil && p.err == nil {
		p.err = errors.New("the validation ended without an outcome")
	}
	p.phase = valDone
	if p.cancel != nil {
		p.cancel()
	}
	switch {
	case p.err != nil:
		p.setError(fmt.Errorf("validate: %w", p.err))
	case p.outcome.Interrupted:
		p.setStatus("validation cancelled: %d finished jobs kept in %s; v again resumes", len(p.outcome.Rows), p.dir)
	default:
		p.setStatus("validation finished: saved in %s", filepath.Join(p.dir, job.ValidationFile))
	}
}

// job is the pane's view of candidate c's job (made on first sight).
func (p *validationPane) job(c presets.Candidate) *jobView {
	if p.jobs == nil {
		p.jobs = map[string]*jobView{}
	}
	j, ok := p.jobs[c.Key()]
	if !ok {
		j = &jobView{u: job.Update{Candidate: c}}
		p.jobs[c.Key()] = j
		p.targets = append(p.targets, job.Target{Candidate: c})
	}
	return j
}

func (p *validationPane) helpKeys() helpKeys {
	k := p.keys
	switch p.phase {
	case valForm:
		return p.form.helpKeys(k)
	case valConfirm:
		return helpKeys{short: []key.Binding{withHelp(k.Confirm, "y", "run the jobs"), withHelp(k.Deny, "n/esc", "no")}}
	case valStarting, valRunning:
		if p.cancelling {
			return helpKeys{short: []key.Binding{withHelp(k.Quit, "ctrl+c", "quit now")}}
		}
		return helpKeys{short: []key.Binding{withHelp(k.Back, "esc/q", "cancel the jobs")}}
	}
	return helpKeys{short: []key.Binding{withHelp(k.Back, "esc", "back to the ranking"), k.Quit}}
}

// --- view ---------------------------------------------------------------

// View is the form; the command to confirm; the jobs as they run; then
// the comparison. The last line says what to do or what came of it.
func (p *validationPane) View(w, h int) string {
	st := p.st
	switch p.phase {
	case valForm:
		return p.form.View(st, w, h)
	case valConfirm:
		return fitBlock(strings.Join(p.confirmLines(w), "\n"), w, h-1) + "\n" + p.promptLine(w)
	}
	lines := []string{p.titleLine(w)}
	// The command whole: it is what runs.
	for i, l := range commandLines(p.req.Command, w-len("command: ")) {
		lead := "command: "
		if i > 0 {
			lead = strings.Repeat(" ", len(lead))
		}
		lines = append(lines, st.Faint.Render(lead+l))
	}
	if p.dir != "" {
		lines = append(lines, st.Faint.Render(truncate("folder "+p.dir, w)))
	}
	lines = append(lines, "")
	if p.outcome != nil && len(p.outcome.Rows) > 0 {
		lines = append(lines, p.comparisonLines(w)...)
		lines = append(lines, "")
		lines = append(lines, p.summaryLines(w)...)
	} else {
		lines = append(lines, p.jobLines(w, h-1-len(lines))...)
	}
	if p.err != nil {
		lines = append(lines, "", st.Err.Render(wrap("✗ "+p.err.Error(), w)))
	}
	return fitBlock(strings.Join(lines, "\n"), w, h-1) + "\n" + p.promptLine(w)
}

// titleLine is the pane's title, the launcher and the jobs done.
func (p *validationPane) titleLine(w int) string {
	st := p.st
	sub := fmt.Sprintf("%s launcher", p.req.Launcher)
	if n := len(p.targets); n > 0 {
		sub += fmt.Sprintf(" · %d/%d done", p.done, n)
	}
	return truncate(st.Title.Render("Validation on real jobs")+"  "+st.Muted.Render(sub), w)
}

// confirmLines say what will run (the jobs, and the top candidates
// skipped, with why) and the whole command, never cut: it is what will
// run.
func (p *validationPane) confirmLines(w int) []string {
	st := p.st
	what := fmt.Sprintf("the top %d graphed candidates of %s and the eager baseline", p.req.Top, p.req.RunDir)
	if p.form != nil && p.form.plan != nil {
		what = planText(*p.form.plan)
	}
	lines := []string{p.titleLine(w)}
	lines = append(lines, styleLines(st.Muted, wrap(fmt.Sprintf("Runs %s, one training job each for %d iterations, with this command:", what, p.req.Iters), w))...)
	lines = append(lines, "")
	for _, l := range commandLines(p.req.Command, w-2) {
		lines = append(lines, "  "+st.Value.Render(l))
	}
	if p.form != nil && p.form.plan != nil {
		for _, sk := range skipGroups(p.form.plan.Skipped) {
			lines = append(lines, styleLines(st.Warn, hanging("skips ", sk, w))...)
		}
	}
	return lines
}

// jobLines are each job's candidate, state and job id, and as many of the
// last log lines as fit in h lines.
func (p *validationPane) jobLines(w, h int) []string {
	st := p.st
	if len(p.targets) == 0 {
		return []string{st.Faint.Render("starting…")}
	}
	tail := min(max(h/len(p.targets)-1, 0), 3)
	var cands []presets.Candidate
	for _, t := range p.targets {
		cands = append(cands, t.Candidate)
	}
	nameW := nameWidth(cands, 24)
	t := newTable(w, column{title: "CANDIDATE", width: nameW}, column{title: "STATE", width: 20},
		column{title: "JOB", width: 8}, column{title: "RESULT", width: 10, flex: true})
	lines := []string{t.header(st)}
	for _, tg := range p.targets {
		j := p.jobs[tg.Candidate.Key()]
		res, style := j.resultText(st)
		lines = append(lines, style.Render(t.row(nameCell(tg.Candidate, nameW), j.stateText(), j.id(), res)))
		log := j.u.Tail
		if len(log) > tail {
			log = log[len(log)-tail:]
		}
		for _, l := range log {
			lines = append(lines, st.Faint.Render(truncate("  │ "+strings.TrimRight(l, "\r"), w)))
		}
	}
	return lines
}

// stateText is the job's state as the launcher reports it, with why it
// waits.
func (j *jobView) stateText() string {
	state := j.u.State
	if state == "" {
		state = "waiting"
	}
	if j.u.Reason != "" && j.u.Reason != "None" {
		state += " (" + j.u.Reason + ")"
	}
	if j.u.Reattached {
		state += " re-attached"
	}
	return state
}

func (j *jobView) id() string {
	if j.u.JobID == "" {
		return "—"
	}
	return j.u.JobID
}

// resultText is the job's iteration time once done, and the row's style.
func (j *jobView) resultText(st Styles) (string, lipgloss.Style) {
	switch r := j.result; {
	case r == nil:
		return "", st.Value
	case r.Failed():
		return "failed (" + string(r.ErrKind) + ")", st.Err
	}
	res := fmtMs(j.result.Step.Median) + " ms/iter"
	if j.resumed {
		res += " (journal)"
	}
	return res, st.OK
}

// comparisonLines rank the jobs by real iteration time next to the
// predictions and their error.
func (p *validationPane) comparisonLines(w int) []string {
	st := p.st
	rows := p.outcome.Rows
	var cands []presets.Candidate
	for _, r := range rows {
		cands = append(cands, r.Candidate)
	}
	nameW := nameWidth(cands, 24)
	cols := []column{{title: "#", width: 2, right: true}, {title: "CANDIDATE", width: nameW},
		{title: "REAL ms", width: 7, right: true}, {title: "PRED ms", width: 7, right: true},
		{title: "ERROR", width: 7, right: true}, {title: "×EAGER", width: 6, right: true},
		{title: "JOB", width: 6, flex: true}}
	// A narrow window gives up the speed-up (the line under the table
	// has the winner's) before the job ids are cut.
	eager := w >= 2+nameW+7+7+7+6+6+2*6
	if !eager {
		cols = slices.Delete(cols, 5, 6)
	}
	t := newTable(w, cols...)
	row := func(cells ...string) string {
		if !eager {
			cells = slices.Delete(cells, 5, 6)
		}
		return t.row(cells...)
	}
	lines := []string{t.header(st)}
	for _, r := range rows {
		pred, perr := "—", "—"
		if r.PredictedMs > 0 {
			pred = fmtMs(r.PredictedMs)
		}
		if r.HasError {
			perr = fmt.Sprintf("%+.1f%%", r.ErrorPct)
		}
		id := "—"
		if r.Real.Job != nil {
			id = r.Real.Job.ID
		}
		name := nameCell(r.Candidate, nameW)
		if r.Real.Failed() {
			lines = append(lines, st.Err.Render(row("–", name, "failed", pred, "", "", id+" "+string(r.Real.ErrKind)+": "+r.Real.Err)))
			continue
		}
		rank := fmt.Sprint(r.Rank)
		if r.Rank == 1 {
			rank = "★"
		}
		lines = append(lines, row(rank, name, fmtMs(r.Real.Step.Median), pred, perr, fmtSpeedup(r.RealSpeedup), id))
	}
	return lines
}

// summaryLines say what the predictions were, the winner on the
// real job, and the calibration the jobs gave.
func (p *validationPane) summaryLines(w int) []string {
	st := p.st
	out := p.outcome
	var lines []string
	if out.Interrupted {
		lines = append(lines, st.Warn.Render(truncate("cancelled: only the jobs that finished are compared; v again resumes the rest", w)))
	}
	srcs := map[engine.Source]bool{}
	var src []string
	for _, r := range out.Rows {
		if s := r.PredictedSource; s != "" && !srcs[s] {
			srcs[s] = true
			src = append(src, string(s))
		}
	}
	if len(src) > 0 {
		lines = append(lines, st.Muted.Render(truncate("predictions: "+strings.Join(src, ", ")+"; error = (predicted − real) / real", w)))
	}
	switch {
	case out.CalibrationErr != "":
		lines = append(lines, st.Faint.Render(truncate("calibration not updated: "+out.CalibrationErr, w)))
	case out.Calibration != nil:
		lines = append(lines, st.Faint.Render(truncate(fmt.Sprintf("calibration: host-cost scale %.3g saved to %s", out.Calibration.HostScale, out.CalibrationFile), w)))
	}
	return lines
}

// promptLine is the pane's bottom line.
func (p *validationPane) promptLine(w int) string {
	st := p.st
	switch p.phase {
	case valConfirm:
		jobs := fmt.Sprintf("the top %d and eager", p.req.Top)
		if p.form != nil && p.form.plan != nil {
			jobs = fmt.Sprintf("these %d jobs", len(p.form.plan.Targets))
		}
		return st.Warn.Render(truncate(fmt.Sprintf("Run %s with the command above? (y/n)", jobs), w))
	case valStarting, valRunning:
		if p.cancelling {
			return st.Warn.Render(truncate("cancelling the queued and running jobs…", w))
		}
		return st.Muted.Render(truncate(fmt.Sprintf("%d of %d jobs done · esc cancels them", p.done, len(p.targets)), w))
	}
	if p.outcome != nil {
		if win := p.outcome.Winner(); win != nil {
			line := fmt.Sprintf("★ on the real job: %s: %s ms/iteration", win.Candidate.Name(), fmtMs(win.Real.Step.Median))
			if win.RealSpeedup > 0 {
				line += fmt.Sprintf(", %s eager", fmtSpeedup(win.RealSpeedup))
			}
			if ansi.StringWidth(line) > w {
				line = fmt.Sprintf("★ real job: %s %s ms/iter", win.Candidate.Name(), fmtMs(win.Real.Step.Median))
				if win.RealSpeedup > 0 {
					line += fmt.Sprintf(", %s eager", fmtSpeedup(win.RealSpeedup))
				}
			}
			return st.OK.Render(truncate(line, w))
		}
	}
	return st.Err.Render(truncate("no job succeeded: the logs are in the validation folder", w))
}

// commandLines lays a command out in lines of at most w cells, broken
// between words with a shell continuation; a word longer than a line is
// split over lines rather than cut, so every character shows.
func commandLines(cmd string, w int) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(cmd, "\n"), "\n") {
		for _, part := range copyableLines(l, "flags", w) {
			r := []rune(part)
			for len(r) > w {
				out = append(out, string(r[:w]))
				r = r[w:]
			}
			out = append(out, string(r))
		}
	}
	return out
}
