package setup

import (
	"context"
	"testing"

	"cgtune/engine"
	"cgtune/internal/fileio/fileiotest"
	"cgtune/internal/testmodel"
	"cgtune/presets"
	"cgtune/search"
	"cgtune/stepmodel"
)

// A recompute given with --set changes the headless search's breakdown
// as the same change in the TUI's layout editor does: llama3_8b on h100
// keeps every layer's activations without it, one layer's input per
// layer with full uniform recompute of one layer, and the block method
// keeps the rest of the layers whole.
func TestSetRecomputeReachesTheBreakdown(t *testing.T) {
	fileiotest.IsolateCache(t)
	m, l := testmodel.Builtin(t, "llama3_8b", "h100")
	breakdown := func(sets map[string]string) *stepmodel.MemoryBreakdown {
		t.Helper()
		cfg := search.Config{Model: m, Layout: l, MBridge: "0.7", Sets: sets, Strategy: search.StrategyExhaustive,
			Space: presets.Space{Impls: []string{presets.ImplNone}, Warmups: []int{presets.DefaultWarmup}}}
		if err := Workload(&cfg); err != nil {
			t.Fatal(err)
		}
		est, err := EstimateEngine("h100", Profile{})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Engines = []engine.Engine{est}
		d, err := search.Run(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reference == nil || d.Reference.Ranked == nil || d.Reference.Ranked.Result.Memory.Breakdown == nil {
			t.Fatalf("no breakdown for the recipe's setting: %+v", d.Reference)
		}
		return d.Reference.Ranked.Result.Memory.Breakdown
	}
	full := func(method, n string) map[string]string {
		return map[string]string{"model.recompute_granularity": "full", "model.recompute_method": method, "model.recompute_num_layers": n}
	}
	plain := breakdown(nil)
	uniform := breakdown(full("uniform", "1"))
	block := breakdown(full("block", "1"))
	// One layer's input, bf16, per layer and micro-batch: tokens·hidden·2.
	tokens := float64(l.MBS*l.Seq) / float64(l.CPSize())
	input := tokens * float64(m.Arch.Hidden) * 2 / (1 << 20)
	if uniform.Activations >= plain.Activations/4 || float64(uniform.Activations) < 32*input {
		t.Errorf("full uniform recompute of 1 layer: activations %d MiB; without: %d MiB; inputs alone %.0f MiB",
			uniform.Activations, plain.Activations, 32*input)
	}
	if block.Activations <= uniform.Activations || block.Activations >= plain.Activations {
		t.Errorf("block recompute of 1 layer: activations %d MiB, want between uniform's %d and none's %d",
			block.Activations, uniform.Activations, plain.Activations)
	}
	if uniform.Weights != plain.Weights || uniform.Optimizer != plain.Optimizer {
		t.Errorf("recompute moved the persistent memory: %s vs %s", uniform.Describe(), plain.Describe())
	}
}
