package recipe

import (
	"maps"
	"slices"

	"cgtune/presets"
	"cgtune/stepmodel"
)

// MoEWorkload sets the workload options the recipe decides, from the
// layout's recipe settings and the overrides the search checks (--set):
// the layer spec (model.transformer_impl), whether FusedAdam copies bf16
// moments (te_version), and the MoE mode: static shapes,
// with no token count sent to the host, for drop-and-pad experts
// (moe_expert_capacity_factor with moe_pad_expert_input_to_capacity, as
// MCore decides it) and for the flex dispatcher's static per-rank budget
// (moe_expert_rank_capacity_factor on hybridep or ncclep); else dropless.
// Engines build the same model the rules judged.
func MoEWorkload(opts stepmodel.WorkloadOptions, m presets.Model, l presets.Layout, mbridge string, sets map[string]string) (stepmodel.WorkloadOptions, error) {
	r, err := New(m, l, mbridge)
	if err != nil {
		return opts, err
	}
	// In key order, as the search checks them (checkSets) and the
	// recommendation applies them (Target.Conditions): an override the
	// rules judge by another one must meet it in the same order.
	for _, k := range slices.Sorted(maps.Keys(sets)) {
		if err := r.ApplySet(k + "=" + sets[k]); err != nil {
			return opts, err // it names the --set already
		}
	}
	return newState(r, 0).moeWorkload(m, opts), nil
}
