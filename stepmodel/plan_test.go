package stepmodel

import (
	"slices"
	"strings"
	"testing"

	"cgtune/presets"
)

// Small models of each layer type keep the plans readable.
var (
	denseModel = presets.Model{Name: "dense", Arch: presets.Arch{Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 2, HeadDim: 128, Vocab: 32000}}
	moeModel   = presets.Model{Name: "moe", Arch: presets.Arch{Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 2, HeadDim: 128, Vocab: 32000,
		MoE: &presets.MoE{Experts: 16, TopK: 4, FFNHidden: 384}}}
	mixedMoE    = presets.Model{Name: "mixed", Arch: func() presets.Arch { a := moeModel.Arch; m := *a.MoE; m.FirstDenseLayers = 1; a.MoE = &m; return a }()}
	hybridModel = presets.Model{Name: "hybrid", Arch: presets.Arch{Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 2, HeadDim: 128, Vocab: 32000,
		HybridPattern: "M*-E", Mamba: &presets.Mamba{StateDim: 64, Heads: 16, HeadDim: 64, Groups: 4},
		MoE: &presets.MoE{Experts: 16, TopK: 4, FFNHidden: 384}}}
	oneGPU = presets.Layout{NumGPUs: 1, GBS: 4, MBS: 1, Seq: 1024, Precision: "bf16"}
)

