package recipe

import (
	"slices"
	"strings"
	"testing"

	"cgtune/presets"
)

func ids(r Report) []string {
	out := make([]string, len(r.Violations))
	for i, v := range r.Violations {
		out[i] = v.ID
	}
	return out
}

// The same candidate meets different rules depending on the MB release.
func TestGenerationDifferences(t *testing.T) {
	overlapSets := map[string]string{"model.overlap_moe_expert_parallel_comm": "true"}
	cpuSets := map[string]string{"model.cpu_offloading": "true"}
	cases := []struct {
		name string
		c    presets.Candidate
		sets map[string]string
		want map[string][]string // MB version -> violated rule ids
	}{
		{"local per-layer", presets.Candidate{Impl: "local", Scopes: []string{"attn"}, Warmup: 3}, nil,
			map[string][]string{"0.4": {}, "0.5": {}, "0.6": {"MB-05"}, "0.7": {"MB-05"}}},
		{"te full_iteration", presets.Candidate{Impl: "transformer_engine", Scopes: []string{"full_iteration"}, Warmup: 3}, nil,
			map[string][]string{"0.4": {"PERF-05"}, "0.5": {"PERF-05"}, "0.6": {"PERF-04"}}},
		{"full_iteration plus attn", presets.Candidate{Impl: "local", Scopes: []string{"full_iteration", "attn"}, Warmup: 3}, nil,
			map[string][]string{"0.4": {}, "0.5": {"TC-15"}, "0.6": {"PERF-03"}}},
		{"EP overlap with full iteration", presets.Candidate{Impl: "local", Scopes: []string{"full_iteration"}, Warmup: 3}, overlapSets,
			map[string][]string{"0.4": {"TC-36"}, "0.6": {}}},
		{"CPU offloading with full iteration", presets.Candidate{Impl: "local", Scopes: []string{"full_iteration"}, Warmup: 3}, cpuSets,
			map[string][]string{"0.4": {"TC-16"}, "0.6": {}}},
		{"whole layer te", presets.Candidate{Impl: "transformer_engine", Warmup: 3}, nil,
			map[string][]string{"0.3": {}, "0.4": {}, "0.5": {}, "0.6": {}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for mb, want := range tc.want {
				r := ValidateCandidate(moeModel, layoutFor(moeModel), tc.c, mb, tc.sets)
				if got := ids(r); !slices.Equal(got, want) {
					t.Errorf("%s, MB %s: got %v, want %v (%v)", tc.name, mb, got, want, r.Violations)
				}
			}
		})
	}

	// Written as the recipe field rather than through the harness.
	for mb, want := range map[string][]string{"0.4": {"TC-13"}, "0.6": {}} {
		t.Run(mb, func(t *testing.T) {
			c := newCfg(t, denseModel, mb)
			for _, s := range []string{"model.cuda_graph_impl=full_iteration", "rng.te_rng_tracker=true",
				"rerun_state_machine.check_for_nan_in_loss=false", "ddp.check_for_nan_in_grad=false"} {
				if err := c.ApplySet(s); err != nil {
					t.Fatal(err)
				}
			}
			if mb == "0.6" {
				if err := c.ApplySet("model.cuda_graph_scope=null"); err != nil {
					t.Fatal(err)
				}
			}
			if got := ids(Check(c, mb)); !slices.Equal(got, want) {
				t.Errorf("impl full_iteration, MB %s: got %v, want %v", mb, got, want)
			}
		})
	}
}

func TestValidateCandidate(t *testing.T) {
	l := layoutFor(moeModel)
	c := presets.Candidate{Impl: "transformer_engine", Scopes: []string{"attn", "moe"}, Warmup: 3}
	r := ValidateCandidate(moeModel, l, c, "0.4", nil)
	if got := ids(r); !slices.Equal(got, []string{"TC-22"}) {
		t.Fatalf("got %v", r.Violations)
	}
	if r.Violations[0].String() != "TC-22: moe cuda graph is only supported with drop-padding MoE." {
		t.Errorf("String() = %q", r.Violations[0].String())
	}
	r = ValidateCandidate(moeModel, l, c, "0.4", map[string]string{
		"model.moe_expert_capacity_factor": "1.0", "model.moe_pad_expert_input_to_capacity": "true"})
	if !r.OK() {
		t.Fatalf("drop-and-pad MoE rejected: %v", r.Violations)
	}
	if !slices.Contains(r.Notes, "PERF-06: rng.te_rng_tracker=True, model.use_te_rng_tracker=True (CUDA graphs need the TE RNG tracker)") {
		t.Errorf("notes %q", r.Notes)
	}

	// The candidate wins over a set that names the same field.
	r = ValidateCandidate(moeModel, l, presets.Candidate{Impl: "none", Warmup: 3}, "0.4",
		map[string]string{"model.cuda_graph_impl": "local", "model.cuda_graph_scope": "[attn]"})
	if !r.OK() {
		t.Errorf("impl none rejected: %v", r.Violations)
	}

	r = ValidateCandidate(moeModel, l, c, "0.4", map[string]string{"model.bogus": "1"})
	if got := ids(r); !slices.Equal(got, []string{ConfigID}) || r.Violations[0].Message != "--set model.bogus=1: unknown field model.bogus" {
		t.Errorf("bad set: %v", r.Violations)
	}
	r = ValidateCandidate(moeModel, l, c, "1.0", nil)
	if got := ids(r); !slices.Equal(got, []string{ConfigID}) || !strings.Contains(r.Violations[0].Message, `unknown Megatron-Bridge version "1.0"`) {
		t.Errorf("bad version: %v", r.Violations)
	}

	// nil scopes is the whole layer here, not "flag not given".
	whole := ValidateCandidate(denseModel, layoutFor(denseModel), presets.Candidate{Impl: "transformer_engine", Warmup: 3}, "0.4", nil)
	if !whole.OK() {
		t.Errorf("whole-layer te rejected: %v", whole.Violations)
	}
}

