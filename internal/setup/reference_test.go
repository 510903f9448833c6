package setup_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/internal/fileio/fileiotest"
	"cgtune/internal/setup"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
)

// tiesWith reports whether b's step lies within the tie band of a, the
// faster: closer than the band's fraction of a's step, or with
// overlapping p10–p90 ranges (b's p10 at or below a's p90), as the
// ranking's documentation (search.DefaultTie) defines a tie.
func tiesWith(a, b engine.Result, frac float64) bool {
	gap := b.Step.Median - a.Step.Median
	return gap <= frac*a.Step.Median || b.Step.P10 <= a.Step.P90
}

// The recipe's own setting stands unless beaten beyond noise: for every
// built-in model on every GPU type it has a layout for, the headless
// search on the estimate engine (exhaustive over every impl × scope set,
// the default tie band) either picks the recipe's setting or a winner
// faster than it beyond the tie band; and when the recipe's setting wins,
// the reference line says to keep it. The space runs warm-up 3 (MCore's
// default) only and the search has no estimator to order it: neither
// changes a step time, and both would triple the test's time (the
// reference, whatever its warm-up, is always run).
func TestRecipeSettingStandsUnlessBeatenBeyondNoise(t *testing.T) {
	fileiotest.IsolateCache(t)
	ms, err := presets.BuiltinModels()
	if err != nil {
		t.Fatal(err)
	}
	start, searches, kept := time.Now(), 0, 0
	for _, m := range ms {
		for _, gpu := range slices.Sorted(maps.Keys(m.Layouts)) {
			l, err := m.Layout(gpu)
			if err != nil {
				t.Fatal(err)
			}
			cfg := search.Config{Model: m, Layout: l, Strategy: search.StrategyExhaustive,
				Space: presets.Space{Warmups: []int{presets.DefaultWarmup}}}
			if cfg.MBridge = firstRelease(m, l); cfg.MBridge == "" {
				t.Fatalf("%s %s: no Megatron-Bridge release builds the layout", m.Name, gpu)
			}
			if err := setup.Workload(&cfg); err != nil {
				t.Fatalf("%s %s: %v", m.Name, gpu, err)
			}
			e, err := setup.Open(context.Background(), &cfg, setup.Options{Engine: setup.EngineEstimate, GPUs: []int{0}})
			if err != nil {
				t.Fatal(err)
			}
			cfg.Estimator = nil
			d, err := search.Run(context.Background(), cfg, nil)
			e.Close()
			if err != nil {
				t.Fatalf("%s %s: %v", m.Name, gpu, err)
			}
			searches++
			ref := d.Reference
			switch {
			case d.Winner == nil || ref == nil || ref.Ranked == nil:
				t.Errorf("%s %s: no winner or no ranked reference: %+v", m.Name, gpu, ref)
			case !ref.Ranked.Fits:
				t.Logf("%s %s: the recipe's setting does not fit: it cannot win (%s)", m.Name, gpu, ref.Ranked.Note)
			case ref.Won(d.Winner):
				kept++
				if line := ref.Describe(d.Winner); !strings.Contains(line, search.KeepRecipe) {
					t.Errorf("%s %s: the recipe's setting won but the reference line says %q", m.Name, gpu, line)
				}
			case tiesWith(d.Winner.Result, ref.Ranked.Result, search.DefaultTie):
				t.Errorf("%s %s: %s replaces the recipe's %s inside the tie band (%.2f vs %.2f ms/step)", m.Name, gpu,
					d.Winner.Result.Candidate.Key(), ref.Ranked.Result.Candidate.Key(), d.Winner.Result.Step.Median, ref.Ranked.Result.Step.Median)
			}
		}
	}
	t.Logf("%d searches (%d keep the recipe's setting) in %s", searches, kept, time.Since(start).Round(time.Millisecond))
}

// firstRelease is the first Megatron-Bridge release from cgtune's default
// on whose fields the layout's recipe is built (a layout that sets a G3
// field needs 0.5 or later), "" for none.
func firstRelease(m presets.Model, l presets.Layout) string {
	from := slices.Index(presets.MBridgeVersions, presets.DefaultMBridge)
	for _, mb := range presets.MBridgeVersions[from:] {
		if _, err := recipe.New(m, l, mb); err == nil {
			return mb
		}
	}
	return ""
}
