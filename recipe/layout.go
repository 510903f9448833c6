package recipe

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

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

// setExpertBudget writes the layout's per-rank expert budget and paged
// stash, fields Megatron-Bridge has from 0.5 on (a layout that sets them
// for an older one is refused, as its settings are).
func (c *Recipe) setExpertBudget(model string, l presets.Layout, mbridge string) error {
	set := map[string]Value{}
	if l.RankCapacityFactor > 0 {
		set["model.moe_expert_rank_capacity_factor"] = Value{Float: l.RankCapacityFactor}
	}
	if s := l.PagedStash; s != nil {
		set["model.moe_paged_stash"] = trueValue
		set["model.moe_paged_stash_buffer_size_factor_cuda"] = Value{Float: s.CUDAFactor}
		set["model.moe_paged_stash_buffer_size_factor_cpu"] = Value{Float: s.HostFactor}
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		f, _ := lookupField(k)
		if _, ok := c.field(k); !ok {
			return fmt.Errorf("model %s: the %s layout's recipe sets %s, which Megatron-Bridge %s (%s) does not have (allowed: --mbridge %s)",
				model, layoutName(l), k, mbridge, c.gen, strings.Join(mbridgeOf(f.Gen), ", "))
		}
		c.vals[k] = set[k]
	}
	return nil
}

// readExpertBudget reads the per-rank expert budget and the paged stash
// back into l, as setExpertBudget writes them.
func (c *Recipe) readExpertBudget(l *presets.Layout) {
	l.RankCapacityFactor, l.PagedStash = 0, nil
	if v, ok := c.vals["model.moe_expert_rank_capacity_factor"]; ok && !v.Null {
		l.RankCapacityFactor = v.Float
	}
	if c.vals["model.moe_paged_stash"].Bool {
		l.PagedStash = &presets.PagedStash{
			CUDAFactor: c.vals["model.moe_paged_stash_buffer_size_factor_cuda"].Float,
			HostFactor: c.vals["model.moe_paged_stash_buffer_size_factor_cpu"].Float,
		}
	}
}

// Layout is the parallel layout the recipe's values describe: the layout
// it was seeded from, with every field the recipe has a key for read back
// from the values (a --set, a YAML file or the layout editor may have
// changed them). Fields no recipe key holds (the GPU count, the
// precision, the optimizer's state dtype, ...) stay the seed's. The
// capture plan of `cgtune check`, the workload of a search and the memory
// model are built on it, so that an override reaches them as an edit of
// the layout does. The values are the ones Megatron-Bridge applies:
// mixed_precision's grad_reduce_in_fp32 wins over ddp's
// (update_config_with_precision_overrides), recompute and offload settings
// count only where their switch is on.
func (c *Recipe) Layout() presets.Layout {
	l := c.layout.Clone()
	num := func(k string) int {
		v, ok := c.vals[k]
		if !ok || v.Null {
			return 0
		}
		return v.Int
	}
	l.TP = num("model.tensor_model_parallel_size")
	l.PP = num("model.pipeline_model_parallel_size")
	l.VP = num("model.virtual_pipeline_model_parallel_size")
	l.CP = num("model.context_parallel_size")
	l.EP = num("model.expert_model_parallel_size")
	l.ETP = num("model.expert_tensor_parallel_size")
	l.MTPLayers = num("model.mtp_num_layers")
	l.GBS = num("train.global_batch_size")
	l.MBS = num("train.micro_batch_size")
	l.Seq = num("model.seq_length")
	l.SequenceParallel = c.vals["model.sequence_parallel"].Bool
	l.FSDP = c.vals["ddp.use_megatron_fsdp"].Bool
	if d := c.vals["model.moe_token_dispatcher_type"].Str; c.model.Arch.MoE != nil && !(l.Dispatcher == "" && d == defaultMoEDispatcher) {
		l.Dispatcher = d
	}
	l.GradReduceInFP32 = c.vals["mixed_precision.grad_reduce_in_fp32"].Bool
	l.PrecisionAwareOptimizer = c.vals["optimizer.use_precision_aware_optimizer"].Bool
	l.AccountForEmbedding = c.vals["model.account_for_embedding_in_pipeline_split"].Bool
	l.AccountForLoss = c.vals["model.account_for_loss_in_pipeline_split"].Bool
	l.PipelineLayout = c.vals["model.pipeline_model_parallel_layout"].Str
	l.CPUOffloadLayers = 0
	if c.vals["model.cpu_offloading"].Bool {
		l.CPUOffloadLayers = num("model.cpu_offloading_num_layers")
	}
	l.OffloadModules = nil
	if c.vals["model.fine_grained_activation_offloading"].Bool {
		l.OffloadModules = slices.Clone(names(c.vals["model.offload_modules"]))
	}
	c.readRecompute(&l)
	c.readExpertBudget(&l)
	c.readAllocator(&l)
	return l
}

