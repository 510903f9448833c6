package megatron

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/engine/worker"
	"cgtune/presets"
	"cgtune/stepmodel"
)

func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH")
	}
	return p
}

// fakeEngine runs testdata/fake_worker.py as the framework worker.
func fakeEngine(t *testing.T, mode string, fallback engine.Engine, deadline time.Duration) *Engine {
	t.Helper()
	script, _ := filepath.Abs("testdata/fake_worker.py")
	cmd := worker.Command{Path: python(t), Args: []string{"-B", script}, Env: []string{"FAKE_MODE=" + mode}}
	rates, _ := stepmodel.SpecFor("h100")
	e, err := newWithCommand(context.Background(), Options{Rates: rates, Fallback: fallback, StartTimeout: 20 * time.Second,
		Deadline: func(*stepmodel.Workload, presets.Candidate) time.Duration { return deadline }}, cmd)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func workload(t *testing.T, tp int) *stepmodel.Workload {
	t.Helper()
	m, err := presets.LookupModel("llama3_8b")
	if err != nil {
		t.Fatal(err)
	}
	l := presets.Layout{GPU: "h100", NumGPUs: 8 * tp, TP: tp, PP: 1, CP: 1, EP: 1, GBS: 16, MBS: 1, Seq: 1024, Precision: "bf16"}
	w, err := stepmodel.BuildWorkload(m, l, stepmodel.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestFrameworkResultGetsModelledCollectives(t *testing.T) {
	e := fakeEngine(t, "ok", nil, time.Minute)
	if fw := e.Framework(); fw == nil || fw.MCore != "0.20.0" {
		t.Fatalf("hello framework = %+v", fw)
	}
	if n := e.Notes(); len(n) != 1 || n[0] != "fake worker" {
		t.Fatalf("notes = %v", n)
	}
	w := workload(t, 2)
	var samples int
	r := e.Run(context.Background(), w, presets.Candidate{Impl: "local", Scopes: []string{}, Warmup: 1}, engine.RunOptions{}, func(engine.StepSample) { samples++ })
	if r.Failed() || samples != 1 {
		t.Fatalf("result %+v, samples %d", r, samples)
	}
	if r.Source != engine.SourceFramework {
		t.Errorf("source = %q, want framework", r.Source)
	}
	rates, _ := stepmodel.SpecFor("h100")
	want := CollectiveMs(w, rates, nil)
	if want <= 0 || r.CollectivesMs != want {
		t.Fatalf("collectives %.3f ms, want %.3f (> 0) for a TP 2 layout run at world size 1", r.CollectivesMs, want)
	}
	if r.Step.Median != 50+want || r.Eager.Median != 100+want {
		t.Errorf("step %.3f eager %.3f: the modelled time must be added to both", r.Step.Median, r.Eager.Median)
	}
	if got := (100 + want) / (50 + want); r.Speedup != got {
		t.Errorf("speed-up %.4f, want %.4f", r.Speedup, got)
	}
	if !strings.Contains(strings.Join(r.Notes, " "), "collectives: modelled") {
		t.Errorf("notes %v do not label the modelled collectives", r.Notes)
	}
	// What fits is judged from the job's rank (the memory model), not
	// from the slice's peak.
	b := r.Memory.Breakdown
	if b == nil || b.GPUMiB <= 0 || b.Weights <= 0 || !strings.Contains(strings.Join(r.Notes, " "), "job memory per rank") {
		t.Fatalf("breakdown %+v, notes %v", b, r.Notes)
	}
	// The graph memory the worker measured comes through as it sent it.
	// This run is a slice of a 16-GPU job: the breakdown keeps the memory
	// model's graphs, and the note gives the slice's measurement beside them.
	if r.Memory.GraphMiB != 640 || r.Memory.GraphFullJobMiB != 2560 {
		t.Errorf("graph memory %d MiB (stage %d), want the worker's 640 (2560)", r.Memory.GraphMiB, r.Memory.GraphFullJobMiB)
	}
	c := presets.Candidate{Impl: "local", Scopes: []string{}, Warmup: 1}
	modelled := stepmodel.PredictMemory(w, stepmodel.PlanCapture(w, c, w.Spec.Options.Generation), nil,
		stepmodel.JobGPUMiB(w.Layout, e.Device().MemoryMiB), stepmodel.MemoryOptions{}).Graphs
	if b.Graphs != modelled {
		t.Errorf("breakdown graphs %d MiB, want the memory model's %d for a slice", b.Graphs, modelled)
	}
	if !strings.Contains(strings.Join(r.Notes, " "), "graphs modelled: the slice measured 640 MiB over eager (2560 MiB scaled to the stage)") {
		t.Errorf("notes %q do not give the slice's graph memory", r.Notes)
	}
}

// A run that is the whole job (one GPU, every layer and micro-batch) puts
// the graph memory the worker measured into the breakdown.
func TestWholeJobRunGivesTheMeasuredGraphMemory(t *testing.T) {
	m, err := presets.LookupModel("llama3_8b")
	if err != nil {
		t.Fatal(err)
	}
	l := presets.Layout{GPU: "h100", NumGPUs: 1, TP: 1, PP: 1, CP: 1, EP: 1, GBS: 2, MBS: 1, Seq: 1024, Precision: "bf16"}
	w, err := stepmodel.BuildWorkload(m, l, stepmodel.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_MODELLED", "")
	t.Setenv("FAKE_GRAPH_MIB", "900,900")
	t.Setenv("FAKE_RAN", fmt.Sprintf("%d,%d", w.StageLayers, w.MicroBatches))
	e := fakeEngine(t, "ok", nil, time.Minute)
	r := e.Run(context.Background(), w, presets.Candidate{Impl: "local", Scopes: []string{}, Warmup: 1}, engine.RunOptions{}, nil)
	if r.Failed() || r.Memory.Breakdown == nil {
		t.Fatalf("result %+v", r)
	}
	if g := r.Memory.Breakdown.Graphs; g != 900 {
		t.Errorf("breakdown graphs %d MiB, want the 900 measured on the whole job", g)
	}
	if !strings.Contains(strings.Join(r.Notes, " "), "graphs as measured on the framework") {
		t.Errorf("notes %q do not say the graphs were measured", r.Notes)
	}
}

func TestCollectivesOfExecutedDegreesAreNotAdded(t *testing.T) {
	w := workload(t, 2)
	rates, _ := stepmodel.SpecFor("h100")
	all := CollectiveMs(w, rates, nil)
	noTP := CollectiveMs(w, rates, modelledFamilies(&engine.FrameworkInfo{WorldSize: 2, Modelled: []string{"DP 2"}}))
	if !(noTP < all) {
		t.Fatalf("TP run for real: %.3f ms, want less than all collectives %.3f ms", noTP, all)
	}
	// Nothing modelled (a one-GPU job run whole): nothing added, not even
	// the zero-byte collectives the model keeps for degrees of 1.
	if got := CollectiveMs(w, rates, modelledFamilies(&engine.FrameworkInfo{WorldSize: 1})); got != 0 {
		t.Fatalf("nothing modelled: %.3f ms of collectives, want 0", got)
	}
	if got := CollectiveMs(workload(t, 1), rates, nil); got >= all {
		t.Fatalf("TP 1 collectives %.3f ms, want fewer than TP 2's %.3f", got, all)
	}
}

// The collectives added to a result (modelledFamilies) and those the
// exposure fit takes as run (executed) are read from one Modelled list
// one way: of a layout's TP and EP, each is either run or modelled.
func TestExecutedIsWhatIsNotModelled(t *testing.T) {
	l := presets.Layout{TP: 4, EP: 4}
	for _, modelled := range [][]string{nil, {"TP 4"}, {"TP 4 (2 run)", "DP 2"}, {"EP 4 (2 run)"}, {"TP 4", "EP 4", "PP 2"}, {"ETP 2"}} {
		f := &engine.FrameworkInfo{Modelled: modelled}
		ran, mod := executed(f, l), modelledFamilies(f)
		for _, fam := range []string{"sp_", "ep_"} {
			if ran[fam] == mod[fam] {
				t.Errorf("modelled %q: %s run %v, modelled %v; want exactly one", modelled, fam, ran[fam], mod[fam])
			}
		}
	}
	if ran := executed(&engine.FrameworkInfo{}, presets.Layout{TP: 1, EP: 1}); len(ran) != 0 {
		t.Errorf("TP 1 EP 1: %v run, want none (no such collectives)", ran)
	}
}

type stubEngine struct{ runs int }

func (s *stubEngine) Name() string              { return "cuda" }
func (s *stubEngine) Device() engine.DeviceInfo { return engine.DeviceInfo{Name: "stub"} }
func (s *stubEngine) Close() error              { return nil }
func (s *stubEngine) Run(_ context.Context, _ *stepmodel.Workload, c presets.Candidate, _ engine.RunOptions, _ func(engine.StepSample)) engine.Result {
	s.runs++
	return engine.Result{Candidate: c, Source: engine.SourceMeasured, Step: stepmodel.Stats{Median: 70, N: 1}}
}

func TestUnsupportedCandidateGoesToTheFallbackLabelled(t *testing.T) {
	fb := &stubEngine{}
	e := fakeEngine(t, "ok", fb, time.Minute)
	r := e.Run(context.Background(), workload(t, 1), presets.Candidate{Impl: "transformer_engine", Scopes: []string{"attn"}, Warmup: 1}, engine.RunOptions{}, nil)
	if fb.runs != 1 || r.Source != engine.SourceMeasured || r.Failed() {
		t.Fatalf("fallback runs %d, result %+v", fb.runs, r)
	}
	if !strings.Contains(r.Notes[0], "not measured on the framework") || !strings.Contains(r.Notes[0], "cuda engine instead") {
		t.Fatalf("first note %q does not say where it was measured", r.Notes[0])
	}
	// The search asks before it orders the candidates: without TE, the
	// transformer_engine ones are handed on, the local ones are not.
	if !e.Delegates(presets.Candidate{Impl: "transformer_engine"}) || e.Delegates(presets.Candidate{Impl: "local"}) {
		t.Errorf("Delegates: te %v, local %v", e.Delegates(presets.Candidate{Impl: "transformer_engine"}), e.Delegates(presets.Candidate{Impl: "local"}))
	}
	if noFallback := fakeEngine(t, "ok", nil, time.Minute); noFallback.Delegates(presets.Candidate{Impl: "transformer_engine"}) {
		t.Error("an engine without a fallback hands nothing on")
	}
}

func TestWorkerCrashIsAFailedCandidateAndTheWorkerIsReplaced(t *testing.T) {
	e := fakeEngine(t, "crash", nil, time.Minute)
	w := workload(t, 1)
	r := e.Run(context.Background(), w, presets.Candidate{Impl: "local", Warmup: 1}, engine.RunOptions{}, nil)
	if r.ErrKind != engine.FailureCrash || r.Source != engine.SourceFramework {
		t.Fatalf("crash: %+v", r)
	}
	r = e.Run(context.Background(), w, presets.Candidate{Impl: "none"}, engine.RunOptions{}, nil)
	if r.Failed() || e.Restarts() != 1 {
		t.Fatalf("after the crash: %+v, restarts %d", r, e.Restarts())
	}
}

func TestHungWorkerIsKilledAtItsDeadline(t *testing.T) {
	e := fakeEngine(t, "hang", nil, 700*time.Millisecond)
	start := time.Now()
	r := e.Run(context.Background(), workload(t, 1), presets.Candidate{Impl: "local", Warmup: 1}, engine.RunOptions{}, nil)
	if r.ErrKind != engine.FailureTimeout || time.Since(start) > 10*time.Second {
		t.Fatalf("hang: %+v after %s", r, time.Since(start))
	}
}

func TestVersionMismatchAndMissingFrameworkFailTheStart(t *testing.T) {
	script, _ := filepath.Abs("testdata/fake_worker.py")
	for mode, want := range map[string]string{"version": "version 2", "noimport": "No module named 'megatron'"} {
		t.Run(mode, func(t *testing.T) {
			cmd := worker.Command{Path: python(t), Args: []string{"-B", script}, Env: []string{"FAKE_MODE=" + mode}}
			_, err := newWithCommand(context.Background(), Options{StartTimeout: 20 * time.Second}, cmd)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: err = %v, want it to name %q", mode, err, want)
			}
		})
	}
}

func TestInstallIsPrivateAndReplacesTamperedCopies(t *testing.T) {
	root := filepath.Join(t.TempDir(), "workers")
	entry, err := Install(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(entry)
	for _, p := range []string{root, dir} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: mode %v, err %v; want 0700", p, fi.Mode().Perm(), err)
		}
	}
	hash, _ := ContentHash()
	if filepath.Base(dir) != hash {
		t.Fatalf("installed under %s, want the content hash %s", dir, hash)
	}
	if err := os.WriteFile(entry, []byte("import os; os.system('evil')\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir); err == nil {
		t.Fatal("Verify accepted a changed worker")
	}
	if _, err := Install(root); err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir); err != nil {
		t.Fatalf("after reinstall: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "extra.py"), []byte("x=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir); err == nil || !strings.Contains(err.Error(), "unexpected file") {
		t.Fatalf("Verify with an extra file: %v", err)
	}
	os.Remove(filepath.Join(dir, "extra.py"))
	// A folder others could write to is closed before its files are
	// checked, so nothing can be swapped in between.
	os.Chmod(dir, 0o777)
	if err := Verify(dir); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("Verify left %s at mode %o", dir, fi.Mode().Perm())
	}
	os.Chmod(entry, 0o666)
	if err := Verify(dir); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("Verify of a world-writable file: %v", err)
	}
}

func TestInstallRefusesASymlinkedCacheFolder(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "elsewhere")
	os.Mkdir(target, 0o700)
	link := filepath.Join(base, "workers")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("Install through a symlink: %v", err)
	}
}

