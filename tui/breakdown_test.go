package tui

import (
	"strconv"
	"strings"
	"testing"

	"cgtune/stepmodel"
)

// The results pane lists every term the breakdown's total adds, so that
// they sum to the figure the gauge shows: the larger of the activations
// and the optimizer step's temporaries, and the allocator's reserve named
// by its configuration.
func TestBreakdownTextSumsToTheTotal(t *testing.T) {
	for _, b := range []stepmodel.MemoryBreakdown{
		{Weights: 11352, Gradients: 7470, Optimizer: 25232, Activations: 131020, Slack: 1895, Context: 9242},
		{Weights: 26509, Gradients: 25706, Optimizer: 49235, ExpertStash: 48847, Activations: 9000, MainGrads: 24618, Graphs: 24622, Slack: 1969, Context: 9242, ExpandableSegments: true},
	} {
		b.Total = b.Weights + b.Gradients + b.Optimizer + b.ExpertStash + max(b.Activations, b.MainGrads+b.StateCopies) + b.Graphs + b.Slack + b.Context
		text := breakdownText(&b)
		sum := 0.0
		for _, part := range strings.Split(strings.TrimSuffix(text, " GiB"), " · ") {
			fields := strings.Fields(part)
			for i, f := range fields {
				if v, err := strconv.ParseFloat(f, 64); err == nil && i > 0 {
					sum += v
					break
				}
			}
		}
		if got, want := sum, float64(b.Total)/1024; got < want-0.5 || got > want+0.5 {
			t.Errorf("%q sums to %.1f GiB; the total is %.1f", text, got, want)
		}
		if !strings.Contains(text, "allocator slack") || !strings.Contains(text, b.Allocator()) {
			t.Errorf("%q does not name the allocator's reserve (%s)", text, b.Allocator())
		}
		step := b.MainGrads > b.Activations
		if strings.Contains(text, "optimizer step") != step || strings.Contains(text, "activations") == step || strings.Contains(text, "expert stash") != (b.ExpertStash > 0) {
			t.Errorf("%q: want the optimizer step %v, the stash %v", text, step, b.ExpertStash > 0)
		}
	}
}
