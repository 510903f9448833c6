package search

import (
	"context"
	"math"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/engine/estimate"
	jobs "cgtune/engine/job"
	"cgtune/presets"
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
	}, fail: map[string]string{"transformer_engine/mlp": engine.ErrOOM}}
	cfg := Config{Model: m, Layout: l, Engines: []engine.Engine{fe}, Strategy: StrategyHalving, RunDir: dir, Budget: -1,
		Space: presets.Space{Impls: []string{"none", "local", "transformer_engine"}, Scopes: [][]string{{}, {"attn"}, {"mlp"}, {"full_iteration"}}, Warmups: []int{1, 3}}}
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	fp, targets, err := ValidationTargets(dir, 3)
	if err != nil {
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
	if _, ts, _ := ValidationTargets(dir, 1); len(ts) != 2 || ts[1].Candidate.ScopeString() != "full_iteration" {
		t.Errorf("top 1: %v", ts)
	}
	if _, _, err := ValidationTargets(t.TempDir(), 3); err == nil || !strings.Contains(err.Error(), "holds no search") {
		t.Errorf("empty folder: %v", err)
	}
}

func TestPresetTargets(t *testing.T) {
	p := presets.TeamPreset{Name: "x", Result: &presets.Result{Winner: presets.Candidate{Impl: "local", Scopes: []string{"full_iteration"}, Warmup: 3}, StepMS: 20, EagerStepMS: 30, Engine: "measured"}}
	ts, err := PresetTargets(p)
	if err != nil || len(ts) != 2 || ts[0].Predicted.Step.Median != 30 || ts[1].Predicted.Step.Median != 20 || ts[1].Predicted.Source != "measured" {
		t.Errorf("%+v %v", ts, err)
	}
	p.Result = nil
	if _, err := PresetTargets(p); err == nil {
		t.Error("a preset without a result gave targets")
	}
}

// TestFitCalibrationFromValidation fits the estimate engine's host-cost
// scale to "jobs" the estimate engine itself produced at a known scale.
func TestFitCalibrationFromValidation(t *testing.T) {
	m, l := denseModel, layoutFor(denseModel)
	l.GBS = 512 // many micro-batches: host-bound enough for the scale to matter
	rates, _ := engine.SpecFor("h100")
	est := func(s float64) (engine.Engine, error) {
		return estimate.New(rates, engine.DefaultHostCosts().Scaled(s), engine.DeviceInfo{Name: "est"}), nil
	}
	w, err := engine.BuildWorkload(m, l, engine.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	truth, _ := est(4)
	eager := presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}, Warmup: 3}
	full := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{"full_iteration"}, Warmup: 3}
	var targets []jobs.Target
	var results []engine.Result
	for i, c := range []presets.Candidate{eager, full} {
		r := truth.Run(context.Background(), w, c, engine.RunOptions{}, nil)
		r.Job = &engine.JobInfo{Launcher: "slurm", ID: []string{"100", "101"}[i]}
		targets = append(targets, jobs.Target{Candidate: c})
		results = append(results, r)
	}
	v := jobs.Validation{Rows: jobs.Compare(targets, results)}
	cal, err := FitCalibration(m, l, engine.WorkloadOptions{}, ValidationPoints(v), est, "validate test")
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(cal.HostScale-4)/4 > 0.05 {
		t.Errorf("fitted %v, want 4 (points %+v, notes %q)", cal.HostScale, cal.Points, cal.Notes)
	}
	if len(cal.Jobs) != 2 || cal.Layout != engine.CalibrationLayoutKey(l) || cal.Model != m.Name || cal.Source != "validate test" {
		t.Errorf("calibration %+v", cal)
	}
}
