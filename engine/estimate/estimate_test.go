package estimate

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/internal/testmodel"
	"cgtune/presets"
	"cgtune/stepmodel"
)

func workload(t *testing.T, model, gpu string) *stepmodel.Workload {
	t.Helper()
	m, l := testmodel.Builtin(t, model, gpu)
	w, err := stepmodel.BuildWorkload(m, l, stepmodel.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func cand(impl, scopes string) presets.Candidate {
	c := presets.Candidate{Impl: impl, Warmup: 3}
	if scopes != "" {
		c.Scopes = strings.Split(scopes, ",")
	}
	return c
}

func TestEstimatesSayEstimated(t *testing.T) {
	e, err := ForGPU("h200")
	if err != nil {
		t.Fatal(err)
	}
	w := workload(t, "qwen3_30b_a3b", "h100")
	padded := false
	dropPad, err := stepmodel.BuildWorkload(w.Spec.Model, w.Layout, stepmodel.WorkloadOptions{Dropless: &padded})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		w *stepmodel.Workload
		c presets.Candidate
	}{{w, cand("none", "")}, {w, cand("transformer_engine", "attn")}, {dropPad, cand("local", "full_iteration")}} {
		t.Run(tc.c.Key(), func(t *testing.T) {
			r := e.Run(context.Background(), tc.w, tc.c, engine.RunOptions{}, nil)
			if r.Failed() {
				t.Fatalf("%s: %s", tc.c.Label(), r.Err)
			}
			if r.Source != engine.SourceEstimated || !strings.HasPrefix(r.Notes[0], "estimated:") || !strings.Contains(r.Summary(), "estimated") {
				t.Errorf("%s: source %q notes %q summary %q", tc.c.Label(), r.Source, r.Notes, r.Summary())
			}
			// Without a framework profile the per-op costs are the fallback, and the result says so.
			if r.HostCosts != stepmodel.HostCostsPerOp || !strings.Contains(r.Notes[0], "host costs: PyTorch per-op (fallback)") {
				t.Errorf("%s: host costs %q, notes %q", tc.c.Label(), r.HostCosts, r.Notes[0])
			}
			if r.Memory.Breakdown == nil || r.Memory.Breakdown.Total <= 0 {
				t.Errorf("%s: no memory breakdown", tc.c.Label())
			}
			t.Logf("%s", r.Summary())
		})
	}
	// A dropless MoE cannot be captured whole: its full-iteration graph fails.
	if r := e.Run(context.Background(), w, cand("local", "full_iteration"), engine.RunOptions{}, nil); r.ErrKind != engine.FailureCapture {
		t.Errorf("dropless full iteration: kind %q err %q", r.ErrKind, r.Err)
	}
	if _, err := ForGPU("tpu"); err == nil || !strings.Contains(err.Error(), "h100") {
		t.Errorf("unknown GPU: %v", err)
	}
}

// Graphs remove host cost: where kernels are tiny the graphed step must be
// faster, and the full-iteration graph's forward-backward equals its
// kernels' GPU time up to the per-node difference.
func TestGraphsRemoveHostCost(t *testing.T) {
	e, _ := ForGPU("h200")
	m := presets.Model{Name: "tiny", Arch: presets.Arch{Layers: 4, Hidden: 512, FFNHidden: 2048, Heads: 8, KVGroups: 8, HeadDim: 64, Vocab: 32000}}
	l := presets.Layout{NumGPUs: 1, GBS: 2, MBS: 1, Seq: 512}
	w, err := stepmodel.BuildWorkload(m, l, stepmodel.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	none := e.Run(context.Background(), w, cand("none", ""), engine.RunOptions{}, nil)
	full := e.Run(context.Background(), w, cand("local", "full_iteration"), engine.RunOptions{}, nil)
	attn := e.Run(context.Background(), w, cand("transformer_engine", "attn"), engine.RunOptions{}, nil)
	if !(full.Step.Median < attn.Step.Median && attn.Step.Median < none.Step.Median) {
		t.Errorf("host-bound model: full %.3f, attn %.3f, none %.3f ms; want full < attn < none", full.Step.Median, attn.Step.Median, none.Step.Median)
	}
	if full.FwdBwdMs > full.FwdBwdKernelMs*1.05 {
		t.Errorf("full iteration fwd-bwd %.3f ms vs kernels %.3f ms", full.FwdBwdMs, full.FwdBwdKernelMs)
	}
	if none.Speedup != 1 {
		t.Errorf("none speedup %v", none.Speedup)
	}
}

func TestWholeLayerDroplessMoEIsACaptureError(t *testing.T) {
	e, _ := ForGPU("h200")
	r := e.Run(context.Background(), workload(t, "qwen3_30b_a3b", "h100"), cand("transformer_engine", ""), engine.RunOptions{}, nil)
	if r.ErrKind != engine.FailureCapture || !strings.Contains(r.Err, "token_counts_to_host") {
		t.Fatalf("kind %q err %q", r.ErrKind, r.Err)
	}
	// A failed candidate has no step time and no speed-up (and nothing a
	// JSON journal cannot hold).
	if r.Step.Median != 0 || r.Speedup != 0 {
		t.Errorf("failed candidate: step %v speed-up %v", r.Step.Median, r.Speedup)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Error(err)
	}
}

func TestOversizedIsOOM(t *testing.T) {
	e, _ := ForGPU("h100")
	m, _ := presets.LookupModel("llama3_8b")
	l, _ := m.Layout("h100")
	l.Seq, l.MBS = 1<<20, 8
	w, err := stepmodel.BuildWorkload(m, l, stepmodel.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := e.Run(context.Background(), w, cand("none", ""), engine.RunOptions{}, nil)
	if r.ErrKind != engine.FailureOOM {
		t.Fatalf("kind %q err %q peak %d", r.ErrKind, r.Err, r.Memory.DevicePeakMiB)
	}
}

func TestCancelled(t *testing.T) {
	e, _ := ForGPU("h200")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := e.Run(ctx, workload(t, "llama3_8b", "h100"), cand("none", ""), engine.RunOptions{}, nil)
	if r.ErrKind != engine.FailureCancel {
		t.Fatalf("%+v", r)
	}
}
