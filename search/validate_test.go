package search

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/engine/estimate"
	"cgtune/engine/job"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/stepmodel"
)

func TestValidationTargetsFromARun(t *testing.T) {
	m, l := denseModel, layoutFor(denseModel)
	dir := t.TempDir()
	// Step time by arm: full iteration fastest, then whole-layer local,
	// then TE attn; TE mlp fails.
	step := map[string]float64{"local/full_iteration": 700, "local/": 800, "transformer_engine/attn": 850, "transformer_engine/": 900}
	fe := &fakeEngine{step: func(c presets.Candidate) float64 {
		if ms, ok := step[c.Impl+"/"+c.ScopeString()]; ok {
			return ms
		}
		return 990
	}, fail: map[string]engine.FailureKind{"transformer_engine/mlp": engine.FailureOOM}}
	cfg := Config{Model: m, Layout: l, Engines: []engine.Engine{fe}, Strategy: StrategyHalving, RunDir: dir, Budget: -1,
		Space: presets.Space{Impls: []string{"none", "local", "transformer_engine"}, Scopes: [][]string{{}, {"attn"}, {"mlp"}, {"full_iteration"}}, Warmups: []int{1, 3}}}
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	fp, targets, skipped, err := ValidationTargets(dir, 3, nil)
	if err != nil || len(skipped) != 0 {
		t.Fatal(err)
	}
	if fp.Model.Name != m.Name {
		t.Errorf("fingerprint model %s", fp.Model.Name)
	}
	var keys []string
	for _, tg := range targets {
		keys = append(keys, tg.Candidate.Impl+" "+tg.Candidate.ScopeString())
		if tg.Predicted == nil {
			t.Errorf("%s has no prediction", tg.Candidate.Key())
		}
	}
	want := []string{"none ", "local full_iteration", "local ", "transformer_engine attn"}
	if strings.Join(keys, "|") != strings.Join(want, "|") {
		t.Errorf("targets %q, want %q", keys, want)
	}
	if targets[1].Predicted.Step.Median != 700 || targets[0].Predicted.Step.Median != 1000 {
		t.Errorf("predictions %v %v", targets[1].Predicted.Step, targets[0].Predicted.Step)
	}
	// top 1 keeps the eager baseline and the winner.
	if _, ts, _, _ := ValidationTargets(dir, 1, nil); len(ts) != 2 || ts[1].Candidate.ScopeString() != "full_iteration" {
		t.Errorf("top 1: %v", ts)
	}
	if _, _, _, err := ValidationTargets(t.TempDir(), 3, nil); err == nil || !strings.Contains(err.Error(), "holds no search") {
		t.Errorf("empty folder: %v", err)
	}
}

// On a framework without Transformer Engine, the top N are the top N it
// can build: the transformer_engine candidates are passed over (once per
// impl and scope) with the reason, and the next buildable ones fill in.
func TestValidationTargetsTheFrameworkCanBuild(t *testing.T) {
	m, l := denseModel, layoutFor(denseModel)
	dir := t.TempDir()
	// TE attn and TE whole layer fastest, then the local graphs.
	step := map[string]float64{"transformer_engine/attn": 600, "transformer_engine/": 650, "local/full_iteration": 700, "local/": 800}
	fe := &fakeEngine{step: func(c presets.Candidate) float64 {
		if ms, ok := step[c.Impl+"/"+c.ScopeString()]; ok {
			return ms
		}
		return 990
	}}
	cfg := Config{Model: m, Layout: l, Engines: []engine.Engine{fe}, Strategy: StrategyExhaustive, RunDir: dir,
		Space: presets.Space{Impls: []string{"none", "local", "transformer_engine"}, Scopes: [][]string{{}, {"attn"}, {"full_iteration"}}, Warmups: []int{1, 3}}}
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	_, targets, skipped, err := ValidationTargets(dir, 2, NeedsTE("no module named transformer_engine"))
	if err != nil {
		t.Fatal(err)
	}
	var keys, skippedKeys []string
	for _, tg := range targets {
		keys = append(keys, tg.Candidate.Impl+" "+tg.Candidate.ScopeString())
	}
	for _, sk := range skipped {
		skippedKeys = append(skippedKeys, sk.Candidate.Impl+" "+sk.Candidate.ScopeString())
		if !strings.Contains(sk.Why, "needs Transformer Engine: no module named transformer_engine") {
			t.Errorf("why %q", sk.Why)
		}
	}
	if want := []string{"none ", "local full_iteration", "local "}; !slices.Equal(keys, want) {
		t.Errorf("targets %q, want %q", keys, want)
	}
	if want := []string{"transformer_engine attn", "transformer_engine "}; !slices.Equal(skippedKeys, want) {
		t.Errorf("skipped %q, want %q", skippedKeys, want)
	}
	// Nothing it can build: an error naming what was skipped and why.
	onlyLocal := func(c presets.Candidate) (bool, string) { return false, "nothing builds here" }
	if _, _, _, err := ValidationTargets(dir, 2, onlyLocal); err == nil || !strings.Contains(err.Error(), "nothing builds here") {
		t.Errorf("nothing buildable: %v", err)
	}
}

