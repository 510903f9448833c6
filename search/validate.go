package search

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"cgtune/engine"
	"cgtune/engine/job"
	"cgtune/internal/fileio"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/stepmodel"
)

// Buildable says whether the framework the jobs run can build candidate
// c, and when it cannot, why (what is missing).
type Buildable func(c presets.Candidate) (ok bool, why string)

// NeedsTE is the Buildable of a framework without Transformer Engine
// (why says how the node was asked): a transformer_engine graph needs it
// (Megatron-Core's TECudaGraphHelper asserts "CUDA Graphs are not
// supported without TE.", MLM megatron/core/transformer/cuda_graphs.py);
// local and full-iteration graphs do not.
func NeedsTE(why string) Buildable {
	return func(c presets.Candidate) (bool, string) {
		if c.Impl == presets.ImplTE {
			return false, "a transformer_engine graph needs Transformer Engine: " + why
		}
		return true, ""
	}
}

// Skipped is a candidate a validation passed over, and why.
type Skipped struct {
	Candidate presets.Candidate `json:"candidate"`
	Why       string            `json:"why"`
}

// ValidationTargets reads the search in run folder dir and picks what
// `cgtune validate` runs as real jobs: the top successful graphed
// candidates of its ranking that the jobs' framework can build (can; nil:
// any), each impl×scope once, with the warm-up the ranking put first, and
// the eager baseline, each with the search's result as the prediction.
// Each candidate's result is its latest round's. The candidates passed
// over for can come back as skipped, with why.
func ValidationTargets(dir string, top int, can Buildable) (Fingerprint, []job.Target, []Skipped, error) {
	if _, err := os.Stat(filepath.Join(dir, JournalFile)); errors.Is(err, os.ErrNotExist) {
		return Fingerprint{}, nil, nil, fmt.Errorf("%s holds no search (no %s)", dir, JournalFile)
	}
	check, err := journalPlanCheck(dir)
	if err != nil {
		return Fingerprint{}, nil, nil, err
	}
	pj, err := readJournal(dir, filepath.Join(dir, JournalFile), check)
	if err != nil {
		return Fingerprint{}, nil, nil, err
	}
	if err := pj.badLinesError(false); err != nil {
		return Fingerprint{}, nil, nil, err
	}
	fp, results := pj.fp, latestResults(pj.results)
	opts := RankOptions{}
	if spec, ok := stepmodel.SpecFor(fp.Layout.GPU); ok {
		opts.JobGPUMemoryMiB = spec.MemoryMiB
	}
	ranking := Rank(results, opts)
	var targets []job.Target
	var skipped []Skipped
	seen := map[string]bool{}
	for _, r := range ranking {
		c := r.Result.Candidate
		arm := c.Impl + "/" + c.ScopeString()
		if r.Result.Failed() || !r.Fits || !c.Graphed() || seen[arm] || len(targets) >= top {
			continue
		}
		seen[arm] = true
		if can != nil {
			if ok, why := can(c); !ok {
				skipped = append(skipped, Skipped{Candidate: c, Why: why})
				continue
			}
		}
		res := r.Result
		targets = append(targets, job.Target{Candidate: c, Predicted: &res})
	}
	if len(targets) == 0 {
		if len(skipped) > 0 {
			return fp, nil, skipped, fmt.Errorf("%s: no successful graphed candidate of the search can be built by the jobs' framework (%s: %s)", dir, skipped[0].Candidate.Name(), skipped[0].Why)
		}
		return fp, nil, nil, fmt.Errorf("%s: the search has no successful graphed candidate to validate", dir)
	}
	eager := presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}, Warmup: presets.DefaultWarmup}
	var pred *engine.Result
	if i := slices.IndexFunc(ranking, func(r Ranked) bool { return !r.Result.Candidate.Graphed() && !r.Result.Failed() }); i >= 0 {
		res := ranking[i].Result
		pred = &res
	} else if res, ok := eagerAsNone(results); ok {
		pred = &res
	}
	return fp, append([]job.Target{{Candidate: eager, Predicted: pred}}, targets...), skipped, nil
}

// journalPlanCheck is the check a resume of the search in dir applies to
// its journal's results (planCheck), from the plan its header describes:
// the candidates validate launches are those the search could have run,
// never strings taken from the journal unchecked.
func journalPlanCheck(dir string) (resultCheck, error) {
	pj, err := readJournal(dir, filepath.Join(dir, JournalFile), nil)
	if err != nil {
		return nil, err
	}
	fp := pj.fp
	plan, err := Plan(Config{Model: fp.Model, Layout: fp.Layout, MBridge: fp.MBridge, Sets: fp.Sets, Space: fp.Space, Workload: fp.Workload, Reference: fp.Reference})
	if err != nil {
		return nil, fmt.Errorf("%s: the search it holds cannot be planned: %w", filepath.Join(dir, JournalFile), err)
	}
	return planCheck(plan, fp.Strategy), nil
}