func TestFindPythonOrder(t *testing.T) {
	py := python(t)
	t.Setenv(PythonEnv, "")
	if got, err := FindPython(py); err != nil || got != py {
		t.Fatalf("flag: %q %v", got, err)
	}
	t.Setenv(PythonEnv, py)
	if got, err := FindPython(""); err != nil || got != py {
		t.Fatalf("env: %q %v", got, err)
	}
	if _, err := FindPython(filepath.Join(t.TempDir(), "no-python")); err == nil {
		t.Fatal("a missing --python was accepted")
	}
}

func TestUsableNamesWhatIsMissing(t *testing.T) {
	ok, why := Framework{Python: "py", Torch: "2.11", CUDA: true}.Usable()
	if ok || !strings.Contains(why, "megatron.core") {
		t.Fatalf("without mcore: %v %q", ok, why)
	}
	ok, why = Framework{Python: "py", Torch: "2.11", MCore: "0.20"}.Usable()
	if ok || !strings.Contains(why, "CUDA device") {
		t.Fatalf("without CUDA: %v %q", ok, why)
	}
	if ok, _ := (Framework{Torch: "2.11", CUDA: true, MCore: "0.20"}).Usable(); !ok {
		t.Fatal("a complete framework is not usable")
	}
}

// The breakdown takes the graph memory the framework measured only from a
// run that is the whole job (every rank, layer and micro-batch); a slice's
// measurement is reported beside the model's figure.
func TestMeasuredGraphMemoryOnlyFromTheWholeJob(t *testing.T) {
	m, err := presets.LookupModel("llama3_8b")
	if err != nil {
		t.Fatal(err)
	}
	l := presets.Layout{GPU: "h100", NumGPUs: 1, TP: 1, PP: 1, CP: 1, EP: 1, GBS: 2, MBS: 1, Seq: 1024, Precision: "bf16"}
	w, err := stepmodel.BuildWorkload(m, l, stepmodel.WorkloadOptions{RunMicroBatches: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{}, Warmup: 1}
	modelled := stepmodel.PredictMemory(w, stepmodel.PlanCapture(w, c, presets.G2), nil, stepmodel.JobGPUMiB(l, 0), stepmodel.MemoryOptions{}).Graphs
	e := fakeEngine(t, "ok", nil, time.Minute)
	for _, tc := range []struct {
		name         string
		layers, mbs  int
		wantMeasured bool
	}{
		{"whole job", w.StageLayers, w.MicroBatches, true},
		{"a slice of the layers", 8, w.MicroBatches, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := engine.Result{Candidate: c, Raw: &engine.RawTimes{LayersBuilt: tc.layers, MicroBatchesRun: tc.mbs}}
			r.Memory.GraphMiB, r.Memory.GraphFullJobMiB = 777, 777*int64(w.StageLayers)/int64(tc.layers)
			e.addJobMemory(&r, w, c)
			got := r.Memory.Breakdown.Graphs
			if measured := got == r.Memory.GraphFullJobMiB; measured != tc.wantMeasured || (!tc.wantMeasured && got != modelled) {
				t.Errorf("graphs %d MiB (measured %d, modelled %d); want measured %v", got, r.Memory.GraphFullJobMiB, modelled, tc.wantMeasured)
			}
		})
	}
}

