package job

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/presets"
)

func parseFile(t *testing.T, name string) Report {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ParseLog(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParseMegatronLMLog(t *testing.T) {
	r := parseFile(t, "mlm_pretrain_gpt_full_iteration.log")
	if len(r.Iterations) != 12 {
		t.Fatalf("%d iterations, want 12", len(r.Iterations))
	}
	if it := r.Iterations[3]; it.Iter != 4 || it.Of != 12 || it.Ms != 41.2 || it.Span != 1 {
		t.Errorf("iteration 4 parsed as %+v", it)
	}
	if r.MaxReservedMiB != 12166 || r.MaxAllocatedMiB != 10622.05 || r.MemoryFormat != "megatron-lm" {
		t.Errorf("memory: reserved %v allocated %v format %q", r.MaxReservedMiB, r.MaxAllocatedMiB, r.MemoryFormat)
	}
	if r.ErrKind != "" || r.Err != "" {
		t.Errorf("no error expected, got %s: %s", r.ErrKind, r.Err)
	}
	want := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 2}
	if r.Candidate == nil || r.Candidate.Key() != want.Key() {
		t.Errorf("candidate %v, want %s", r.Candidate, want.Key())
	}
	// Warm-up 2: iterations 1-2 eager, 3 captures, 4.. measured.
	res := buildResult(*r.Candidate, r, Status{State: StateCompleted, Done: true}, false, engine.JobInfo{Launcher: "local", ID: "local:1"})
	if res.Failed() {
		t.Fatalf("failed: %s", res.Err)
	}
	if res.Step.N != 9 || res.Step.Median != 41.1 {
		t.Errorf("step %+v, want 9 iterations, median 41.1", res.Step)
	}
	if math.Abs(res.CaptureMs-(1480.9-41.1)) > 1e-9 {
		t.Errorf("capture %v ms", res.CaptureMs)
	}
	if res.Memory.ProcessPeakMiB != 12166 || res.Source != engine.SourceJob || res.Job == nil || res.Job.ID != "local:1" {
		t.Errorf("result: peak %d source %s job %+v", res.Memory.ProcessPeakMiB, res.Source, res.Job)
	}
}

func TestParseMegatronBridgeLog(t *testing.T) {
	r := parseFile(t, "mb_run_recipe_te.log")
	if len(r.Iterations) != 6 || r.Iterations[1].Iter != 4 || r.Iterations[1].Span != 2 || r.Iterations[0].Span != 2 {
		t.Fatalf("iterations %+v", r.Iterations)
	}
	// 61.111 GB of 1e9 bytes.
	if got, want := r.MaxReservedMiB, 61.111e9/(1<<20); math.Abs(got-want) > 1e-6 || r.MemoryFormat != "megatron-bridge" {
		t.Errorf("reserved %v MiB, want %v (%s)", got, want, r.MemoryFormat)
	}
	want := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn", "moe_router"}, Warmup: 3}
	if r.Candidate == nil || r.Candidate.Key() != want.Key() {
		t.Errorf("candidate %v, want %s", r.Candidate, want.Key())
	}
	res := buildResult(want, r, Status{State: StateCompleted, Done: true}, false, engine.JobInfo{})
	// Lines at 6..12 cover iterations 5..12, all past the capture at 4.
	if res.Step.N != 4 || res.Step.Median != (702.4+701.9)/2 {
		t.Errorf("step %+v", res.Step)
	}
	if !strings.Contains(strings.Join(res.Notes, " "), "log_interval > 1") {
		t.Errorf("notes %q should say the lines average several iterations", res.Notes)
	}
}

func TestParseFailures(t *testing.T) {
	for _, tc := range []struct {
		file string
		kind engine.FailureKind
		text string
	}{
		{"mlm_oom.log", engine.FailureOOM, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB"},
		{"mlm_capture_error.log", engine.FailureCapture, "RuntimeError: CUDA error: operation not permitted when stream is capturing"},
		{"mlm_nan.log", engine.FailureNaN, "Unexpected result nan"},
		{"mlm_import_error.log", "", "ModuleNotFoundError: No module named 'transformer_engine'"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r := parseFile(t, tc.file)
			if r.ErrKind != tc.kind || !strings.HasPrefix(r.Err, strings.SplitN(tc.text, "Unexpected", 2)[0]) || !strings.Contains(r.Err, tc.text) {
				t.Errorf("%s: got %q %q, want %q containing %q", tc.file, r.ErrKind, r.Err, tc.kind, tc.text)
			}
			res := buildResult(presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}, Warmup: 1}, r,
				Status{State: StateFailed, ExitCode: 1, Done: true}, false, engine.JobInfo{})
			wantKind := tc.kind
			if wantKind == "" {
				wantKind = engine.FailureCrash
			}
			if res.ErrKind != wantKind || !strings.Contains(res.Err, tc.text) {
				t.Errorf("%s: result %s: %s", tc.file, res.ErrKind, res.Err)
			}
		})
	}
}

