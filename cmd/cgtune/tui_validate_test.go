package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"cgtune/engine/job"
	"cgtune/search"
	"cgtune/tui"
)

// drain reads a validation's updates to the end: the jobs' events and the
// outcome.
func drain(t *testing.T, v tui.Validation) ([]job.ValidateEvent, *search.JobOutcome) {
	t.Helper()
	var evs []job.ValidateEvent
	var out *search.JobOutcome
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case u, ok := <-v.Updates:
			if !ok {
				return evs, out
			}
			if u.Err != nil {
				t.Fatalf("validation: %v", u.Err)
			}
			if u.Event != nil {
				evs = append(evs, u.Event)
			}
			if u.Outcome != nil {
				out = u.Outcome
			}
		case <-timeout:
			t.Fatal("the validation did not end")
		}
	}
}

// The TUI's "v validate top 3": the backend runs the run's top 3 and eager
// as local jobs with the confirmed command, streams their states and log
// tails, and ends with the comparison; a second press resumes from the
// validation's journal instead of refusing the folder.
func TestTUIBackendValidatesOnLocalJobs(t *testing.T) {
	isolate(t)
	run := searchRun(t)
	// The fake job stands in for a framework with Transformer Engine,
	// which the megatron engine's Python says.
	b := newTUIBackend(&rootFlags{jobIters: 12, python: fakePython(t, true)}, nil)
	b.jobPoll = 100 * time.Millisecond
	t.Cleanup(func() { b.close(func() {}) })
	req := tui.ValidateRequest{RunDir: run, Top: 3, Launcher: "local", Command: fakeJobCommand(t)}

	v, err := b.Validate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Targets) != 4 || v.Targets[0].Candidate.Graphed() || !strings.HasSuffix(v.Dir, "validate") {
		t.Fatalf("targets %+v dir %s", v.Targets, v.Dir)
	}
	evs, out := drain(t, v)
	running, tail := false, false
	for _, ev := range evs {
		if e, ok := ev.(job.JobEvent); ok {
			running = running || e.Update.State == job.StateRunning
			for _, l := range e.Update.Tail {
				tail = tail || strings.Contains(l, "elapsed time per iteration")
			}
		}
	}
	if !running || !tail {
		t.Errorf("no RUNNING state (%v) or log tail with iterations (%v) in %d events", running, tail, len(evs))
	}
	if out == nil || out.Interrupted || len(out.Rows) != 4 {
		t.Fatalf("outcome %+v", out)
	}
	// The fake job's full iteration is the fastest (22 ms against 40 eager).
	if w := out.Winner(); w == nil || !w.Candidate.FullIteration() || !w.HasError || w.PredictedMs <= 0 {
		t.Errorf("winner %+v", w)
	}

	v, err = b.Validate(context.Background(), req)
	if err != nil {
		t.Fatalf("a second validation of the run: %v", err)
	}
	evs, out = drain(t, v)
	resumed := 0
	for _, ev := range evs {
		if d, ok := ev.(job.JobDone); ok && d.Resumed {
			resumed++
		}
	}
	if resumed != 4 || out == nil || len(out.Rows) != 4 {
		t.Errorf("second validation: %d jobs from the journal, outcome %+v", resumed, out)
	}
}

