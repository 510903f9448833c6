package search

import (
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cgtune/presets"
	"cgtune/recipe"
)

// invariantReleases are the Megatron-Bridge releases the invariant is
// checked on: G2 (0.4), G3 (0.6), and 0.5, the G3 release whose harness
// wants transformer_engine scopes in cuda_graph_scope. 0.3 and 0.7 share
// their harness and field names with 0.4 and 0.6.
var invariantReleases = []string{"0.4", "0.5", "0.6"}

// conditions are the --set values a search is checked under: the stock
// recipe's own, and one with drop-and-pad experts and EP communication
// overlap off (MoE models) and a full recompute of one layer per chunk.
func conditions(m presets.Model) []map[string]string {
	changed := map[string]string{"model.recompute_granularity": "full", "model.recompute_method": "uniform", "model.recompute_num_layers": "1"}
	if m.Arch.MoE != nil {
		changed["model.moe_expert_capacity_factor"] = "1.0"
		changed["model.moe_pad_expert_input_to_capacity"] = "true"
		changed["comm_overlap.overlap_moe_expert_parallel_comm"] = "false"
	}
	return []map[string]string{nil, changed}
}

// Every output of a recommendation is what was ranked, on the recipe it
// goes onto: for every built-in model × GPU type × Megatron-Bridge release
// × condition, each candidate the search plans as valid (Plan, the
// search's own candidate generation), rendered in every format
// (recipe.WinnerOverrides, what every writer renders) and applied to the
// stock recipe the way the user applies it (YAML onto the recipe, the
// dotlist through the Hydra grammar, the flags through the perf harness's
// parser, the Python and JSON back into fields), breaks no rule, and
// settles, both by a recipe script and through the perf harness's own
// pass, into exactly the configuration that was ranked: the recipe with
// the search's --set values and the candidate as the harness applies it.
// YAML, what cgtune check reads, also passes check's capture plan; the
// Megatron-LM flags of validate's {flags} render. Under the stock
// settings the search's what-if rows are checked too: an accepted
// what-if winner's overrides carry its enabling changes, and on the
// stock recipe they are the recipe that was ranked.
func TestEveryOutputIsWhatWasRanked(t *testing.T) {
	ms, err := presets.BuiltinModels()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var checked, whatIf atomic.Int64
	t.Run("models", func(t *testing.T) {
		for _, m := range ms {
			t.Run(m.Name, func(t *testing.T) {
				t.Parallel()
				for _, gpu := range slices.Sorted(maps.Keys(m.Layouts)) {
					l, err := m.Layout(gpu)
					if err != nil {
						t.Fatal(err)
					}
					for _, mb := range invariantReleases {
						if _, err := recipe.New(m, l, mb); err != nil {
							continue // a layout only later releases build (gpt_oss on b300)
						}
						for _, sets := range conditions(m) {
							n, w := checkTarget(t, recipe.Target{Model: m, Layout: l, MBridge: mb, Sets: sets}, sets == nil)
							checked.Add(int64(n))
							whatIf.Add(int64(w))
						}
					}
				}
			})
		}
	})
	t.Logf("%d candidate renderings checked (%d of what-if rows) in %s", checked.Load(), whatIf.Load(), time.Since(start).Round(time.Millisecond))
	if whatIf.Load() == 0 {
		t.Error("no what-if row was checked")
	}
}

// checkTarget checks every valid candidate of t's plan (with its what-if
// rows when whatIf is set) in every format, and returns how many
// renderings it checked, and how many of them were of what-if rows.
func checkTarget(t *testing.T, tg recipe.Target, whatIf bool) (n, whatIfN int) {
	t.Helper()
	plan, err := Plan(Config{Model: tg.Model, Layout: tg.Layout, MBridge: tg.MBridge, Sets: tg.Sets, WhatIf: whatIf})
	if err != nil {
		t.Fatalf("%s: %v", targetName(tg), err)
	}
	rec := recipe.NewRecommender(tg)
	for _, p := range plan {
		if !p.Valid() {
			continue
		}
		name := targetName(tg) + " " + p.Candidate.Key()
		ranked, _, vs, err := rec.Ranked(p.Candidate)
		if err != nil || len(vs) > 0 {
			t.Fatalf("%s: the ranked recipe: %v %v", name, err, vs)
		}
		want, _ := recipe.Settle(ranked, tg.MBridge)
		o := rec.Overrides(p.Candidate)
		for _, f := range recipe.Formats {
			data, err := o.Render(f)
			if err != nil {
				t.Fatalf("%s %s: %v", name, f, err)
			}
			for _, got := range appliedAs(t, rec, tg, f, data) {
				if d := recipe.Diff(want, got); len(d) > 0 {
					t.Errorf("%s %s: applied to the stock recipe it differs from what was ranked in %v\n%s", name, f, d, data)
				}
			}
			n++
			if len(p.Candidate.WhatIf) > 0 {
				whatIfN++
			}
		}
		if _, err := o.MegatronLMFlagTokens(false); err != nil {
			t.Errorf("%s: validate's {flags}: %v", name, err)
		}
	}
	return n, whatIfN
}

// appliedAs applies rendered overrides to tg's stock recipe every way
// their format is applied (flags: through the perf harness; the others:
// by a recipe script, and through the harness's own pass) and returns the
// recipes Megatron-Bridge settles them into, failing on a broken rule.
func appliedAs(t *testing.T, rec *recipe.Recommender, tg recipe.Target, format string, data []byte) []*recipe.Recipe {
	t.Helper()
	stock, err := rec.Stock()
	if err != nil {
		t.Fatal(err)
	}
	vs, err := stock.ApplyRendered(format, data, tg.MBridge)
	if err != nil || len(vs) > 0 {
		t.Fatalf("%s %s: read back: %v %v\n%s", targetName(tg), format, err, vs, data)
	}
	ways := []*recipe.Recipe{stock}
	if format != "flags" {
		harness := stock.Clone()
		if _, vs := recipe.ApplyHarness(harness, tg.MBridge); len(vs) > 0 {
			t.Fatalf("%s %s: the perf harness raises %v\n%s", targetName(tg), format, vs, data)
		}
		ways = append(ways, harness)
	}
	var out []*recipe.Recipe
	for _, r := range ways {
		check := func(r *recipe.Recipe, mb string) recipe.Report { return recipe.Check(r, mb) }
		if format == "yaml" {
			check = rec.CheckWithCapture
		}
		if rep := check(r, tg.MBridge); !rep.OK() {
			t.Fatalf("%s %s: cgtune check: %v\n%s", targetName(tg), format, rep.Violations, data)
		}
		settled, _ := recipe.Settle(r, tg.MBridge)
		out = append(out, settled)
	}
	return out
}

func targetName(tg recipe.Target) string {
	name := tg.Model.Name + " " + tg.Layout.GPU + " MB " + tg.MBridge
	if len(tg.Sets) > 0 {
		name += " with " + strings.Join(slices.Sorted(maps.Keys(tg.Sets)), ",")
	}
	return name
}
