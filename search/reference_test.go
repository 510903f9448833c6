package search

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// Every search measures the recipe's own setting, whatever the space, and
// every ranked row says how it compares with it: llama3_8b on b200 ships
// a local full-iteration graph; a space of none and te attn still runs it.
func TestEveryResultComparesWithTheRecipesSetting(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "b200")
	ref := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 3}
	if got := l.ShippedGraph(); got.Key() != ref.Key() {
		t.Fatalf("llama3_8b b200 ships %s; the test expects %s", got.Key(), ref.Key())
	}
	steps := map[string]float64{"local/full_iteration": 950, "transformer_engine/attn": 900}
	for _, s := range Strategies() {
		t.Run(s, func(t *testing.T) {
			fe := &fakeEngine{step: func(c presets.Candidate) float64 {
				if ms, ok := steps[armKey(c)]; ok {
					return ms
				}
				return 1000
			}}
			d, err := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{fe}, Strategy: s, Tie: NoTie,
				Space: presets.Space{Impls: []string{presets.ImplNone, presets.ImplTE}, Scopes: [][]string{{"attn"}}, Warmups: []int{2}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d.Reference == nil || d.Reference.Ranked == nil || d.Reference.Candidate.Key() != ref.Key() || d.Reference.From != ReferenceFromRecipe {
				t.Fatalf("reference %+v", d.Reference)
			}
			if d.Winner == nil || armKey(d.Winner.Result.Candidate) != "transformer_engine/attn" {
				t.Fatalf("winner %+v", d.Winner)
			}
			if want := 950.0 / 900; abs(d.Winner.VsReference-want) > 1e-9 {
				t.Errorf("winner's gain over the recipe %.4f, want %.4f", d.Winner.VsReference, want)
			}
			line := d.Reference.Describe(d.Winner)
			if !strings.Contains(line, "the recipe ships full_iteration w3") || !strings.Contains(line, "5.6% faster") {
				t.Errorf("reference line %q", line)
			}
		})
	}
}

// A preset may name its own reference.
func TestPresetNamesItsReference(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "b200")
	own := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"mlp"}, Warmup: 2}
	d, err := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{&fakeEngine{}}, Strategy: StrategyExhaustive,
		Reference: &own, Space: presets.Space{Impls: []string{presets.ImplNone}, Warmups: []int{3}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Reference == nil || d.Reference.From != ReferenceFromPreset || d.Reference.Ranked == nil || d.Reference.Ranked.Result.Candidate.Key() != own.Key() {
		t.Fatalf("reference %+v", d.Reference)
	}
}

// A recipe's own layout is known to run its setting on its GPU: where the
// memory model puts that setting over the GPU, a candidate that needs no
// more fits, one that needs more does not; an edited layout or an
// override that moves memory loses the anchor.
func TestTheRecipeIsKnownToFit(t *testing.T) {
	mk := func(total int64) Ranked {
		r := res(presets.ImplNone, nil, 3, 1000, 0)
		r.Memory.Breakdown = &stepmodel.MemoryBreakdown{Total: total, GPUMiB: 1000}
		return Ranked{Result: r}
	}
	opts := RankOptions{KnownToFitMiB: 1200}
	for _, tc := range []struct {
		total int64
		fits  bool
	}{{900, true}, {1200, true}, {1300, false}} {
		t.Run(fmt.Sprint(tc.total), func(t *testing.T) {
			r := mk(tc.total)
			if got := fits(&r, opts); got != tc.fits {
				t.Errorf("total %d MiB against a known-to-fit 1200 on a 1000 MiB GPU: fits %v, want %v (%s)", tc.total, got, tc.fits, r.Note)
			}
		})
	}
	m, l := builtin(t, "llama31_405b", "b200")
	if !isBuiltinRecipe(Config{Model: m, Layout: l}) {
		t.Error("llama31_405b's b200 layout is not taken as the recipe's")
	}
	edited := l.Clone()
	edited.MBS = 2
	if isBuiltinRecipe(Config{Model: m, Layout: edited}) {
		t.Error("an edited layout is taken as the recipe's")
	}
	if isBuiltinRecipe(Config{Model: m, Layout: l, Sets: map[string]string{"model.transformer_impl": "local"}}) {
		t.Error("a layer-spec override is taken as the recipe's job")
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// Halving measures the reference in its last round even when the round's
// fastest would leave it out: a winner is compared with the reference
// measured as long as itself.
func TestHalvingKeepsTheReferenceToTheEnd(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "b200") // ships full_iteration w3
	fe := &fakeEngine{step: func(c presets.Candidate) float64 {
		switch {
		case armKey(c) == "local/full_iteration":
			return 990 // the slowest graphed arm
		case c.Graphed():
			return 800 + 10*float64(len(c.Scopes))
		}
		return 1000
	}}
	d, err := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{fe}, Strategy: StrategyHalving, Budget: -1, Tie: NoTie,
		Space: presets.Space{Impls: []string{presets.ImplNone, presets.ImplLocal, presets.ImplTE},
			Scopes: [][]string{{}, {"attn"}, {"mlp"}, {"attn", "mlp"}, {presets.ScopeFullIteration}}, Warmups: []int{3}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := 0
	for _, r := range d.Ranking {
		last = max(last, r.Round)
	}
	if last < 2 {
		t.Fatalf("the search ran %d round(s); the test needs a later round to drop the reference from", last)
	}
	ref := d.Reference
	if ref == nil || ref.Ranked == nil || armKey(ref.Ranked.Result.Candidate) != "local/full_iteration" || ref.Ranked.Round != last {
		t.Errorf("reference %+v, want local full_iteration measured in round %d", ref, last)
	}
}