// allocatorConf is the environment variable that configures PyTorch's
// caching allocator: expandable segments change how much it reserves
// above what is allocated, which the memory model counts.
const allocatorConf = envPrefix + "PYTORCH_CUDA_ALLOC_CONF"

// readAllocator reads the allocator's configuration back into l's
// settings, where the memory model looks for it.
func (c *Recipe) readAllocator(l *presets.Layout) {
	v, ok := c.vals[allocatorConf]
	switch {
	case ok && !v.Null && v.Str != "":
		if l.Settings == nil {
			l.Settings = map[string]string{}
		}
		l.Settings[allocatorConf] = v.Str
	case l.Settings != nil:
		delete(l.Settings, allocatorConf)
	}
}

// readRecompute reads the recompute fields back into l, as setRecompute
// writes them: full with its method and layer count, selective with its
// modules (None reads as MCore's default, core_attn), or none.
func (c *Recipe) readRecompute(l *presets.Layout) {
	l.RecomputeGranularity, l.RecomputeModules, l.RecomputeMethod, l.RecomputeLayers = "", nil, "", 0
	g := c.vals["model.recompute_granularity"]
	switch {
	case g.Null:
	case g.Str == "full":
		l.RecomputeGranularity = "full"
		if m := c.vals["model.recompute_method"]; !m.Null {
			l.RecomputeMethod = m.Str
		}
		if n := c.vals["model.recompute_num_layers"]; !n.Null {
			l.RecomputeLayers = n.Int
		}
	case g.Str == "selective":
		l.RecomputeGranularity = "selective"
		if m := c.vals["model.recompute_modules"]; !m.Null {
			l.RecomputeModules = slices.Clone(names(m))
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
// each field that the overrides change takes the value the job runs with
// (Recipe.Layout); the others stay as l has them. An error names the --set
// the recipe refuses.
func LayoutWithSets(m presets.Model, l presets.Layout, mbridge string, sets map[string]string) (presets.Layout, error) {
	if len(sets) == 0 {
		return l, nil
	}
	r, err := New(m, l, mbridge)
	if err != nil {
		return l, err
	}
	before := r.Layout()
	for _, k := range slices.Sorted(maps.Keys(sets)) {
		if err := r.ApplySet(k + "=" + sets[k]); err != nil {
			return l, err
		}
	}
	after := r.Layout()
	out := l.Clone()
	bv, av, ov := reflect.ValueOf(before), reflect.ValueOf(after), reflect.ValueOf(&out).Elem()
	for i := range bv.NumField() {
		if !reflect.DeepEqual(bv.Field(i).Interface(), av.Field(i).Interface()) {
			ov.Field(i).Set(av.Field(i))
		}
	}
	return out, nil
}

// Diff lists the keys whose values differ between a and b (a key only one
// of them has counts), sorted.
func Diff(a, b *Recipe) []string {
	var out []string
	for _, k := range a.Keys() {
		if w, ok := b.vals[k]; !ok || !sameValue(a.vals[k], w) {
			out = append(out, k)
		}
	}
	for _, k := range b.Keys() {
		if _, ok := a.vals[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// sameValue reports whether two values of one field are the same setting:
// an empty list is an empty list however it was built.
func sameValue(a, b Value) bool {
	if a.Null || b.Null {
		return a.Null == b.Null
	}
	return a.Bool == b.Bool && a.Int == b.Int && a.Float == b.Float && a.Str == b.Str && a.Scalar == b.Scalar &&
		a.IsList == b.IsList && slices.Equal(a.List, b.List) && slices.Equal(a.Ints, b.Ints)
}
