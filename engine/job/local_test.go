package job

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/stepmodel"
)

var (
	eager    = presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}, Warmup: 3}
	perLayer = presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{}, Warmup: 2}
	fullIter = presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 3}
	oomCand  = presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{"attn", "mlp"}, Warmup: 1}
	hangCand = presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}, Warmup: 7}
)

func fakeJob(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "fakejob.sh"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func g3(c presets.Candidate) recipe.Overrides { return recipe.BuildOverrides(c, "0.6") }

func newEngine(t *testing.T, l Launcher, tmpl string, dir string, mod func(*Config)) *Engine {
	t.Helper()
	tm, err := ParseCommand(tmpl, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Launcher: l, Command: tm, Overrides: g3, Dir: dir, Iters: 12, Poll: 100 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// groupGone reports whether the local job's process group has ended,
// asking ps (zombies, which init reaps in its own time, do not count).
func groupGone(t *testing.T, id string) bool {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimPrefix(id, "local:"))
	if err != nil {
		t.Fatalf("job id %q", id)
	}
	out, err := exec.Command("ps", "-eo", "pgid=,stat=").Output()
	if err != nil {
		t.Skipf("ps: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == strconv.Itoa(pid) && !strings.HasPrefix(f[1], "Z") {
			return false
		}
	}
	return true
}

// updates collects a job's updates.
type updates struct {
	mu sync.Mutex
	us []Update
}

func (u *updates) add(x Update) { u.mu.Lock(); u.us = append(u.us, x); u.mu.Unlock() }

func (u *updates) states() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var s []string
	for _, x := range u.us {
		if len(s) == 0 || s[len(s)-1] != x.State {
			s = append(s, x.State)
		}
	}
	return s
}

func TestLocalJobsMeasureWhatTheJobPrints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := newEngine(t, &Local{}, "bash "+Quote(fakeJob(t))+" --train-iters {iters} {flags}", dir, nil)
	// The fake job prints step + 0.0/0.3/0.6 ms by iteration: the medians
	// are step + 0.3 (or step + 0.0/0.6 for an even count).
	for _, tc := range []struct {
		c       presets.Candidate
		step    float64
		peakMiB int64
	}{{eager, 40, 1000}, {perLayer, 30, 1200}, {fullIter, 22, 1400}} {
		t.Run(tc.c.Key(), func(t *testing.T) {
			var u updates
			res := e.RunJob(context.Background(), tc.c, 0, u.add)
			if res.Failed() {
				t.Fatalf("%s: %s: %s", tc.c.Key(), res.ErrKind, res.Err)
			}
			if res.Step.Median < tc.step || res.Step.Median > tc.step+0.6 || res.Step.N != 12-FirstMeasured(tc.c)+1 {
				t.Errorf("%s: step %+v, want %v..%v over %d iterations", tc.c.Key(), res.Step, tc.step, tc.step+0.6, 12-FirstMeasured(tc.c)+1)
			}
			if res.Memory.ProcessPeakMiB != tc.peakMiB {
				t.Errorf("%s: peak %d MiB, want %d", tc.c.Key(), res.Memory.ProcessPeakMiB, tc.peakMiB)
			}
			if tc.c.FullIteration() && (res.CaptureMs < 160 || res.CaptureMs > 170) {
				t.Errorf("%s: capture %v ms, want about 190 - step", tc.c.Key(), res.CaptureMs)
			}
			if tc.c.Graphed() && !tc.c.FullIteration() && (res.CaptureMs != 0 || !strings.Contains(strings.Join(res.Notes, ";"), "first iteration")) {
				t.Errorf("%s: local per-layer capture %v ms, notes %q", tc.c.Key(), res.CaptureMs, res.Notes)
			}
			if res.Source != engine.SourceJob || res.Job == nil || res.Job.Launcher != "local" || res.Job.State != StateCompleted {
				t.Errorf("%s: source %s job %+v", tc.c.Key(), res.Source, res.Job)
			}
			if st := u.states(); st[0] != StateSubmitting || st[len(st)-1] != StateCompleted {
				t.Errorf("%s: states %v", tc.c.Key(), st)
			}
			var measured int
			for _, x := range u.us {
				for _, s := range x.Samples {
					if s.Phase == engine.PhaseMeasure {
						measured++
					}
				}
			}
			if measured != res.Step.N {
				t.Errorf("%s: %d measured samples streamed, result has %d", tc.c.Key(), measured, res.Step.N)
			}
			if !groupGone(t, res.Job.ID) {
				t.Errorf("%s: process group still there", tc.c.Key())
			}
		})
	}
}

func TestLocalJobFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := newEngine(t, &Local{}, "bash "+Quote(fakeJob(t))+" --train-iters {iters} {flags}", dir, nil)
	res := e.RunJob(context.Background(), oomCand, 0, nil)
	if res.ErrKind != engine.FailureOOM || !strings.Contains(res.Err, "CUDA out of memory") || res.Job.ExitCode != 1 {
		t.Errorf("OOM job: %s: %s (job %+v)", res.ErrKind, res.Err, res.Job)
	}
	res = e.RunJob(context.Background(), presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"moe"}, Warmup: 1}, 0, nil)
	if res.ErrKind != engine.FailureCapture {
		t.Errorf("capture job: %s: %s", res.ErrKind, res.Err)
	}
	res = e.RunJob(context.Background(), presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"mamba"}, Warmup: 1}, 0, nil)
	if res.ErrKind != engine.FailureNaN {
		t.Errorf("NaN job: %s: %s", res.ErrKind, res.Err)
	}
	res = e.RunJob(context.Background(), presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}, Warmup: 8}, 0, nil)
	if res.ErrKind != engine.FailureNoSteps {
		t.Errorf("job without steady-state iterations: %s: %s", res.ErrKind, res.Err)
	}
	// A job the command cannot even start.
	e2 := newEngine(t, &Local{}, "bash "+Quote(fakeJob(t))+" --bogus {flags}", t.TempDir(), nil)
	res = e2.RunJob(context.Background(), eager, 0, nil)
	if res.ErrKind != engine.FailureCrash || !strings.Contains(res.Err, "exit code 2") {
		t.Errorf("bad command: %s: %s", res.ErrKind, res.Err)
	}
}

