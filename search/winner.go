package search

import (
	"fmt"
	"strings"

	"cgtune/engine"
	"cgtune/presets"
)

// KeyMoEPadForGraphs is MCore's moe_pad_experts_for_cuda_graph_inference:
// the router drops and pads so that experts see static shapes.
const KeyMoEPadForGraphs = "model.moe_pad_experts_for_cuda_graph_inference"

// WinnerOverrides are the recipe overrides for candidate c on model m in
// the field names of Megatron-Bridge mbridge (a release ParseMBridge
// accepts): presets.BuildOverrides, plus, for a full-iteration graph of an
// MoE model, moe_pad_experts_for_cuda_graph_inference=true as MB's
// full-iteration MoE perf recipes set it (MB perf_recipes/qwen/common.py).
// A graph cannot hold dropless MoE's token-count sync (engine.PlanCapture
// fails a dropless full-iteration graph), so a full-iteration winner of an
// MoE model was measured with drop-and-pad experts; the flag keeps the
// experts' shapes static in the recipe too.
func WinnerOverrides(m presets.Model, c presets.Candidate, mbridge string) presets.Overrides {
	gen, _ := presets.ParseMBridge(mbridge)
	o := presets.BuildOverrides(c, gen)
	if c.FullIteration() && m.Arch.MoE != nil {
		o.Entries = append(o.Entries, presets.Entry{Key: KeyMoEPadForGraphs, Value: true})
	}
	return o
}

// EstimateNote is the line every file written from an estimated winner
// carries, so nobody mistakes it for a measurement.
func EstimateNote(r engine.Result) string {
	gpu := strings.TrimSuffix(r.Device.Name, " (estimated)")
	if gpu == "" {
		gpu = "the layout's GPU"
	}
	return fmt.Sprintf("ESTIMATED by cgtune's estimate engine for %s (%.2f ms/step, %.3fx eager): not measured on a GPU", gpu, r.Step.Median, r.Speedup)
}