func TestPresetTargets(t *testing.T) {
	p := presets.TeamPreset{Name: "x", Result: &presets.Outcome{Winner: presets.Candidate{Impl: "local", Scopes: []string{"full_iteration"}, Warmup: 3}, StepMS: 20, EagerStepMS: 30, Engine: "measured"}}
	ts, err := PresetTargets(p, NeedsTE("no TE"))
	if err != nil || len(ts) != 2 || ts[0].Predicted.Step.Median != 30 || ts[1].Predicted.Step.Median != 20 || ts[1].Predicted.Source != "measured" {
		t.Errorf("%+v %v", ts, err)
	}
	p.Result.Winner = presets.Candidate{Impl: "transformer_engine", Scopes: []string{"attn"}, Warmup: 3}
	if _, err := PresetTargets(p, NeedsTE("no TE")); err == nil || !strings.Contains(err.Error(), "te attn w3 cannot be validated here") {
		t.Errorf("a TE winner without TE: %v", err)
	}
	p.Result = nil
	if _, err := PresetTargets(p, nil); err == nil {
		t.Error("a preset without a result gave targets")
	}
}

// TestFitCalibrationFromValidation fits the estimate engine's host-cost
// scale to "jobs" the estimate engine itself produced at a known scale.
func TestFitCalibrationFromValidation(t *testing.T) {
	m, l := denseModel, layoutFor(denseModel)
	l.GBS = 512 // many micro-batches: host-bound enough for the scale to matter
	rates, _ := stepmodel.SpecFor("h100")
	est := func(s float64) (engine.Engine, error) {
		return estimate.New(rates, stepmodel.DefaultHostCosts().Scaled(s), engine.DeviceInfo{Name: "est"}), nil
	}
	w, err := stepmodel.BuildWorkload(m, l, stepmodel.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	truth, _ := est(4)
	eager := presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}, Warmup: 3}
	full := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{"full_iteration"}, Warmup: 3}
	var targets []job.Target
	var results []engine.Result
	for i, c := range []presets.Candidate{eager, full} {
		r := truth.Run(context.Background(), w, c, engine.RunOptions{}, nil)
		r.Job = &engine.JobInfo{Launcher: "slurm", ID: []string{"100", "101"}[i]}
		targets = append(targets, job.Target{Candidate: c})
		results = append(results, r)
	}
	v := job.Validation{Rows: job.Compare(targets, results)}
	cal, err := FitCalibration(m, l, stepmodel.WorkloadOptions{}, ValidationPoints(v), est, "validate test")
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(cal.HostScale-4)/4 > 0.05 {
		t.Errorf("fitted %v, want 4 (points %+v, notes %q)", cal.HostScale, cal.Points, cal.Notes)
	}
	if len(cal.Jobs) != 2 || cal.Layout != stepmodel.LayoutKey(l) || cal.Model != stepmodel.ModelKey(m) || cal.Source != "validate test" {
		t.Errorf("calibration %+v", cal)
	}
}

