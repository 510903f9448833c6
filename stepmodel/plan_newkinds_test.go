package stepmodel

import (
	"slices"
	"testing"

	"cgtune/presets"
)

// opsIn lists the names of the ops of layer i's forward that region r
// holds, and of those left eager.
func opsIn(p *CapturePlan, i int, r Region) (graphed, eager []string) {
	for _, s := range p.Layers[i].Fwd {
		for _, o := range s.Ops {
			switch s.Region {
			case r:
				graphed = append(graphed, o.Name)
			case "":
				eager = append(eager, o.Name)
			}
		}
	}
	return graphed, eager
}

// The gated delta-net is self_attention: Transformer Engine's attn graph
// holds all of it, as it holds the gated attention of the softmax layers
// (_layer_is_graphable: the layer's self_attention is no IdentityOp;
// _te_cuda_graph_capture runs _forward_attention); the router module leaves
// it eager; and no module graphs a mixer as mamba.
func TestPlanGatedDeltaNetUnderAttn(t *testing.T) {
	l := oneGPU
	l.Seq = 4096
	w := build(t, qwen3Next, l, false)
	p := PlanCapture(w, cand(presets.ImplTE, presets.ScopeAttn), presets.G3)
	if p.Failure != nil {
		t.Fatal(p.Failure)
	}
	for _, i := range []int{0, 3} {
		g, e := covered(p, i)
		if !slices.Equal(g[Region(presets.ScopeAttn)], []string{presets.ScopeAttn}) || slices.Contains(e, presets.ScopeAttn) {
			t.Errorf("layer %d (%s): graphed %v, eager %v", i, w.Layers[i].Kind, g, e)
		}
	}
	gdn, _ := opsIn(p, 0, Region(presets.ScopeAttn))
	for _, name := range []string{"in_proj", "causal_conv1d", "gdr_fwd_h", "gated_rmsnorm", "out_proj"} {
		if !slices.Contains(gdn, name) {
			t.Errorf("the attn graph of a gated delta-net layer lacks %s: %v", name, gdn)
		}
	}
	r := PlanCapture(w, cand(presets.ImplTE, presets.ScopeMoERouter), presets.G3)
	if g, e := covered(r, 0); slices.Contains(g[Region(presets.ScopeMoERouter)], presets.ScopeAttn) || !slices.Contains(e, presets.ScopeAttn) {
		t.Errorf("moe_router graphs the gated delta-net: graphed %v, eager %v", g, e)
	}
	if m := PlanCapture(w, cand(presets.ImplTE, presets.ScopeMamba), presets.G3); m.Graphed() {
		t.Errorf("mamba graphs %d regions of a model without Mamba layers", len(m.Graphs))
	}
}

// A latent MoE's down-projection runs in MoELayer.preprocess and its
// up-projection in postprocess: Transformer Engine's moe_router +
// moe_preprocess graph holds the first and not the second; the hybrid
// MoETransformerLayer's local postprocess graph holds the second.
func TestPlanLatentMoE(t *testing.T) {
	l := oneGPU
	l.Seq = 4096
	w := build(t, nemotron3Super, l, true)
	te := PlanCapture(w, cand(presets.ImplTE, presets.ScopeMoERouter, presets.ScopeMoEPreprocess), presets.G3)
	if te.Failure != nil {
		t.Fatal(te.Failure)
	}
	region := regionName([]string{presets.ScopeMoERouter, presets.ScopeMoEPreprocess})
	g, e := opsIn(te, 1, region)
	if !slices.Contains(g, "fc1_latent_proj") || slices.Contains(g, "fc2_latent_proj") || !slices.Contains(e, "fc2_latent_proj") {
		t.Errorf("router+preprocess graph %v, eager %v", g, e)
	}
	local := PlanCapture(w, cand(presets.ImplLocal, presets.ScopeMoERouter, presets.ScopeMoEPreprocess), presets.G2)
	if local.Failure != nil {
		t.Fatal(local.Failure)
	}
	if post, _ := opsIn(local, 1, RegionMoEPostprocess); !slices.Contains(post, "fc2_latent_proj") {
		t.Errorf("the local postprocess graph %v lacks fc2_latent_proj", post)
	}
}

