package tui

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"cgtune/engine"
	"cgtune/engine/job"
	"cgtune/presets"
	"cgtune/search"
	"cgtune/stepmodel"
)

const testJobCommand = "srun python pretrain_gpt.py --log-interval 1 --train-iters {iters} {flags}"

// toResults runs the scripted search to the results screen.
func toResults(t *testing.T, m *App, f *fakeBackend) {
	t.Helper()
	press(m, "enter", "enter")
	planNow(t, m, f)
	press(m, "enter")
	playEvents(m, f, -1)
	if m.screen != screenResults {
		t.Fatalf("screen %v, want the results", m.screen)
	}
}

// jobResult is a job's result: step ms, job id.
func jobResult(c presets.Candidate, step float64, id string) engine.Result {
	return engine.Result{Candidate: c, Source: engine.SourceJob, Step: stepmodel.Stats{Median: step, P10: step, P90: step, N: 20},
		Job: &engine.JobInfo{Launcher: "slurm", ID: id, State: job.StateCompleted}}
}

// validator drives the validation pane: it runs the Cmds the model gives
// back and feeds the fake's update channel.
type validator struct {
	t   *testing.T
	m   *App
	f   *fakeBackend
	cmd tea.Cmd
}

func (v *validator) feed(u ValidationUpdate) {
	v.t.Helper()
	if v.cmd == nil {
		v.t.Fatal("the model is not waiting for the validation")
	}
	v.f.valUpdates <- u
	v.cmd = send(v.m, v.cmd())
}

func (v *validator) end() {
	v.t.Helper()
	close(v.f.valUpdates)
	v.cmd = send(v.m, v.cmd())
}

// startValidation opens the validation form with v, takes it as it is
// filled with enter, answers the question with y and delivers the
// backend's answer.
func startValidation(t *testing.T, m *App, f *fakeBackend) *validator {
	t.Helper()
	press(m, "v", "enter")
	cmd := press(m, "y")
	if cmd == nil {
		t.Fatal("y started nothing")
	}
	return &validator{t: t, m: m, f: f, cmd: send(m, cmd())}
}

// outcome compares the jobs' results with the fake's predictions.
func outcome(real []engine.Result, interrupted bool) *search.JobOutcome {
	var ts []job.Target
	for _, r := range real {
		for _, t := range fakeTargets() {
			if t.Candidate.Key() == r.Candidate.Key() {
				ts = append(ts, t)
			}
		}
	}
	return &search.JobOutcome{Validation: job.Validation{Source: "run /tmp/cgtune-run", Launcher: "slurm", Iters: 30,
		Rows: job.Compare(ts, real), Interrupted: interrupted}, Dir: "/tmp/cgtune-run/validate"}
}

// v opens a form, prefilled from the flags; without --command it asks for
// the template, refuses to go on without one and starts nothing.
func TestValidateFormAsksForTheCommand(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	toResults(t, m, f)
	// v only asks what the validation would run.
	if cmd := press(m, "v"); cmd == nil {
		t.Fatal("v did not ask what it would run")
	} else if msg, ok := cmd().(validatePlanMsg); !ok || len(f.validations) != 0 {
		t.Fatalf("v gave a %T, validations %v", msg, f.validations)
	}
	p := &m.resScr.val
	if p.phase != valForm || p.form.field != formCommand {
		t.Fatalf("phase %v, form %+v: want the form with the cursor on the command", p.phase, p.form)
	}
	out := m.View().Content
	for _, want := range []string{"Validation on real jobs", "Launcher", "(•) local", "( ) slurm", "Command", "Top", "3 graphed candidates, and eager", "Iters", "30 iterations per job", "{flags}"} {
		if !strings.Contains(out, want) {
			t.Errorf("the form does not show %q:\n%s", want, out)
		}
	}
	if cmd := press(m, "enter"); cmd != nil || p.phase != valForm || !m.statusErr || !strings.Contains(m.status, "Command: give the training command template") {
		t.Fatalf("enter without a command: phase %v, status %q", p.phase, m.status)
	}
	// q is text here, not quit.
	for _, r := range "torchrun q.py {iters} {flags}" {
		if cmd := press(m, string(r)); isQuit(cmd) {
			t.Fatal("typing q quit the program")
		}
	}
	if cmd := press(m, "enter"); cmd != nil || p.phase != valConfirm || p.req.Command != "torchrun q.py {iters} {flags}" {
		t.Fatalf("enter with a command: phase %v, request %+v", p.phase, p.req)
	}
	if len(f.validations) != 0 {
		t.Fatalf("jobs started before y: %v", f.validations)
	}
}

