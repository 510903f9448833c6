package recipe

import (
	"slices"

	"cgtune/presets"
)

// The values of the defaults tables, by kind.
var (
	trueValue  = Value{Bool: true}
	falseValue = Value{Bool: false}
	nullValue  = Value{Null: true}
)

func strValue(s string) Value { return Value{Str: s} }
func intValue(n int) Value    { return Value{Int: n} }

// commonDefaults are the settings New writes the same for every model and
// layout of either generation: MCore's and MB's defaults that a perf
// recipe leaves alone. What a model or layout decides is written by the
// set functions below.
var commonDefaults = map[string]Value{
	"model.cuda_graph_impl": strValue(presets.ImplNone),
	// MB's library recipes write cuda_graph_scope="full" explicitly (e.g.
	// MB v0.4.0 recipes/qwen/qwen2.py, v0.6.0 recipes/qwen/h100/qwen3_moe.py);
	// in G3 that is the deprecated alias, which matters for TC-04.
	"model.cuda_graph_scope":         {Scalar: true, Str: "full"},
	"model.cuda_graph_warmup_steps":  intValue(3),
	"model.enable_cuda_graph":        falseValue,
	"model.external_cuda_graph":      falseValue,
	"model.use_te_rng_tracker":       falseValue,
	"rng.te_rng_tracker":             falseValue,
	"optimizer.optimizer_cuda_graph": falseValue,

	"rerun_state_machine.check_for_nan_in_loss": trueValue,
	// MB recipes/common.py builds every recipe's DDP config with
	// check_for_nan_in_grad, overlap_grad_reduce, overlap_param_gather and
	// use_distributed_optimizer on.
	"ddp.check_for_nan_in_grad":           trueValue,
	"ddp.overlap_grad_reduce":             trueValue,
	"ddp.overlap_param_gather":            trueValue,
	"ddp.use_distributed_optimizer":       trueValue,
	"optimizer.use_distributed_optimizer": trueValue,

	"model.moe_expert_capacity_factor":               nullValue,
	"model.moe_pad_expert_input_to_capacity":         falseValue,
	"model.moe_router_padding_for_fp8":               falseValue,
	"model.moe_router_padding_for_quantization":      falseValue,
	"model.moe_input_jitter_eps":                     nullValue,
	"model.moe_shared_expert_overlap":                falseValue,
	"model.moe_pad_experts_for_cuda_graph_inference": falseValue,
	"model.moe_flex_dispatcher_backend":              strValue("deepep"), // MCore's default
	"model.overlap_moe_expert_parallel_comm":         falseValue,
	"model.delay_wgrad_compute":                      falseValue,
	"comm_overlap.overlap_moe_expert_parallel_comm":  nullValue,
	"comm_overlap.delay_wgrad_compute":               nullValue,
	"model.delay_offload_until_cuda_graph":           falseValue,
	"dataset.enable_offline_packing":                 falseValue,
	"dataset.enable_in_batch_packing":                falseValue,
	"dataset.pad_to_max_length":                      falseValue,
	"dataset.dataset_kwargs.pad_to_max_length":       falseValue,
	"dataset.offline_packing_specs.pad_cu_seqlens":   falseValue,
	"dataset.packing_buffer_size":                    nullValue,
	"ddp.megatron_fsdp_cuda_graph_mode":              falseValue,
	"ddp.megatron_fsdp_version":                      strValue("1"),
	"model.transformer_impl":                         strValue("transformer_engine"),
	"model.use_transformer_engine_op_fuser":          falseValue, // the provider's default

	// MB's providers for every built-in family set both dropouts to 0.0
	// (MB v0.3.0 models/{llama,qwen,deepseek,gpt_oss}/*_provider.py).
	"model.attention_dropout": {Float: 0},
	"model.hidden_dropout":    {Float: 0},
	// MB's GPTModelProvider turns gradient-accumulation fusion on whenever
	// the fused kernel is importable, which it is in MB's container.
	"model.gradient_accumulation_fusion": trueValue,
}

// generationDefaults are the defaults of the fields only one generation
// has (MCore's defaults where nothing else is said).
var generationDefaults = map[presets.Generation]map[string]Value{
	presets.G3: {
		"model.cuda_graph_modules":                            {Scalar: true, Str: "full"},
		"model.fine_grained_offloading_max_inflight_offloads": nullValue,
		"model.gtp_weight_remat_size":                         intValue(1),
		"model.moe_expert_rank_capacity_factor":               nullValue,
		"model.moe_paged_stash":                               falseValue,
		"model.moe_paged_stash_buffer_size_factor_cuda":       {Float: presets.DefaultPagedStashCUDAFactor},
		"model.moe_paged_stash_buffer_size_factor_cpu":        {Float: presets.DefaultPagedStashHostFactor},
	},
}

// optIntValue is n, or null where the layout leaves it unset (0).
func optIntValue(n int) Value {
	if n > 0 {
		return intValue(n)
	}
	return nullValue
}