func TestTUIBackendValidateBadInput(t *testing.T) {
	isolate(t)
	run := searchRun(t)
	// The fake job stands in for a framework with Transformer Engine,
	// which the megatron engine's Python says.
	b := newTUIBackend(&rootFlags{jobIters: 12, python: fakePython(t, true)}, nil)
	t.Cleanup(func() { b.close(func() {}) })
	for _, c := range []struct {
		req  tui.ValidateRequest
		want string
	}{
		{tui.ValidateRequest{RunDir: run, Top: 3, Launcher: "pbs", Command: fakeJobCommand(t)}, `--launcher "pbs": allowed: local, slurm`},
		{tui.ValidateRequest{RunDir: t.TempDir(), Top: 3, Launcher: "local", Command: fakeJobCommand(t)}, "holds no search"},
		{tui.ValidateRequest{RunDir: run, Top: 3, Launcher: "local", Command: "python train.py"}, "--command"},
	} {
		t.Run(c.want, func(t *testing.T) {
			if _, err := b.Validate(context.Background(), c.req); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%+v: error %v, want %q", c.req, err, c.want)
			}
		})
	}
	b.flags.jobIters = 2
	if _, err := b.Validate(context.Background(), tui.ValidateRequest{RunDir: run, Top: 3, Launcher: "local", Command: fakeJobCommand(t)}); err == nil || !strings.Contains(err.Error(), "--job-iters 2") {
		t.Errorf("--job-iters 2: %v", err)
	}
}

// The form's iterations override --job-iters, and a number too small for
// a candidate is refused naming the form's field.
func TestTUIBackendValidateTakesTheFormsIters(t *testing.T) {
	isolate(t)
	run := searchRun(t)
	b := newTUIBackend(&rootFlags{jobIters: 2}, nil)
	t.Cleanup(func() { b.close(func() {}) })
	_, err := b.Validate(context.Background(), tui.ValidateRequest{RunDir: run, Top: 3, Launcher: "local", Command: fakeJobCommand(t), Iters: 2})
	if err == nil || !strings.HasPrefix(err.Error(), "iters 2: ") {
		t.Errorf("iters 2: %v", err)
	}
	// 12 from the form: past the --job-iters 2 check.
	v, err := b.Validate(context.Background(), tui.ValidateRequest{RunDir: run, Top: 1, Launcher: "local", Command: fakeJobCommand(t), Iters: 12})
	if err != nil {
		t.Fatalf("iters 12: %v", err)
	}
	for range v.Updates {
	}
}

// The TUI's validation form says what it will run and skip before anything
// starts: the backend picks them as `cgtune validate RUN` does, so the
// form's skipped candidates and reasons are the lines validate prints.
func TestTUIBackendPlansValidationAsValidate(t *testing.T) {
	isolate(t)
	run := searchRun(t)
	python := fakePython(t, false) // the jobs' Python has no Transformer Engine
	b := newTUIBackend(&rootFlags{jobIters: 12, python: python}, nil)
	t.Cleanup(func() { b.close(func() {}) })
	plan, err := b.PlanValidation(context.Background(), run, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Skipped) == 0 || len(plan.Targets) < 2 || plan.Targets[0].Candidate.Graphed() {
		t.Fatalf("plan %+v", plan)
	}
	for _, tg := range plan.Targets {
		if tg.Candidate.Impl == "transformer_engine" {
			t.Errorf("a transformer_engine candidate runs without Transformer Engine: %s", tg.Candidate.Key())
		}
	}
	code, _, errb := cgtune(t, "validate", run, "--launcher", "local", "--command", fakeJobCommand(t), "--dry-run", "--job-python", python)
	if code != exitOK {
		t.Fatalf("validate: exit %d\n%s", code, errb)
	}
	var printed []string
	for _, l := range strings.Split(errb, "\n") {
		if strings.HasPrefix(l, "skipped ") {
			printed = append(printed, l)
		}
	}
	var planned []string
	for _, sk := range plan.Skipped {
		planned = append(planned, "skipped "+sk.Candidate.Name()+": "+sk.Why)
	}
	if strings.Join(planned, "\n") != strings.Join(printed, "\n") {
		t.Errorf("the TUI's plan skips\n%s\nvalidate printed\n%s", strings.Join(planned, "\n"), strings.Join(printed, "\n"))
	}
	if _, err := b.PlanValidation(context.Background(), t.TempDir(), 3); err == nil || !strings.Contains(err.Error(), "holds no search") {
		t.Errorf("a folder without a search: %v", err)
	}
}