// The form's fields are checked inline: a placeholder the command does not
// know is shown under the field and enter stays on the form.
func TestValidateFormChecksTheCommand(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	m.opts.JobCommand = "torchrun x.py {nonsense}"
	toResults(t, m, f)
	press(m, "v")
	out := m.View().Content
	if !strings.Contains(out, "✗") || !strings.Contains(out, "nonsense") {
		t.Errorf("no inline error for the unknown placeholder:\n%s", out)
	}
	press(m, "enter")
	if m.resScr.val.phase != valForm || !strings.HasPrefix(m.status, "Command: ") {
		t.Errorf("phase %v, status %q", m.resScr.val.phase, m.status)
	}
}

// What the form holds is what the validation runs: the launcher, the
// command, how many of the top candidates and the iterations.
func TestValidateFormRunsWhatItHolds(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	m.opts.JobCommand, m.opts.JobIters = testJobCommand, 40
	toResults(t, m, f)
	press(m, "v")
	press(m, "space")                                    // launcher: slurm
	press(m, "down", "down", "-")                        // top: 2
	press(m, "down", "backspace", "backspace", "1", "2") // iters: 12
	press(m, "enter")
	cmd := press(m, "y")
	if cmd == nil {
		t.Fatal("y started nothing")
	}
	send(m, cmd())
	want := ValidateRequest{RunDir: "/tmp/cgtune-run", Top: 2, Launcher: "slurm", Command: testJobCommand, Iters: 12}
	if len(f.validations) != 1 || f.validations[0] != want {
		t.Fatalf("Validate calls %+v, want %+v", f.validations, want)
	}
}

func TestValidateShowsTheCommandFirst(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	m.opts.JobCommand, m.opts.JobLauncher = testJobCommand+" --data-path '$(rm -rf ~)'", "slurm"
	toResults(t, m, f)
	if cmd := press(m, "v", "enter"); cmd != nil {
		t.Fatal("v ran something before the answer")
	}
	out := m.View().Content
	for _, want := range []string{"  srun python pretrain_gpt.py", "--data-path '$(rm -rf ~)'", "slurm launcher", "Run the top 3 and eager with the command above? (y/n)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the question does not show %q:\n%s", want, out)
		}
	}
	// q on the question quits the program only through the quit key, never
	// starts jobs; n says no.
	if cmd := press(m, "n"); cmd != nil || len(f.validations) != 0 || m.resScr.val.phase != valOff {
		t.Fatalf("n: cmd %v, validations %v, phase %v", cmd, f.validations, m.resScr.val.phase)
	}
	if m.status != "nothing started" {
		t.Errorf("status %q", m.status)
	}
	press(m, "v")
	if cmd := press(m, "enter"); cmd != nil || len(f.validations) != 0 {
		t.Fatal("enter started the jobs: only y does")
	}
}