// The memory outside the allocator the worker measured on this node (NVML
// used less torch reserved, in the warm process) replaces the figure per
// GPU type, labelled as measured here; it is assumed for another job GPU.
func TestMeasuredOutsideAllocatorReachesTheBreakdown(t *testing.T) {
	m, err := presets.LookupModel("llama3_8b")
	if err != nil {
		t.Fatal(err)
	}
	c := presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}}
	e := fakeEngine(t, "ok", nil, time.Minute)
	for _, gpu := range []string{"h200", "b200"} {
		l := presets.Layout{GPU: gpu, NumGPUs: 8, TP: 1, PP: 1, CP: 1, EP: 1, GBS: 8, MBS: 1, Seq: 1024, Precision: "bf16"}
		w, err := stepmodel.BuildWorkload(m, l, stepmodel.WorkloadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		table := stepmodel.PredictMemory(w, stepmodel.PlanCapture(w, c, presets.G2), nil, stepmodel.JobGPUMiB(l, 0), stepmodel.MemoryOptions{})
		r := engine.Result{Candidate: c, Raw: &engine.RawTimes{LayersBuilt: 1, MicroBatchesRun: 1}}
		r.Memory.OutsideAllocatorMiB = 7000
		e.addJobMemory(&r, w, c)
		b := r.Memory.Breakdown
		assumed := strings.Contains(b.ContextSource, "assumed for B200")
		if b.Context != 7000 || b.Total != table.Total-table.Context+7000 || !strings.Contains(b.ContextSource, "measured in the warm worker on this node") ||
			assumed != (gpu == "b200") {
			t.Errorf("%s: outside the allocator %d MiB (%s), total %d; the table's %d", gpu, b.Context, b.ContextSource, b.Total, table.Total)
		}
	}
}

