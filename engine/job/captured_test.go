package job

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"

	"cgtune/presets"
)

// readLog parses a log of testdata; without the lines cgtune itself wrote
// at its top ([cgtune] ...) when noHeader, so that the candidate comes from
// what the framework printed.
func readLog(t *testing.T, name string, noHeader bool) Report {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if noHeader {
		var kept [][]byte
		for _, l := range bytes.SplitAfter(data, []byte("\n")) {
			if !bytes.HasPrefix(l, []byte("[cgtune] ")) {
				kept = append(kept, l)
			}
		}
		data = bytes.Join(kept, nil)
	}
	r, err := ParseLog(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Logs captured from Megatron-LM pretrain_gpt.py jobs that cgtune validate
// ran (testdata/README.md). The wants are read off the logs: what
// iterations 1 and 2 print, the largest "max reserved" and "max
// allocated" of the memory reports, and the median of the 28 iteration
// lines from iteration 3 on (sorted by hand).
func TestParseCapturedMegatronLMLogs(t *testing.T) {
	full := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 1}
	for _, tc := range []struct {
		file                string
		cand                presets.Candidate
		it1, it2            float64
		reserved, allocated float64
		median              float64
	}{
		{"captured/cgtune-none.log", presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}, Warmup: 3}, 878.1, 551.1, 13424, 13057.10, 199.15},
		{"captured/cgtune-local-layer-w1.log", presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{}, Warmup: 1}, 909.0, 507.8, 14952, 13257.61, 88.1},
		{"captured/cgtune-local-full_iteration-w1.log", full, 876.3, 599.9, 14786, 13121.22, 86.4},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r := readLog(t, tc.file, true)
			if len(r.Iterations) != 30 {
				t.Fatalf("%d iterations, want 30", len(r.Iterations))
			}
			for i, it := range r.Iterations {
				if it.Iter != i+1 || it.Of != 30 || it.Span != 1 {
					t.Fatalf("line %d read as %+v, want iteration %d of 30 covering 1", i, it, i+1)
				}
			}
			if r.Iterations[0].Ms != tc.it1 || r.Iterations[1].Ms != tc.it2 {
				t.Errorf("iterations 1, 2: %v, %v ms; want %v, %v", r.Iterations[0].Ms, r.Iterations[1].Ms, tc.it1, tc.it2)
			}
			if r.MemoryFormat != "megatron-lm" || r.MaxReservedMiB != tc.reserved || r.MaxAllocatedMiB != tc.allocated {
				t.Errorf("memory (%s): reserved %v allocated %v MiB; want %v, %v", r.MemoryFormat, r.MaxReservedMiB, r.MaxAllocatedMiB, tc.reserved, tc.allocated)
			}
			// The logs' warnings (CUDA graph capture may fail ..., NCCL's
			// destroy_process_group) are not failures.
			if r.ErrKind != "" || r.Err != "" || r.NaNIterations != 0 {
				t.Errorf("a job that completed: %q %q, %d NaN iterations", r.ErrKind, r.Err, r.NaNIterations)
			}
			// The candidate from Megatron-LM's argument list alone, and from
			// cgtune's header where the log has it.
			if r.Candidate == nil || r.Candidate.Key() != tc.cand.Key() {
				t.Errorf("candidate from the argument list %v, want %s", r.Candidate, tc.cand.Key())
			}
			if h := readLog(t, tc.file, false).Candidate; h == nil || h.Key() != tc.cand.Key() {
				t.Errorf("candidate with the header %v, want %s", h, tc.cand.Key())
			}
			res := FromLog(tc.cand, r, tc.file)
			if res.Failed() || res.Step.N != 28 || math.Abs(res.Step.Median-tc.median) > 1e-9 {
				t.Errorf("step %+v (%s), want 28 iterations, median %v", res.Step, res.Err, tc.median)
			}
			if res.Memory.ProcessPeakMiB != int64(tc.reserved) {
				t.Errorf("peak %d MiB, want %v", res.Memory.ProcessPeakMiB, tc.reserved)
			}
		})
	}
	// A full-iteration graph is captured in iteration warmup+1 = 2: its
	// excess over the steady step is the capture's.
	r := readLog(t, "captured/cgtune-local-full_iteration-w1.log", false)
	if res := FromLog(full, r, "full"); math.Abs(res.CaptureMs-(599.9-86.4)) > 1e-9 {
		t.Errorf("capture %v ms, want iteration 2's 599.9 less the median 86.4", res.CaptureMs)
	}
}

// Megatron-Bridge's iteration, memory and configuration lines, generated
// from the format strings of MB's training_log, report_memory and
// log_non_default_values (testdata/README.md) for a perf-recipe job:
// log_interval 1, 50 iterations, Transformer Engine graphs of the MoE
// router and preprocess with the default warm-up. The wants are read off
// the file: what iterations 1 and 4 print, the largest
// mem-max-reserved/-allocated-gigabytes, the median of the 46 lines from
// iteration 5 on (sorted by hand: the middle two are 29686.9 and 29687.0).
func TestParseMegatronBridgeFormatLog(t *testing.T) {
	const file = "mb_perf_qwen3_30b_a3b_h100.log"
	r := readLog(t, file, false)
	if len(r.Iterations) != 50 {
		t.Fatalf("%d iterations, want 50", len(r.Iterations))
	}
	for i, it := range r.Iterations {
		if it.Iter != i+1 || it.Of != 50 || it.Span != 1 {
			t.Fatalf("line %d read as %+v", i, it)
		}
	}
	if r.Iterations[0].Ms != 48213.7 || r.Iterations[3].Ms != 36608.4 {
		t.Errorf("iterations 1, 4: %v, %v ms; want 48213.7, 36608.4", r.Iterations[0].Ms, r.Iterations[3].Ms)
	}
	const gb = 1e9 / (1 << 20)
	if r.MemoryFormat != "megatron-bridge" || math.Abs(r.MaxReservedMiB-72.418*gb) > 1e-6 || math.Abs(r.MaxAllocatedMiB-63.583*gb) > 1e-6 {
		t.Errorf("memory (%s): reserved %v allocated %v MiB; want 72.418 and 63.583 GB", r.MemoryFormat, r.MaxReservedMiB, r.MaxAllocatedMiB)
	}
	if r.ErrKind != "" || r.Err != "" {
		t.Errorf("a job that completed: %q %q", r.ErrKind, r.Err)
	}
	// cuda_graph_warmup_steps is MCore's default, so MB does not list it.
	want := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"moe_router", "moe_preprocess"}, Warmup: presets.DefaultWarmup}
	if r.Candidate == nil || r.Candidate.Key() != want.Key() {
		t.Fatalf("candidate %v, want %s", r.Candidate, want.Key())
	}
	res := FromLog(*r.Candidate, r, file)
	if res.Failed() || res.Step.N != 46 || math.Abs(res.Step.Median-(29686.9+29687.0)/2) > 1e-9 {
		t.Errorf("step %+v (%s), want 46 iterations, median 29686.95", res.Step, res.Err)
	}
	if math.Abs(res.CaptureMs-(36608.4-29686.95)) > 1e-6 {
		t.Errorf("capture %v ms, want iteration 4's 36608.4 less the median 29686.95", res.CaptureMs)
	}
	if strings.Contains(strings.Join(res.Notes, " "), "log_interval > 1") {
		t.Errorf("notes %q: every line is one iteration", res.Notes)
	}
}
