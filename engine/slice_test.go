package engine

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"cgtune/presets"
	"cgtune/stepmodel"
)

// oomAbove is an emulating engine whose runs fit its GPU up to fit
// layers: a step costs 10 ms per layer graphed and 25 eager, graphs 100
// MiB per layer; above fit layers a run is an out-of-memory failure with
// the memory model's breakdown of what it was given.
type oomAbove struct {
	fit  int
	runs []int
	fail string // an error other than OOM for slices
}

func (o *oomAbove) Name() string       { return "fake" }
func (o *oomAbove) Device() DeviceInfo { return DeviceInfo{Name: "fake"} }
func (o *oomAbove) Close() error       { return nil }
func (o *oomAbove) Run(_ context.Context, w *stepmodel.Workload, c presets.Candidate, _ RunOptions, _ func(StepSample)) Result {
	n := len(w.Layers)
	o.runs = append(o.runs, n)
	r := Result{Candidate: c, Memory: Memory{Breakdown: &stepmodel.MemoryBreakdown{Graphs: int64(100 * n)}}}
	switch {
	case n > o.fit:
		r.Err, r.ErrKind = "out of memory", FailureOOM
	case o.fail != "":
		r.Err, r.ErrKind = o.fail, FailureCUDA
	default:
		ms := float64(n) * 10
		r.Step, r.Eager = stepmodel.Stats{Median: ms, P10: ms, P90: ms}, stepmodel.Stats{Median: 2.5 * ms, P10: 2.5 * ms, P90: 2.5 * ms}
		r.Speedup = 2.5
		r.Memory.GraphMiB, r.Memory.GraphFullJobMiB = int64(100*n), int64(100*n)
	}
	return r
}

func sixteenLayers(t *testing.T) *stepmodel.Workload {
	t.Helper()
	m := presets.Model{Name: "dense", Arch: presets.Arch{Layers: 16, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 2, HeadDim: 128, Vocab: 32000}}
	oneGPU := presets.Layout{NumGPUs: 1, GBS: 4, MBS: 1, Seq: 1024, Precision: "bf16"}
	w, err := stepmodel.BuildWorkload(m, oneGPU, stepmodel.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A stage that does not fit runs as the megatron engine's slice (8
// layers), then halves until it fits; its times are the whole stage's
// (×layers/slice), its speed-up the slice's, and the job's memory the
// whole stage's model; the slice's own graph memory stays what it took.
func TestSliceWhenTooBig(t *testing.T) {
	w := sixteenLayers(t)
	fake := &oomAbove{fit: 4}
	r := SliceWhenTooBig(fake).Run(context.Background(), w, presets.Candidate{Impl: presets.ImplLocal, Warmup: 1}, RunOptions{}, nil)
	if r.Failed() {
		t.Fatalf("failed: %s", r.Err)
	}
	if got := fake.runs; len(got) != 3 || got[0] != 16 || got[1] != 8 || got[2] != 4 {
		t.Errorf("ran %v layers, want the stage's 16, then 8, then 4", got)
	}
	if r.SliceLayers != 4 || math.Abs(r.Step.Median-160) > 1e-9 || math.Abs(r.Eager.Median-400) > 1e-9 || r.Speedup != 2.5 {
		t.Errorf("slice %d, step %.1f, eager %.1f, speed-up %.2f; want 4, 160 (40×4), 400, 2.5", r.SliceLayers, r.Step.Median, r.Eager.Median, r.Speedup)
	}
	if r.Memory.Breakdown.Graphs != 1600 || r.Memory.GraphFullJobMiB != 1600 || r.Memory.GraphMiB != 400 {
		t.Errorf("graphs: job %d (breakdown %d), run %d; want 1600, 1600, 400", r.Memory.GraphFullJobMiB, r.Memory.Breakdown.Graphs, r.Memory.GraphMiB)
	}
	if !strings.Contains(r.Scaling, "built 4 of the stage's 16 layers") || !strings.Contains(r.Scaling, "×4") {
		t.Errorf("scaling %q", r.Scaling)
	}

	// What fits runs once; a slice's other failure is the result; a slice
	// of one layer that does not fit either is the OOM, said.
	for _, c := range []struct {
		fake     *oomAbove
		runs     int
		kind     FailureKind
		noteHas  string
		wantFail bool
	}{
		{&oomAbove{fit: 16}, 1, "", "", false},
		{&oomAbove{fit: 4, fail: "CUDA_ERROR_LAUNCH_FAILED"}, 3, FailureCUDA, "", true},
		{&oomAbove{fit: 0}, 5, FailureOOM, "a slice of one layer does not fit", true},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			r := SliceWhenTooBig(c.fake).Run(context.Background(), w, presets.Candidate{Impl: presets.ImplLocal, Warmup: 1}, RunOptions{}, nil)
			if len(c.fake.runs) != c.runs || r.Failed() != c.wantFail || r.ErrKind != c.kind {
				t.Errorf("fit %d: ran %v, failed %v (%s); want %d runs", c.fake.fit, c.fake.runs, r.Failed(), r.ErrKind, c.runs)
			}
			if c.noteHas != "" && !strings.Contains(strings.Join(r.Notes, "\n"), c.noteHas) {
				t.Errorf("fit %d: notes %q", c.fake.fit, r.Notes)
			}
		})
	}
}

// RunLayers builds the stage's first layers only, and says so.
func TestWorkloadRunLayers(t *testing.T) {
	w := sixteenLayers(t)
	spec := w.Spec
	spec.Options.RunLayers = 3
	s, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Layers) != 3 || s.StageLayers != 16 || w.StageLayers != 16 || s.Layers[2].Index != 2 || s.ParamsLocal >= w.ParamsLocal {
		t.Errorf("slice: %d layers of %d (whole: %d), params %.3g of %.3g", len(s.Layers), s.StageLayers, w.StageLayers, s.ParamsLocal, w.ParamsLocal)
	}
	if !strings.Contains(strings.Join(s.Notes, "\n"), "runs the first 3 of the stage's 16 layers") {
		t.Errorf("notes %q", s.Notes)
	}
	// The slice travels to a worker process as its spec (JSON) and is
	// built again there the same.
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var back stepmodel.WorkloadSpec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	again, err := back.Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Layers) != 3 || again.StageLayers != 16 {
		t.Errorf("the spec sent to a worker builds %d of %d layers", len(again.Layers), again.StageLayers)
	}
	spec.Options.RunLayers = -1
	if _, err := spec.Build(); err == nil || !strings.Contains(err.Error(), "run_layers -1 is out of range") {
		t.Errorf("run_layers -1: %v", err)
	}
}