// The worker runs Megatron-Core's plain schedule: a recipe with EP
// communication overlap gets the all-to-all time the combined 1F1B
// schedule hides taken off its step and eager figures, labelled; one
// without it keeps its figures.
func TestEPOverlapIsModelledOnFrameworkResults(t *testing.T) {
	m, err := presets.LookupModel("qwen3_30b_a3b")
	if err != nil {
		t.Fatal(err)
	}
	l := presets.Layout{GPU: "h100", NumGPUs: 2, TP: 1, PP: 1, CP: 1, EP: 2, GBS: 4, MBS: 1, Seq: 1024, Precision: "bf16"}
	rates, _ := stepmodel.SpecFor("h100")
	for _, overlap := range []bool{false, true} {
		w, err := stepmodel.BuildWorkload(m, l, stepmodel.WorkloadOptions{EPOverlap: overlap})
		if err != nil {
			t.Fatal(err)
		}
		hidden := stepmodel.EPOverlapHiddenMs(w, rates)
		if overlap != (hidden > 0) {
			t.Fatalf("EP overlap %v: %.3f ms hidden", overlap, hidden)
		}
		r := engine.Result{Step: stepmodel.Stats{N: 5, Median: 500, P10: 490, P90: 510}, Eager: stepmodel.Stats{N: 5, Median: 800, P10: 790, P90: 810}}
		hideEPOverlap(&r, w, rates)
		if r.Step.Median != 500-hidden || r.Eager.Median != 800-hidden {
			t.Errorf("EP overlap %v: step %.3f eager %.3f, want 500 and 800 less the %.3f ms hidden", overlap, r.Step.Median, r.Eager.Median, hidden)
		}
		labelled := strings.Contains(strings.Join(r.Notes, " "), "EP communication overlap: modelled")
		if labelled != overlap {
			t.Errorf("EP overlap %v: notes %q", overlap, r.Notes)
		}
		if overlap && r.Speedup != r.Eager.Median/r.Step.Median {
			t.Errorf("speed-up %.4f not recomputed", r.Speedup)
		}
	}
}
