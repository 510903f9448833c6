package tui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"cgtune/engine"
	jobs "cgtune/engine/job"
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

type validationPane struct {
	phase      valPhase
	form       *validateForm
	req        ValidateRequest
	cancel     context.CancelFunc
	cancelling bool
	targets    []jobs.Target
	dir        string
	updates    <-chan ValidationUpdate
	jobs       map[string]*jobView // by candidate key
	done       int
	outcome    *search.JobOutcome
	err        error
}

// jobView is what the pane knows of one job: its last update (the log
// tail kept from the last update that had one) and its result once done.
type jobView struct {
	u       jobs.Update
	result  *engine.Result
	resumed bool
}

// validating reports whether jobs are being started or run: then q and
// ctrl+c cancel them instead of quitting.
func (m *Model) validating() bool {
	p := m.resScr.val.phase
	return m.screen == screenResults && (p == valStarting || p == valRunning)
}

func (m *Model) validationKey(msg tea.KeyPressMsg) tea.Cmd {
	p := &m.resScr.val
	k := m.keys
	switch p.phase {
	case valForm:
		return m.formKey(msg)
	case valConfirm:
		switch {
		case msg.String() == "y":
			ctx, cancel := context.WithCancel(m.opts.Context)
			p.phase, p.cancel = valStarting, cancel
			m.setStatus("starting the jobs…")
			return validateCmd(ctx, m.backend, p.req)
		case key.Matches(msg, k.Deny):
			p.phase = valOff
			m.setStatus("nothing started")
		}
	case valStarting, valRunning:
		if !key.Matches(msg, k.Back) && !key.Matches(msg, k.Quit) {
			return nil
		}
		if p.cancelling {
			if msg.String() == "ctrl+c" {
				return tea.Quit // a second ctrl+c: the program's context cancels the jobs
			}
			return nil
		}
		p.cancelling = true
		p.cancel()
		m.setStatus("cancelling the jobs…")
	case valDone:
		if key.Matches(msg, k.Back) || key.Matches(msg, k.Validate) {
			p.phase = valOff
			m.setStatus("")
		}
	}
	return nil
}

func (m *Model) onValidateStarted(msg validateStartedMsg) tea.Cmd {
	p := &m.resScr.val
	if msg.err != nil {
		p.cancel()
		p.phase = valOff
		m.setError(fmt.Errorf("validate: %w", msg.err))
		return nil
	}
	p.phase, p.targets, p.dir, p.updates = valRunning, msg.v.Targets, msg.v.Dir, msg.v.Updates
	p.jobs = map[string]*jobView{}
	for _, t := range p.targets {
		p.jobs[t.Candidate.Key()] = &jobView{u: jobs.Update{Candidate: t.Candidate}}
	}
	if !p.cancelling {
		skipped := ""
		for _, sk := range msg.v.Skipped {
			skipped += fmt.Sprintf("; skipped %s: %s", candName(sk.Candidate), sk.Why)
		}
		m.setStatus("%d jobs through the %s launcher; esc cancels them%s", len(p.targets), p.req.Launcher, skipped)
	}
	return waitForValidation(msg.v.Updates)
}

