package search

import (
	"context"
	"maps"
	"slices"
	"testing"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// The recipes Megatron-Bridge ships fit their GPUs: for every built-in
// model × GPU layout, the search (estimate engine, as on a machine
// without a GPU) judges the recipe's own setting to fit, none included,
// so every layout has a candidate that fits.
func TestShippedSettingsFitTheirGPUs(t *testing.T) {
	ms, err := presets.BuiltinModels()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		// Each GPU type with a layout of its own (h200 borrows h100's).
		for _, g := range slices.Sorted(maps.Keys(m.Layouts)) {
			t.Run(m.Name+"/"+g, func(t *testing.T) {
				l, err := m.Layout(g)
				if err != nil {
					t.Fatal(err)
				}
				shippedSettingFits(t, m, l)
			})
		}
	}
}

func shippedSettingFits(t *testing.T, m presets.Model, l presets.Layout) {
	d, err := Run(context.Background(), Config{Model: m, Layout: l, MBridge: "0.7", Strategy: StrategyExhaustive,
		Engines:         []engine.Engine{engine.SliceWhenTooBig(estimator(t, l.GPU))},
		JobGPUMemoryMiB: stepmodel.JobGPUMiB(l, 0),
		Space:           presets.Space{Impls: []string{presets.ImplNone}, Warmups: []int{presets.DefaultWarmup}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref := d.Reference
	if ref == nil || ref.Ranked == nil {
		t.Fatalf("the recipe's setting was not ranked: %+v", ref)
	}
	if !ref.Ranked.Fits {
		t.Errorf("%s does not fit: %s", candName(ref.Candidate), ref.Ranked.Note)
	}
	if ref.Ranked.Result.Memory.Breakdown == nil {
		t.Errorf("%s has no memory breakdown", candName(ref.Candidate))
	}
}
