package search

import (
	"reflect"
	"strings"
	"testing"

	"cgtune/engine/estimate"
	"cgtune/presets"
)

func builtin(t testing.TB, name, gpu string) (presets.Model, presets.Layout) {
	t.Helper()
	m, err := presets.LookupModel(name)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Layout(gpu)
	if err != nil {
		t.Fatal(err)
	}
	return m, l
}

func planOf(t *testing.T, cfg Config) map[string]Planned {
	t.Helper()
	plan, err := Plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Planned{}
	for _, p := range plan {
		if _, dup := out[p.Candidate.Key()]; dup {
			t.Fatalf("candidate %s planned twice", p.Candidate.Key())
		}
		out[p.Candidate.Key()] = p
	}
	return out
}

func planIDs(p Planned) []string {
	var out []string
	for _, v := range p.Violations {
		out = append(out, v.ID)
	}
	return out
}

// The default space is every impl × every scope subset (plus
// full_iteration) × warm-ups 1,2,3, with none once; each candidate the
// rules reject carries their ids, and scopes that capture nothing on the
// model are SPACE rejections.
func TestPlanDefaultSpace(t *testing.T) {
	m, l := builtin(t, "qwen3_30b_a3b", "h100")
	plan, err := Plan(Config{Model: m, Layout: l})
	if err != nil {
		t.Fatal(err)
	}
	// none once + 2 graph impls × (64 subsets + full_iteration) × 3 warm-ups.
	if len(plan) != 1+2*65*3 {
		t.Fatalf("%d candidates, want %d", len(plan), 1+2*65*3)
	}
	if c := plan[0].Candidate; c.Impl != presets.ImplNone || len(c.Scopes) != 0 || !plan[0].Valid() {
		t.Errorf("first candidate %+v (%v), want none, valid", c, plan[0].Violations)
	}
	byKey := planOf(t, Config{Model: m, Layout: l})
	for _, tc := range []struct {
		key  string
		want []string // nil: valid
		msg  string
	}{
		{"transformer_engine/attn/w1", nil, ""},
		{"transformer_engine/attn,moe_router,moe_preprocess/w2", nil, ""},
		{"local/full_iteration/w3", nil, ""},
		{"transformer_engine/moe/w3", []string{"TC-22"}, "moe cuda graph is only supported with drop-padding MoE."},
		{"transformer_engine/mlp/w3", []string{"TC-21"}, "mlp cuda graph is only supported for dense layers"},
		{"transformer_engine/moe,moe_router/w1", []string{"TC-18", "TC-22"}, "must not contain both moe and moe_router"},
		{"transformer_engine/moe_preprocess/w1", []string{"TC-19"}, "moe_preprocess cuda graph is only supported with moe_router cuda graph."},
		{"transformer_engine/full_iteration/w3", []string{"PERF-05"}, ""},
		{"transformer_engine/mamba/w3", []string{SpaceID}, "mamba captures nothing on qwen3_30b_a3b: the model has no Mamba layer (nothing is captured)"},
		{"transformer_engine/attn,mamba/w3", []string{SpaceID}, "the same as te attn"},
		// MB 0.4 takes per-layer scopes with impl local, and MCore then
		// captures moe_router and moe_preprocess together (TC-17).
		{"local/moe_router/w3", []string{SpaceID}, "the same as local moe_router,moe_preprocess"},
		{"local/moe_router,moe_preprocess/w3", nil, ""},
	} {
		p, ok := byKey[tc.key]
		if !ok {
			t.Errorf("%s not planned", tc.key)
			continue
		}
		if got := planIDs(p); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: rejected by %v (%v), want %v", tc.key, got, p.Violations, tc.want)
			continue
		}
		if tc.msg != "" && !strings.Contains(p.Violations[0].Message, tc.msg) {
			t.Errorf("%s: message %q, want it to contain %q", tc.key, p.Violations[0].Message, tc.msg)
		}
	}
	// Deterministic: the same config plans the same list.
	again, _ := Plan(Config{Model: m, Layout: l})
	if !reflect.DeepEqual(plan, again) {
		t.Error("two plans of the same config differ")
	}
}