func TestValidateFollowsJobsAndCompares(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 100, 30)
	m.opts.JobCommand, m.opts.JobLauncher = testJobCommand, "slurm"
	toResults(t, m, f)
	v := startValidation(t, m, f)
	want := ValidateRequest{RunDir: "/tmp/cgtune-run", Top: 3, Launcher: "slurm", Command: testJobCommand, Iters: job.DefaultIters}
	if len(f.validations) != 1 || f.validations[0] != want {
		t.Fatalf("Validate calls %+v, want %+v", f.validations, want)
	}
	if !m.validating() {
		t.Fatal("not validating after y")
	}
	v.feed(ValidationUpdate{Event: job.JobEvent{Update: job.Update{Candidate: cNone, JobID: "4101", State: job.StateRunning,
		Tail: []string{"building GPT model ...", " [2026-12-01 11:00:03] iteration        5/      30 | elapsed time per iteration (ms): 131.2 |"}}}})
	v.feed(ValidationUpdate{Event: job.JobEvent{Update: job.Update{Candidate: cTEAttnMLP, JobID: "4102", State: job.StatePending, Reason: "Priority"}}})
	out := m.View().Content
	for _, s := range []string{"RUNNING", "4101", "iteration        5/      30", "PENDING (Priority)", "4102", "0 of 3 jobs done"} {
		if !strings.Contains(out, s) {
			t.Errorf("the pane does not show %q:\n%s", s, out)
		}
	}
	rNone, rMLP := jobResult(cNone, 130, "4101"), jobResult(cTEAttnMLP, 100, "4102")
	rAttn := engine.Result{Candidate: cTEAttn, Source: engine.SourceJob, Err: "CUDA out of memory", ErrKind: engine.FailureOOM,
		Job: &engine.JobInfo{Launcher: "slurm", ID: "4103", State: job.StateOutOfMemory}}
	v.feed(ValidationUpdate{Event: job.JobDone{Result: rNone, Done: 1, Total: 3}})
	v.feed(ValidationUpdate{Event: job.JobDone{Result: rMLP, Done: 2, Total: 3}})
	v.feed(ValidationUpdate{Event: job.JobDone{Result: rAttn, Done: 3, Total: 3}})
	if out := m.View().Content; !strings.Contains(out, "failed (oom)") || !strings.Contains(out, "100.0 ms/iter") {
		t.Errorf("the pane does not show the jobs' results:\n%s", out)
	}
	v.feed(ValidationUpdate{Outcome: outcome([]engine.Result{rNone, rMLP, rAttn}, false)})
	v.end()
	if m.validating() || m.resScr.val.phase != valDone {
		t.Fatalf("phase %v after the channel closed", m.resScr.val.phase)
	}
	out = m.View().Content
	// te attn+mlp: predicted 104 ms, real 100 ms: +4.0%; 130/100 = 1.300×
	// eager. eager: predicted 130, real 130: +0.0%.
	for _, s := range []string{"REAL ms", "PRED ms", "ERROR", "+4.0%", "+0.0%", "1.300×", "failed", "CUDA out of memory",
		"★ on the real job: te attn,mlp w3: 100.0 ms/iteration, 1.300× eager", "predictions: measured"} {
		if !strings.Contains(out, s) {
			t.Errorf("the comparison does not show %q:\n%s", s, out)
		}
	}
	if !strings.Contains(m.status, "validation finished") {
		t.Errorf("status %q", m.status)
	}
	press(m, "esc")
	if m.resScr.val.phase != valOff || !strings.Contains(m.View().Content, "Ranking") {
		t.Errorf("esc did not go back to the ranking")
	}
}

func TestValidateEscCancelsTheJobs(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	m.opts.JobCommand = testJobCommand
	toResults(t, m, f)
	v := startValidation(t, m, f)
	if f.validations[0].Launcher != "local" {
		t.Errorf("launcher %q, want local by default", f.validations[0].Launcher)
	}
	v.feed(ValidationUpdate{Event: job.JobEvent{Update: job.Update{Candidate: cNone, JobID: "local:77", State: job.StateRunning}}})
	// q cancels, it does not quit while jobs run.
	if cmd := press(m, "q"); cmd != nil {
		t.Fatalf("q gave a Cmd (%T), want the jobs cancelled", cmd())
	}
	if f.valCtx.Err() == nil {
		t.Fatal("q did not cancel the validation's context")
	}
	if !strings.Contains(m.View().Content, "cancelling the queued and running jobs") {
		t.Errorf("no cancelling notice:\n%s", m.View().Content)
	}
	v.feed(ValidationUpdate{Outcome: outcome([]engine.Result{jobResult(cNone, 130, "local:77")}, true)})
	v.end()
	if want := fmt.Sprintf("validation cancelled: 1 finished jobs kept in %s", "/tmp/cgtune-run/validate"); !strings.HasPrefix(m.status, want) {
		t.Errorf("status %q, want %q…", m.status, want)
	}
	if out := m.View().Content; !strings.Contains(out, "cancelled: only the jobs that finished are compared") {
		t.Errorf("no cancelled note:\n%s", out)
	}
}

func TestValidateStartFailureIsShown(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	m.opts.JobCommand = testJobCommand
	toResults(t, m, f)
	press(m, "v", "enter", "y")
	send(m, validateStartedMsg{err: fmt.Errorf("/tmp/cgtune-run: the search has no successful graphed candidate to validate")})
	if m.resScr.val.phase != valOff || !m.statusErr || !strings.Contains(m.status, "no successful graphed candidate") {
		t.Errorf("phase %v, status %q (error %v)", m.resScr.val.phase, m.status, m.statusErr)
	}
}