func TestApplyHarnessFlagsWarmupAndFields(t *testing.T) {
	c := newCfg(t, denseModel, "0.6")
	notes, v := ApplyHarnessFlags(c, presets.Candidate{Impl: "transformer_engine", Scopes: []string{"attn", "mlp"}, Warmup: 5}, "0.6")
	if len(v) > 0 {
		t.Fatal(v)
	}
	if len(notes) != 1 {
		t.Errorf("notes %q", notes)
	}
	get := func(k string) Value { v, _ := c.Get(k); return v }
	if get("model.cuda_graph_warmup_steps").Int != 5 {
		t.Errorf("warmup %d", get("model.cuda_graph_warmup_steps").Int)
	}
	if m := get("model.cuda_graph_modules"); !slices.Equal(m.List, []string{"attn", "mlp"}) || !get("model.cuda_graph_scope").Null {
		t.Errorf("modules %+v scope %+v", m, get("model.cuda_graph_scope"))
	}

	// G2: the scope field, and local + full_iteration stays as written.
	g2 := newCfg(t, denseModel, "0.4")
	if _, v := ApplyHarnessFlags(g2, presets.Candidate{Impl: "local", Scopes: []string{"full_iteration"}, Warmup: 3}, "0.4"); len(v) > 0 {
		t.Fatal(v)
	}
	if s, _ := g2.Get("model.cuda_graph_scope"); !slices.Equal(s.List, []string{"full_iteration"}) {
		t.Errorf("G2 scope %+v", s)
	}
	if i, _ := g2.Get("model.cuda_graph_impl"); i.Str != "local" {
		t.Errorf("G2 impl %q", i.Str)
	}
	// G3 v0.6+: set_full_iteration_cuda_graph.
	g3 := newCfg(t, denseModel, "0.6")
	if _, v := ApplyHarnessFlags(g3, presets.Candidate{Impl: "local", Scopes: []string{"full_iteration"}, Warmup: 3}, "0.6"); len(v) > 0 {
		t.Fatal(v)
	}
	if i, _ := g3.Get("model.cuda_graph_impl"); i.Str != "full_iteration" {
		t.Errorf("G3 impl %q", i.Str)
	}

	// Without --cuda_graph_impl the recipe's impl stays.
	keep := newCfg(t, denseModel, "0.4")
	if err := keep.ApplySet("model.cuda_graph_impl=transformer_engine"); err != nil {
		t.Fatal(err)
	}
	if _, v := ApplyHarnessFlags(keep, presets.Candidate{Scopes: []string{"attn"}, Warmup: 3}, "0.4"); len(v) > 0 {
		t.Fatal(v)
	}
	if i, _ := keep.Get("model.cuda_graph_impl"); i.Str != "transformer_engine" {
		t.Errorf("impl %q", i.Str)
	}
}

func BenchmarkValidateCandidate(b *testing.B) {
	l := layoutFor(deepseekModel)
	c := presets.Candidate{Impl: "transformer_engine", Scopes: []string{"attn", "moe_router", "moe_preprocess"}, Warmup: 3}
	for b.Loop() {
		ValidateCandidate(deepseekModel, l, c, "0.6", nil)
	}
}

func TestValidateShape(t *testing.T) {
	cases := []struct {
		c    presets.Candidate
		mb   string
		want []string
	}{
		{presets.Candidate{Impl: "transformer_engine", Scopes: []string{"attn", "moe", "mlp"}, Warmup: 3}, "0.4", []string{}},
		{presets.Candidate{Impl: "transformer_engine", Scopes: []string{"moe", "moe_router"}, Warmup: 3}, "0.4", []string{"TC-18"}},
		{presets.Candidate{Impl: "transformer_engine", Scopes: []string{"moe_preprocess"}, Warmup: 3}, "0.6", []string{"TC-19"}},
		{presets.Candidate{Impl: "local", Scopes: []string{"attn"}, Warmup: 3}, "0.6", []string{"MB-05"}},
		{presets.Candidate{Impl: "local", Scopes: []string{"full_iteration"}, Warmup: 3}, "0.4", []string{}},
		{presets.Candidate{Impl: "bogus", Warmup: 3}, "0.4", []string{"PERF-01"}},
	}
	for _, tc := range cases {
		t.Run(tc.mb, func(t *testing.T) {
			if got := ids(ValidateShape(tc.c, tc.mb)); !slices.Equal(got, tc.want) {
				t.Errorf("%s MB %s: got %v, want %v", tc.c.Key(), tc.mb, got, tc.want)
			}
		})
	}
}