func TestParseLinePrefixesAndRestarts(t *testing.T) {
	var p Parser
	lines := []string{
		"0: [Rank 0] (after 2 iterations) memory (MB) | allocated: 1.00 | max allocated: 2.00 | reserved: 3.00 | max reserved: 500.00",
		"1: [Rank 1] (after 2 iterations) memory (MB) | allocated: 1.00 | max allocated: 2.00 | reserved: 3.00 | max reserved: 700.00",
		"[default0]: [2026-01-01 00:00:00.000000] iteration        5/      10 | elapsed time per iteration (ms): 12.5 |",
		"[default0]: [2026-01-01 00:00:00.000000] iteration        3/      10 | elapsed time per iteration (ms): 1.5e+01 |",
		"[default0]:[rank0]: torch.OutOfMemoryError: CUDA out of memory.",
	}
	for _, l := range lines {
		p.Line(l)
	}
	r := p.Report()
	if r.MaxReservedMiB != 700 {
		t.Errorf("max reserved %v, want the larger rank's 700", r.MaxReservedMiB)
	}
	if len(r.Iterations) != 2 || r.Iterations[0].Span != 5 || r.Iterations[1].Span != 1 || r.Iterations[1].Ms != 15 {
		t.Errorf("iterations %+v", r.Iterations)
	}
	if r.ErrKind != engine.FailureOOM || r.Err != "torch.OutOfMemoryError: CUDA out of memory." {
		t.Errorf("error %q %q (prefixes should be stripped)", r.ErrKind, r.Err)
	}
}

func TestNoStepsIsAFailure(t *testing.T) {
	var p Parser
	p.Line(" [2026-01-01 00:00:00.000000] iteration        1/      30 | elapsed time per iteration (ms): 99.0 |")
	p.Line(" [2026-01-01 00:00:00.000000] iteration        2/      30 | elapsed time per iteration (ms): 50.0 |")
	res := buildResult(presets.Candidate{Impl: presets.ImplNone}, p.Report(), Status{State: StateCompleted, Done: true}, false, engine.JobInfo{})
	if res.ErrKind != engine.FailureNoSteps || !strings.Contains(res.Err, "from iteration 3") {
		t.Errorf("got %s: %s", res.ErrKind, res.Err)
	}
}

func TestPhases(t *testing.T) {
	c := presets.Candidate{Impl: presets.ImplTE, Warmup: 3}
	want := map[int]engine.Phase{1: engine.PhaseWarmup, 3: engine.PhaseWarmup, 4: engine.PhaseCapture, 5: engine.PhaseMeasure, 9: engine.PhaseMeasure}
	for it, ph := range want {
		t.Run(fmt.Sprint("iteration ", it), func(t *testing.T) {
			if got := Phase(c, Iteration{Iter: it, Span: 1}); got != ph {
				t.Errorf("iteration %d: %s, want %s", it, got, ph)
			}
		})
	}
	if got := Phase(presets.Candidate{Impl: presets.ImplNone}, Iteration{Iter: 3, Span: 1}); got != engine.PhaseMeasure {
		t.Errorf("eager iteration 3: %s", got)
	}
	// A line averaging iterations 2-3 includes a warm-up iteration.
	if got := Phase(presets.Candidate{Impl: presets.ImplNone}, Iteration{Iter: 3, Span: 2}); got != engine.PhaseWarmup {
		t.Errorf("eager line covering iterations 2-3: %s, want warmup", got)
	}
}

func TestParseCandidateKey(t *testing.T) {
	for _, c := range []presets.Candidate{
		{Impl: presets.ImplNone, Scopes: []string{}, Warmup: 3},
		{Impl: presets.ImplLocal, Scopes: []string{}, Warmup: 2},
		{Impl: presets.ImplLocal, Scopes: []string{"full_iteration"}, Warmup: 1},
		{Impl: presets.ImplTE, Scopes: []string{"attn", "moe_router"}, Warmup: 0},
	} {
		t.Run(c.Key(), func(t *testing.T) {
			got, err := ParseCandidateKey(c.Key())
			if err != nil || got.Key() != c.Key() {
				t.Errorf("%s: got %v, %v", c.Key(), got, err)
			}
		})
	}
	for _, bad := range []string{"", "local", "local/attn", "local/attn/3", "bogus/attn/w3", "local/bogus/w3", "local/attn/w-1"} {
		t.Run(bad, func(t *testing.T) {
			if _, err := ParseCandidateKey(bad); err == nil {
				t.Errorf("%q: no error", bad)
			}
		})
	}
}