func build(t *testing.T, m presets.Model, l presets.Layout, dropless bool) *Workload {
	t.Helper()
	w, err := BuildWorkload(m, l, WorkloadOptions{Dropless: &dropless})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func cand(impl string, scopes ...string) presets.Candidate {
	return presets.Candidate{Impl: impl, Scopes: scopes, Warmup: 3}
}

// covered lists, per layer, the op scopes inside each forward graph and
// the ones left eager.
func covered(p *CapturePlan, layer int) (graphed map[Region][]string, eager []string) {
	graphed = map[Region][]string{}
	for _, s := range p.Layers[layer].Fwd {
		for _, o := range s.Ops {
			if s.Graphed() {
				if !slices.Contains(graphed[s.Region], o.Scope) {
					graphed[s.Region] = append(graphed[s.Region], o.Scope)
				}
			} else if !slices.Contains(eager, o.Scope) {
				eager = append(eager, o.Scope)
			}
		}
	}
	return graphed, eager
}

func graphsOf(p *CapturePlan, layer int) int {
	n := 0
	for _, g := range p.Graphs {
		if g.Layer == layer {
			n++
		}
	}
	return n
}

// TestPlanPerScope is the plan for each impl and module list on each layer
// type: which regions are graphed, which ops they cover, and whether the
// capture fails.
func TestPlanPerScope(t *testing.T) {
	attn, mlp := presets.ScopeAttn, presets.ScopeMLP
	router, pre, moe, post := presets.ScopeMoERouter, presets.ScopeMoEPreprocess, presets.ScopeMoE, ScopeMoEPostprocess
	mamba := presets.ScopeMamba
	cases := []struct {
		name     string
		m        presets.Model
		dropless bool
		c        presets.Candidate
		layer    int // index into w.Layers checked
		regions  map[Region][]string
		eager    []string
		fail     string // failure stage, "" = captures
		failOp   string
	}{
		// Transformer Engine: the scoped region only, per layer and micro-batch.
		{"te whole dense", denseModel, false, cand(presets.ImplTE), 0, map[Region][]string{RegionLayer: {attn, mlp}}, nil, "", ""},
		{"te attn dense", denseModel, false, cand(presets.ImplTE, attn), 0, map[Region][]string{"attn": {attn}}, []string{mlp}, "", ""},
		{"te mlp dense", denseModel, false, cand(presets.ImplTE, mlp), 0, map[Region][]string{"mlp": {mlp}}, []string{attn}, "", ""},
		{"te attn,mlp dense", denseModel, false, cand(presets.ImplTE, attn, mlp), 0, map[Region][]string{"attn,mlp": {attn, mlp}}, nil, "", ""},
		{"te moe_router dense", denseModel, false, cand(presets.ImplTE, router), 0, map[Region][]string{}, []string{attn, mlp}, "", ""},
		{"te whole moe dropless", moeModel, true, cand(presets.ImplTE), 0, nil, nil, FailCapture, "token_counts_to_host"},
		{"te whole moe drop-pad", moeModel, false, cand(presets.ImplTE), 0, map[Region][]string{RegionLayer: {attn, router, pre, moe, post}}, nil, "", ""},
		{"te attn moe dropless", moeModel, true, cand(presets.ImplTE, attn), 0, map[Region][]string{"attn": {attn}}, []string{router, pre, moe, post}, "", ""},
		{"te attn,router,pre moe dropless", moeModel, true, cand(presets.ImplTE, attn, router, pre), 0,
			map[Region][]string{"attn,moe_router,moe_preprocess": {attn, router, pre}}, []string{moe, post}, "", ""},
		{"te router moe dropless", moeModel, true, cand(presets.ImplTE, router), 0, map[Region][]string{"moe_router": {router}}, []string{attn, pre, moe, post}, "", ""},
		{"te moe drop-pad", moeModel, false, cand(presets.ImplTE, moe), 0, map[Region][]string{"moe": {router, pre, moe, post}}, []string{attn}, "", ""},
		{"te moe dropless", moeModel, true, cand(presets.ImplTE, moe), 0, nil, nil, FailCapture, "token_counts_to_host"},
		{"te mamba on mamba layer", hybridModel, true, cand(presets.ImplTE, mamba), 0, map[Region][]string{"mamba": {mamba}}, nil, "", ""},
		{"te mamba on attention layer", hybridModel, true, cand(presets.ImplTE, mamba), 1, map[Region][]string{}, []string{attn}, "", ""},
		{"te attn,mamba on attention layer", hybridModel, true, cand(presets.ImplTE, attn, mamba), 1, map[Region][]string{"attn": {attn}}, nil, "", ""},
		{"te attn on mlp layer", hybridModel, true, cand(presets.ImplTE, attn), 2, map[Region][]string{}, []string{mlp}, "", ""},
		// local on GPTModel: the whole layer whatever the list names.
		{"local whole dense", denseModel, false, cand(presets.ImplLocal), 0, map[Region][]string{RegionLayer: {attn, mlp}}, nil, "", ""},
		{"local attn dense", denseModel, false, cand(presets.ImplLocal, attn), 0, map[Region][]string{RegionLayer: {attn, mlp}}, nil, "", ""},
		{"local mlp dense", denseModel, false, cand(presets.ImplLocal, mlp), 0, nil, nil, FailBuild, ""},
		{"local attn,mlp dense", denseModel, false, cand(presets.ImplLocal, attn, mlp), 0, map[Region][]string{RegionLayer: {attn, mlp}}, nil, "", ""},
		{"local attn moe drop-pad", moeModel, false, cand(presets.ImplLocal, attn), 0, map[Region][]string{RegionLayer: {attn, router, pre, moe, post}}, nil, "", ""},
		{"local attn,router,pre moe dropless", moeModel, true, cand(presets.ImplLocal, attn, router, pre), 0, nil, nil, FailCapture, "token_counts_to_host"},
		{"local attn,router,pre moe drop-pad", moeModel, false, cand(presets.ImplLocal, attn, router, pre), 0,
			map[Region][]string{RegionLayer: {attn, router, pre, moe, post}}, nil, "", ""},
		{"local router moe (GPT)", moeModel, true, cand(presets.ImplLocal, router), 0, map[Region][]string{}, []string{attn, router, pre, moe, post}, "", ""},
		{"local mlp on a MoE layer", mixedMoE, true, cand(presets.ImplLocal, mlp), 1, nil, nil, FailBuild, ""},
		// local on the hybrid model's layers.
		{"local mamba", hybridModel, true, cand(presets.ImplLocal, mamba), 0, map[Region][]string{RegionLayer: {mamba}}, nil, "", ""},
		{"local attn on attention layer", hybridModel, true, cand(presets.ImplLocal, attn), 1, map[Region][]string{RegionLayer: {attn}}, nil, "", ""},
		{"local attn on mlp layer", hybridModel, true, cand(presets.ImplLocal, attn), 2, map[Region][]string{}, []string{mlp}, "", ""},
		{"local attn,mlp on mlp layer", hybridModel, true, cand(presets.ImplLocal, attn, mlp), 2, nil, nil, FailBuild, ""},
		{"local router on MoETransformerLayer dropless", hybridModel, true, cand(presets.ImplLocal, router), 3,
			map[Region][]string{"moe_router,moe_preprocess": {router, pre}, RegionMoEPostprocess: {post}}, []string{moe}, "", ""},
		{"local whole MoETransformerLayer dropless", hybridModel, true, cand(presets.ImplLocal), 3, nil, nil, FailCapture, "token_counts_to_host"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, gen := range []presets.Generation{presets.G2, presets.G3} {
				t.Run(gen.String(), func(t *testing.T) {
					w := build(t, tc.m, oneGPU, tc.dropless)
					p := PlanCapture(w, tc.c, gen)
					name := tc.name + " " + gen.String()
					if tc.fail != "" {
						if p.Failure == nil || p.Failure.Stage != tc.fail || p.Failure.Op != tc.failOp {
							t.Errorf("%s: failure %+v, want stage %s op %q", name, p.Failure, tc.fail, tc.failOp)
						}
						return
					}
					if p.Failure != nil {
						t.Errorf("%s: unexpected failure %s", name, p.Failure.Message)
						return
					}
					graphed, eager := covered(p, tc.layer)
					for r, scopes := range tc.regions {
						if !slices.Equal(graphed[r], scopes) {
							t.Errorf("%s: region %q covers %v, want %v (all: %v)", name, r, graphed[r], scopes, graphed)
						}
					}
					if len(graphed) != len(tc.regions) {
						t.Errorf("%s: regions %v, want %v", name, graphed, tc.regions)
					}
					if !slices.Equal(eager, tc.eager) {
						t.Errorf("%s: eager %v, want %v", name, eager, tc.eager)
					}
					// One forward and one backward graph per region and captured micro-batch.
					if got, want := graphsOf(p, tc.layer), 2*len(tc.regions)*p.Captured; got != want {
						t.Errorf("%s: %d graphs for the layer, want %d", name, got, want)
					}
					for _, g := range p.Graphs {
						for _, o := range g.Ops {
							if o.HostSync {
								t.Errorf("%s: graph %s holds host sync %s but the plan does not fail", name, g.Region, o.Name)
							}
						}
					}
				})
			}
		})
	}
}