// setModel writes the fields the architecture decides outside MoE.
func (c *Recipe) setModel(a presets.Arch) {
	c.vals["model.add_bias_linear"] = Value{Bool: a.AddBiasLinear}
	c.vals["model.add_qkv_bias"] = Value{Bool: a.AddQKVBias}
}

// setMoE writes the MoE fields the architecture and layout decide: the
// experts, the dense layers before them, the shared expert and the token
// dispatcher.
func (c *Recipe) setMoE(a presets.Arch, l presets.Layout) {
	c.vals["model.num_moe_experts"] = nullValue
	c.vals["model.moe_shared_expert_intermediate_size"] = nullValue
	if a.MoE != nil {
		c.vals["model.num_moe_experts"] = intValue(a.MoE.Experts)
		c.vals["model.moe_shared_expert_intermediate_size"] = optIntValue(a.MoE.SharedExpertFFN)
	}
	// DeepSeek-style leading dense layers are written as a 0/1 list (MB's
	// deepseek bridges); hybrid models keep MCore's default 1 because their
	// layer types come from the hybrid pattern, not from moe_layer_freq.
	c.vals["model.moe_layer_freq"] = intValue(1)
	if a.MoE != nil && a.HybridPattern == "" && a.MoE.FirstDenseLayers > 0 {
		freq := make([]int, a.Layers)
		for j := a.MoE.FirstDenseLayers; j < a.Layers; j++ {
			freq[j] = 1
		}
		c.vals["model.moe_layer_freq"] = Value{IsList: true, Ints: freq}
	}
	disp := l.Dispatcher
	if disp == "" {
		// MCore defaults to allgather, but every MB MoE recipe picks alltoall
		// or flex; a layout that names none is taken as alltoall.
		disp = "allgather"
		if a.MoE != nil {
			disp = defaultMoEDispatcher
		}
	}
	c.vals["model.moe_token_dispatcher_type"] = strValue(disp)
}

// setOffload writes the layout's activation offloading: fine-grained by
// module, or whole layers to the CPU.
func (c *Recipe) setOffload(l presets.Layout) {
	c.vals["model.fine_grained_activation_offloading"] = Value{Bool: len(l.OffloadModules) > 0}
	c.vals["model.offload_modules"] = Value{List: slices.Clone(l.OffloadModules)}
	if l.OffloadModules == nil {
		c.vals["model.offload_modules"] = Value{List: []string{}}
	}
	c.vals["model.cpu_offloading"] = Value{Bool: l.CPUOffloadLayers > 0}
}

// setParallel writes the layout's parallelism, batch sizes and sequence
// length.
func (c *Recipe) setParallel(l presets.Layout) {
	c.vals["model.tensor_model_parallel_size"] = intValue(l.TPSize())
	c.vals["model.pipeline_model_parallel_size"] = intValue(l.PPSize())
	c.vals["model.virtual_pipeline_model_parallel_size"] = optIntValue(l.VP)
	c.vals["model.context_parallel_size"] = intValue(l.CPSize())
	c.vals["model.expert_model_parallel_size"] = intValue(l.EPSize())
	c.vals["model.expert_tensor_parallel_size"] = optIntValue(l.ETP)
	c.vals["model.sequence_parallel"] = Value{Bool: l.SequenceParallel}
	c.vals["model.mtp_num_layers"] = optIntValue(l.MTPLayers)
	c.vals["train.global_batch_size"] = intValue(max(1, l.GBS))
	c.vals["train.micro_batch_size"] = intValue(max(1, l.MBS))
	c.vals["model.seq_length"] = intValue(max(1, l.Seq))
	c.vals["dataset.sequence_length"] = intValue(max(1, l.Seq))
	c.vals["ddp.use_megatron_fsdp"] = Value{Bool: l.FSDP}
}

// defaultMoEDispatcher is the token dispatcher of an MoE layout that names
// none.
const defaultMoEDispatcher = "alltoall"

// setRecompute writes the layout's recompute settings: selective with its
// modules, or full with recompute_num_layers of the uniform method.
func (c *Recipe) setRecompute(l presets.Layout) {
	c.vals["model.recompute_method"] = nullValue
	c.vals["model.recompute_num_layers"] = nullValue
	switch {
	case l.FullRecompute():
		c.vals["model.recompute_granularity"] = strValue("full")
		c.vals["model.recompute_method"] = strValue("uniform")
		if l.RecomputeLayers > 0 {
			c.vals["model.recompute_num_layers"] = intValue(l.RecomputeLayers)
		}
		c.vals["model.recompute_modules"] = nullValue
	case len(l.RecomputeModules) > 0 || l.RecomputeGranularity == "selective":
		c.vals["model.recompute_granularity"] = strValue("selective")
		c.vals["model.recompute_modules"] = Value{List: slices.Clone(l.RecomputeModules)}
		if len(l.RecomputeModules) == 0 {
			c.vals["model.recompute_modules"] = nullValue // MCore reads None as ["core_attn"]
		}
	default:
		c.vals["model.recompute_granularity"] = nullValue
		c.vals["model.recompute_modules"] = nullValue
	}
}
