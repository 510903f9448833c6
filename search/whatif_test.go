package search

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"cgtune/engine"
	"cgtune/engine/estimate"
	"cgtune/internal/testmodel"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/stepmodel"
)

// userSets are the --set values a user gives for each enabling change on
// qwen3_30b_a3b's h100 recipe, whose comm_overlap config decides EP
// overlap: the search the what-if rows must agree with.
var userSets = map[string]map[string]string{
	"drop-and-pad":   {"model.moe_expert_capacity_factor": "1.0", "model.moe_pad_expert_input_to_capacity": "true"},
	"ep-overlap-off": {"comm_overlap.overlap_moe_expert_parallel_comm": "false"},
}

func qwenH100(t *testing.T) (presets.Model, presets.Layout) {
	t.Helper()
	m, l := testmodel.Builtin(t, "qwen3_30b_a3b", "h100")
	return m, l
}

// Every what-if row is a candidate the recipe rejects today (rules and
// capture plan, as cgtune check judges it) that its changes let run, none
// of whose smaller change sets does; the recipe's own rows are what they
// are without what-if. On qwen3_30b_a3b's h100 recipe (dropless experts,
// EP overlap on) local full_iteration and te attn,moe are two changes
// away, and listed with both.
func TestWhatIfRowsAreRejectedCandidatesTheirChangesLetRun(t *testing.T) {
	m, l := qwenH100(t)
	cfg := Config{Model: m, Layout: l, MBridge: "0.4"}
	plain, err := Plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WhatIf = true
	plan, err := Plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var own []Planned
	for _, p := range plan {
		if len(p.Candidate.WhatIf) == 0 {
			own = append(own, p)
		}
	}
	if len(own) != len(plain) {
		t.Fatalf("the recipe's rows: %d with what-if, %d without", len(own), len(plain))
	}
	for i := range own {
		if own[i].Candidate.Key() != plain[i].Candidate.Key() || own[i].Valid() != plain[i].Valid() {
			t.Errorf("row %d: %s (valid %v) with what-if, %s (valid %v) without", i, own[i].Candidate.Key(), own[i].Valid(), plain[i].Candidate.Key(), plain[i].Valid())
		}
	}
	val := recipe.NewValidator(cfg.Target())
	rows := 0
	for _, p := range plan {
		c := p.Candidate
		if len(c.WhatIf) == 0 {
			continue
		}
		rows++
		if !p.Valid() || len(c.WhatIf) > MaxChanges {
			t.Errorf("%s: valid %v, %d changes", c.Key(), p.Valid(), len(c.WhatIf))
		}
		for _, sp := range append([]presets.Candidate{c}, p.Also...) {
			if !slices.Equal(sp.WhatIf, c.WhatIf) {
				t.Errorf("%s: spelling %s has other changes", c.Key(), sp.Key())
			}
			if r := val.ValidateWithCapture(sp); !r.OK() {
				t.Errorf("%s with its changes: %v", sp.Key(), r.Violations)
			}
			for _, sub := range subsets(sp.WhatIf) {
				smaller := sp
				smaller.WhatIf = sub
				if val.ValidateWithCapture(smaller).OK() {
					t.Errorf("%s: runs with only %v: not a smallest change set", sp.Key(), sub)
				}
			}
		}
	}
	if rows == 0 {
		t.Fatal("no what-if row")
	}
	both := []string{"drop-and-pad", "ep-overlap-off"}
	for _, want := range []presets.Candidate{
		{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 3},
		{Impl: presets.ImplTE, Scopes: []string{presets.ScopeAttn, presets.ScopeMoE}, Warmup: 3},
	} {
		if !slices.ContainsFunc(plan, func(p Planned) bool {
			return p.Candidate.Impl == want.Impl && slices.Equal(p.Candidate.Scopes, want.Scopes) && p.Candidate.Warmup == want.Warmup &&
				len(p.Candidate.WhatIf) == 2 && isSubset(both, p.Candidate.WhatIf)
		}) {
			t.Errorf("no what-if row of %s with %v", want.Label(), both)
		}
	}
}