// The generations capture the same graphs; only the configuration's field
// names differ (G2 cuda_graph_scope and local+full_iteration scope, G3
// cuda_graph_modules and impl full_iteration).
func TestPlanGenerations(t *testing.T) {
	w := build(t, moeModel, oneGPU, true)
	for _, tc := range []struct {
		c      presets.Candidate
		g2, g3 string
	}{
		{cand(presets.ImplTE, "attn", "moe_router", "moe_preprocess"), "cuda_graph_impl=transformer_engine cuda_graph_scope=[attn,moe_router,moe_preprocess]",
			"cuda_graph_impl=transformer_engine cuda_graph_modules=[attn,moe_router,moe_preprocess]"},
		{cand(presets.ImplLocal, "moe_router"), "cuda_graph_impl=local cuda_graph_scope=[moe_router,moe_preprocess]", "cuda_graph_impl=local cuda_graph_modules=[moe_router,moe_preprocess]"},
		{cand(presets.ImplLocal, "full_iteration"), "cuda_graph_impl=local cuda_graph_scope=[full_iteration]", "cuda_graph_impl=full_iteration cuda_graph_modules=[]"},
		{cand(presets.ImplNone), "cuda_graph_impl=none", "cuda_graph_impl=none"},
	} {
		t.Run(tc.c.Key(), func(t *testing.T) {
			p2, p3 := PlanCapture(w, tc.c, presets.G2), PlanCapture(w, tc.c, presets.G3)
			if p2.Config != tc.g2 || p3.Config != tc.g3 {
				t.Errorf("%s: config G2 %q G3 %q", tc.c.Label(), p2.Config, p3.Config)
			}
			if len(p2.Graphs) != len(p3.Graphs) || p2.Nodes() != p3.Nodes() || (p2.Failure == nil) != (p3.Failure == nil) {
				t.Errorf("%s: G2 and G3 plans differ: %d/%d graphs", tc.c.Label(), len(p2.Graphs), len(p3.Graphs))
			}
		})
	}
}

func TestPlanFullIteration(t *testing.T) {
	for _, tc := range []struct {
		m        presets.Model
		dropless bool
		fail     bool
	}{{denseModel, false, false}, {moeModel, false, false}, {moeModel, true, true}, {hybridModel, false, false}} {
		t.Run(tc.m.Name, func(t *testing.T) {
			w := build(t, tc.m, oneGPU, tc.dropless)
			p := PlanCapture(w, cand(presets.ImplLocal, "full_iteration"), presets.G3)
			if (p.Failure != nil) != tc.fail {
				t.Errorf("%s dropless=%v: failure %+v", tc.m.Name, tc.dropless, p.Failure)
			}
			if tc.fail {
				if !strings.Contains(p.Failure.Message, "token_counts_to_host") || p.Failure.Region != RegionFullIteration {
					t.Errorf("%s: %s", tc.m.Name, p.Failure.Message)
				}
				return
			}
			if len(p.Graphs) != 1 || p.Graphs[0].Layer != -1 || p.Mechanism != MechanismFullIteration {
				t.Fatalf("%s: %d graphs, mechanism %s", tc.m.Name, len(p.Graphs), p.Mechanism)
			}
			// Every micro-batch the run holds, forward and backward, in one graph;
			// the optimizer stays outside.
			if got, want := len(p.Graphs[0].Ops), w.RunMicroBatches*len(w.MicroBatchOps()); got != want {
				t.Errorf("%s: graph has %d ops, want %d", tc.m.Name, got, want)
			}
			if p.FullIteration.RealMicroBatches != w.MicroBatches || p.Graphs[0].StaticBytes != float64(w.RunMicroBatches)*w.StaticInputBytes() {
				t.Errorf("%s: %+v", tc.m.Name, p.FullIteration)
			}
			if p.Graphs[0].PoolBytes <= 0 {
				t.Errorf("%s: full-iteration pool %v", tc.m.Name, p.Graphs[0].PoolBytes)
			}
		})
	}
}