// PresetTargets are what `cgtune validate --preset` runs: the preset's
// result's winner and the eager baseline, with its step times as the
// predictions. A winner the jobs' framework cannot build (can; nil: any)
// is an error: there is nothing to compare eager with.
func PresetTargets(p presets.TeamPreset, can Buildable) ([]job.Target, error) {
	r := p.Result
	if r == nil {
		return nil, fmt.Errorf("preset %s has no result to validate (run a search and save it with the result)", p.Name)
	}
	if can != nil && r.Winner.Graphed() {
		if ok, why := can(r.Winner); !ok {
			return nil, fmt.Errorf("preset %s's winner %s cannot be validated here: %s", p.Name, r.Winner.Name(), why)
		}
	}
	eager := presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}, Warmup: presets.DefaultWarmup}
	src := engine.Source(r.Engine) // a preset's engine names the source: measured, estimated or job
	pred := func(ms float64) *engine.Result {
		if ms <= 0 {
			return nil
		}
		return &engine.Result{Source: src, Step: stepmodel.Stats{Median: ms, P10: ms, P90: ms, N: 1}}
	}
	ts := []job.Target{{Candidate: eager, Predicted: pred(r.EagerStepMS)}}
	if r.Winner.Graphed() {
		ts = append(ts, job.Target{Candidate: r.Winner, Predicted: pred(r.StepMS)})
	}
	return ts, nil
}

// EstimatorAt builds an engine that predicts with the framework host
// costs scaled by scale (the estimate engine for the job's GPU).
type EstimatorAt func(scale float64) (engine.Engine, error)

