//go:build gpu

// GPU tests: they need an NVIDIA GPU and driver, so they sit behind the
// gpu build tag (go test -tags gpu ./engine/cuda). CGTUNE_PTX may name a
// freshly built kernels.ptx.
package cuda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/engine/cuda"
	"cgtune/engine/estimate"
	"cgtune/internal/testmodel"
	"cgtune/presets"
	"cgtune/probes"
	"cgtune/stepmodel"
)

func open(t *testing.T) *cuda.Engine {
	t.Helper()
	spec, _ := stepmodel.SpecFor("h200")
	e, err := cuda.New(cuda.Options{Ordinal: 0, Rates: spec, Host: stepmodel.DefaultHostCosts()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestDriverErrorIsNamed(t *testing.T) {
	d, err := cuda.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	unbind, err := d.Bind()
	if err != nil {
		t.Fatal(err)
	}
	defer unbind()
	_, err = cuda.Alloc(1 << 50)
	if !cuda.IsOOM(err) || err.Error() != "CUDA_ERROR_OUT_OF_MEMORY (2) in cuMemAlloc" {
		t.Fatalf("1 PiB alloc: %v", err)
	}
}

func TestSpinKernelHitsItsTarget(t *testing.T) {
	e := open(t)
	for _, us := range []float64{50, 500, 5000} {
		t.Run(fmt.Sprintf("%gus", us), func(t *testing.T) {
			op := stepmodel.Op{Name: "gemm", Kind: stepmodel.KindGEMM, FLOPs: us * 790e6}
			r, _ := stepmodel.SpecFor("h200")
			r.KernelUs = 0
			e.SetRates(r)
			got, err := e.TimeOpUs(op)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("spin target %.0f us: measured %.1f us", us, got)
			if math.Abs(got-us)/us > 0.05 && math.Abs(got-us) > 3 {
				t.Errorf("spin kernel for %.0f us took %.1f us", us, got)
			}
		})
	}
}

func workload(t *testing.T, model, gpu string, opt stepmodel.WorkloadOptions) *stepmodel.Workload {
	t.Helper()
	m, l := testmodel.Builtin(t, model, gpu)
	w, err := stepmodel.BuildWorkload(m, l, opt)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// tiny is a small dense model for the many-candidate tests.
func tiny(t *testing.T, seq int) *stepmodel.Workload {
	m := presets.Model{Name: "tiny", Arch: presets.Arch{Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 8, HeadDim: 128, Vocab: 32000}}
	l := presets.Layout{NumGPUs: 1, TP: 1, PP: 1, CP: 1, EP: 1, GBS: 2, MBS: 1, Seq: seq, Precision: "bf16"}
	w, err := stepmodel.BuildWorkload(m, l, stepmodel.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func cand(impl, scopes string, warmup int) presets.Candidate {
	c := presets.Candidate{Impl: impl, Warmup: warmup}
	if scopes != "" {
		c.Scopes = strings.Split(scopes, ",")
	}
	return c
}

// TestEstimateSelfConsistency measures candidates of qwen3_30b_a3b (h100
// layout, one rank) and llama3_8b on the cuda engine and computes them on
// the estimate engine, which takes the same probed rates, host costs and
// workload trace that the cuda engine replays. Their agreement is
// self-consistency (the estimate computes what the emulation runs), not
// accuracy: it says nothing about the framework, which only the megatron
// and job engines measure. What is measured against something other than
// the model: the full-iteration graph's forward-backward must be within 5%
// of its kernels' summed GPU time, each timed on this GPU.
func TestEstimateSelfConsistency(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	rep, err := probes.Run(ctx, e, probes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range rep.Items {
		t.Logf("probe %-28s %10.2f %-10s %s", it.Name, it.Value, it.Unit, it.Source)
	}
	e2, err := cuda.New(cuda.Options{Ordinal: 0, Rates: rep.Rates, Host: rep.Host})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	est := estimate.New(rep.Rates, rep.Host, e2.Device())
	var all, ests []engine.Result
	dropPad := false
	for _, tc := range []struct {
		model string
		opt   stepmodel.WorkloadOptions
		cands []presets.Candidate
	}{
		{"qwen3_30b_a3b", stepmodel.WorkloadOptions{}, []presets.Candidate{cand("none", "", 3), cand("transformer_engine", "attn", 3),
			cand("transformer_engine", "attn,moe_router,moe_preprocess", 3)}},
		// A full-iteration graph cannot hold dropless MoE's token-count
		// sync (TestSyncInsideCaptureIsACaptureError): drop-and-pad.
		{"qwen3_30b_a3b", stepmodel.WorkloadOptions{Dropless: &dropPad}, []presets.Candidate{cand("none", "", 3), cand("local", "full_iteration", 3)}},
		{"llama3_8b", stepmodel.WorkloadOptions{}, []presets.Candidate{cand("none", "", 3), cand("transformer_engine", "attn", 3),
			cand("transformer_engine", "attn,mlp", 3), cand("local", "full_iteration", 3)}},
	} {
		t.Run(tc.model, func(t *testing.T) {
			w := workload(t, tc.model, "h100", tc.opt)
			t.Logf("%s h100 layout: %d micro-batches/step (runs %d), %d layers, notes: %s", tc.model, w.MicroBatches, w.RunMicroBatches, len(w.Layers), strings.Join(w.Notes, "; "))
			t.Logf("%-44s %9s %9s %8s %10s %6s %6s %9s %9s | %9s %9s %8s", "candidate (cuda engine)", "eager ms", "graph ms", "speedup", "capture ms", "graphs", "nodes", "graph MiB", "peak MiB", "estimate", "est-cuda", "est. x")
			for _, c := range tc.cands {
				r := e2.Run(ctx, w, c, engine.RunOptions{}, nil)
				x := est.Run(ctx, w, c, engine.RunOptions{}, nil)
				all, ests = append(all, r), append(ests, x)
				if r.Failed() {
					t.Errorf("%s %s: %s", tc.model, c.Label(), r.Err)
					continue
				}
				rel := (x.Step.Median - r.Step.Median) / r.Step.Median
				t.Logf("%-44s %9.1f %9.1f %8.4f %10.0f %6d %6d %9d %9d | %9.1f %+8.1f%% %8.4f", tc.model+" "+c.Label(), r.Eager.Median, r.Step.Median, r.Speedup,
					r.CaptureMs, r.Graphs, r.Nodes, r.Memory.GraphMiB, r.Memory.DevicePeakMiB, x.Step.Median, 100*rel, x.Speedup)
				if math.Abs(rel) > 0.15 {
					t.Errorf("%s %s: self-consistency: the estimate engine computes %.1f ms where the cuda engine replaying the same rates and host costs ran %.1f ms (%+.1f%%)",
						tc.model, c.Label(), x.Step.Median, r.Step.Median, 100*rel)
				}
				// A speed-up inside the measurement's own spread has no sign.
				noise := max(0.002, (r.Step.P90-r.Step.P10)/r.Step.Median)
				if c.Graphed() && math.Abs(r.Speedup-1) > noise && (r.Speedup > 1) != (x.Speedup > 1) {
					t.Errorf("%s %s: self-consistency: speed-up on the cuda engine %.4f, on the estimate engine %.4f (opposite sides of 1)", tc.model, c.Label(), r.Speedup, x.Speedup)
				}
				if c.FullIteration() {
					rel := math.Abs(r.FwdBwdMs-r.FwdBwdKernelMs) / r.FwdBwdKernelMs
					t.Logf("  full iteration: forward-backward %.1f ms, sum of its kernels %.1f ms (%.2f%%)", r.FwdBwdMs, r.FwdBwdKernelMs, 100*rel)
					if rel > 0.05 {
						t.Errorf("%s: full-iteration graph %.1f ms vs kernel sum %.1f ms", tc.model, r.FwdBwdMs, r.FwdBwdKernelMs)
					}
				}
			}
		})
	}
	if dir := os.Getenv("CGTUNE_GPU_OUT"); dir != "" {
		b, _ := json.MarshalIndent(map[string]any{"probe": rep, "results": all, "estimates": ests}, "", " ")
		os.WriteFile(filepath.Join(dir, "acceptance.json"), b, 0o644)
	}
}

func TestFiftyCandidatesReturnMemory(t *testing.T) {
	e := open(t)
	w := tiny(t, 2048)
	cands := []presets.Candidate{cand("none", "", 1), cand("transformer_engine", "attn", 1), cand("transformer_engine", "", 2), cand("transformer_engine", "attn,mlp", 1), cand("local", "full_iteration", 1)}
	var base int64
	for i := 0; i < 50; i++ {
		r := e.Run(context.Background(), w, cands[i%len(cands)], engine.RunOptions{MeasuredSteps: 3, EagerSteps: 3}, nil)
		if r.Failed() {
			t.Fatalf("candidate %d %s: %s", i, r.Candidate.Label(), r.Err)
		}
		if i == 0 {
			base = r.Memory.DeviceBaseMiB
		}
		if d := r.Memory.DeviceAfterMiB - base; d > 64 || d < -64 {
			t.Errorf("candidate %d %s: device memory %d MiB after, baseline %d MiB", i, r.Candidate.Label(), r.Memory.DeviceAfterMiB, base)
		}
	}
	t.Logf("50 candidates: device memory baseline %d MiB, all back within 64 MiB", base)
}

func TestOversizedCandidateIsAResult(t *testing.T) {
	e := open(t)
	huge := tiny(t, 1<<24) // a 16M-token sequence: scratch far beyond 141 GB
	r := e.Run(context.Background(), huge, cand("transformer_engine", "attn", 1), engine.RunOptions{}, nil)
	if r.ErrKind != engine.FailureOOM {
		t.Fatalf("oversized candidate: kind %q err %q", r.ErrKind, r.Err)
	}
	t.Logf("oversized: %s", r.Summary())
	next := e.Run(context.Background(), tiny(t, 2048), cand("transformer_engine", "attn", 1), engine.RunOptions{MeasuredSteps: 3}, nil)
	if next.Failed() {
		t.Fatalf("next candidate after OOM: %s", next.Err)
	}
	if d := next.Memory.DeviceAfterMiB - r.Memory.DeviceBaseMiB; d > 64 || d < -64 {
		t.Errorf("memory not back after OOM: %d MiB vs %d", next.Memory.DeviceAfterMiB, r.Memory.DeviceBaseMiB)
	}
	t.Logf("next: %s", next.Summary())
}

// A whole-layer TE graph of a dropless MoE layer would contain the
// token-count sync: the capture fails, as it does in Megatron.
func TestSyncInsideCaptureIsACaptureError(t *testing.T) {
	e := open(t)
	w := workload(t, "qwen3_30b_a3b", "h100", stepmodel.WorkloadOptions{RunMicroBatches: 1})
	r := e.Run(context.Background(), w, cand("transformer_engine", "", 1), engine.RunOptions{MeasuredSteps: 2}, nil)
	if r.ErrKind != engine.FailureCapture {
		t.Fatalf("kind %q err %q", r.ErrKind, r.Err)
	}
	t.Logf("whole-layer dropless MoE: %s", r.Err)
	full := e.Run(context.Background(), w, cand("local", "full_iteration", 1), engine.RunOptions{MeasuredSteps: 2}, nil)
	if full.ErrKind != engine.FailureCapture {
		t.Fatalf("dropless full iteration: kind %q err %q", full.ErrKind, full.Err)
	}
	t.Logf("full-iteration dropless MoE: %s", full.Err)
	next := e.Run(context.Background(), w, cand("transformer_engine", "attn", 1), engine.RunOptions{MeasuredSteps: 2}, nil)
	if next.Failed() {
		t.Fatalf("after capture error: %s", next.Err)
	}
}

func TestSamplerDoesNotStallTheEngine(t *testing.T) {
	e := open(t)
	w := tiny(t, 4096)
	c := cand("none", "", 1)
	opts := engine.RunOptions{MeasuredSteps: 30}
	e.Run(context.Background(), w, c, opts, nil) // warm
	quiet := e.Run(context.Background(), w, c, opts, nil)
	n, err := cuda.OpenNVML()
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	s := probes.NewSampler(n, []int{0}, 200*time.Millisecond)
	start := time.Now()
	busy := e.Run(context.Background(), w, c, opts, nil)
	var got int
	for time.Since(start) < 2*time.Second {
		<-s.C
		got++
	}
	s.Stop()
	hz := float64(got) / time.Since(start).Seconds()
	t.Logf("sampler %.1f Hz; step %.3f ms quiet, %.3f ms while sampling", hz, quiet.Step.Median, busy.Step.Median)
	if hz < 4 {
		t.Errorf("sampler at %.1f Hz, want >= 4", hz)
	}
	if busy.Step.Median > quiet.Step.Median*1.03 {
		t.Errorf("sampling slowed the engine: %.3f vs %.3f ms", busy.Step.Median, quiet.Step.Median)
	}
}