func TestPlanPerModelAndGeneration(t *testing.T) {
	llama, ll := builtin(t, "llama3_8b", "h100")
	p := planOf(t, Config{Model: llama, Layout: ll})
	for key, want := range map[string]string{
		"transformer_engine/moe_router/w1": "TC-20",
		"transformer_engine/mamba/w1":      SpaceID,
		"transformer_engine/attn,mlp/w1":   "",
		"local/attn/w1":                    "", // MB 0.4 still takes scoped local graphs
	} {
		if got := strings.Join(planIDs(p[key]), ","); got != want {
			t.Errorf("llama %s: %q (%v), want %q", key, got, p[key].Violations, want)
		}
	}
	// MB 0.6 allows impl local only for full iteration (MB-05).
	p = planOf(t, Config{Model: llama, Layout: ll, MBridge: "0.6"})
	if got := planIDs(p["local/attn/w1"]); !reflect.DeepEqual(got, []string{"MB-05"}) {
		t.Errorf("0.6 local attn: %v", p["local/attn/w1"].Violations)
	}
	if !p["local/full_iteration/w1"].Valid() {
		t.Errorf("0.6 local full_iteration: %v", p["local/full_iteration/w1"].Violations)
	}
	// A hybrid model keeps mamba; `attn` there captures the attention layers.
	nh, nl := builtin(t, "nemotronh_56b", "h100")
	p = planOf(t, Config{Model: nh, Layout: nl})
	for _, key := range []string{"transformer_engine/mamba/w3", "transformer_engine/attn,mamba/w3", "transformer_engine/attn,mlp,mamba/w3"} {
		if !p[key].Valid() {
			t.Errorf("nemotronh %s: %v", key, p[key].Violations)
		}
	}
}

// An explicit space is taken as given: scope sets in any order are one
// candidate, warm-ups are the space's, impls the space's.
func TestPlanExplicitSpace(t *testing.T) {
	m, l := builtin(t, "qwen3_30b_a3b", "h100")
	plan, err := Plan(Config{Model: m, Layout: l, Space: presets.Space{
		Impls:   []string{presets.ImplNone, presets.ImplTE},
		Scopes:  [][]string{{"moe_router", "attn"}, {"attn", "moe_router"}, {}},
		Warmups: []int{2},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, p := range plan {
		keys = append(keys, p.Candidate.Key())
	}
	want := []string{"none/-/w3", "transformer_engine/attn,moe_router/w2", "transformer_engine/layer/w2"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
}

func TestPlanBadInput(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	if _, err := Plan(Config{Model: m, Layout: l, MBridge: "0.9"}); err == nil {
		t.Error("unknown MB version accepted")
	}
	_, err := Plan(Config{Model: m, Layout: l, Sets: map[string]string{"model.no_such_field": "1"}})
	if err == nil || !strings.Contains(err.Error(), "no_such_field") {
		t.Errorf("bad set: %v", err)
	}
}

// With an estimator every valid candidate carries its estimate (the
// search's order and the ETA come from it), rejected ones none.
func TestPlanEstimates(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	est, err := estimate.ForGPU("h100")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Plan(Config{Model: m, Layout: l, Estimator: est})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plan {
		if p.Valid() != (p.Estimate != nil) {
			t.Fatalf("%s: valid %v, estimate %v", p.Candidate.Key(), p.Valid(), p.Estimate != nil)
		}
		if p.Estimate != nil && (p.Estimate.Source != "estimated" || p.Estimate.Candidate.Key() != p.Candidate.Key()) {
			t.Errorf("%s: estimate %+v", p.Candidate.Key(), p.Estimate.Candidate)
		}
	}
}

// Planning stays fast enough for the TUI to redo it on every edit: the
// whole default space of the largest model, rules and estimates.
func BenchmarkPlan(b *testing.B) {
	m, l := builtin(b, "deepseek_v3", "b200")
	est, _ := estimate.ForGPU("b200")
	for b.Loop() {
		if _, err := Plan(Config{Model: m, Layout: l, Estimator: est}); err != nil {
			b.Fatal(err)
		}
	}
}