func (m *Model) onValidate(msg validateMsg) tea.Cmd {
	p := &m.resScr.val
	if msg.closed {
		if p.outcome == nil && p.err == nil {
			p.err = errors.New("the validation ended without an outcome")
		}
		p.phase = valDone
		if p.cancel != nil {
			p.cancel()
		}
		switch {
		case p.err != nil:
			m.setError(fmt.Errorf("validate: %w", p.err))
		case p.outcome.Interrupted:
			m.setStatus("validation cancelled: %d finished jobs kept in %s; v again resumes", len(p.outcome.Rows), p.dir)
		default:
			m.setStatus("validation finished: saved in %s", filepath.Join(p.dir, jobs.ValidationFile))
		}
		return nil
	}
	u := msg.u
	switch ev := u.Event.(type) {
	case jobs.JobEvent:
		j := p.job(ev.Update.Candidate)
		tail := j.u.Tail
		j.u = ev.Update
		if len(j.u.Tail) == 0 {
			j.u.Tail = tail
		}
	case jobs.JobDone:
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

// job is the pane's view of candidate c's job (made on first sight).
func (p *validationPane) job(c presets.Candidate) *jobView {
	if p.jobs == nil {
		p.jobs = map[string]*jobView{}
	}
	j, ok := p.jobs[c.Key()]
	if !ok {
		j = &jobView{u: jobs.Update{Candidate: c}}
		p.jobs[c.Key()] = j
		p.targets = append(p.targets, jobs.Target{Candidate: c})
	}
	return j
}

func (m *Model) validationHelp() helpKeys {
	k := m.keys
	switch m.resScr.val.phase {
	case valForm:
		return m.formHelp()
	case valConfirm:
		return helpKeys{short: []key.Binding{withHelp(k.Confirm, "y", "run the jobs"), withHelp(k.Deny, "n/esc", "no")}}
	case valStarting, valRunning:
		if m.resScr.val.cancelling {
			return helpKeys{short: []key.Binding{withHelp(k.Quit, "ctrl+c", "quit now")}}
		}
		return helpKeys{short: []key.Binding{withHelp(k.Back, "esc/q", "cancel the jobs")}}
	}
	return helpKeys{short: []key.Binding{withHelp(k.Back, "esc", "back to the ranking"), k.Quit}}
}

// --- view ---------------------------------------------------------------

func (m *Model) validationView(w, h int) string {
	st := m.st
	p := &m.resScr.val
	if p.phase == valForm {
		return m.formView(w, h)
	}
	var lines []string
	title := st.Title.Render("Validation on real jobs")
	sub := fmt.Sprintf("%s launcher", p.req.Launcher)
	if n := len(p.targets); n > 0 {
		sub += fmt.Sprintf(" · %d/%d done", p.done, n)
	}
	lines = append(lines, truncate(title+"  "+st.Muted.Render(sub), w))
	if p.phase == valConfirm {
		lines = append(lines,
			st.Muted.Render(wrap(fmt.Sprintf("Runs the top %d graphed candidates of %s and the eager baseline, one training job each for %d iterations, with this command:", p.req.Top, p.req.RunDir, p.req.Iters), w)),
			"")
		// The whole command, never cut: it is what will run.
		for _, l := range commandLines(p.req.Command, w-2) {
			lines = append(lines, "  "+st.Value.Render(l))
		}
		body := strings.Join(lines, "\n")
		return fitBlock(body, w, h-1) + "\n" + m.validationPrompt(w)
	}
	lines = append(lines, st.Faint.Render(truncate("command: "+p.req.Command, w)))
	if p.dir != "" {
		lines = append(lines, st.Faint.Render(truncate("folder "+p.dir, w)))
	}
	lines = append(lines, "")
	if p.outcome != nil && len(p.outcome.Rows) > 0 {
		lines = append(lines, m.validationTable(w)...)
		lines = append(lines, "")
		lines = append(lines, m.validationSummary(w)...)
	} else {
		lines = append(lines, m.jobLines(w, h-1-len(lines))...)
	}
	if p.err != nil {
		lines = append(lines, "", st.Err.Render(wrap("✗ "+p.err.Error(), w)))
	}
	return fitBlock(strings.Join(lines, "\n"), w, h-1) + "\n" + m.validationPrompt(w)
}

// jobLines are each job's candidate, state and job id, and as many of the
// last log lines as fit in h lines.
func (m *Model) jobLines(w, h int) []string {
	st := m.st
	p := &m.resScr.val
	if len(p.targets) == 0 {
		return []string{st.Faint.Render("starting…")}
	}
	tail := min(max(h/len(p.targets)-1, 0), 3)
	var cands []presets.Candidate
	for _, t := range p.targets {
		cands = append(cands, t.Candidate)
	}
	t := newTable(w, column{title: "CANDIDATE", width: nameWidth(cands, 24)}, column{title: "STATE", width: 20},
		column{title: "JOB", width: 8}, column{title: "RESULT", width: 10, flex: true})
	lines := []string{t.header(st)}
	for _, tg := range p.targets {
		j := p.jobs[tg.Candidate.Key()]
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
		res, style := "", st.Value
		switch r := j.result; {
		case r == nil:
		case r.Failed():
			res, style = "failed ("+r.ErrKind+")", st.Err
		default:
			res, style = fmtMs(r.Step.Median)+" ms/iter", st.OK
			if j.resumed {
				res += " (journal)"
			}
		}
		id := j.u.JobID
		if id == "" {
			id = "—"
		}
		lines = append(lines, style.Render(t.row(nameCell(tg.Candidate, nameWidth(cands, 24)), state, id, res)))
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

// validationTable ranks the jobs by real iteration time next to the
// predictions and their error.
func (m *Model) validationTable(w int) []string {
	st := m.st
	rows := m.resScr.val.outcome.Rows
	var cands []presets.Candidate
	for _, r := range rows {
		cands = append(cands, r.Candidate)
	}
	nameW := nameWidth(cands, 24)
	t := newTable(w, column{title: "#", width: 2, right: true}, column{title: "CANDIDATE", width: nameW},
		column{title: "REAL ms", width: 7, right: true}, column{title: "PRED ms", width: 7, right: true},
		column{title: "ERROR", width: 7, right: true}, column{title: "×EAGER", width: 6, right: true},
		column{title: "JOB", width: 6, flex: true})
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
			lines = append(lines, st.Err.Render(t.row("–", name, "failed", pred, "", "", id+" "+r.Real.ErrKind+": "+r.Real.Err)))
			continue
		}
		rank := fmt.Sprint(r.Rank)
		if r.Rank == 1 {
			rank = "★"
		}
		lines = append(lines, t.row(rank, name, fmtMs(r.Real.Step.Median), pred, perr, fmtSpeedup(r.RealSpeedup), id))
	}
	return lines
}

// validationSummary says what the predictions were, the winner on the
// real job, and the calibration the jobs gave.
func (m *Model) validationSummary(w int) []string {
	st := m.st
	out := m.resScr.val.outcome
	var lines []string
	if out.Interrupted {
		lines = append(lines, st.Warn.Render(truncate("cancelled: only the jobs that finished are compared; v again resumes the rest", w)))
	}
	srcs := map[string]bool{}
	var src []string
	for _, r := range out.Rows {
		if s := r.PredictedSource; s != "" && !srcs[s] {
			srcs[s] = true
			src = append(src, s)
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

// validationPrompt is the pane's bottom line.
func (m *Model) validationPrompt(w int) string {
	st := m.st
	p := &m.resScr.val
	switch p.phase {
	case valConfirm:
		return truncate(st.Warn.Render(fmt.Sprintf("Validate the top %d and eager as real jobs with: %s? (y/n)", p.req.Top, oneLine(p.req.Command))), w)
	case valStarting, valRunning:
		if p.cancelling {
			return st.Warn.Render(truncate("cancelling the queued and running jobs…", w))
		}
		return st.Muted.Render(truncate(fmt.Sprintf("%d of %d jobs done · esc cancels them", p.done, len(p.targets)), w))
	}
	if p.outcome != nil {
		if win := p.outcome.Winner(); win != nil {
			line := fmt.Sprintf("★ on the real job: %s: %s ms/iteration", candName(win.Candidate), fmtMs(win.Real.Step.Median))
			if win.RealSpeedup > 0 {
				line += fmt.Sprintf(", %s eager", fmtSpeedup(win.RealSpeedup))
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

// oneLine puts a multi-line command on one line for the prompt.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
