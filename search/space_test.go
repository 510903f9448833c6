package search

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/engine/estimate"
	"cgtune/internal/testmodel"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/stepmodel"
)

func builtin(t testing.TB, name, gpu string) (presets.Model, presets.Layout) {
	t.Helper()
	return testmodel.Builtin(t, name, gpu)
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
// rules reject carries their ids, scopes that capture nothing on the
// model make a SPACE rejection when nothing else is left, and every other
// spelling is a row of its own or an alias of one.
// droplessBuiltin is a built-in dropless MoE layout whose recipe leaves EP
// communication overlap off: qwen3_30b_a3b's b200 one (the h100 recipe
// turns the overlap on, and with it G2's TC-36 rejects every local graph).
func droplessBuiltin(t *testing.T) (presets.Model, presets.Layout) {
	t.Helper()
	return builtin(t, "qwen3_30b_a3b", "b200")
}

func TestPlanDefaultSpace(t *testing.T) {
	m, l := droplessBuiltin(t)
	plan, err := Plan(Config{Model: m, Layout: l})
	if err != nil {
		t.Fatal(err)
	}
	// none once + 2 graph impls × (64 subsets + full_iteration) × 3 warm-ups,
	// each either a row or listed under one.
	spellings := 0
	for _, p := range plan {
		spellings += 1 + len(p.Also)
	}
	if spellings != 1+2*65*3 {
		t.Fatalf("%d spellings in %d rows, want %d", spellings, len(plan), 1+2*65*3)
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
		// Dropless MoE syncs with the host: a graph of the whole
		// iteration cannot be captured.
		{"local/full_iteration/w3", []string{recipe.WillFailID}, "syncs with the host inside the full-iteration graph"},
		{"transformer_engine/moe/w3", []string{"TC-22"}, "moe cuda graph is only supported with drop-padding MoE."},
		{"transformer_engine/mlp/w3", []string{"TC-21"}, "mlp cuda graph is only supported for dense layers"},
		{"transformer_engine/moe,moe_router/w1", []string{"TC-18", "TC-22"}, "must not contain both moe and moe_router"},
		{"transformer_engine/moe_preprocess/w1", []string{"TC-19"}, "moe_preprocess cuda graph is only supported with moe_router cuda graph."},
		{"transformer_engine/full_iteration/w3", []string{"PERF-05"}, ""},
		{"transformer_engine/mamba/w3", []string{SpaceID}, "mamba captures nothing on qwen3_30b_a3b: the model has no Mamba layer (nothing is captured)"},
		// The whole-layer graph holds the dropless dispatch's host sync.
		{"transformer_engine/layer/w3", []string{recipe.WillFailID}, "token_counts_to_host"},
		// MB 0.4 takes per-layer scopes with impl local, but GPTModel's
		// TransformerLayer is graphed by local only for attn or mlp.
		{"local/moe_router,moe_preprocess/w3", []string{SpaceID}, "captures nothing on qwen3_30b_a3b's layers"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			p, ok := byKey[tc.key]
			if !ok {
				t.Errorf("%s not planned", tc.key)
				return
			}
			if got := planIDs(p); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s: rejected by %v (%v), want %v", tc.key, got, p.Violations, tc.want)
				return
			}
			if tc.msg != "" && !strings.Contains(p.Violations[0].Message, tc.msg) {
				t.Errorf("%s: message %q, want it to contain %q", tc.key, p.Violations[0].Message, tc.msg)
			}
		})
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
		"local/layer/w1":                   "", // MB 0.4 takes scoped local graphs: local attn runs as this
	} {
		t.Run(key, func(t *testing.T) {
			if got := strings.Join(planIDs(p[key]), ","); got != want {
				t.Errorf("llama %s: %q (%v), want %q", key, got, p[key].Violations, want)
			}
		})
	}
	if also := p["local/layer/w1"].Also; len(also) == 0 || also[0].Key() != "local/attn/w1" {
		t.Errorf("llama local whole-layer: also %v, want local attn first", also)
	}
	// local mlp without attn is not the whole layer: Megatron-Core fails
	// to build it (measured on the H200 with core 0.20.0).
	if mlp := p["local/mlp/w1"]; !reflect.DeepEqual(planIDs(mlp), []string{recipe.WillFailID}) ||
		!strings.Contains(mlp.Violations[0].Message, "no attribute 'is_moe_layer'") {
		t.Errorf("llama local mlp: %v, want %s naming Megatron-Core's AttributeError", mlp.Violations, recipe.WillFailID)
	}
	for _, c := range p["local/layer/w1"].Also {
		if c.Key() == "local/mlp/w1" {
			t.Error("local mlp is listed as the whole layer")
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
	// ...plus the recipe's own setting, which every search measures.
	want := []string{"none/-/w3", "transformer_engine/attn,moe_router/w2", "transformer_engine/layer/w2", "transformer_engine/moe_router,moe_preprocess/w3"}
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

// A full-iteration graph is one configuration however its scope list is
// spelled: the space [full_iteration] + [full_iteration, attn] plans one
// row, written local full_iteration, with the other spelling under it, on
// MB 0.4 (from 0.5 on, the rules reject the combination: TC-15, PERF-03).
func TestPlanFullIterationAliases(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	for _, mb := range []string{"0.3", "0.4"} {
		t.Run(mb, func(t *testing.T) {
			plan, err := Plan(Config{Model: m, Layout: l, MBridge: mb, Space: presets.Space{
				Impls:   []string{presets.ImplLocal},
				Scopes:  [][]string{{"full_iteration"}, {"full_iteration", "attn"}},
				Warmups: []int{3},
			}})
			if err != nil {
				t.Fatal(err)
			}
			// The recipe's own setting (none for llama3_8b on h100) comes last.
			if len(plan) != 2 || !plan[0].Valid() || plan[0].Candidate.Key() != "local/full_iteration/w3" || plan[1].Candidate.Key() != "none/-/w3" {
				t.Fatalf("MB %s: plan %+v, want one valid local/full_iteration/w3 row and the recipe's none", mb, plan)
			}
			if len(plan[0].Also) != 1 || plan[0].Also[0].Key() != "local/full_iteration,attn/w3" || len(plan[0].Why) == 0 {
				t.Errorf("MB %s: also %v (why %v)", mb, plan[0].Also, plan[0].Why)
			}
		})
	}
}

// No two rows the search would run emit the same overrides, for every
// built-in shape (dense, MoE, MoE with dense layers, hybrid) and both
// generations: the overrides are what the job runs, so two rows with the
// same overrides would measure one configuration twice.
func TestPlanRowsEmitDistinctOverrides(t *testing.T) {
	for _, name := range []string{"llama3_8b", "qwen3_30b_a3b", "deepseek_v3", "nemotronh_56b", "nemotron_3_nano"} {
		t.Run(name, func(t *testing.T) {
			m, l := builtin(t, name, firstGPU(t, name))
			for _, mb := range []string{"0.4", "0.5", "0.6"} {
				t.Run(mb, func(t *testing.T) {
					plan, err := Plan(Config{Model: m, Layout: l, MBridge: mb})
					if err != nil {
						t.Fatal(err)
					}
					seen := map[string]string{}
					for _, p := range plan {
						if !p.Valid() {
							continue
						}
						o, err := recipe.WinnerOverrides(recipe.Target{Model: m, Layout: l, MBridge: mb}, p.Candidate).Render("dotlist")
						if err != nil {
							t.Fatal(err)
						}
						if prev, dup := seen[string(o)]; dup {
							t.Errorf("%s MB %s: %s and %s emit the same overrides %s", name, mb, prev, p.Candidate.Key(), o)
						}
						seen[string(o)] = p.Candidate.Key()
						for _, a := range p.Also {
							if a.Key() == p.Candidate.Key() {
								t.Errorf("%s MB %s: %s lists itself as an alias", name, mb, a.Key())
							}
						}
					}
				})
			}
		})
	}
}

func firstGPU(t *testing.T, name string) string {
	m, err := presets.LookupModel(name)
	if err != nil {
		t.Fatal(err)
	}
	return m.GPUs()[0]
}

// Capture failures known before anything runs are not valid: a graph that
// holds dropless MoE's host sync. Drop-and-pad (from --set) captures, and
// so do graphs that leave the dispatch eager.
func TestPlanWillFail(t *testing.T) {
	m, l := droplessBuiltin(t)
	p := planOf(t, Config{Model: m, Layout: l})
	for key, want := range map[string]string{
		"transformer_engine/layer/w3":                          recipe.WillFailID,
		"local/layer/w3":                                       recipe.WillFailID, // local attn, local moe_router,... on a GPT layer
		"transformer_engine/attn/w3":                           "",
		"transformer_engine/attn,moe_router,moe_preprocess/w3": "",
		"local/full_iteration/w3":                              recipe.WillFailID, // the whole iteration holds the sync
	} {
		t.Run(key, func(t *testing.T) {
			got := strings.Join(planIDs(p[key]), ",")
			if got != want {
				t.Errorf("%s: %q (%v), want %q", key, got, p[key].Violations, want)
			}
		})
	}
	if msg := p["transformer_engine/layer/w3"].Violations[0].Message; !strings.Contains(msg, "dropless MoE syncs with the host inside the whole-layer graph of layer 0") || !strings.Contains(msg, "drop-and-pad") {
		t.Errorf("will-fail message %q", msg)
	}
	padded := planOf(t, Config{Model: m, Layout: l, Sets: map[string]string{
		"model.moe_expert_capacity_factor": "1.0", "model.moe_pad_expert_input_to_capacity": "true"}})
	for _, key := range []string{"transformer_engine/layer/w3", "local/full_iteration/w3"} {
		if !padded[key].Valid() {
			t.Errorf("drop-and-pad %s: %v", key, padded[key].Violations)
		}
	}
	// A dense model has no host sync in any layer.
	dm, dl := builtin(t, "llama3_8b", "h100")
	if v := planOf(t, Config{Model: dm, Layout: dl})["transformer_engine/layer/w3"]; !v.Valid() {
		t.Errorf("llama whole layer: %v", v.Violations)
	}
}

// With RunPredictedFailures the predicted capture failures are run: valid,
// carrying the prediction, and each result says whether the engine agreed.
func TestRunPredictedFailures(t *testing.T) {
	m, l := droplessBuiltin(t)
	space := presets.Space{Impls: []string{presets.ImplNone, presets.ImplLocal}, Scopes: [][]string{{}, {"full_iteration"}}, Warmups: []int{3}}
	p := planOf(t, Config{Model: m, Layout: l, Space: space, RunPredictedFailures: true})
	full := p["local/full_iteration/w3"]
	if !full.Valid() || !strings.Contains(full.PredictedFailure, "syncs with the host inside the full-iteration graph") {
		t.Fatalf("full iteration: %+v", full)
	}
	// The engine fails the whole layer (as predicted) and captures the
	// full iteration (a framework that made the dispatch graph-safe).
	fe := &fakeEngine{fail: map[string]engine.FailureKind{"local/layer": engine.FailureCapture}}
	d, err := Run(context.Background(), Config{Model: m, Layout: l, Space: space, RunPredictedFailures: true,
		Engines: []engine.Engine{fe}, Strategy: StrategyExhaustive}, nil)
	if err != nil {
		t.Fatal(err)
	}
	notes := map[string]string{}
	for _, r := range d.Ranking {
		notes[armKey(r.Result.Candidate)] = strings.Join(r.Result.Notes, " ")
	}
	if !strings.Contains(notes["local/layer"], "the run failed too (capture)") {
		t.Errorf("whole layer notes %q", notes["local/layer"])
	}
	if !strings.Contains(notes["local/full_iteration"], "the prediction is wrong for this framework") {
		t.Errorf("full iteration notes %q", notes["local/full_iteration"])
	}
	if strings.Contains(notes["none/-"], "predicted") {
		t.Errorf("none notes %q", notes["none/-"])
	}
}

// A saved space is written as the model runs it.
func TestCanonicalSpace(t *testing.T) {
	m, _ := builtin(t, "qwen3_30b_a3b", "h100")
	got := CanonicalSpace(m, presets.Space{
		Impls:   []string{"local", "transformer_engine"},
		Scopes:  [][]string{{"full_iteration", "attn"}, {"full_iteration"}, {"moe_router", "attn", "mamba"}, {"attn", "moe_router"}, {"mamba"}},
		Warmups: []int{3, 1, 3},
	})
	want := presets.Space{
		Impls:   []string{"local", "transformer_engine"},
		Scopes:  [][]string{{"full_iteration"}, {"attn", "moe_router"}, {"mamba"}},
		Warmups: []int{1, 3},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CanonicalSpace = %+v, want %+v", got, want)
	}
}

// cancellingEstimator cancels the search's context on its first estimate
// and counts the estimates asked of it.
type cancellingEstimator struct {
	engine.Engine
	cancel context.CancelFunc
	calls  int
}

func (e *cancellingEstimator) Run(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	e.calls++
	e.cancel()
	return e.Engine.Run(ctx, w, c, opts, emit)
}

// Planning stops when the search's context is cancelled, so an interrupt
// does not wait until every candidate of a large space is planned and
// estimated.
func TestPlanStopsWhenCancelled(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	est := &cancellingEstimator{Engine: estimator(t, "h100"), cancel: cancel}
	cfg := Config{Model: m, Layout: l, Engines: []engine.Engine{&fakeEngine{}}, Estimator: est}
	var ev events
	_, err := Run(ctx, cfg, ev.emit)
	if !errors.Is(err, context.Canceled) || est.calls != 1 || ev.plan != nil {
		t.Errorf("err %v, %d estimates after the cancel, plan event %v", err, est.calls, ev.plan != nil)
	}
}

// A space past the bound (warm-ups 0 to 1000) is refused at once, saying
// the bound and why, instead of being planned for minutes.
func TestPlanRefusesAnOversizedSpace(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	var warmups []int
	for w := range presets.MaxWarmup + 1 {
		warmups = append(warmups, w)
	}
	for _, tc := range []struct {
		name  string
		space presets.Space
		want  string
	}{
		{"every warm-up", presets.Space{Warmups: warmups}, "130131 candidates (2 graphed impls × 65 scope sets × 1001 warm-ups + none), more than the 4096"},
		{"one impl", presets.Space{Impls: []string{presets.ImplLocal}, Warmups: warmups[:64]}, "4160 candidates (1 graphed impls × 65 scope sets × 64 warm-ups)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Plan(Config{Model: m, Layout: l, Space: tc.space})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "checked against the rules") {
				t.Errorf("%v", err)
			}
		})
	}
	if _, err := Plan(Config{Model: m, Layout: l, Space: presets.Space{Warmups: warmups[:31]}}); err != nil {
		t.Errorf("4031 candidates: %v", err)
	}
}
