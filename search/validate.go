package search

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"cgtune/engine"
	jobs "cgtune/engine/job"
	"cgtune/presets"
)

// ValidationTargets reads the search in run folder dir and picks what
// `cgtune validate` runs as real jobs: the top successful graphed
// candidates of its ranking (each impl×scope once, with the warm-up the
// ranking put first) and the eager baseline, each with the search's result
// as the prediction. Each candidate's result is its latest round's.
func ValidationTargets(dir string, top int) (Fingerprint, []jobs.Target, error) {
	data, err := os.ReadFile(filepath.Join(dir, JournalFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Fingerprint{}, nil, fmt.Errorf("%s holds no search (no %s)", dir, JournalFile)
		}
		return Fingerprint{}, nil, err
	}
	fp, lines, _, err := parseJournal(dir, data)
	if err != nil {
		return Fingerprint{}, nil, err
	}
	latest := map[string]journalLine{}
	var order []string
	for _, l := range lines {
		if old, ok := latest[l.Key]; !ok {
			order = append(order, l.Key)
		} else if old.Round > l.Round {
			continue
		}
		latest[l.Key] = l
	}
	var results []engine.Result
	for _, k := range order {
		results = append(results, *latest[k].Result)
	}
	opts := RankOptions{}
	if spec, ok := engine.SpecFor(fp.Layout.GPU); ok {
		opts.JobGPUMemoryMiB = spec.MemoryMiB
	}
	ranking := Rank(results, opts)
	var targets []jobs.Target
	seen := map[string]bool{}
	for _, r := range ranking {
		c := r.Result.Candidate
		arm := c.Impl + "/" + c.ScopeString()
		if r.Result.Failed() || !r.Fits || !c.Graphed() || seen[arm] || len(targets) >= top {
			continue
		}
		seen[arm] = true
		res := r.Result
		targets = append(targets, jobs.Target{Candidate: c, Predicted: &res})
	}
	if len(targets) == 0 {
		return fp, nil, fmt.Errorf("%s: the search has no successful graphed candidate to validate", dir)
	}
	eager := presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}, Warmup: presets.DefaultWarmup}
	var pred *engine.Result
	if i := slices.IndexFunc(ranking, func(r Ranked) bool { return !r.Result.Candidate.Graphed() && !r.Result.Failed() }); i >= 0 {
		res := ranking[i].Result
		pred = &res
	} else if res, ok := eagerAsNone(results); ok {
		pred = &res
	}
	return fp, append([]jobs.Target{{Candidate: eager, Predicted: pred}}, targets...), nil
}

// PresetTargets are what `cgtune validate --preset` runs: the preset's
// result's winner and the eager baseline, with its step times as the
// predictions.
func PresetTargets(p presets.TeamPreset) ([]jobs.Target, error) {
	r := p.Result
	if r == nil {
		return nil, fmt.Errorf("preset %s has no result to validate (run a search and save it with the result)", p.Name)
	}
	eager := presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}, Warmup: presets.DefaultWarmup}
	src := r.Engine
	if src == "job" {
		src = engine.FromJob
	}
	pred := func(ms float64) *engine.Result {
		if ms <= 0 {
			return nil
		}
		return &engine.Result{Source: src, Step: engine.Stats{Median: ms, P10: ms, P90: ms, N: 1}}
	}
	ts := []jobs.Target{{Candidate: eager, Predicted: pred(r.EagerStepMS)}}
	if r.Winner.Graphed() {
		ts = append(ts, jobs.Target{Candidate: r.Winner, Predicted: pred(r.StepMS)})
	}
	return ts, nil
}

// EstimatorAt builds an engine that predicts with the framework host
// costs scaled by scale (the estimate engine for the job's GPU).
type EstimatorAt func(scale float64) (engine.Engine, error)

// FitCalibration fits the host-cost scale of model m on layout l to the
// jobs' step times (FitHostScale with the estimate engine's predictions)
// and returns the calibration, not yet saved.
func FitCalibration(m presets.Model, l presets.Layout, wo engine.WorkloadOptions, points []engine.CalibrationPoint, est EstimatorAt, source string) (engine.Calibration, error) {
	w, err := engine.BuildWorkload(m, l, wo)
	if err != nil {
		return engine.Calibration{}, err
	}
	var mu sync.Mutex
	engines := map[float64]engine.Engine{}
	predict := func(scale float64, c presets.Candidate) (float64, error) {
		mu.Lock()
		e, ok := engines[scale]
		mu.Unlock()
		if !ok {
			if e, err = est(scale); err != nil {
				return 0, err
			}
			mu.Lock()
			engines[scale] = e
			mu.Unlock()
		}
		r := e.Run(context.Background(), w, c, engine.RunOptions{}, nil)
		if r.Failed() {
			return 0, fmt.Errorf("%s", r.Err)
		}
		return r.Step.Median, nil
	}
	scale, pts, notes, err := engine.FitHostScale(points, predict)
	if err != nil {
		return engine.Calibration{}, err
	}
	cal := engine.Calibration{Model: m.Name, Layout: engine.CalibrationLayoutKey(l), HostScale: scale, Source: source, Points: pts, Notes: notes}
	for _, p := range pts {
		if p.Job != "" {
			cal.Jobs = append(cal.Jobs, p.Job)
		}
	}
	return cal, nil
}

// ValidationPoints are the successful jobs of a validation as calibration
// points.
func ValidationPoints(v jobs.Validation) []engine.CalibrationPoint {
	var pts []engine.CalibrationPoint
	for _, r := range v.Rows {
		if r.Real.Failed() {
			continue
		}
		p := engine.CalibrationPoint{Candidate: r.Candidate, RealMs: r.Real.Step.Median}
		if r.Real.Job != nil {
			p.Job = r.Real.Job.ID
		}
		pts = append(pts, p)
	}
	return pts
}