// TestValidateOnJobs is the TUI's "validate top 3": a run's top candidates
// as local jobs (engine/job's fake training job), streamed job states,
// the calibration saved, and a preset made from the outcome.
func TestValidateOnJobs(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	m, l := denseModel, layoutFor(denseModel)
	dir := t.TempDir()
	fe := &fakeEngine{step: func(c presets.Candidate) float64 { return 900 - 100*float64(len(c.Scopes)) }}
	cfg := Config{Model: m, Layout: l, Engines: []engine.Engine{fe}, Strategy: StrategyExhaustive, RunDir: dir,
		Space: presets.Space{Impls: []string{"none", "local"}, Scopes: [][]string{{}, {"full_iteration"}}, Warmups: []int{3}}}
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	v, err := JobValidationForRun(dir, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	fake, _ := filepath.Abs(filepath.Join("..", "engine", "job", "testdata", "fakejob.sh"))
	v.Launcher = &job.Local{}
	if v.Command, err = job.ParseCommand("bash "+job.Quote(fake)+" --train-iters {iters} {flags}", ""); err != nil {
		t.Fatal(err)
	}
	v.Iters, v.Poll, v.MBridge = 10, 50*time.Millisecond, "0.6"
	rates, _ := stepmodel.SpecFor("h100")
	v.Estimator = func(s float64) (engine.Engine, error) {
		return estimate.New(rates, stepmodel.DefaultHostCosts().Scaled(s), engine.DeviceInfo{Name: "est"}), nil
	}
	states := map[string][]string{}
	var tails int
	out, err := ValidateOnJobs(context.Background(), v, func(ev job.ValidateEvent) {
		if je, ok := ev.(job.JobEvent); ok {
			k := je.Update.Candidate.Key()
			if s := states[k]; len(s) == 0 || s[len(s)-1] != je.Update.State {
				states[k] = append(s, je.Update.State)
			}
			if len(je.Update.Tail) > 0 {
				tails++
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Rows) != 3 || out.Rows[0].Candidate.ScopeString() != "full_iteration" || out.Calibration == nil || out.CalibrationFile == "" {
		t.Fatalf("outcome %+v", out)
	}
	for k, s := range states {
		if strings.Join(s, ",") != "SUBMITTING,RUNNING,COMPLETED" {
			t.Errorf("%s: states %v", k, s)
		}
	}
	if tails == 0 {
		t.Error("no log tail streamed")
	}
	p, err := ValidatedPreset("dense-validated", nil, v, out.Validation, presets.JobSetup{Launcher: "local", Command: v.Command.Text}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if p.ModelInline == nil || p.Result.Engine != "job" || len(p.Result.Job.IDs) != 2 || !p.Result.Winner.FullIteration() || p.MBridge != "0.6" {
		t.Errorf("preset %+v result %+v", p, p.Result)
	}
	// Interrupted before anything ran: no calibration, no validation.json.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v.Dir = filepath.Join(t.TempDir(), "v2")
	out, err = ValidateOnJobs(ctx, v, nil)
	if err != nil || !out.Interrupted || out.Calibration != nil {
		t.Errorf("interrupted: %+v %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(v.Dir, job.ValidationFile)); err == nil {
		t.Error("an interrupted validation wrote validation.json")
	}
}

// TestSearchOnTheJobEngine runs a whole search with the job engine (local
// jobs of engine/job's fake training job): results come from the jobs'
// logs, the journal keeps them with their job ids, and a resume runs none
// again.
func TestSearchOnTheJobEngine(t *testing.T) {
	m, l := denseModel, layoutFor(denseModel)
	dir := t.TempDir()
	fake, _ := filepath.Abs(filepath.Join("..", "engine", "job", "testdata", "fakejob.sh"))
	tmpl, err := job.ParseCommand("bash "+job.Quote(fake)+" --train-iters {iters} {flags}", "")
	if err != nil {
		t.Fatal(err)
	}
	newEngine := func() *job.Engine {
		e, err := job.New(job.Config{Launcher: &job.Local{}, Command: tmpl, Dir: filepath.Join(dir, "jobs"), Iters: 10, Poll: 50 * time.Millisecond,
			Overrides: func(c presets.Candidate) recipe.Overrides {
				return recipe.WinnerOverrides(recipe.Target{Model: m, Layout: l, MBridge: "0.6"}, c)
			}})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	cfg := Config{Model: m, Layout: l, MBridge: "0.6", Engines: []engine.Engine{newEngine()}, Strategy: StrategyExhaustive, RunDir: dir,
		Space:    presets.Space{Impls: []string{"none", "local"}, Scopes: [][]string{{}, {"full_iteration"}}, Warmups: []int{3}},
		Measured: engine.RunOptions{MeasuredSteps: 4}}
	d, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Winner == nil || !d.Winner.Result.Candidate.FullIteration() || d.Winner.Result.Source != engine.SourceJob {
		t.Fatalf("winner %+v", d.Winner)
	}
	_, rs, err := ReadJournal(dir, false)
	if err != nil || len(rs) != d.Runs || d.Runs == 0 {
		t.Fatalf("journal: %d results, %d runs, %v", len(rs), d.Runs, err)
	}
	for _, r := range rs {
		if r.Job == nil || r.Job.Launcher != "local" || r.Job.ID == "" {
			t.Errorf("%s: journal has no job: %+v", r.Candidate.Key(), r.Job)
		}
	}
	ledger, _ := job.OpenLedger(filepath.Join(dir, "jobs"))
	before := len(ledger.Entries())
	cfg.Resume, cfg.Engines = true, []engine.Engine{newEngine()}
	d2, err := Run(context.Background(), cfg, nil)
	if err != nil || d2.Runs != 0 || d2.Resumed != d.Runs || d2.Winner.Result.Step != d.Winner.Result.Step {
		t.Errorf("resume: %d runs, %d resumed, %v", d2.Runs, d2.Resumed, err)
	}
	ledger, _ = job.OpenLedger(filepath.Join(dir, "jobs"))
	if len(ledger.Entries()) != before {
		t.Error("the resume launched jobs")
	}
}
