package search

import (
	"fmt"

	"cgtune/engine"
	"cgtune/presets"
)

// MoEWorkload sets the workload's MoE mode from the recipe overrides the
// search checks (--set model.moe_expert_capacity_factor=… and
// model.moe_pad_expert_input_to_capacity=…): drop-and-pad when both are
// set, as MCore decides it, else dropless. Engines build the same MoE the
// rules judged.
func MoEWorkload(opts engine.WorkloadOptions, m presets.Model, l presets.Layout, mbridge string, sets map[string]string) (engine.WorkloadOptions, error) {
	if m.Arch.MoE == nil {
		return opts, nil
	}
	r, err := NewRecipe(m, l, mbridge)
	if err != nil {
		return opts, err
	}
	for k, v := range sets {
		if err := r.ApplySet(k + "=" + v); err != nil {
			return opts, fmt.Errorf("--set %s=%s: %w", k, v, err)
		}
	}
	st := newState(r, 0)
	dropless := st.dropless()
	opts.Dropless = &dropless
	if !dropless {
		opts.MoECapacityFactor = st.f("model.moe_expert_capacity_factor")
	}
	return opts, nil
}
