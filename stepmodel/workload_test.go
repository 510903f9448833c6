package stepmodel

import (
	"math"
	"strings"
	"testing"

	"cgtune/presets"
)

// Inline copies of two built-in architectures keep these tests independent of
// the preset files; TestBuiltinPresetsBuild checks the real presets.
var (
	llama8b = presets.Model{Name: "llama3_8b", Arch: presets.Arch{Layers: 32, Hidden: 4096, FFNHidden: 14336, Heads: 32, KVGroups: 8, HeadDim: 128, Vocab: 128256}}
	qwen30b = presets.Model{Name: "qwen3_30b_a3b", Arch: presets.Arch{Layers: 48, Hidden: 2048, FFNHidden: 6144, Heads: 32, KVGroups: 4, HeadDim: 128, Vocab: 151936,
		MoE: &presets.MoE{Experts: 128, TopK: 8, FFNHidden: 768}}}
	single = presets.Layout{NumGPUs: 1, TP: 1, PP: 1, CP: 1, EP: 1, GBS: 4, MBS: 1, Seq: 4096, Precision: "bf16"}
)

// analytic is 6 · (active params that multiply activations) · tokens plus
// causal attention (QKᵀ and AV: 12·L·S·H·d per token forward and
// backward, halved by the causal mask),
// computed from the architecture independently of the op builder.
func analytic(a presets.Arch, seq int, tokens float64) float64 {
	h, d := float64(a.Hidden), float64(a.HeadDim)
	attn := h*float64(a.Heads+2*a.KVGroups)*d + float64(a.Heads)*d*h
	var mlp float64
	if a.MoE != nil {
		mlp = h*float64(a.MoE.Experts) + float64(a.MoE.TopK)*3*h*float64(a.MoE.FFNHidden)
	} else {
		mlp = 3 * h * float64(a.FFNHidden)
	}
	n := float64(a.Layers)*(attn+mlp) + h*float64(a.Vocab)
	attnFLOPs := 6 * float64(a.Layers) * float64(seq) * float64(a.Heads) * d * tokens
	return 6*n*tokens + attnFLOPs
}

func TestFLOPsMatchAnalytic(t *testing.T) {
	for _, m := range []presets.Model{llama8b, qwen30b} {
		t.Run(m.Name, func(t *testing.T) {
			w, err := BuildWorkload(m, single, WorkloadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tokens := float64(single.GBS * single.Seq)
			want := analytic(m.Arch, single.Seq, tokens)
			got := w.TotalFLOPs()
			if rel := math.Abs(got-want) / want; rel > 0.05 {
				t.Errorf("%s: trace %.4g FLOPs/step, analytic %.4g: off by %.1f%%", m.Name, got, want, 100*rel)
			}
		})
	}
}

func count(ops []Op, pred func(Op) bool) int {
	n := 0
	for _, o := range ops {
		if pred(o) {
			n++
		}
	}
	return n
}

func all(Op) bool { return true }

func TestKernelCountsPerLayer(t *testing.T) {
	shared := qwen30b
	sa := *qwen30b.Arch.MoE
	sa.SharedExpertFFN = 1024
	shared.Arch.MoE = &sa
	mamba := presets.Model{Name: "hybrid", Arch: presets.Arch{Layers: 2, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 2, HeadDim: 128, Vocab: 1000,
		HybridPattern: "M*", Mamba: &presets.Mamba{StateDim: 128, Heads: 32, HeadDim: 64, Groups: 8}}}
	tp2 := single
	tp2.TP, tp2.NumGPUs = 2, 2
	cp2 := single
	cp2.CP, cp2.NumGPUs = 2, 2
	notDropless := false
	cases := []struct {
		name     string
		m        presets.Model
		l        presets.Layout
		opt      WorkloadOptions
		fwd, bwd int
	}{
		{"dense", llama8b, single, WorkloadOptions{}, 11, 15},
		{"dense TP2", llama8b, tp2, WorkloadOptions{}, 15, 19},
		{"dense CP2", llama8b, cp2, WorkloadOptions{}, 12, 16},
		{"moe dropless", qwen30b, single, WorkloadOptions{}, 37, 31},
		{"moe drop-pad", qwen30b, single, WorkloadOptions{Dropless: &notDropless}, 36, 31},
		{"moe shared expert", shared, single, WorkloadOptions{}, 40, 36},
		{"mamba", mamba, single, WorkloadOptions{}, 11, 13},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := BuildWorkload(c.m, c.l, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			l := w.Layers[0]
			if got := len(l.Fwd); got != c.fwd {
				t.Errorf("%s: %d forward kernels, want %d", c.name, got, c.fwd)
			}
			if got := len(l.Bwd); got != c.bwd {
				t.Errorf("%s: %d backward kernels, want %d", c.name, got, c.bwd)
			}
		})
	}
}