func TestLocalJobTimeoutKillsTheGroup(t *testing.T) {
	t.Parallel()
	e := newEngine(t, &Local{Grace: time.Second}, "bash "+Quote(fakeJob(t))+" --train-iters {iters} {flags}", t.TempDir(),
		func(c *Config) { c.Timeout = 2 * time.Second })
	start := time.Now()
	res := e.RunJob(context.Background(), hangCand, 0, nil)
	if res.ErrKind != engine.FailureTimeout {
		t.Fatalf("%s: %s", res.ErrKind, res.Err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
	if !groupGone(t, res.Job.ID) {
		t.Error("the hung job's process group is still there")
	}
}

func TestLocalJobCancel(t *testing.T) {
	t.Parallel()
	e := newEngine(t, &Local{Grace: time.Second}, "bash "+Quote(fakeJob(t))+" --train-iters {iters} {flags}", t.TempDir(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	var id string
	res := e.RunJob(ctx, hangCand, 0, func(u Update) {
		// Cancel once the job is well under way.
		for _, s := range u.Samples {
			if s.Step == 5 {
				id = u.JobID
				cancel()
			}
		}
	})
	if res.ErrKind != engine.FailureCancel {
		t.Fatalf("%s: %s", res.ErrKind, res.Err)
	}
	if id == "" || !groupGone(t, id) {
		t.Errorf("job %q still running after cancel", id)
	}
}

func TestLocalJobStoppedAfterEnoughIterations(t *testing.T) {
	t.Parallel()
	// The command has no {iters}: the job would run 1000 iterations;
	// cgtune stops it after Iters and keeps the result.
	e := newEngine(t, &Local{Grace: time.Second}, "bash "+Quote(fakeJob(t))+" --train-iters 1000 {flags}", t.TempDir(), nil)
	start := time.Now()
	res := e.RunJob(context.Background(), perLayer, 0, nil)
	if res.Failed() {
		t.Fatalf("%s: %s", res.ErrKind, res.Err)
	}
	if res.Step.N < 12-FirstMeasured(perLayer)+1 || !strings.Contains(strings.Join(res.Notes, ";"), "cgtune stopped the job") {
		t.Errorf("step %+v notes %q", res.Step, res.Notes)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("took %s", time.Since(start))
	}
}

func TestEngineInterfaceStreamsSamples(t *testing.T) {
	t.Parallel()
	var e engine.Engine = newEngine(t, &Local{}, "bash "+Quote(fakeJob(t))+" --train-iters {iters} {flags}", t.TempDir(), nil)
	var n int
	res := e.Run(context.Background(), nil, perLayer, engine.RunOptions{MeasuredSteps: 4}, func(s engine.StepSample) {
		if s.Candidate != perLayer.Key() {
			t.Errorf("sample for %s", s.Candidate)
		}
		n++
	})
	if res.Failed() || n != 12 {
		t.Errorf("%d samples, result %s", n, res.Summary())
	}
}

func TestLocalValidateRanksAndCompares(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := newEngine(t, &Local{}, "bash "+Quote(fakeJob(t))+" --train-iters {iters} {flags}", dir, nil)
	pred := func(ms float64) *engine.Result {
		return &engine.Result{Source: engine.SourceEstimated, Step: stepmodel.Stats{Median: ms, N: 5}}
	}
	targets := []Target{{eager, pred(50)}, {perLayer, pred(27)}, {fullIter, pred(20)}, {oomCand, pred(25)}}
	var dones int
	v, err := Validate(context.Background(), ValidateConfig{Engine: e, Targets: targets, Parallel: 2, Source: "test"}, func(ev ValidateEvent) {
		if _, ok := ev.(JobDone); ok {
			dones++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if dones != 4 || len(v.Rows) != 4 || v.Interrupted {
		t.Fatalf("%d done events, %d rows, interrupted %v", dones, len(v.Rows), v.Interrupted)
	}
	order := []string{fullIter.Key(), perLayer.Key(), eager.Key(), oomCand.Key()}
	for i, r := range v.Rows {
		if r.Candidate.Key() != order[i] {
			t.Errorf("row %d is %s, want %s", i, r.Candidate.Key(), order[i])
		}
	}
	fi := v.Rows[0]
	wantErr := (20 - fi.Real.Step.Median) / fi.Real.Step.Median * 100
	if fi.Rank != 1 || !fi.HasError || fi.ErrorPct != wantErr || fi.PredictedSpeedup != 50.0/20 {
		t.Errorf("full iteration row %+v", fi)
	}
	if want := v.Rows[2].Real.Step.Median / fi.Real.Step.Median; fi.RealSpeedup != want {
		t.Errorf("real speed-up %v, want %v", fi.RealSpeedup, want)
	}
	if v.Rows[3].Rank != 0 || !v.Rows[3].Real.Failed() {
		t.Errorf("failed row %+v", v.Rows[3])
	}
	if w := v.Winner(); w == nil || w.Candidate.Key() != fullIter.Key() {
		t.Errorf("winner %v", w)
	}
	// Saved, and a second validation in the same folder must resume.
	got, err := ReadValidation(dir)
	if err != nil || len(got.Rows) != 4 {
		t.Fatalf("validation.json: %v, %d rows", err, len(got.Rows))
	}
	if _, err := Validate(context.Background(), ValidateConfig{Engine: e, Targets: targets}, nil); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Errorf("second validation: %v", err)
	}
	// Resuming a finished validation runs nothing.
	resumed := 0
	v2, err := Validate(context.Background(), ValidateConfig{Engine: e, Targets: targets, Resume: true}, func(ev ValidateEvent) {
		if d, ok := ev.(JobDone); ok && d.Resumed {
			resumed++
		}
		if _, ok := ev.(JobEvent); ok {
			t.Error("a job ran on resume")
		}
	})
	if err != nil || resumed != 4 || v2.Rows[0].Real.Step != v.Rows[0].Real.Step {
		t.Errorf("resume: %v, %d resumed", err, resumed)
	}
}
