package recipe

import (
	"maps"
	"reflect"
	"slices"

	"cgtune/presets"
)

// setMemoryDefaults writes the recipe fields that move one rank's memory
// and have no other writer in New, from the layout.
func (c *Recipe) setMemoryDefaults(l presets.Layout) {
	c.vals["model.cpu_offloading_num_layers"] = Value{Int: l.CPUOffloadLayers}
	c.vals["optimizer.use_precision_aware_optimizer"] = Value{Bool: l.PrecisionAwareOptimizer}
	c.vals["ddp.grad_reduce_in_fp32"] = Value{Bool: l.GradReduceInFP32}
	c.vals["mixed_precision.grad_reduce_in_fp32"] = Value{Bool: l.GradReduceInFP32}
	c.vals["model.account_for_embedding_in_pipeline_split"] = Value{Bool: l.AccountForEmbedding}
	c.vals["model.account_for_loss_in_pipeline_split"] = Value{Bool: l.AccountForLoss}
	if l.PipelineLayout != "" {
		c.vals["model.pipeline_model_parallel_layout"] = Value{Str: l.PipelineLayout}
	}
}

// MemoryLayout is layout l with the recipe's values of every field that
// moves one rank's memory, as the job runs them: what a --set changed
// reaches the memory model as the TUI's layout editor's changes do. The
// values are the ones Megatron-Bridge applies: mixed_precision's
// grad_reduce_in_fp32 wins over ddp's (update_config_with_precision_overrides),
// recompute and offload settings count only where their switch is on,
// and a full recompute without a method is MCore's uniform.
func (c *Recipe) MemoryLayout(l presets.Layout) presets.Layout {
	out := l.Clone()
	get := func(k string) Value { v, _ := c.Get(k); return v }
	b := func(k string) bool { v := get(k); return v.Bool && !v.Null }
	i := func(k string) int {
		if v := get(k); !v.Null {
			return v.Int
		}
		return 0
	}
	out.TP, out.PP, out.CP, out.EP = i("model.tensor_model_parallel_size"), i("model.pipeline_model_parallel_size"),
		i("model.context_parallel_size"), i("model.expert_model_parallel_size")
	out.VP, out.ETP, out.MTPLayers = i("model.virtual_pipeline_model_parallel_size"), i("model.expert_tensor_parallel_size"), i("model.mtp_num_layers")
	out.SequenceParallel = b("model.sequence_parallel")
	out.FSDP = b("ddp.use_megatron_fsdp")
	out.GradReduceInFP32 = b("mixed_precision.grad_reduce_in_fp32")
	out.PrecisionAwareOptimizer = b("optimizer.use_precision_aware_optimizer")
	out.AccountForEmbedding = b("model.account_for_embedding_in_pipeline_split")
	out.AccountForLoss = b("model.account_for_loss_in_pipeline_split")
	out.PipelineLayout = get("model.pipeline_model_parallel_layout").Str
	out.CPUOffloadLayers = 0
	if b("model.cpu_offloading") {
		out.CPUOffloadLayers = i("model.cpu_offloading_num_layers")
	}
	out.OffloadModules = nil
	if b("model.fine_grained_activation_offloading") {
		out.OffloadModules = slices.Clone(get("model.offload_modules").List)
	}
	c.recomputeLayout(&out)
	return out
}

// recomputeLayout reads the recompute settings: granularity, modules
// (selective; MCore reads None as ["core_attn"]), method and number of
// layers (full).
func (c *Recipe) recomputeLayout(out *presets.Layout) {
	get := func(k string) Value { v, _ := c.Get(k); return v }
	out.RecomputeGranularity, out.RecomputeModules, out.RecomputeMethod, out.RecomputeLayers = "", nil, "", 0
	g := get("model.recompute_granularity")
	if g.Null {
		return
	}
	out.RecomputeGranularity = g.Str
	switch g.Str {
	case "selective":
		out.RecomputeModules = slices.Clone(get("model.recompute_modules").List)
	case "full":
		if m := get("model.recompute_method"); !m.Null {
			out.RecomputeMethod = m.Str
		}
		if n := get("model.recompute_num_layers"); !n.Null {
			out.RecomputeLayers = n.Int
		}
	}
}

// epOverlap is the overlap_moe_expert_parallel_comm the model runs with:
// comm_overlap's value where the recipe sets one (CommOverlapConfig.setup
// copies it onto the model), the model's otherwise.
func (s *state) epOverlap() bool {
	if v := s.v("comm_overlap.overlap_moe_expert_parallel_comm"); !v.Null {
		return v.Bool
	}
	return s.b("model.overlap_moe_expert_parallel_comm")
}

// LayoutWithSets is layout l of model m with the --set overrides applied:
// each field that moves memory and that the overrides change takes the
// value the job runs with (MemoryLayout); the others stay as l has them.
// An error names the --set the recipe refuses.
func LayoutWithSets(m presets.Model, l presets.Layout, mbridge string, sets map[string]string) (presets.Layout, error) {
	if len(sets) == 0 {
		return l, nil
	}
	r, err := New(m, l, mbridge)
	if err != nil {
		return l, err
	}
	before := r.MemoryLayout(l)
	for _, k := range slices.Sorted(maps.Keys(sets)) {
		if err := r.ApplySet(k + "=" + sets[k]); err != nil {
			return l, err
		}
	}
	after := r.MemoryLayout(l)
	out := l.Clone()
	bv, av, ov := reflect.ValueOf(before), reflect.ValueOf(after), reflect.ValueOf(&out).Elem()
	for i := range bv.NumField() {
		if !reflect.DeepEqual(bv.Field(i).Interface(), av.Field(i).Interface()) {
			ov.Field(i).Set(av.Field(i))
		}
	}
	return out, nil
}