// The MTP blocks: Transformer Engine graphs a transformer model's
// mtp_model_layer like a decoder layer, but not a hybrid model's
// HybridStack, which is no GraphableMegatronModule
// (TECudaGraphHelper._discover_layers, _layer_is_graphable); the block's
// prelude (eh_proj and the norms) is outside mtp_model_layer and stays
// eager; a full-iteration graph holds everything.
func TestPlanMTPBlocks(t *testing.T) {
	l := oneGPU
	l.Seq, l.MTPLayers = 4096, 1
	hybrid := build(t, nemotron3Super, l, false)
	p := PlanCapture(hybrid, cand(presets.ImplTE, presets.ScopeAttn, presets.ScopeMamba), presets.G3)
	for i, lt := range hybrid.Layers {
		switch {
		case lt.MTP && p.Layers[i].Graphed():
			t.Errorf("hybrid MTP layer %d (%s) is graphed", lt.Index, lt.Kind)
		case !lt.MTP && lt.Kind == presets.LayerAttention && !p.Layers[i].Graphed():
			t.Errorf("decoder attention layer %d is not graphed", lt.Index)
		}
	}
	gpt := build(t, dsv4, l, false)
	last := len(gpt.Layers) - 1
	if !gpt.Layers[last].MTP {
		t.Fatal("no MTP layer")
	}
	for _, c := range []presets.Candidate{cand(presets.ImplTE, presets.ScopeAttn), cand(presets.ImplTE)} {
		q := PlanCapture(gpt, c, presets.G3)
		if !q.Layers[last].Graphed() {
			t.Errorf("%s: the transformer MTP layer is not graphed", c.Label())
			continue
		}
		_, eager := opsIn(q, last, q.Layers[last].Regions[0])
		if !slices.Contains(eager, "mtp_eh_proj") || !slices.Contains(eager, "mtp_enorm") {
			t.Errorf("%s: the MTP prelude is graphed (eager: %v)", c.Label(), eager)
		}
	}
	full := PlanCapture(hybrid, cand(presets.ImplLocal, presets.ScopeFullIteration), presets.G2)
	if full.Failure != nil || !full.Layers[len(full.Layers)-1].Graphed() {
		t.Errorf("full iteration leaves the MTP block out: %v", full.Failure)
	}
}

// Hyper-connections are part of the block they wrap: the attn graph holds
// the attention's; a moe_router graph holds the MoE's mapping and
// aggregation before the router, and its residual mix after the experts
// only with the rest of the MoE (moe).
func TestPlanHyperConnectionFollowsItsBlock(t *testing.T) {
	w := build(t, dsv4, oneGPU, false)
	named := func(ops []Op, name string) []Op { return opsNamed(ops, name) }
	for _, c := range []struct {
		scope string
		post  int // graphed residual mixes
	}{{presets.ScopeAttn, 1}, {presets.ScopeMoERouter, 0}, {presets.ScopeMoE, 1}} {
		p := PlanCapture(w, cand(presets.ImplTE, c.scope), presets.G3)
		if p.Failure != nil {
			t.Fatalf("%s: %v", c.scope, p.Failure)
		}
		graphed := opsOf(p, 0)
		for _, name := range []string{"hc_mapping_proj", "hc_aggregate"} {
			if got := named(graphed, name); len(got) != 1 {
				t.Errorf("%s graph: %d %s graphed, want its block's one", c.scope, len(got), name)
			}
		}
		if got := named(graphed, "hc_res_post"); len(got) != c.post {
			t.Errorf("%s graph: %d residual mixes graphed, want %d", c.scope, len(got), c.post)
		}
	}
}

// Each graphed region of a layer is one run of its forward ops and one of
// its backward ops, as a per-layer graph is one callable: on every new
// layer kind, for every module a per-layer graph may list.
func TestPlanRegionsAreContiguous(t *testing.T) {
	l := oneGPU
	l.MTPLayers = 1
	for _, m := range []presets.Model{qwen3Next, nemotron3Super, dsv4} {
		w := build(t, m, l, false)
		for _, c := range []presets.Candidate{cand(presets.ImplTE), cand(presets.ImplTE, presets.ScopeAttn),
			cand(presets.ImplTE, presets.ScopeMoERouter, presets.ScopeMoEPreprocess), cand(presets.ImplTE, presets.ScopeMoE),
			cand(presets.ImplTE, presets.ScopeAttn, presets.ScopeMamba, presets.ScopeMoERouter),
			cand(presets.ImplLocal, presets.ScopeMoERouter, presets.ScopeMoEPreprocess)} {
			p := PlanCapture(w, c, presets.G3)
			for i, lp := range p.Layers {
				for _, segs := range [][]Segment{lp.Fwd, lp.Bwd} {
					var seen []Region
					for _, sg := range segs {
						if sg.Graphed() && slices.Contains(seen, sg.Region) {
							t.Errorf("%s %s: layer %d (%s) has region %s in two runs", m.Name, c.Label(), i, lp.Kind, sg.Region)
						}
						seen = append(seen, sg.Region)
					}
				}
			}
		}
	}
}

// opsOf is the graphed forward ops of layer i.
func opsOf(p *CapturePlan, i int) []Op {
	var out []Op
	for _, s := range p.Layers[i].Fwd {
		if s.Graphed() {
			out = append(out, s.Ops...)
		}
	}
	return out
}