func TestDroplessMoEHasOneHostSyncBeforeExperts(t *testing.T) {
	w, err := BuildWorkload(qwen30b, single, WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fwd := w.Layers[0].Fwd
	syncAt := -1
	for i, o := range fwd {
		if o.HostSync {
			if syncAt >= 0 {
				t.Fatal("more than one host sync in a layer")
			}
			syncAt = i
		}
	}
	if syncAt < 0 {
		t.Fatal("dropless MoE layer has no host sync")
	}
	for _, o := range fwd[:syncAt] {
		if o.Scope == presets.ScopeMoE {
			t.Errorf("%s (moe scope) runs before the token-count sync", o.Name)
		}
	}
	if fwd[syncAt].Scope != presets.ScopeMoE || fwd[syncAt+1].Name != "permute_index" {
		t.Errorf("sync at %d: scope %s, next %s; want the start of the moe scope", syncAt, fwd[syncAt].Scope, fwd[syncAt+1].Name)
	}
	if count(w.Layers[0].Bwd, func(o Op) bool { return o.HostSync }) != 0 {
		t.Error("backward has a host sync")
	}
}

func TestMicroBatchesAndScaling(t *testing.T) {
	l := presets.Layout{NumGPUs: 16, TP: 1, PP: 1, CP: 1, EP: 16, GBS: 1024, MBS: 1, Seq: 4096}
	w, err := BuildWorkload(qwen30b, l, WorkloadOptions{RunMicroBatches: 2})
	if err != nil {
		t.Fatal(err)
	}
	if w.MicroBatches != 64 || w.RunMicroBatches != 2 || w.ScaleFactor() != 32 {
		t.Errorf("micro-batches %d run %d scale %v; want 64, 2, 32", w.MicroBatches, w.RunMicroBatches, w.ScaleFactor())
	}
	if p := PlanCapture(w, presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}}, presets.G2); p.Captured != 1 || p.RealCaptured != 1 {
		t.Errorf("PP=1 captures %d (real %d) micro-batches, want 1", p.Captured, p.RealCaptured)
	}
	l.PP, l.NumGPUs = 4, 64
	w, err = BuildWorkload(qwen30b, l, WorkloadOptions{RunMicroBatches: 3})
	if err != nil {
		t.Fatal(err)
	}
	p := PlanCapture(w, presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}}, presets.G2)
	if p.RealCaptured != w.MicroBatches || p.Captured != 3 || len(w.Layers) != 12 {
		t.Errorf("PP=4: captured %d (real %d of %d), layers %d", p.Captured, p.RealCaptured, w.MicroBatches, len(w.Layers))
	}
	if w.Layers[0].Index != 36 || len(w.Head) == 0 || w.Head[0].Name != "final_layernorm" {
		t.Errorf("PP=4 should emulate the last stage with the loss; first layer %d", w.Layers[0].Index)
	}
}

func TestRatesOpTimes(t *testing.T) {
	r, ok := SpecFor("NVIDIA H200")
	if !ok {
		t.Fatal("no H200 spec")
	}
	g := Op{Kind: KindGEMM, FLOPs: 790e12 * 1e-3} // 1 ms of matrix work
	if us := r.OpGPUUs(g); math.Abs(us-1000-r.KernelUs) > 1 {
		t.Errorf("1 ms GEMM takes %.1f µs", us)
	}
	g.RateScale = 2
	if us := r.OpGPUUs(g); math.Abs(us-500-r.KernelUs) > 1 {
		t.Errorf("fp8 GEMM takes %.1f µs, want half", us)
	}
	m := Op{Kind: KindElementwise, Bytes: 4.3e12 * 1e-3}
	if us := r.OpGPUUs(m); math.Abs(us-1000-r.KernelUs) > 1 {
		t.Errorf("1 ms copy takes %.1f µs", us)
	}
	if _, ok := SpecFor("gb200"); !ok {
		t.Error("gb200 missing")
	}
	if r, _ := SpecFor("NVIDIA GB200"); r.Source != "spec table: GB200" {
		t.Errorf("GB200 resolved to %s", r.Source)
	}
}

// Every built-in model builds for every layout it has, and the two models
// the acceptance names match the analytic FLOPs from their preset files.
func TestBuiltinPresetsBuild(t *testing.T) {
	models, err := presets.BuiltinModels()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range models {
		for _, g := range m.GPUs() {
			l, err := m.Layout(g)
			if err != nil {
				t.Fatal(err)
			}
			w, err := BuildWorkload(m, l, WorkloadOptions{})
			if err != nil {
				t.Errorf("%s/%s: %v", m.Name, g, err)
				continue
			}
			if len(w.Layers) == 0 || w.TotalFLOPs() <= 0 || w.MaxOpBytes() <= 0 || len(w.Optimizer) == 0 {
				t.Errorf("%s/%s: empty workload", m.Name, g)
			}
		}
	}
	for _, name := range []string{"llama3_8b", "qwen3_30b_a3b"} {
		t.Run(name, func(t *testing.T) {
			m, err := presets.LookupModel(name)
			if err != nil {
				t.Fatal(err)
			}
			w, err := BuildWorkload(m, single, WorkloadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := analytic(m.Arch, single.Seq, float64(single.GBS*single.Seq))
			if rel := math.Abs(w.TotalFLOPs()-want) / want; rel > 0.05 {
				t.Errorf("%s preset: %.4g vs analytic %.4g (%.1f%%)", name, w.TotalFLOPs(), want, 100*rel)
			}
		})
	}
}

func TestHostCostsScaled(t *testing.T) {
	h := DefaultHostCosts()
	s := h.Scaled(2)
	op := Op{Kind: KindGEMM}
	if s.OpHostUs(op) != 2*h.OpHostUs(op) || s.GraphReplayUs != 2*h.GraphReplayUs || s.BackwardScale != h.BackwardScale {
		t.Errorf("%+v", s)
	}
	if !strings.HasSuffix(s.Source, "×2") || h.Scaled(1) != h {
		t.Errorf("source %q", s.Source)
	}
}
