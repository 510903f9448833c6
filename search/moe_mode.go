package search

import (
	"fmt"

	"cgtune/engine"
	"cgtune/presets"
)

// MoEWorkload sets the workload options the recipe decides, from the
// layout's recipe settings and the overrides the search checks (--set):
// the MoE mode (drop-and-pad when model.moe_expert_capacity_factor and
// model.moe_pad_expert_input_to_capacity are both set, as MCore decides
// it, else dropless) and the layer spec (model.transformer_impl). Engines
// build the same model the rules judged.
func MoEWorkload(opts engine.WorkloadOptions, m presets.Model, l presets.Layout, mbridge string, sets map[string]string) (engine.WorkloadOptions, error) {
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
	if impl := st.str("model.transformer_impl"); impl == "local" {
		opts.LayerSpec = impl
	}
	if m.Arch.MoE == nil {
		return opts, nil
	}
	dropless := st.dropless()
	opts.Dropless = &dropless
	if !dropless {
		opts.MoECapacityFactor = st.f("model.moe_expert_capacity_factor")
	}
	return opts, nil
}
