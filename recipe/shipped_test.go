package recipe

import (
	"slices"
	"testing"

	"cgtune/presets"
	"cgtune/stepmodel"
)

// builtinLayouts calls f for every built-in model and every GPU type it has
// a layout of its own for (h200 borrows h100's, which is checked as h100).
func builtinLayouts(t *testing.T, f func(t *testing.T, m presets.Model, l presets.Layout)) {
	t.Helper()
	ms, err := presets.BuiltinModels()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		for _, g := range m.GPUs() {
			if _, own := m.Layouts[g]; !own {
				continue
			}
			l, err := m.Layout(g)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(m.Name+"/"+g, func(t *testing.T) { f(t, m, l) })
		}
	}
}

// g2Expresses reports whether every recipe setting of l is a field G2's
// Megatron-Core has (MB 0.3/0.4): only then can the layout be checked there.
func g2Expresses(l presets.Layout) bool {
	if l.RankCapacityFactor > 0 || l.PagedStash != nil {
		return false // MB 0.5+ fields
	}
	for k := range l.Settings {
		f, ok := lookupField(k)
		if !ok || f.Gen == presets.G3 {
			return false
		}
	}
	return true
}

// Every graph an MB perf recipe ships passes the rules `cgtune check` runs:
// MB 0.7 always, MB 0.4 where its fields can say the layout.
func TestShippedGraphsPassTheRules(t *testing.T) {
	builtinLayouts(t, func(t *testing.T, m presets.Model, l presets.Layout) {
		c := l.ShippedGraph()
		if !c.Graphed() {
			t.Skipf("%s ships no graph", l.Source)
		}
		mbs := []string{"0.7"}
		if g2Expresses(l) {
			mbs = append(mbs, "0.4")
		}
		for _, mb := range mbs {
			if r := ValidateCandidate(m, l, c, mb, nil); !r.OK() {
				t.Errorf("MB %s rejects the shipped %s: %v", mb, c.Label(), r.Violations)
			}
		}
	})
}

// The capture plan of a shipped graph, on the workload the search builds
// (MoE mode from the recipe), does not fail before it runs.
func TestShippedGraphsCapture(t *testing.T) {
	builtinLayouts(t, func(t *testing.T, m presets.Model, l presets.Layout) {
		c := l.ShippedGraph()
		if !c.Graphed() {
			t.Skipf("%s ships no graph", l.Source)
		}
		opts, err := MoEWorkload(stepmodel.WorkloadOptions{}, m, l, "0.7", nil)
		if err != nil {
			t.Fatal(err)
		}
		w, err := stepmodel.BuildWorkload(m, l, opts)
		if err != nil {
			t.Fatal(err)
		}
		p := stepmodel.PlanCapture(w, c, presets.G3)
		if p.Failure != nil {
			t.Errorf("%s: %s", c.Label(), p.Failure.Message)
		}
		if !p.Graphed() {
			t.Errorf("%s captures nothing: %s", c.Label(), p.Describe())
		}
	})
}

// Where a recipe offloads activations to the host (cpu_offloading), the
// rules say why a per-layer graph cannot be searched there: TC-16.
func TestCPUOffloadLayoutsRejectPerLayerGraphs(t *testing.T) {
	n := 0
	builtinLayouts(t, func(t *testing.T, m presets.Model, l presets.Layout) {
		if l.CPUOffloadLayers == 0 {
			t.Skip("no CPU offloading")
		}
		n++
		for _, mb := range []string{"0.4", "0.7"} {
			t.Run(mb, func(t *testing.T) {
				r := ValidateCandidate(m, l, presets.Candidate{Impl: presets.ImplTE, Scopes: []string{presets.ScopeAttn}, Warmup: 3}, mb, nil)
				if !slices.ContainsFunc(r.Violations, func(v Violation) bool {
					return v.ID == "TC-16" && v.Message == "CUDA graphs not supported with CPU offloading."
				}) {
					t.Errorf("MB %s: te attn on a CPU-offloading layout: %v", mb, r.Violations)
				}
			})
		}
	})
	if n == 0 {
		t.Error("no built-in layout offloads to the CPU; the test checks nothing")
	}
}

// Megatron-FSDP layouts: MCore rules per-layer graphs out only together
// with EP communication overlap (FSDP-01); a full-iteration graph passes.
func TestFSDPLayoutsWithEPOverlap(t *testing.T) {
	n := 0
	builtinLayouts(t, func(t *testing.T, m presets.Model, l presets.Layout) {
		if !l.FSDP || m.Arch.MoE == nil || l.CPUOffloadLayers > 0 {
			t.Skip("not an MoE Megatron-FSDP layout without CPU offloading")
		}
		n++
		sets := map[string]string{"comm_overlap.overlap_moe_expert_parallel_comm": "true"}
		router := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{presets.ScopeMoERouter, presets.ScopeMoEPreprocess}, Warmup: 3}
		if r := ValidateCandidate(m, l, router, "0.7", nil); !r.OK() {
			t.Errorf("without EP overlap: %v", r.Violations)
		}
		r := ValidateCandidate(m, l, router, "0.7", sets)
		if !slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.ID == "FSDP-01" }) {
			t.Errorf("with EP overlap: %v, want FSDP-01", r.Violations)
		}
		full := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 3}
		if r := ValidateCandidate(m, l, full, "0.7", sets); slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.ID == "FSDP-01" }) {
			t.Errorf("full iteration with EP overlap: %v", r.Violations)
		}
	})
	if n == 0 {
		t.Error("no built-in MoE layout uses Megatron-FSDP; the test checks nothing")
	}
}