// TE captures one graph set per micro-batch with PP > 1 (all of them in
// the real job), one with PP == 1; graphs are listed forward in layer order
// then backward in reverse, per micro-batch.
func TestPlanMicroBatchesAndOrder(t *testing.T) {
	l := oneGPU
	l.PP, l.NumGPUs, l.GBS = 2, 2, 8
	w, err := BuildWorkload(denseModel, l, WorkloadOptions{RunMicroBatches: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, impl := range []string{presets.ImplTE, presets.ImplLocal} {
		t.Run(impl, func(t *testing.T) {
			p := PlanCapture(w, cand(impl), presets.G3)
			if p.RealCaptured != 8 || p.Captured != 3 || len(p.Graphs) != 3*2*len(w.Layers) {
				t.Fatalf("%s PP2: captured %d real %d graphs %d", impl, p.Captured, p.RealCaptured, len(p.Graphs))
			}
			g := p.Graphs
			n := len(w.Layers)
			if g[0].Layer != 0 || g[n-1].Layer != n-1 || g[n].Layer != n-1 || !g[n].Backward || g[2*n].MicroBatch != 1 {
				t.Errorf("%s: capture order %+v", impl, g[:2*n+1])
			}
			// The last stage holds one micro-batch in flight: only the first
			// captured micro-batch's forward graphs add pool memory.
			for _, x := range g {
				if (x.PoolBytes > 0) != (!x.Backward && x.MicroBatch == 0) {
					t.Errorf("%s: graph layer %d mb %d bwd %v pool %v", impl, x.Layer, x.MicroBatch, x.Backward, x.PoolBytes)
				}
			}
		})
	}
	p := PlanCapture(w, cand(presets.ImplTE, "attn"), presets.G3)
	if p.WarmupPasses != TEWarmupPasses(3, w.MicroBatches, 3) {
		t.Errorf("TE warm-up passes %d", p.WarmupPasses)
	}
	if p := PlanCapture(w, cand(presets.ImplLocal), presets.G3); p.WarmupPasses != 3 {
		t.Errorf("local warm-up passes %d, want cuda_graph_warmup_steps", p.WarmupPasses)
	}
}

// The plan's one-line description shows what is really captured: local
// [attn] graphs whole layers.
func TestPlanDescribe(t *testing.T) {
	w := build(t, denseModel, oneGPU, false)
	d := PlanCapture(w, cand(presets.ImplLocal, "attn"), presets.G2).Describe()
	want := "capture plan: local per-layer (CudaGraphManager), cuda_graph_impl=local cuda_graph_scope=[attn]: 8 graphs, regions [layer] in 4 of 4 layers, 1 captured micro-batch(es) in the run, 1 in the real job"
	if d != want {
		t.Errorf("got  %s\nwant %s", d, want)
	}
	w = build(t, moeModel, oneGPU, true)
	if d := PlanCapture(w, cand(presets.ImplLocal, "full_iteration"), presets.G3).Describe(); !strings.Contains(d, "cuda_graph_impl=full_iteration") || !strings.Contains(d, "fails: capture failed: token_counts_to_host") {
		t.Errorf("%s", d)
	}
}

func TestPlanNothingCapturedSaysSo(t *testing.T) {
	w := build(t, moeModel, oneGPU, true)
	p := PlanCapture(w, cand(presets.ImplLocal, presets.ScopeMoERouter), presets.G2)
	if p.Graphed() || p.Failure != nil || len(p.Notes) == 0 || !strings.Contains(p.Notes[0], "captures nothing") {
		t.Errorf("graphed %v failure %+v notes %q", p.Graphed(), p.Failure, p.Notes)
	}
	none := PlanCapture(w, cand(presets.ImplNone), presets.G2)
	if none.Graphed() || len(none.Layers) != len(w.Layers) || none.Layers[0].Fwd[0].To != len(w.Layers[0].Fwd) {
		t.Errorf("none: %+v", none)
	}
}