// subsets are the proper subsets of names, the empty one included.
func subsets(names []string) [][]string {
	var out [][]string
	for mask := 0; mask < 1<<len(names)-1; mask++ {
		var s []string
		for i, n := range names {
			if mask&(1<<i) != 0 {
				s = append(s, n)
			}
		}
		out = append(out, s)
	}
	return out
}

// whatIfSpace is a small space of qwen3_30b_a3b: candidates the recipe
// allows and ones its rules reject for dropless experts and EP overlap.
var whatIfSpace = presets.Space{
	Impls:   []string{presets.ImplNone, presets.ImplLocal, presets.ImplTE},
	Scopes:  [][]string{{}, {presets.ScopeFullIteration}, {presets.ScopeAttn, presets.ScopeMoE}, {presets.ScopeMoERouter, presets.ScopeMoEPreprocess}},
	Warmups: []int{3},
}

func estimateSearch(t *testing.T, cfg Config) DoneEvent {
	t.Helper()
	rates, _ := stepmodel.SpecFor(cfg.Layout.GPU)
	cfg.Engines = []engine.Engine{estimate.New(rates, stepmodel.DefaultHostCosts(), engine.DeviceInfo{Name: "est"})}
	cfg.Strategy = StrategyExhaustive
	d, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A what-if row is the step the changes make: the same as a search given
// them with --set measures for the candidate, and its eager step with
// the changes that search's eager step; its speed-up is over the recipe's
// own eager step as it runs today (the none row of the search), the
// product of what the changes alone and the graph alone do. It ranks in
// the what-if table, not the main ranking, and the winner stays a
// candidate the recipe allows.
func TestWhatIfRowIsPricedOverTheRecipesOwnEagerStep(t *testing.T) {
	m, l := qwenH100(t)
	d := estimateSearch(t, Config{Model: m, Layout: l, MBridge: "0.4", Space: whatIfSpace, WhatIf: true})
	if len(d.WhatIf) == 0 {
		t.Fatal("no what-if row ranked")
	}
	none := slices.IndexFunc(d.Ranking, func(r Ranked) bool { return !r.Result.Candidate.Graphed() })
	if none < 0 {
		t.Fatal("no none row")
	}
	recipeEager := d.Ranking[none].Result.Step.Median
	for _, r := range d.Ranking {
		if len(r.Result.Candidate.WhatIf) > 0 || r.WhatIf != nil {
			t.Errorf("%s in the main ranking without being accepted", r.Result.Candidate.Key())
		}
	}
	if d.Winner == nil || len(d.Winner.Result.Candidate.WhatIf) > 0 {
		t.Fatalf("winner %v: want a candidate the recipe allows", d.Winner)
	}
	withSets := map[string]DoneEvent{}
	rowOf := map[string]string{} // in the --set searches: a spelling's plan row
	for _, r := range d.WhatIf {
		res, wi := r.Result, r.WhatIf
		if res.Failed() || wi == nil {
			t.Fatalf("%s: failed or unpriced: %v %+v", res.Candidate.Key(), res.Err, wi)
		}
		k := strings.Join(res.Candidate.WhatIf, ",")
		if _, ok := withSets[k]; !ok {
			sets := map[string]string{}
			for _, n := range res.Candidate.WhatIf {
				maps.Copy(sets, userSets[n])
			}
			cfg := Config{Model: m, Layout: l, MBridge: "0.4", Space: whatIfSpace, Sets: sets}
			withSets[k] = estimateSearch(t, cfg)
			plan, err := Plan(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range plan {
				for _, sp := range append([]presets.Candidate{p.Candidate}, p.Also...) {
					rowOf[k+" "+sp.Key()] = p.Candidate.Key()
				}
			}
		}
		plain := res.Candidate
		plain.WhatIf = nil
		i := slices.IndexFunc(withSets[k].Ranking, func(o Ranked) bool { return o.Result.Candidate.Key() == rowOf[k+" "+plain.Key()] })
		if i < 0 {
			t.Fatalf("%s: not ranked by the search given the changes with --set", plain.Key())
		}
		set := withSets[k].Ranking[i].Result
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(a, b) }
		if !near(res.Step.Median, set.Step.Median) || !near(wi.ChangedEager.Median, set.Eager.Median) {
			t.Errorf("%s: step %.3f, eager with the changes %.3f; the --set search: step %.3f, eager %.3f",
				res.Candidate.Key(), res.Step.Median, wi.ChangedEager.Median, set.Step.Median, set.Eager.Median)
		}
		if !near(wi.RecipeEager.Median, recipeEager) || !near(res.Eager.Median, recipeEager) || !near(res.Speedup, recipeEager/res.Step.Median) {
			t.Errorf("%s: speed-up %.4f over eager %.3f (recipe's %.3f): want %.4f over the recipe's eager step %.3f",
				res.Candidate.Key(), res.Speedup, res.Eager.Median, wi.RecipeEager.Median, recipeEager/res.Step.Median, recipeEager)
		}
		if !near(wi.GraphSpeedup*wi.ChangeSpeedup, res.Speedup) || !near(wi.ChangeSpeedup, recipeEager/set.Eager.Median) {
			t.Errorf("%s: graph %.4f × changes %.4f ≠ speed-up %.4f", res.Candidate.Key(), wi.GraphSpeedup, wi.ChangeSpeedup, res.Speedup)
		}
		if len(wi.Changes) != len(res.Candidate.WhatIf) {
			t.Errorf("%s: %d changes priced", res.Candidate.Key(), len(wi.Changes))
		}
		for _, c := range wi.Changes {
			if c.Cost == "" || !strings.HasPrefix(c.Priced, "modelled") {
				t.Errorf("%s: %s: cost %q, priced %q: want its cost and modelled by the estimate engine", res.Candidate.Key(), c.Name, c.Cost, c.Priced)
			}
		}
	}
}

// Accepting changes lets the what-if rows of only those changes rank with
// the candidates the recipe allows, and win when they are faster beyond
// the tie band; rows that need a change not accepted stay out.
func TestAcceptedWhatIfRowsCompeteForTheWinner(t *testing.T) {
	m, l := qwenH100(t)
	accept := []string{"drop-and-pad"}
	d := estimateSearch(t, Config{Model: m, Layout: l, MBridge: "0.4", Space: whatIfSpace, WhatIf: true, Accept: accept})
	inMain := 0
	for _, r := range d.WhatIf {
		accepted := isSubset(r.Result.Candidate.WhatIf, accept)
		if r.WhatIf.Accepted != accepted {
			t.Errorf("%s: accepted %v, want %v", r.Result.Candidate.Key(), r.WhatIf.Accepted, accepted)
		}
		i := slices.IndexFunc(d.Ranking, func(o Ranked) bool { return o.Result.Candidate.Key() == r.Result.Candidate.Key() })
		if (i >= 0) != accepted {
			t.Errorf("%s: in the main ranking %v, accepted %v", r.Result.Candidate.Key(), i >= 0, accepted)
		}
		if accepted {
			inMain++
			if got := d.Ranking[i].Result.Speedup; math.Abs(got-r.Result.Speedup) > 1e-9 {
				t.Errorf("%s: speed-up %.4f in the main ranking, %.4f in the what-if table", r.Result.Candidate.Key(), got, r.Result.Speedup)
			}
		}
	}
	if inMain == 0 {
		t.Fatal("no accepted row: the space has none the test can check")
	}
	if d.Winner == nil || Winner(d.Ranking).Result.Candidate.Key() != d.Winner.Result.Candidate.Key() {
		t.Fatalf("winner %v is not the main ranking's", d.Winner)
	}
	// The main ranking is what the search without accepting ranks, plus
	// the accepted rows: its best is the winner.
	plain := estimateSearch(t, Config{Model: m, Layout: l, MBridge: "0.4", Space: whatIfSpace, WhatIf: true})
	if len(d.Ranking) != len(plain.Ranking)+inMain {
		t.Errorf("main ranking: %d rows, want the %d of the recipe's candidates and %d accepted", len(d.Ranking), len(plain.Ranking), inMain)
	}
}

// recordingEngine is an estimate engine that records the workload
// options each candidate was run on.
type recordingEngine struct {
	engine.Engine
	mu   sync.Mutex
	opts map[string]stepmodel.WorkloadOptions
}

func (e *recordingEngine) Run(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, o engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	e.mu.Lock()
	e.opts[c.Key()] = w.Spec.Options
	e.mu.Unlock()
	return e.Engine.Run(ctx, w, c, o, emit)
}

// The engines are given the step a what-if row's changes make (the
// megatron engine's worker builds its slice from the workload's options:
// drop-and-pad experts for real), the recipe's own step for the others.
func TestEnginesRunTheStepTheChangesMake(t *testing.T) {
	m, l := qwenH100(t)
	rates, _ := stepmodel.SpecFor(l.GPU)
	rec := &recordingEngine{Engine: estimate.New(rates, stepmodel.DefaultHostCosts(), engine.DeviceInfo{Name: "est"}), opts: map[string]stepmodel.WorkloadOptions{}}
	cfg := Config{Model: m, Layout: l, MBridge: "0.4", Space: whatIfSpace, WhatIf: true, Strategy: StrategyExhaustive, Engines: []engine.Engine{rec}}
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for k, o := range rec.opts {
		dropless := o.Dropless == nil || *o.Dropless
		switch {
		case strings.Contains(k, "+"): // a what-if row's key names its changes
			seen++
			pad := strings.Contains(k, "drop-and-pad")
			if dropless == pad || pad && o.MoECapacityFactor != 1 {
				t.Errorf("%s ran with dropless %v, capacity factor %g", k, dropless, o.MoECapacityFactor)
			}
			if o.EPOverlap == strings.Contains(k, "ep-overlap-off") {
				t.Errorf("%s ran with EP overlap %v", k, o.EPOverlap)
			}
		case !dropless || !o.EPOverlap:
			t.Errorf("%s, a candidate the recipe allows, ran with dropless %v and EP overlap %v: not the recipe's step", k, dropless, o.EPOverlap)
		}
	}
	if seen == 0 {
		t.Fatal("no what-if row ran")
	}
}

// Each row says how the engine that ran it took each change: the
// megatron engine runs drop-and-pad on its slice, and EP overlap off
// where its ranks run the EP all-to-all, else the collectives model adds
// it (modelled); the emulating engines model both; a change of what the
// job checks or needs is not priced.
func TestEachChangeSaysHowTheEngineTookIt(t *testing.T) {
	pad, _ := recipe.LookupChange("drop-and-pad")
	off, _ := recipe.LookupChange("ep-overlap-off")
	nan, _ := recipe.LookupChange("nan-checks-off")
	fw := func(modelled ...string) engine.Result {
		return engine.Result{Source: engine.SourceFramework, Framework: &engine.FrameworkInfo{WorldSize: 1, Modelled: modelled}}
	}
	for _, tc := range []struct {
		ch   recipe.Change
		res  engine.Result
		want string
	}{
		{pad, fw("EP 8"), "run:"},
		{off, fw("EP 8"), "modelled:"},
		{off, fw(), "run:"},
		{pad, engine.Result{Source: engine.SourceEstimated}, "modelled:"},
		{off, engine.Result{Source: engine.SourceMeasured}, "modelled:"},
		{nan, fw(), "not priced:"},
		{nan, engine.Result{Source: engine.SourceJob}, "run:"},
	} {
		if got := pricedBy(tc.ch, tc.res); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s on a %s result (modelled %v): %q, want %s ...", tc.ch.Name, tc.res.Source, tc.res.Framework, got, tc.want)
		}
	}
}