// FitCalibration fits the host-cost scale of model m on layout l to the
// jobs' step times (FitHostScale with the estimate engine's predictions)
// and returns the calibration, not yet saved.
func FitCalibration(m presets.Model, l presets.Layout, wo stepmodel.WorkloadOptions, points []stepmodel.CalibrationPoint, est EstimatorAt, source string) (stepmodel.Calibration, error) {
	w, err := stepmodel.BuildWorkload(m, l, wo)
	if err != nil {
		return stepmodel.Calibration{}, err
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
	scale, pts, notes, err := stepmodel.FitHostScale(points, predict)
	if err != nil {
		return stepmodel.Calibration{}, err
	}
	cal := stepmodel.Calibration{Model: stepmodel.ModelKey(m), Layout: stepmodel.LayoutKey(l), GPU: l.GPU, HostScale: scale, Source: source, Points: pts, Notes: notes}
	for _, p := range pts {
		if p.Job != "" {
			cal.Jobs = append(cal.Jobs, p.Job)
		}
	}
	return cal, nil
}

// ValidationPoints are the successful jobs of a validation as calibration
// points.
func ValidationPoints(v job.Validation) []stepmodel.CalibrationPoint {
	var pts []stepmodel.CalibrationPoint
	for _, r := range v.Rows {
		if r.Real.Failed() {
			continue
		}
		p := stepmodel.CalibrationPoint{Candidate: r.Candidate, RealMs: r.Real.Step.Median}
		if r.Real.Job != nil {
			p.Job = r.Real.Job.ID
		}
		pts = append(pts, p)
	}
	return pts
}

// JobValidation is one validation of candidates on the real training job:
// what to run (from a run folder: JobValidationForRun, or a preset), where
// and how. The CLI (`cgtune validate`) and the TUI's "validate top 3" both
// run it with ValidateOnJobs.
type JobValidation struct {
	Source   string // "run DIR", "preset NAME": what the targets came from
	Model    presets.Model
	Layout   presets.Layout
	MBridge  string            // field names of the overrides
	Sets     map[string]string // the search's --set values (the overrides carry those the candidates need)
	Workload stepmodel.WorkloadOptions
	Space    presets.Space // what the search searched (for a saved preset)
	Targets  []job.Target  // the eager baseline and the candidates
	Skipped  []Skipped     // top candidates the jobs' framework cannot build
	// Notes are what the person should know about the targets (a search
	// that did not finish, fewer candidates than asked for); the outcome
	// carries them too.
	Notes []string

	Dir      string // validation folder: jobs, their logs, journal, validation.json
	Launcher job.Launcher
	Command  job.Template
	Iters    int           // per job (default job.DefaultIters)
	Parallel int           // jobs queued or running at once (default 1)
	Timeout  time.Duration // per job's running time; 0: none
	Poll     time.Duration // how often states and logs are read (default 1 s)
	Resume   bool
	// SkipBadLines lets a resume set aside the unreadable lines of the
	// folder's journal and job ledger instead of refusing them.
	SkipBadLines bool
	// Estimator predicts at a host-cost scale for the calibration that the
	// jobs' step times fit; nil: no calibration.
	Estimator EstimatorAt
}

// JobValidationForRun fills what to validate from run folder dir: its top
// candidates the jobs' framework can build (ValidationTargets) and eager
// baseline with their predictions, its model, layout and MB release; the
// validation folder is dir/validate.
func JobValidationForRun(dir string, top int, can Buildable) (JobValidation, error) {
	fp, targets, skipped, err := ValidationTargets(dir, top, can)
	if err != nil {
		return JobValidation{}, err
	}
	return JobValidation{Source: "run " + dir, Model: fp.Model, Layout: fp.Layout, MBridge: fp.MBridge, Sets: fp.Sets,
		Workload: fp.Workload, Space: fp.Space, Targets: targets, Skipped: skipped, Dir: filepath.Join(dir, validateFolder),
		Notes: runNotes(dir, top, len(targets)-1, len(skipped))}, nil
}

// runNotes say what a validation of the search in dir should know before
// it trusts the candidates it got: that the search did not finish (its
// ranking is of the candidates it measured before it stopped), and that
// fewer than top candidates were there to validate (graphed is how many
// it got, skipped how many the jobs' framework cannot build).
func runNotes(dir string, top, graphed, skipped int) []string {
	var notes []string
	if finished, known, err := Finished(dir); err == nil && known && !finished {
		notes = append(notes, fmt.Sprintf("the search in %s did not finish (interrupted, or stopped by an error): its ranking is of the candidates it measured before it stopped; finish it first with cgtune --headless --resume %s", dir, dir))
	}
	if graphed < top {
		why := "that succeeded and fit"
		if skipped > 0 {
			why += fmt.Sprintf(" (%d more the jobs' framework cannot build)", skipped)
		}
		notes = append(notes, fmt.Sprintf("--top %d: the search has %d graphed candidate(s) %s, each impl and scope once; validating %d", top, graphed, why, graphed))
	}
	return notes
}

// JobOutcome is a finished (or interrupted) validation and the calibration
// its jobs gave.
type JobOutcome struct {
	job.Validation
	Dir             string                 `json:"dir"`
	Skipped         []Skipped              `json:"skipped,omitempty"`
	Calibration     *stepmodel.Calibration `json:"calibration,omitempty"`
	CalibrationFile string                 `json:"calibration_file,omitempty"`
	CalibrationErr  string                 `json:"calibration_error,omitempty"`
}

// Engine builds v's job engine (for a dry run's commands, say).
func (v JobValidation) Engine() (*job.Engine, error) {
	t := recipe.Target{Model: v.Model, Layout: v.Layout, MBridge: v.MBridge, Sets: v.Sets}
	return job.New(job.Config{Launcher: v.Launcher, Command: v.Command, Dir: v.Dir, Iters: v.Iters, Timeout: v.Timeout, Poll: v.Poll,
		SkipBadLines: v.SkipBadLines, Overrides: func(c presets.Candidate) recipe.Overrides { return recipe.WinnerOverrides(t, c) }})
}

// ValidateOnJobs runs v's targets as jobs and streams their state and log
// tail to emit (job.JobEvent, job.JobDone; called from one goroutine at a
// time). When it was not interrupted it saves validation.json and, with an
// Estimator, fits and saves the host-cost calibration for the model and
// layout. A cancelled ctx cancels the queued and running jobs.
func ValidateOnJobs(ctx context.Context, v JobValidation, emit func(job.ValidateEvent)) (JobOutcome, error) {
	if _, err := presets.ParseMBridge(v.MBridge); err != nil {
		return JobOutcome{}, err
	}
	lock, err := claimValidationDir(v.Dir, v.Resume)
	if err != nil {
		return JobOutcome{}, err
	}
	defer lock.Release()
	e, err := v.Engine()
	if err != nil {
		return JobOutcome{}, err
	}
	val, err := job.Validate(ctx, job.ValidateConfig{Engine: e, Targets: v.Targets, Parallel: v.Parallel, Resume: v.Resume, Source: v.Source, SkipBadLines: v.SkipBadLines, Notes: v.Notes}, emit)
	out := JobOutcome{Validation: val, Dir: v.Dir, Skipped: v.Skipped}
	if err != nil || val.Interrupted || v.Estimator == nil {
		return out, err
	}
	if pts := ValidationPoints(val); len(pts) > 0 {
		cal, err := FitCalibration(v.Model, v.Layout, v.Workload, pts, v.Estimator, "validate "+v.Source)
		if err != nil {
			out.CalibrationErr = err.Error()
			return out, nil
		}
		cal.Fitted = time.Now().UTC()
		out.Calibration = &cal
		if out.CalibrationFile, err = stepmodel.SaveCalibration(cal); err != nil {
			out.CalibrationErr = err.Error()
		}
	}
	return out, nil
}

// claimValidationDir locks the validation folder dir as a search locks its
// run folder: a second validation there (a --resume while one runs) would
// find the first one's jobs in the ledger, mark them lost and start them
// again. A new validation needs a folder that holds nothing but a cgtune
// validation, checked before the lock file is made and again under it.
func claimValidationDir(dir string, resume bool) (*RunLock, error) {
	if !resume {
		if err := CheckValidationDir(dir); err != nil {
			return nil, err
		}
	}
	lock, err := LockRunDir(dir)
	if err != nil {
		return nil, err
	}
	if !resume {
		if err := CheckValidationDir(dir); err != nil {
			lock.Release()
			return nil, err
		}
	}
	return lock, nil
}

// validationFiles are the files cgtune keeps in a validation folder.
var validationFiles = []string{LockFile, job.ValidationJournal, job.ValidationFile, job.LedgerFile,
	fileio.UnreadableName(job.ValidationJournal), fileio.UnreadableName(job.LedgerFile)}

// CheckValidationDir refuses a validation folder (validate --dir) that
// holds anything but a cgtune validation: its journal, outcome, job
// ledger, lock and job folders (named cgtune-..., job.JobName). validate
// writes validation.json and truncates each job's log there. A missing or
// empty folder is fine.
func CheckValidationDir(dir string) error {
	return checkOwnFolder(dir, "validation", func(e fs.DirEntry) bool {
		if e.IsDir() {
			return strings.HasPrefix(e.Name(), "cgtune-")
		}
		return e.Type().IsRegular() && slices.Contains(validationFiles, e.Name())
	}, validationFiles)
}

// ValidatedPreset is a team preset of v's model, layout, space and MB
// release whose result is the validation's winner on the real job (engine
// "job", with the winner's and the eager baseline's job ids, the nodes and
// GPUs) and whose job section is how the jobs ran. base, when not nil, is
// the preset the validation started from.
func ValidatedPreset(name string, base *presets.TeamPreset, v JobValidation, out job.Validation, setup presets.JobSetup, cgtuneVersion string) (presets.TeamPreset, error) {
	win, eager := out.Winner(), out.Eager()
	if win == nil {
		return presets.TeamPreset{}, errors.New("no job succeeded: nothing to save")
	}
	var p presets.TeamPreset
	if base != nil {
		p = *base
	} else {
		p = presets.TeamPreset{GPU: v.Layout.GPU, Layout: v.Layout, Space: v.Space}
		if b, err := presets.LookupModel(v.Model.Name); err == nil && reflect.DeepEqual(b, v.Model) {
			p.Model = v.Model.Name
		} else {
			m := v.Model.Clone()
			if _, ok := m.Layouts[v.Layout.GPU]; !ok {
				// An inline model names at least the layout it ran with.
				if m.Layouts == nil {
					m.Layouts = map[string]presets.Layout{}
				}
				m.Layouts[v.Layout.GPU] = v.Layout
			}
			p.ModelInline = &m
		}
		if len(p.Space.Impls) == 0 {
			p.Space = presets.DefaultSpace()
		}
	}
	p.Version, p.Name, p.MBridge = presets.FileVersion, name, v.MBridge
	// The search's --set values go into the layout: the preset ranks
	// under the conditions the jobs ran with.
	var left []string
	p.Layout, left = recipe.Target{Model: v.Model, Layout: v.Layout, MBridge: v.MBridge, Sets: v.Sets}.PresetLayout()
	l := v.Launcher
	p.Description = fmt.Sprintf("validated on %s jobs by cgtune validate (%s)", l.Name(), v.Source)
	if len(left) > 0 {
		p.Description += fmt.Sprintf("; the search also had %s, which a preset cannot hold", strings.Join(left, ", "))
	}
	r := &presets.Outcome{Winner: win.Candidate, StepMS: win.Real.Step.Median, Speedup: win.RealSpeedup,
		MemoryMiB: float64(win.Real.Memory.ProcessPeakMiB), Engine: "job", CgtuneVersion: cgtuneVersion, MeasuredAt: time.Now().UTC(),
		Job: &presets.JobRecord{Launcher: l.Name(), Nodes: l.Nodes(), GPUs: l.GPUs()}}
	if win.Real.Job != nil {
		r.Job.IDs = append(r.Job.IDs, win.Real.Job.ID)
	}
	if eager != nil && !eager.Real.Failed() {
		r.EagerStepMS = eager.Real.Step.Median
		if eager.Real.Job != nil && eager != win {
			r.Job.IDs = append(r.Job.IDs, eager.Real.Job.ID)
		}
	}
	p.Result = r
	p.Job = &setup
	return p, p.Validate()
}
