package search

import (
	"strings"
	"testing"

	"cgtune/presets"
)

// gdnMoE is a small model of gated delta-net layers only, every layer MoE
// (a linear_attention_freq list of ones: no softmax attention at all).
var gdnMoE = presets.Model{Name: "gdn", Arch: presets.Arch{Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 2, HeadDim: 128, Vocab: 32000,
	MoE:                          &presets.MoE{Experts: 16, TopK: 4, FFNHidden: 384},
	ExperimentalAttentionVariant: "gated_delta_net",
	LinearAttention: &presets.LinearAttention{LinearAttentionPattern: []int{1, 1, 1, 1}, LinearConvKernelDim: 4, LinearKeyHeadDim: 64, LinearValueHeadDim: 64,
		LinearNumKeyHeads: 8, LinearNumValueHeads: 16}}}

// Which scopes capture something on the new layer kinds: attn covers the
// gated delta-net, which sits under self_attention (MB
// docs/training/cuda-graphs.md; MLM _layer_is_graphable); mamba covers
// only Mamba layers; mlp needs a dense MLP; and impl local graphs each of
// these TransformerLayers whole once attn is listed.
func TestCanonicalOnGatedDeltaNetLayers(t *testing.T) {
	te := func(scopes ...string) presets.Candidate {
		return presets.Candidate{Impl: presets.ImplTE, Scopes: scopes, Warmup: 3}
	}
	if e := Canonical(gdnMoE, presets.G3, te(presets.ScopeAttn)); e.Nothing != "" || len(e.Why) > 0 {
		t.Errorf("attn on gated delta-net layers: %+v", e)
	}
	for _, c := range []struct{ scope, need string }{{presets.ScopeMamba, "Mamba layer"}, {presets.ScopeMLP, "dense MLP layer"}} {
		if e := Canonical(gdnMoE, presets.G3, te(c.scope)); !strings.Contains(e.Nothing, c.need) {
			t.Errorf("%s: %+v, want nothing captured (no %s)", c.scope, e, c.need)
		}
	}
	local := Canonical(gdnMoE, presets.G2, presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeAttn}, Warmup: 3})
	if len(local.Candidate.Scopes) != 0 {
		t.Errorf("local attn on TransformerLayers: %+v, want the whole layer", local.Candidate)
	}
}

// Every built-in model × GPU layout (whatever built-ins exist) plans a
// space of every impl with each per-layer module, the whole layer and the
// full iteration, and the estimate engine estimates each candidate the
// rules accept: a step time, or the capture failure the plan predicts.
// At least one graphed candidate is valid.
func TestEveryBuiltinLayoutPlansWithEstimates(t *testing.T) {
	ms, err := presets.BuiltinModels()
	if err != nil {
		t.Fatal(err)
	}
	space := presets.Space{Impls: []string{presets.ImplNone, presets.ImplLocal, presets.ImplTE},
		Scopes: [][]string{{}, {presets.ScopeFullIteration}, {presets.ScopeAttn}, {presets.ScopeMLP}, {presets.ScopeMoE},
			{presets.ScopeMoERouter, presets.ScopeMoEPreprocess}, {presets.ScopeMamba},
			{presets.ScopeAttn, presets.ScopeMoERouter, presets.ScopeMoEPreprocess, presets.ScopeMamba}},
		Warmups: []int{presets.DefaultWarmup}}
	for _, m := range ms {
		for _, g := range m.GPUs() {
			l, err := m.Layout(g)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := Plan(Config{Model: m, Layout: l, MBridge: "0.7", Space: space, Estimator: estimator(t, l.GPU)})
			if err != nil {
				t.Errorf("%s/%s: %v", m.Name, g, err)
				continue
			}
			graphed := 0
			for _, p := range plan {
				if !p.Valid() {
					continue
				}
				if e := p.Estimate; e == nil || (!e.Failed() && e.Step.Median <= 0) {
					t.Errorf("%s/%s %s: no estimate (%+v)", m.Name, g, p.Candidate.Label(), e)
				}
				if p.Candidate.Graphed() {
					graphed++
				}
			}
			if graphed == 0 {
				t.Errorf("%s/%s: no graphed candidate is valid", m.Name, g)
			}
		}
	}
}