// An error too long for the status line opens whole in a scrollable
// view: esc closes it, the status keeps its start and says how to read
// it all, and ! opens it again (issue: a validate error ended "no s…").
func TestLongErrorOpensInAView(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 60, 16)
	m.opts.JobCommand = testJobCommand
	toResults(t, m, f)
	press(m, "v", "enter", "y")
	long := fmt.Errorf("%w; %s", errNoBuildable, strings.Repeat("and one more reason the jobs cannot run, ", 12)+"the end of it")
	send(m, validateStartedMsg{err: long})
	if !m.alertOpen {
		t.Fatalf("the error did not open in its view:\n%s", view(m))
	}
	out := view(m)
	if strings.Contains(out, "the end of it") || !strings.Contains(out, "lines 1–") {
		t.Fatalf("a long error should start at its top and say there is more:\n%s", out)
	}
	for range 10 {
		press(m, "pgdown")
	}
	if out := view(m); !strings.Contains(out, "the end of it") {
		t.Errorf("pgdn did not reach the end:\n%s", out)
	}
	press(m, "esc")
	out = view(m)
	if m.alertOpen || !strings.Contains(out, "! reads it all") || m.screen != screenResults {
		t.Fatalf("esc: open %v, screen %v:\n%s", m.alertOpen, m.screen, out)
	}
	press(m, "!")
	if !m.alertOpen || !strings.Contains(view(m), "✗ Error") {
		t.Errorf("! did not open the error again:\n%s", view(m))
	}
	// A short error stays on the status line.
	press(m, "enter")
	m.setError(fmt.Errorf("short"))
	if m.alertOpen {
		t.Error("a short error opened the view")
	}
}

// Before anything starts, the form says which jobs it will run and which
// top candidates it skips, with why (the backend's plan, as cgtune
// validate picks them); a new Top asks again, and an answer for an older
// Top is dropped. The question before the jobs start says it too.
func TestValidateFormSaysWhatItSkips(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	m.opts.JobCommand = testJobCommand
	f.events, f.valPlan = longRanking(f.events), noTEPlan()
	toResults(t, m, f)
	cmd := press(m, "v")
	if cmd == nil {
		t.Fatal("v asked nothing of the backend")
	}
	old := cmd()
	if out := view(m); !strings.Contains(out, "asking which candidates the jobs can build") {
		t.Errorf("the form does not say it is asking:\n%s", out)
	}
	send(m, old)
	flowed := strings.Join(strings.Fields(view(m)), " ")
	for _, want := range []string{"Runs 3 jobs: eager, local attn w3, local whole-layer w3",
		"Skips te attn,mlp w3, te attn w3: a transformer_engine graph needs Transformer Engine"} {
		if !strings.Contains(flowed, want) {
			t.Errorf("the form lacks %q:\n%s", want, view(m))
		}
	}
	press(m, "down", "down") // Top
	next := press(m, "-")
	if next == nil || m.resScr.val.form.plan != nil || m.resScr.val.form.planTop != 2 {
		t.Fatalf("a new Top did not ask again (plan %v, top %d)", m.resScr.val.form.plan, m.resScr.val.form.planTop)
	}
	send(m, old) // the answer for Top 3 comes late
	if m.resScr.val.form.plan != nil {
		t.Error("an answer for an older Top was taken")
	}
	send(m, next())
	if got := f.valPlans; !slices.Equal(got, []int{3, 2}) {
		t.Errorf("plans asked for %v, want [3 2]", got)
	}
	press(m, "enter")
	out := strings.Join(strings.Fields(view(m)), " ")
	if !strings.Contains(out, "skips te attn,mlp w3, te attn w3: a transformer_engine graph needs") || !strings.Contains(out, "Run these 3 jobs with the command above? (y/n)") {
		t.Errorf("the question does not say what runs and what is skipped:\n%s", view(m))
	}
}

// When the backend says nothing of the search can run as jobs, the form
// says why, does not offer enter, and enter starts nothing.
func TestValidateFormWithNothingToRun(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	m.opts.JobCommand = testJobCommand
	toResults(t, m, f)
	press(m, "v")
	send(m, validatePlanMsg{top: 3, err: errNoBuildable})
	out := view(m)
	if !strings.Contains(out, "no successful graphed candidate") || strings.Contains(helpLine(out), "enter") {
		t.Errorf("the form should say why and not offer enter:\n%s", out)
	}
	if cmd := press(m, "enter"); cmd != nil || m.resScr.val.phase != valForm || !m.statusErr {
		t.Errorf("enter: phase %v, status %q", m.resScr.val.phase, m.status)
	}
}
