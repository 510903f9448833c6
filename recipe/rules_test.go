package recipe

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"cgtune/presets"
)

// ruleCase is one configuration for one rule. fail cases must produce the
// rule with exactly msg (Reject) or the note (AutoFix); pass cases must not
// produce the rule at all.
type ruleCase struct {
	id      string
	mb      string // default 0.4
	model   presets.Model
	sets    []string
	harness *presets.Candidate
	// launcher is the job's launcher (default LauncherMB).
	launcher Launcher
	fail     bool
	msg      string // Reject: the exact message
	note     string // AutoFix: the exact note (without "ID: ")
}

func (rc ruleCase) name() string {
	verdict := "pass"
	if rc.fail {
		verdict = "fail"
	}
	h := ""
	if rc.harness != nil {
		h = " harness=" + rc.harness.Key()
	}
	if rc.launcher != "" {
		h += " launcher=" + string(rc.launcher)
	}
	return fmt.Sprintf("%s/%s/mb%s/%s%s/%s", rc.id, verdict, rc.mb, rc.model.Name, h, strings.Join(rc.sets, ","))
}

func run(t *testing.T, rc ruleCase) Report {
	t.Helper()
	m := rc.model
	if m.Name == "" {
		m = denseModel
	}
	cfg, err := New(m, layoutFor(m), rc.mb)
	if err != nil {
		t.Fatalf("NewConfig: %v", err)
	}
	for _, s := range rc.sets {
		if err := cfg.ApplySet(s); err != nil {
			t.Fatalf("ApplySet: %v", err)
		}
	}
	var notes []string
	if rc.harness != nil {
		n, v := ApplyHarnessFlags(cfg, *rc.harness, rc.mb)
		if len(v) > 0 {
			return Report{Violations: v, Notes: n}
		}
		notes = n
	}
	r := Check(cfg, rc.mb, WithLauncher(rc.launcher))
	r.Notes = append(notes, r.Notes...)
	return r
}

func cand(impl string, scopes ...string) *presets.Candidate {
	c := presets.Candidate{Impl: impl, Scopes: scopes, Warmup: 3}
	if scopes == nil {
		c.Scopes = nil
	}
	return &c
}

// Frequently used settings.
var (
	te      = "model.cuda_graph_impl=transformer_engine"
	local   = "model.cuda_graph_impl=local"
	rngOn   = "rng.te_rng_tracker=true"
	noScope = "model.cuda_graph_scope=null" // G3: drop the recipe's deprecated "full"
	dropPad = []string{"model.moe_expert_capacity_factor=1.0", "model.moe_pad_expert_input_to_capacity=true"}
	overlap = "model.overlap_moe_expert_parallel_comm=true"
	// coOverlap is the overlap as MB's recipes ask for it.
	coOverlap = "comm_overlap.overlap_moe_expert_parallel_comm=true"
)

func sets(groups ...any) []string {
	var out []string
	for _, g := range groups {
		switch v := g.(type) {
		case string:
			out = append(out, v)
		case []string:
			out = append(out, v...)
		}
	}
	return out
}

var ruleCases = []ruleCase{
	// --- perf harness ---
	{id: "PERF-01", harness: cand("full_iteration", "attn"), fail: true,
		msg: "argument --cuda_graph_impl: invalid is_cuda_graph_impl_valid value: 'full_iteration'"},
	{id: "PERF-01", harness: cand("transformer_engine", "attn")},
	{id: "PERF-02", harness: cand("transformer_engine", "attn", "foo"), fail: true,
		msg: "argument --cuda_graph_scope: invalid is_cuda_graph_scope_valid value: 'attn,foo'"},
	{id: "PERF-02", harness: cand("transformer_engine", "attn", "mlp")},
	{id: "PERF-03", mb: "0.6", harness: cand("local", "full_iteration", "attn"), fail: true,
		msg: "full_iteration CUDA graph scope cannot be combined with other scopes."},
	{id: "PERF-03", mb: "0.6", harness: cand("local", "full_iteration")},
	{id: "PERF-03", mb: "0.4", harness: cand("local", "full_iteration", "attn")}, // v0.4's harness had no such check
	{id: "PERF-04", mb: "0.6", harness: cand("transformer_engine", "full_iteration"), fail: true,
		msg: "full_iteration CUDA graph scope cannot use cuda_graph_impl=transformer_engine."},
	{id: "PERF-04", mb: "0.6", harness: cand("local", "full_iteration")},
	{id: "PERF-05", mb: "0.4", harness: cand("transformer_engine", "full_iteration"), fail: true,
		msg: "Invalid cuda graph scope: ['full_iteration']. Valid options are: ['attn', 'mlp', 'moe', 'moe_router', 'moe_preprocess', 'mamba']"},
	{id: "PERF-05", mb: "0.4", harness: cand("transformer_engine"), fail: true, msg: "'NoneType' object is not iterable"},
	{id: "PERF-05", mb: "0.5", harness: cand("transformer_engine"), fail: true,
		msg: "Invalid cuda graph scope: full. Valid options are: ['attn', 'mlp', 'moe', 'moe_router', 'moe_preprocess', 'mamba']"},
	{id: "PERF-05", mb: "0.5", harness: cand("transformer_engine", "full_iteration"), fail: true,
		msg: "Invalid cuda graph scope: ['full_iteration']. Valid options are: ['attn', 'mlp', 'moe', 'moe_router', 'moe_preprocess', 'mamba']"},
	{id: "PERF-05", mb: "0.4", harness: cand("transformer_engine", "attn")},
	{id: "PERF-05", mb: "0.5", harness: &presets.Candidate{Impl: "transformer_engine", Scopes: []string{}}},
	{id: "PERF-06", harness: cand("transformer_engine", "attn"), fail: true,
		note: "rng.te_rng_tracker=True, model.use_te_rng_tracker=True (CUDA graphs need the TE RNG tracker)"},
	{id: "PERF-06", mb: "0.6", harness: cand("local", "full_iteration"), fail: true,
		note: "rerun_state_machine.check_for_nan_in_loss=False, ddp.check_for_nan_in_grad=False (full-iteration graph)"},
	{id: "PERF-06", mb: "0.4", sets: sets("rerun_state_machine.check_for_nan_in_loss=false"), harness: cand("local", "full_iteration"), fail: true,
		note: "ddp.check_for_nan_in_grad=False (full-iteration graph)"},
	{id: "PERF-06", mb: "0.6", sets: sets("ddp.check_for_nan_in_grad=true"), harness: cand("local", "full_iteration"), fail: true,
		note: "rerun_state_machine.check_for_nan_in_loss=False (full-iteration graph)"},
	{id: "PERF-06", mb: "0.6", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn), harness: cand("none"), fail: true,
		note: "cuda_graph_impl=none: cleared the CUDA graph scope ['attn']"},
	{id: "PERF-06", mb: "0.6", sets: sets("model.use_te_rng_tracker=true"), harness: cand("none"), fail: true,
		note: "model.use_te_rng_tracker=False (cuda_graph_impl=none)"},
	{id: "PERF-06", harness: cand("none")}, // nothing to change

	// --- comm-overlap setup ---
	{id: "MB-18", model: moeModel, sets: sets(coOverlap, "model.expert_model_parallel_size=1"), fail: true,
		msg: "overlap_moe_expert_parallel_comm is only supported when expert_model_parallel_size > 1"},
	{id: "MB-18", sets: sets(coOverlap, "model.expert_model_parallel_size=8"), fail: true,
		msg: "'>' not supported between instances of 'NoneType' and 'int'"},
	{id: "MB-18", mb: "0.6", model: moeModel, sets: sets(coOverlap, "model.num_moe_experts=1"), fail: true,
		msg: "overlap_moe_expert_parallel_comm is only supported when num_moe_experts > 1,                     but got 1"},
	{id: "MB-18", model: moeModel, sets: sets(coOverlap, "model.moe_token_dispatcher_type=allgather"), fail: true,
		msg: "overlap_moe_expert_parallel_comm is only supported when moe_token_dispatcher_type == 'alltoall' or 'flex',                      but got allgather"},
	{id: "MB-18", model: moeModel, sets: sets(coOverlap, "model.bf16=false"), fail: true,
		msg: "overlap_moe_expert_parallel_comm is only supported when using bf16 or fp16 models"},
	{id: "MB-18", model: moeModel, sets: sets(coOverlap, "model.pipeline_model_parallel_size=2"), fail: true,
		msg: "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified when pipeline_model_parallel_size > 1"},
	{id: "MB-18", model: moeModel, sets: sets(coOverlap, "model.recompute_method=uniform"), fail: true,
		msg: "disable recomputation method when enabling overlap_moe_expert_parallel_comm"},
	{id: "MB-18", mb: "0.6", model: moeModel, sets: sets(coOverlap, "model.recompute_modules=[moe]"), fail: true,
		msg: "disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm"},
	{id: "MB-18", mb: "0.5", model: moeModel, sets: sets(coOverlap, "model.recompute_modules=[moe]")}, // MCore's TC-39 says it
	{id: "MB-18", model: moeModel, sets: sets(coOverlap, "model.moe_shared_expert_overlap=true"), fail: true,
		msg: "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm"},
	{id: "MB-18", model: moeModel, sets: sets(coOverlap, "model.mtp_num_layers=0"), fail: true,
		msg: "MTP layernum only supports 1 when enabling overlap_moe_expert_parallel_comm."},
	{id: "MB-18", mb: "0.7", model: moeModel, sets: sets(coOverlap, "model.mtp_num_layers=2"), fail: true,
		msg: "MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm."},
	{id: "MB-18", mb: "0.7", model: moeModel, sets: sets(coOverlap, "model.mtp_num_layers=0")},
	{id: "MB-18", model: moeModel, sets: sets(coOverlap)},
	// Only the recipe's comm_overlap value runs MB's block; MCore's TC-39 checks the model's.
	{id: "MB-18", model: moeModel, sets: sets(overlap, "model.expert_model_parallel_size=1")},
	{id: "MB-11", model: moeModel, sets: sets("comm_overlap.delay_wgrad_compute=true", "comm_overlap.overlap_moe_expert_parallel_comm=true", "te_version=2.6"), fail: true,
		msg: "TE version >= 2.7.0 is required for overlap_grad_reduce when usingdelay_wgrad_compute. Current TE version: 2.6"},
	{id: "MB-11", model: moeModel, sets: sets("comm_overlap.delay_wgrad_compute=true", "comm_overlap.overlap_moe_expert_parallel_comm=true", "te_version=2.6.1", "ddp.overlap_grad_reduce=false"), fail: true,
		msg: "TE version >= 2.7.0 is required for gradient_accumulation_fusion when usingdelay_wgrad_compute. Current TE version: 2.6.1"},
	{id: "MB-11", model: moeModel, sets: sets("comm_overlap.delay_wgrad_compute=true", "comm_overlap.overlap_moe_expert_parallel_comm=true", "te_version=2.7")},
	{id: "MB-12", model: moeModel, sets: sets("comm_overlap.delay_wgrad_compute=true"), fail: true,
		msg: "overlap_moe_expert_parallel_comm is required for delay_wgrad_compute"},
	{id: "MB-12", model: moeModel, sets: sets("comm_overlap.delay_wgrad_compute=true", coOverlap)},
	{id: "MB-13", mb: "0.5", model: moeModel, sets: sets("comm_overlap.delay_wgrad_compute=true", coOverlap, te, "model.cuda_graph_scope=[attn]", rngOn, "te_version=2.11"), fail: true,
		msg: "CUDA graph with delay_wgrad_compute requires TE version >= 2.12.0."},
	{id: "MB-13", mb: "0.6", model: moeModel, sets: sets("comm_overlap.delay_wgrad_compute=true", coOverlap, te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "te_version=2.11"), fail: true,
		msg: "CUDA graph with delay_wgrad_compute requires TE version >= 2.12.0."},
	{id: "MB-13", mb: "0.6", model: moeModel, sets: sets("comm_overlap.delay_wgrad_compute=true", coOverlap, te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "te_version=2.12")},
	{id: "MB-13", mb: "0.3", model: moeModel, sets: sets("comm_overlap.delay_wgrad_compute=true", coOverlap, te, "model.cuda_graph_scope=[attn]", rngOn, "te_version=2.11")},
	// MB 0.4 compares scope names with CudaGraphScope members: never equal.
	{id: "MB-13", model: moeModel, sets: sets("comm_overlap.delay_wgrad_compute=true", coOverlap, te, "model.cuda_graph_scope=[attn]", rngOn, "te_version=2.11")},
	{id: "MB-14", mb: "0.5", model: deepseekModel, sets: sets("comm_overlap.delay_wgrad_compute=true", coOverlap, te, "model.cuda_graph_scope=[moe_router]", rngOn, "model.gradient_accumulation_fusion=false"), fail: true,
		msg: "CUDA graph with delay_wgrad_compute requires gradient_accumulation_fusion to be enabled. This is because default gradient accumulation does not use static memory addresses, which breaks CUDA graph requirements."},
	{id: "MB-14", mb: "0.5", model: deepseekModel, sets: sets("comm_overlap.delay_wgrad_compute=true", coOverlap, te, "model.cuda_graph_scope=[moe_router]", rngOn, "model.gradient_accumulation_fusion=false", "model.moe_shared_expert_overlap=true")},
	{id: "MB-14", model: deepseekModel, sets: sets("comm_overlap.delay_wgrad_compute=true", coOverlap, te, "model.cuda_graph_scope=[moe_router]", rngOn, "model.gradient_accumulation_fusion=false")},
	{id: "MB-15", mb: "0.7", model: moeModel, sets: sets("comm_overlap.delay_wgrad_compute=true", coOverlap, te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "model.add_qkv_bias=true"), fail: true,
		msg: "CUDA graph with delay_wgrad_compute does not support attention bias for now."},
	{id: "MB-15", mb: "0.7", model: moeModel, sets: sets("comm_overlap.delay_wgrad_compute=true", coOverlap, te, "model.cuda_graph_modules=[moe_router]", noScope, rngOn, "model.add_qkv_bias=true")},
	{id: "MB-15", model: moeModel, sets: sets("comm_overlap.delay_wgrad_compute=true", coOverlap, te, "model.cuda_graph_scope=[attn]", rngOn, "model.add_qkv_bias=true")},

	// --- MB >= 0.6 before finalize ---
	{id: "MB-20", mb: "0.6", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "dataset.enable_offline_packing=true", "dataset.offline_packing_specs.pad_cu_seqlens=true"), fail: true,
		msg: "offline_packing_specs.pad_cu_seqlens=True requires dataset pad_to_max_length=True."},
	{id: "MB-20", mb: "0.7", sets: sets("dataset.enable_offline_packing=true", "dataset.enable_in_batch_packing=true"), fail: true,
		msg: "enable_offline_packing and enable_in_batch_packing are mutually exclusive."},
	{id: "MB-20", mb: "0.6", sets: sets("dataset.enable_offline_packing=true", "dataset.offline_packing_specs.pad_cu_seqlens=true", "dataset.dataset_kwargs.pad_to_max_length=true")},
	{id: "MB-07", mb: "0.6", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "dataset.enable_offline_packing=true"), fail: true,
		msg: "Offline packing with CUDA graphs requires dataset pad_to_max_length=True."},
	{id: "MB-07", mb: "0.6", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "dataset.enable_offline_packing=true", "dataset.offline_packing_specs.pad_cu_seqlens=true", "dataset.pad_to_max_length=true")},
	// MB reads the fine-tuning dataset's dataset_kwargs too.
	{id: "MB-07", mb: "0.7", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "dataset.enable_offline_packing=true", "dataset.offline_packing_specs.pad_cu_seqlens=true", "dataset.dataset_kwargs.pad_to_max_length=true")},
	{id: "MB-08", mb: "0.6", sets: sets("model.cuda_graph_impl=full_iteration", "model.cuda_graph_modules=[]", noScope, rngOn, "dataset.enable_offline_packing=true", "dataset.pad_to_max_length=true"), fail: true,
		msg: "Packed attention CUDA graphs require offline_packing_specs.pad_cu_seqlens=True. Enable it for full-iteration, whole-layer, or attention-scoped capture."},
	{id: "MB-08", mb: "0.6", sets: sets(te, "model.cuda_graph_modules=[mlp]", noScope, rngOn, "dataset.enable_offline_packing=true", "dataset.pad_to_max_length=true")},
	{id: "MB-05", mb: "0.6", sets: sets(local, "model.cuda_graph_modules=[attn,mlp]", noScope, rngOn), fail: true,
		msg: `Megatron Bridge supports model.cuda_graph_impl="local" only for full-iteration CUDA graphs with scopes ['attn', 'mlp']. Use model.cuda_graph_impl="transformer_engine" for scoped CUDA graph capture such as "attn" or "mlp".`},
	{id: "MB-05", mb: "0.6", sets: sets(local, rngOn), fail: true,
		msg: `Megatron Bridge supports model.cuda_graph_impl="local" only for full-iteration CUDA graphs. Use model.cuda_graph_impl="transformer_engine" for scoped CUDA graph capture such as "attn" or "mlp".`},
	{id: "MB-05", mb: "0.6", sets: sets(local, "model.cuda_graph_modules=[full_iteration]", noScope, rngOn)},
	{id: "MB-05", mb: "0.5", sets: sets(local, "model.cuda_graph_modules=[attn]", noScope, rngOn)}, // MB 0.5 predates MB-05
	{id: "MB-04", sets: sets("model.cuda_graph_scope=[attn]"), fail: true,
		note: "cuda_graph_impl is none: cleared the CUDA graph scope ['attn']"},
	{id: "MB-04", mb: "0.6", sets: sets("model.cuda_graph_modules=[attn]", noScope), fail: true,
		note: "cuda_graph_impl is none: cleared the CUDA graph scope ['attn']"},
	{id: "MB-04", sets: sets(te, "model.cuda_graph_scope=[attn]", rngOn)},
	{id: "MB-04", mb: "0.3", sets: sets("model.cuda_graph_scope=[attn]")}, // v0.3 never clears

	// --- MCore ---
	{id: "TC-43", sets: sets("model.expert_model_parallel_size=8"), fail: true, msg: "num_moe_experts must be non None to use expert-parallel."},
	{id: "TC-43", model: moeModel, sets: sets(dropPad, "model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=deepep"), fail: true,
		msg: "Flex token dispatcher with deepep backend does not support moe_pad_expert_input_to_capacity"},
	{id: "TC-43", model: moeModel, sets: sets(dropPad, "model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=hybridep")},
	{id: "TC-43", model: deepseekModel, sets: sets("model.moe_shared_expert_overlap=true", "model.moe_token_dispatcher_type=flex"), fail: true,
		msg: "moe_shared_expert_overlap only works with alltoall token dispatcher."},
	{id: "TC-43", mb: "0.5", model: deepseekModel, sets: sets("model.moe_shared_expert_overlap=true", "model.moe_token_dispatcher_type=flex")},
	{id: "TC-43", mb: "0.5", model: deepseekModel, sets: sets("model.moe_shared_expert_overlap=true", "model.moe_token_dispatcher_type=allgather"), fail: true,
		msg: "moe_shared_expert_overlap only works with alltoall or flex token dispatcher."},
	{id: "TC-43", model: moeModel, sets: sets("model.moe_pad_expert_input_to_capacity=true"), fail: true,
		msg: "moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity"},
	// A negative capacity factor is dropless: MCore reads it as None.
	{id: "TC-43", model: moeModel, sets: sets("model.moe_pad_expert_input_to_capacity=true", "model.moe_expert_capacity_factor=-1"), fail: true,
		msg: "moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity"},
	{id: "TC-22", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[attn,moe]", rngOn, "model.moe_expert_capacity_factor=-1"), fail: true,
		msg: "moe cuda graph is only supported with drop-padding MoE."},
	{id: "TC-46", sets: sets("model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn]", "model.cpu_offloading=true"), fail: true,
		msg: "fine_grained_activation_offloading cannot be enabled with cpu_offloading."},
	{id: "TC-46", sets: sets("model.fine_grained_activation_offloading=true", "model.offload_modules=[attn_proj]"), fail: true,
		msg: "attn_proj cannot be set to offload_modules alone without core_attn because the input of attn_proj is the output of core_attn, which is needed in core_attn.backward()."},
	{id: "TC-46", sets: sets("model.fine_grained_activation_offloading=true", "model.offload_modules=[attn_proj,core_attn]")},
	{id: "TC-46", mb: "0.6", model: moeModel, sets: sets("model.fine_grained_activation_offloading=true", "model.offload_modules=[expert_fc1]",
		"model.recompute_granularity=selective", "model.recompute_modules=[moe]"), fail: true,
		msg: "Cannot offload {'expert_fc1'} while recomputing the entire MoE layer. 'moe' in recompute_modules wraps the full MoE forward in a checkpoint, so offloading activations inside it is redundant and will cause errors. Either remove 'moe' from --recompute-modules or remove {'expert_fc1'} from --offload-modules."},
	{id: "TC-46", mb: "0.5", model: moeModel, sets: sets("model.fine_grained_activation_offloading=true", "model.offload_modules=[expert_fc1]",
		"model.recompute_granularity=selective", "model.recompute_modules=[moe]")}, // MB 0.5's MCore does not check it
	{id: "TC-46", mb: "0.6", model: moeModel, sets: sets("model.fine_grained_activation_offloading=true", "model.offload_modules=[fused_group_mlp]"), fail: true,
		msg: "fused_group_mlp requires use_transformer_engine_op_fuser."},
	{id: "TC-46", mb: "0.6", model: moeModel, sets: sets("model.fine_grained_activation_offloading=true", "model.offload_modules=[fused_group_mlp,moe_act]",
		"model.use_transformer_engine_op_fuser=true"), fail: true,
		msg: "fused_group_mlp offloads the whole fused grouped MLP and cannot be combined with expert_fc1 or moe_act. Remove: {'moe_act'}"},
	{id: "MB-23", sets: sets("model.fp4=e2m1", "te_version=2.6.0"), fail: true,
		msg: "fp4 requires Transformer Engine >= 2.7.0.dev0 for NVFP4BlockScaling support."},
	{id: "MB-23", sets: sets("model.fp4=e2m1", "te_version=2.7.0")},
	{id: "TC-47", mb: "0.6", model: moeModel, sets: sets("model.moe_paged_stash=true", "model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=hybridep", "model.use_transformer_engine_op_fuser=true"), fail: true,
		msg: "moe_paged_stash requires moe_expert_rank_capacity_factor to be set; there is no need to use paged stashing without it."},
	{id: "TC-47", mb: "0.6", model: moeModel, sets: sets("model.moe_paged_stash=true", "model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=hybridep", "model.use_transformer_engine_op_fuser=true", "model.moe_expert_rank_capacity_factor=1.0")},
	{id: "TC-47", mb: "0.6", model: moeModel, sets: sets("model.moe_paged_stash=true", "model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=hybridep", "model.use_transformer_engine_op_fuser=true", "model.moe_expert_rank_capacity_factor=1.0", "model.cpu_offloading=true"), fail: true,
		msg: "moe_paged_stash cannot be enabled with cpu_offloading."},
	{id: "TC-47", mb: "0.6", model: moeModel, sets: sets("model.moe_paged_stash=true", "model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=hybridep", "model.use_transformer_engine_op_fuser=true", "model.moe_expert_rank_capacity_factor=1.0",
		"model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn,expert_fc1]"), fail: true,
		msg: "When moe_paged_stash is enabled, offload_modules must not include expert_fc1, moe_act, or fused_group_mlp (paged stash covers those activations). Remove: {'expert_fc1'}"},
	{id: "TC-47", mb: "0.5", model: moeModel, sets: sets("model.moe_paged_stash=true", "model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=hybridep", "model.use_transformer_engine_op_fuser=true", "model.moe_expert_rank_capacity_factor=1.0",
		"model.fine_grained_activation_offloading=true", "model.offload_modules=[moe_act]"), fail: true,
		msg: "When moe_paged_stash is enabled, offload_modules must not include expert_fc1 or moe_act (paged stash covers those activations). Remove: {'moe_act'}"},
	{id: "TC-44", sets: sets("model.cpu_offloading=true", "model.cpu_offloading_num_layers=4"), fail: true,
		msg: "CPU offloading can be done only for layers less than 4"},
	{id: "TC-44", sets: sets("model.cpu_offloading=true", "model.cpu_offloading_num_layers=3")},
	{id: "TC-44", sets: sets("model.cpu_offloading=true", "model.pipeline_model_parallel_size=2"), fail: true,
		msg: "Currently there is no support for Pipeline parallelism with CPU offloading"},
	{id: "TC-44", sets: sets("model.cpu_offloading=true", "model.recompute_granularity=selective"), fail: true,
		msg: "CPU offloading does not work when activation recomputation is enabled"},
	{id: "TC-44", sets: sets("model.recompute_granularity=full"), fail: true,
		msg: `Using recompute_granularity: full so recompute_method must be "block" or "uniform"`},
	{id: "TC-44", mb: "0.6", sets: sets("model.recompute_granularity=full", "model.recompute_method=block", "model.pipeline_model_parallel_size=2"), fail: true,
		msg: "When using recompute_granularity: full recompute_num_layers must be between 1 and num_layers_per_pipeline_rank: 2"},
	{id: "TC-44", sets: sets("model.recompute_granularity=selective", "model.recompute_num_layers=1"), fail: true,
		msg: "When using recompute_granularity: selective recompute_num_layers must be None."},
	{id: "TC-44", sets: sets("model.recompute_granularity=full", "model.recompute_method=uniform", "model.recompute_num_layers=1")},
	{id: "TC-44", sets: sets("model.recompute_method=uniform", "model.recompute_num_layers=1")}, // no granularity: not checked
	{id: "TC-45", sets: sets("model.moe_router_padding_for_fp8=true"), fail: true,
		msg: "fp8/fp4 must be specified when moe_router_padding_for_quantization is True."},
	{id: "TC-45", model: moeModel, sets: sets("model.moe_router_padding_for_fp8=true", "model.fp8=hybrid", "model.moe_token_dispatcher_type=allgather"), fail: true,
		msg: "allgather and alltoall_seq dispatcher does not support moe_router_padding_for_quantization."},
	{id: "TC-45", model: moeModel, sets: sets("model.moe_router_padding_for_fp8=true", "model.fp8=hybrid")},
	{id: "TC-45", model: moeModel, sets: sets("model.moe_router_padding_for_quantization=true", "model.fp8=e4m3", "model.moe_token_dispatcher_type=allgather"), fail: true,
		msg: "allgather and alltoall_seq dispatcher does not support moe_router_padding_for_quantization."},
	{id: "TC-45", model: moeModel, sets: sets("model.moe_router_padding_for_quantization=true"), fail: true,
		msg: "fp8/fp4 must be specified when moe_router_padding_for_quantization is True."},
	{id: "TC-45", model: moeModel, sets: sets("model.moe_router_padding_for_quantization=true", "model.fp4=e2m1")},
	{id: "TC-42", mb: "0.7", model: moeModel, sets: sets("model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=hybridep", "model.moe_expert_rank_capacity_factor=1.5"), fail: true,
		msg: "moe_expert_rank_capacity_factor with the 'hybridep' backend requires use_transformer_engine_op_fuser to be enabled."},
	{id: "TC-42", mb: "0.6", model: moeModel, sets: sets("model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=deepep", "model.moe_expert_rank_capacity_factor=1.5"), fail: true,
		msg: "moe_expert_rank_capacity_factor requires moe_flex_dispatcher_backend to be 'hybridep' or 'ncclep'."},
	{id: "TC-42", mb: "0.7", model: moeModel, sets: sets("model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=ncclep", "model.moe_expert_rank_capacity_factor=1.5")},
	{id: "TC-42", mb: "0.7", model: moeModel, sets: sets("model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=hybridep", "model.moe_expert_rank_capacity_factor=1.5", "model.use_transformer_engine_op_fuser=true")},
	{id: "TC-42", mb: "0.5", model: moeModel, sets: sets("model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=deepep", "model.moe_expert_rank_capacity_factor=1.5"), fail: true,
		msg: "moe_expert_rank_capacity_factor requires use_transformer_engine_op_fuser to be enabled."},
	{id: "TC-42", mb: "0.5", model: moeModel, sets: sets("model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=deepep", "model.moe_expert_rank_capacity_factor=1.5", "model.use_transformer_engine_op_fuser=true"), fail: true,
		msg: "moe_expert_rank_capacity_factor requires moe_flex_dispatcher_backend to be 'hybridep'."},
	{id: "TC-42", mb: "0.5", model: moeModel, sets: sets("model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=hybridep", "model.moe_expert_rank_capacity_factor=1.5", "model.use_transformer_engine_op_fuser=true")},
	{id: "TC-01", sets: sets("model.enable_cuda_graph=true", te, rngOn), fail: true,
		msg: "Do not use enable_cuda_graph or external_cuda_graph with cuda_graph_impl."},
	{id: "TC-01", sets: sets("model.enable_cuda_graph=true", rngOn)},
	{id: "TC-02", sets: sets("model.enable_cuda_graph=true", "model.external_cuda_graph=true", rngOn), fail: true,
		msg: "enable_cuda_graph and external_cuda_graph cannot be enabled at the same time."},
	{id: "TC-02", sets: sets("model.external_cuda_graph=true", rngOn)},
	{id: "TC-03", sets: sets("model.enable_cuda_graph=true", rngOn), fail: true,
		note: "enable_cuda_graph is deprecated, use cuda_graph_impl=local instead."},
	{id: "TC-03", sets: sets("model.external_cuda_graph=true", rngOn), fail: true,
		note: "external_cuda_graph is deprecated, use cuda_graph_impl=transformer_engine instead."},
	{id: "TC-03", sets: sets(te, rngOn)},
	{id: "TC-04", mb: "0.6", sets: sets(te, "model.cuda_graph_modules=[attn]", rngOn), fail: true,
		msg: "cuda_graph_scope and cuda_graph_modules cannot be set together."},
	{id: "TC-04", mb: "0.6", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn)},
	{id: "TC-04", mb: "0.6", sets: sets(te, "model.cuda_graph_scope=[attn]", rngOn)},
	{id: "TC-05", mb: "0.6", sets: sets(te, "model.cuda_graph_scope=[attn]", rngOn), fail: true,
		note: "cuda_graph_scope is deprecated, use cuda_graph_modules instead."},
	{id: "TC-05", mb: "0.6", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn)},
	{id: "TC-06", sets: sets(te, "model.cuda_graph_scope=[full,attn]", rngOn), fail: true,
		msg: "full scope cannot be used with other scopes."},
	{id: "TC-06", mb: "0.6", sets: sets(te, "model.cuda_graph_modules=full,attn", noScope, rngOn), fail: true,
		msg: "full scope cannot be used with other scopes."},
	{id: "TC-06", sets: sets(te, "model.cuda_graph_scope=full", rngOn)},
	// G2 and MB 0.5 normalise the scope before MB clears it for impl none.
	{id: "TC-06", sets: sets("model.cuda_graph_scope=[full,attn]"), fail: true, msg: "full scope cannot be used with other scopes."},
	{id: "TC-06", mb: "0.6", sets: sets("model.cuda_graph_modules=[full,attn]", noScope)},
	{id: "TC-09", sets: sets(te, "model.cuda_graph_scope=[full_iteration]", rngOn), fail: true,
		msg: "To use full iteration cuda graph, please use cuda_graph_impl=local instead of cuda_graph_impl=transformer_engine."},
	{id: "TC-09", mb: "0.6", sets: sets(te, "model.cuda_graph_modules=[full_iteration]", noScope, rngOn), fail: true,
		msg: "cuda_graph_modules='full_iteration' cannot be combined with cuda_graph_impl='transformer_engine'."},
	{id: "TC-09", sets: sets(local, "model.cuda_graph_scope=[full_iteration]", rngOn)},
	{id: "TC-12", mb: "0.6", sets: sets(local, "model.cuda_graph_modules=[full_iteration]", noScope, rngOn), fail: true,
		note: "cuda_graph_modules 'full_iteration' is deprecated. Use cuda_graph_impl='full_iteration' instead."},
	{id: "TC-12", mb: "0.5", sets: sets("model.cuda_graph_scope=[full_iteration]", rngOn), fail: true,
		note: "cuda_graph_modules 'full_iteration' is deprecated. Use cuda_graph_impl='full_iteration' instead."},
	{id: "TC-12", mb: "0.6", sets: sets("model.cuda_graph_impl=full_iteration", "model.cuda_graph_modules=[]", noScope, rngOn)},
	{id: "TC-13", sets: sets("model.cuda_graph_impl=full_iteration", rngOn), fail: true,
		msg: "Invalid cuda graph implementation: full_iteration"},
	{id: "TC-13", mb: "0.6", sets: sets("model.cuda_graph_impl=full_iteration", rngOn)},
	{id: "TC-15", mb: "0.6", sets: sets("model.cuda_graph_impl=full_iteration", "model.cuda_graph_modules=[attn]", noScope, rngOn), fail: true,
		msg: `cuda_graph_modules must be empty when cuda_graph_impl="full_iteration".`},
	{id: "TC-15", mb: "0.5", harness: cand("local", "full_iteration", "attn"), fail: true,
		msg: `cuda_graph_modules must be empty when cuda_graph_impl="full_iteration".`},
	{id: "TC-15", mb: "0.6", sets: sets("model.cuda_graph_impl=full_iteration", "model.cuda_graph_modules=[]", noScope, rngOn)},
	{id: "TC-16", sets: sets(local, "model.cuda_graph_scope=[full_iteration]", rngOn, "model.cpu_offloading=true"), fail: true,
		msg: "CUDA graphs not supported with CPU offloading."},
	{id: "TC-16", mb: "0.6", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "model.cpu_offloading=true"), fail: true,
		msg: "CUDA graphs not supported with CPU offloading."},
	{id: "TC-16", mb: "0.6", sets: sets("model.cuda_graph_impl=full_iteration", "model.cuda_graph_modules=[]", noScope, rngOn, "model.cpu_offloading=true")},
	{id: "TC-17", model: moeModel, sets: sets(local, "model.cuda_graph_scope=[moe_router]", rngOn), fail: true,
		note: "cuda_graph_impl=local captures moe_router and moe_preprocess together: added moe_preprocess"},
	{id: "TC-17", model: moeModel, sets: sets(local, "model.cuda_graph_scope=[moe_preprocess]", rngOn), fail: true,
		note: "cuda_graph_impl=local captures moe_router and moe_preprocess together: added moe_router"},
	{id: "TC-17", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe_router]", rngOn)},
	{id: "TC-18", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe,moe_router]", rngOn, dropPad), fail: true,
		msg: "cuda_graph_scope must not contain both moe and moe_router."},
	{id: "TC-18", mb: "0.6", model: moeModel, sets: sets(te, "model.cuda_graph_modules=[moe,moe_router]", noScope, rngOn, dropPad), fail: true,
		msg: "cuda_graph_modules must not contain both moe and moe_router."},
	{id: "TC-18", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe_router]", rngOn)},
	{id: "TC-19", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe_preprocess]", rngOn), fail: true,
		msg: "moe_preprocess cuda graph is only supported with moe_router cuda graph."},
	{id: "TC-19", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe_router,moe_preprocess]", rngOn)},
	{id: "TC-20", sets: sets(te, "model.cuda_graph_scope=[moe_router]", rngOn), fail: true,
		msg: "moe cuda graph is only supported for MoE."},
	{id: "TC-20", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe_router]", rngOn)},
	{id: "TC-21", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[mlp]", rngOn), fail: true,
		msg: "mlp cuda graph is only supported for dense layers, but not found in the model."},
	{id: "TC-21", model: deepseekModel, sets: sets(te, "model.cuda_graph_scope=[mlp]", rngOn)},
	{id: "TC-21", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[mlp]", rngOn, "model.moe_layer_freq=[0,1,1,1]")},
	{id: "TC-22", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[attn,moe]", rngOn), fail: true,
		msg: "moe cuda graph is only supported with drop-padding MoE."},
	{id: "TC-22", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[attn,moe]", rngOn, "model.moe_expert_capacity_factor=1.0"), fail: true,
		msg: "moe cuda graph is only supported with drop-padding MoE."},
	{id: "TC-22", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[attn,moe]", rngOn, dropPad)},
	{id: "TC-23", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe_router,moe_preprocess]", rngOn, "model.moe_expert_capacity_factor=1.0"), fail: true,
		msg: "moe_preprocess cuda graph is not supported when there are DtoH copies and synchronizations in the preprocess step."},
	{id: "TC-23", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe_router,moe_preprocess]", rngOn, "model.moe_router_padding_for_fp8=true"), fail: true,
		msg: "moe_preprocess cuda graph is not supported when there are DtoH copies and synchronizations in the preprocess step."},
	{id: "TC-23", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe_router,moe_preprocess]", rngOn, "model.moe_expert_capacity_factor=1.0", "model.moe_token_dispatcher_type=flex")},
	{id: "TC-24", sets: sets(te, "model.cuda_graph_scope=[attn]", rngOn, "model.recompute_granularity=full"), fail: true,
		msg: "full recompute is only supported with full iteration CUDA graph."},
	{id: "TC-24", sets: sets(local, "model.cuda_graph_scope=[full_iteration]", rngOn, "model.recompute_granularity=full")},
	{id: "TC-24", mb: "0.6", sets: sets("model.cuda_graph_impl=full_iteration", "model.cuda_graph_modules=[]", noScope, rngOn, "model.recompute_granularity=full")},
	{id: "TC-25", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe_router]", rngOn, "model.recompute_granularity=selective", "model.recompute_modules=[moe]"), fail: true,
		msg: "moe recompute is not supported with moe_router CUDA graph with: "},
	{id: "TC-25", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe_router]", rngOn, "model.recompute_granularity=selective", "model.recompute_modules=[core_attn]")},
	{id: "TC-26", sets: sets(te, "model.cuda_graph_scope=[attn]", rngOn, "model.recompute_granularity=selective", "model.attention_dropout=0.1"), fail: true,
		msg: "attention dropout is not supported with graphed attention recomputation."},
	{id: "TC-26", sets: sets(te, "model.cuda_graph_scope=[attn]", rngOn, "model.recompute_granularity=selective", "model.attention_dropout=0.1", "model.recompute_modules=[mlp]")},
	{id: "TC-26", sets: sets(te, "model.cuda_graph_scope=[mlp]", rngOn, "model.recompute_granularity=selective", "model.attention_dropout=0.1")},
	{id: "TC-27", sets: sets(te, "model.cuda_graph_scope=[]", rngOn, "model.recompute_granularity=selective", "model.recompute_modules=[mlp]", "model.hidden_dropout=0.1"), fail: true,
		msg: "hidden dropout is not supported with graphed MLP/MoE recomputation."},
	{id: "TC-27", sets: sets(te, "model.cuda_graph_scope=[attn]", rngOn, "model.recompute_granularity=selective", "model.recompute_modules=[mlp]", "model.hidden_dropout=0.1")},
	{id: "TC-28", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe]", rngOn, dropPad, "model.recompute_granularity=selective", "model.recompute_modules=[moe]", "model.moe_input_jitter_eps=0.01"), fail: true,
		msg: "moe_input_jitter_eps is not supported with graphed moe recomputation."},
	{id: "TC-28", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe]", rngOn, dropPad, "model.recompute_granularity=selective", "model.recompute_modules=[moe]")},
	{id: "TC-29", mb: "0.6", model: deepseekModel, sets: sets(local, "model.cuda_graph_modules=[moe_router]", noScope, rngOn, "model.gtp_weight_remat_size=2", "model.fp8=hybrid",
		"model.recompute_granularity=selective", "model.recompute_modules=[shared_experts]"), fail: true,
		msg: "GTP + local CUDA graphs that capture shared_experts (moe_router/moe scope) cannot recompute it under fp8/fp4: te_checkpoint requires .backward(), but the local fwd-graph warmup uses .grad(). Drop 'shared_experts' from --recompute-modules (GTP-shard + offload instead), or use --cuda-graph-impl full_iteration."},
	{id: "TC-29", mb: "0.6", model: deepseekModel, sets: sets(local, "model.cuda_graph_modules=[moe_router]", noScope, rngOn, "model.gtp_weight_remat_size=2",
		"model.recompute_granularity=selective", "model.recompute_modules=[shared_experts]")},
	{id: "TC-30", mb: "0.6", model: moeModel, sets: sets(local, "model.cuda_graph_modules=[moe_router]", noScope, rngOn, "model.fine_grained_activation_offloading=true", "model.offload_modules=[qkv_linear,core_attn,expert_fc1]"), fail: true,
		msg: "fine-grained activation offloading with cuda_graph_impl='local' only supports offload_modules 'expert_fc1', 'moe_act', and 'fused_group_mlp'. Unsupported offload_modules: ['core_attn', 'qkv_linear']."},
	{id: "TC-30", mb: "0.6", model: moeModel, sets: sets(local, "model.cuda_graph_modules=[moe_router]", noScope, rngOn, "model.fine_grained_activation_offloading=true", "model.offload_modules=[expert_fc1]")},
	{id: "TC-31", mb: "0.6", model: moeModel, sets: sets(local, "model.cuda_graph_modules=[]", noScope, rngOn, "model.fine_grained_activation_offloading=true", "model.offload_modules=[expert_fc1]"), fail: true,
		msg: "fine-grained activation offloading with cuda_graph_impl='local' is not supported with whole-layer CUDA graph capture."},
	{id: "TC-31", mb: "0.6", model: moeModel, sets: sets(local, "model.cuda_graph_modules=[moe_router]", noScope, rngOn, "model.fine_grained_activation_offloading=true", "model.offload_modules=[expert_fc1]")},
	{id: "TC-32", mb: "0.6", sets: sets(local, "model.cuda_graph_modules=[attn]", noScope, rngOn, "model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn]"), fail: true,
		msg: "fine-grained activation offloading is only supported with transformer_engine CUDA graph implementation or local CUDA graph implementation with partial MoE offload. Local partial CUDA graphs are supported only for expert_fc1, moe_act, or fused_group_mlp offload when the full MoE module is not captured."},
	{id: "TC-32", mb: "0.5", model: moeModel, sets: sets(local, "model.cuda_graph_modules=[moe_router]", noScope, rngOn, "model.fine_grained_activation_offloading=true", "model.offload_modules=[expert_fc1]"), fail: true,
		msg: "fine-grained activation offloading is only supported with transformer_engine CUDA graph implementation or local CUDA graph implementation with full_iteration scope."},
	{id: "TC-32", mb: "0.6", model: moeModel, sets: sets(local, "model.cuda_graph_modules=[moe_router]", noScope, rngOn, "model.fine_grained_activation_offloading=true", "model.offload_modules=[expert_fc1]")},
	{id: "TC-32", mb: "0.5", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn]")},
	{id: "TC-33", mb: "0.6", model: moeModel, sets: sets(te, "model.cuda_graph_modules=[moe]", noScope, rngOn, dropPad, "model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn]"), fail: true,
		msg: "Token-drop MoE is temporarily not supported with activation offloading."},
	{id: "TC-33", mb: "0.6", model: moeModel, sets: sets(te, "model.cuda_graph_modules=[moe_router]", noScope, rngOn, "model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn]")},
	{id: "TC-33", mb: "0.4", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe]", rngOn, dropPad, "model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn]")},
	{id: "TC-34", mb: "0.6", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn]", "model.cuda_graph_warmup_steps=0"), fail: true,
		msg: "cuda_graph_warmup_steps must be greater than 0 when enabling fine-grained activation offloading."},
	{id: "TC-34", mb: "0.6", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn]", "model.cuda_graph_warmup_steps=1")},
	{id: "TC-35", mb: "0.6", sets: sets("model.cuda_graph_impl=full_iteration", "model.cuda_graph_modules=[]", noScope, rngOn, "model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn]"), fail: true,
		msg: "fine_grained_offloading_max_inflight_offloads must be a non-negative integer when using fine-grained activation offloading with full-iteration CUDA graphs"},
	{id: "TC-35", mb: "0.6", sets: sets("model.cuda_graph_impl=full_iteration", "model.cuda_graph_modules=[]", noScope, rngOn, "model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn]", "model.fine_grained_offloading_max_inflight_offloads=0")},
	{id: "TC-39", model: moeModel, sets: sets(overlap, "model.pipeline_model_parallel_size=2"), fail: true,
		msg: "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified when pipeline_model_parallel_size > 1"},
	{id: "TC-39", model: moeModel, sets: sets(coOverlap, "model.pipeline_model_parallel_size=2")}, // MB-18 says it first
	{id: "TC-39", model: moeModel, sets: sets(overlap, "model.expert_model_parallel_size=1"), fail: true,
		msg: "overlap_moe_expert_parallel_comm is only supported with expert model parallelism"},
	{id: "TC-39", model: moeModel, sets: sets(overlap, "model.moe_token_dispatcher_type=allgather"), fail: true,
		msg: "overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher"},
	{id: "TC-39", model: moeModel, sets: sets(overlap, "model.recompute_granularity=full"), fail: true,
		msg: "disable full recomputation when enabling overlap_moe_expert_parallel_comm"},
	{id: "TC-39", model: moeModel, sets: sets(overlap, "model.recompute_method=uniform"), fail: true,
		msg: "disable recomputation method when enabling overlap_moe_expert_parallel_comm"},
	{id: "TC-39", model: moeModel, sets: sets(overlap, "model.recompute_num_layers=1"), fail: true,
		msg: "recompute_num_layers must be None when enabling overlap_moe_expert_parallel_comm"},
	{id: "TC-39", model: moeModel, sets: sets(overlap, "model.recompute_granularity=selective", "model.recompute_modules=[moe]"), fail: true,
		msg: "disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm"},
	{id: "TC-39", model: moeModel, sets: sets(overlap, "model.bf16=false"), fail: true,
		msg: "overlap_moe_expert_parallel_comm is only supported with bf16 or fp16 model"},
	{id: "TC-39", model: moeModel, sets: sets(overlap, "model.moe_shared_expert_overlap=true"), fail: true,
		msg: "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm"},
	{id: "TC-39", model: moeModel, sets: sets(overlap, "model.mtp_num_layers=0"), fail: true,
		msg: "MTP layernum only supports 1 when enabling overlap_moe_expert_parallel_comm."},
	{id: "TC-39", mb: "0.6", model: moeModel, sets: sets(overlap, "model.mtp_num_layers=0")},
	{id: "TC-39", mb: "0.6", model: moeModel, sets: sets(overlap, "model.mtp_num_layers=2"), fail: true,
		msg: "MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm."},
	{id: "TC-39", model: moeModel, sets: sets(overlap, "model.mtp_num_layers=1"), fail: true,
		msg: "Pipeline model parallel size must be larger than 1 when enabling overlap_moe_expert_parallel_comm with MTP layer."},
	{id: "TC-39", mb: "0.5", model: moeModel, sets: sets(overlap, "model.mtp_num_layers=1")},
	{id: "TC-39", model: moeModel, sets: sets(overlap, "model.pipeline_model_parallel_size=2", "model.virtual_pipeline_model_parallel_size=2", "model.mtp_num_layers=1")},
	{id: "TC-36", model: moeModel, sets: sets(overlap, te, "model.cuda_graph_scope=[moe]", rngOn, dropPad), fail: true,
		msg: "CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm"},
	{id: "TC-36", model: moeModel, sets: sets(overlap, local, "model.cuda_graph_scope=[full_iteration]", rngOn, "rerun_state_machine.check_for_nan_in_loss=false"), fail: true,
		msg: "CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm"},
	{id: "TC-36", mb: "0.6", model: moeModel, sets: sets(overlap, "model.cuda_graph_impl=full_iteration", "model.cuda_graph_modules=[]", noScope, rngOn)},
	{id: "TC-36", model: moeModel, sets: sets(overlap, te, "model.cuda_graph_scope=[attn,moe_router]", rngOn)},
	{id: "TC-38", model: moeModel, sets: sets("model.delay_wgrad_compute=true"), fail: true,
		msg: "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute"},
	{id: "TC-38", model: moeModel, sets: sets("model.delay_wgrad_compute=true", overlap)},
	{id: "TC-38", model: moeModel, sets: sets("comm_overlap.delay_wgrad_compute=true")}, // MB-12 says it first
	{id: "TC-37", model: moeModel, sets: sets("model.delay_wgrad_compute=true", overlap, te, "model.cuda_graph_scope=[moe_router]", rngOn, "te_version=2.9"), fail: true,
		msg: "TE version >= 2.10.0 is required for delay_wgrad_compute with partial cuda graph"},
	{id: "TC-37", model: moeModel, sets: sets("model.delay_wgrad_compute=true", overlap, te, "model.cuda_graph_scope=[moe_router]", rngOn, "te_version=2.10")},

	// --- MB after finalize, provide, run time ---
	{id: "MB-02", sets: sets(rngOn), fail: true, note: "model.use_te_rng_tracker=True because rng.te_rng_tracker=True (MB keeps the two in sync)"},
	{id: "MB-02", sets: sets("model.use_te_rng_tracker=true"), fail: true, note: "rng.te_rng_tracker=True because model.use_te_rng_tracker=True (MB keeps the two in sync)"},
	{id: "MB-02", sets: sets(rngOn, "model.use_te_rng_tracker=true")},
	{id: "MB-03", sets: sets(local, "model.cuda_graph_scope=[full_iteration]", rngOn), fail: true,
		msg: "check_for_nan_in_loss must be disabled when using full_iteration CUDA graph. Set rerun_state_machine.check_for_nan_in_loss=False."},
	{id: "MB-03", mb: "0.6", sets: sets("model.cuda_graph_impl=full_iteration", "model.cuda_graph_modules=[]", noScope, rngOn), fail: true,
		msg: "check_for_nan_in_loss must be disabled when using full_iteration CUDA graph. Set rerun_state_machine.check_for_nan_in_loss=False."},
	{id: "MB-03", sets: sets(local, "model.cuda_graph_scope=[full_iteration]", rngOn, "rerun_state_machine.check_for_nan_in_loss=false")},
	// Under the perf harness the recipe has the checks off before the
	// overrides: one an override turns back on stays on in MB 0.4, and
	// MB 0.5+'s harness turns the loss check off for a full-iteration graph.
	{id: "MB-03", mb: "0.4", sets: sets("rerun_state_machine.check_for_nan_in_loss=true"), harness: cand("local", "full_iteration"), fail: true,
		msg: "check_for_nan_in_loss must be disabled when using full_iteration CUDA graph. Set rerun_state_machine.check_for_nan_in_loss=False."},
	{id: "MB-03", mb: "0.6", sets: sets("rerun_state_machine.check_for_nan_in_loss=true"), harness: cand("local", "full_iteration")},
	{id: "MB-03", mb: "0.4", harness: cand("local", "full_iteration")},
	{id: "MB-06", mb: "0.7", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "ddp.use_megatron_fsdp=true", "ddp.megatron_fsdp_version=2"), fail: true,
		msg: "MFSDP V2 does not support CUDA graphs."},
	{id: "MB-06", mb: "0.7", sets: sets("optimizer.optimizer_cuda_graph=true", "ddp.use_megatron_fsdp=true", "ddp.megatron_fsdp_version=2"), fail: true,
		msg: "MFSDP V2 does not support optimizer CUDA graphs."},
	{id: "MB-06", mb: "0.7", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "ddp.use_megatron_fsdp=true", "ddp.megatron_fsdp_version=1")},
	{id: "MB-06", mb: "0.6", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "ddp.use_megatron_fsdp=true", "ddp.megatron_fsdp_version=2")},
	{id: "FSDP-01", mb: "0.7", model: moeModel, sets: sets(te, "model.cuda_graph_modules=[moe_router]", noScope, rngOn, "ddp.use_megatron_fsdp=true", overlap), fail: true,
		msg: "1F1B overlap with FSDP does not support per-layer CUDA graphs (cuda_graph_impl='transformer_engine'). Use cuda_graph_impl='full_iteration' or disable CUDA graphs (cuda_graph_impl='none')."},
	{id: "FSDP-01", mb: "0.5", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe_router]", rngOn, "ddp.use_megatron_fsdp=true", "comm_overlap.overlap_moe_expert_parallel_comm=true"), fail: true,
		msg: "1F1B overlap with FSDP does not support per-layer CUDA graphs (cuda_graph_impl='transformer_engine'). Use cuda_graph_impl='full_iteration' or disable CUDA graphs (cuda_graph_impl='none')."},
	{id: "FSDP-01", mb: "0.7", model: moeModel, sets: sets("model.cuda_graph_impl=full_iteration", "model.cuda_graph_modules=[]", noScope, rngOn, "ddp.use_megatron_fsdp=true", overlap)},
	{id: "FSDP-01", mb: "0.7", model: moeModel, sets: sets(te, "model.cuda_graph_modules=[moe_router]", noScope, rngOn, "ddp.use_megatron_fsdp=true")},
	{id: "FSDP-01", mb: "0.7", model: moeModel, sets: sets(te, "model.cuda_graph_modules=[moe_router]", noScope, rngOn, overlap)},
	{id: "FSDP-01", mb: "0.4", model: moeModel, sets: sets(te, "model.cuda_graph_scope=[moe_router]", rngOn, "ddp.use_megatron_fsdp=true", overlap)},
	{id: "MB-09", mb: "0.7", sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "dataset.packing_buffer_size=16"), fail: true,
		msg: "Energon native sequence packing does not support CUDA graphs."},
	{id: "MB-09", mb: "0.7", sets: sets("dataset.packing_buffer_size=16")},
	{id: "MB-09", mb: "0.7", model: moeModel, sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "dataset.packing_buffer_size=16", "model.mtp_num_layers=1"), fail: true,
		msg: "Energon native sequence packing does not support MTP."},
	{id: "MB-09", mb: "0.7", sets: sets("dataset.packing_buffer_size=16", "model.pipeline_model_parallel_size=2"), fail: true,
		msg: "Energon native sequence packing does not yet support pipeline parallelism."},
	{id: "MB-22", mb: "0.7", model: moeModel, sets: sets(coOverlap, "dataset.packing_buffer_size=16"), fail: true,
		note: "Disabling MoE expert-parallel communication overlap and delayed weight-gradient compute because overlap switches MCore to combined-1F1B schedule-plan execution, but the current VLM path does not forward visual inputs or packed-sequence metadata through that plan."},
	{id: "MB-22", mb: "0.7", model: moeModel, sets: sets(coOverlap)},
	{id: "MB-22", mb: "0.6", model: moeModel, sets: sets(coOverlap, "dataset.packing_buffer_size=16")},
	// ... so FSDP-01 and TC-36 no longer see EP overlap.
	{id: "FSDP-01", mb: "0.7", model: moeModel, sets: sets(te, "model.cuda_graph_modules=[moe_router]", noScope, rngOn, "ddp.use_megatron_fsdp=true", coOverlap, "dataset.packing_buffer_size=16")},
	{id: "MB-21", mb: "0.6", sets: sets("model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn]"), fail: true,
		msg: "For fine-grained activation offloading with TE >= 2.10.0, NVTE_CPU_OFFLOAD_V1 environment variable should be set to 1 to avoid offloading weights."},
	{id: "MB-21", sets: sets("model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn]", "model.transformer_impl=local", "env.NVTE_CPU_OFFLOAD_V1=1"), fail: true,
		msg: "Fine-grained activation offloading is only supported with transformer_engine implementation. Current transformer_impl: local"},
	{id: "MB-21", sets: sets("model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn]", "env.NVTE_CPU_OFFLOAD_V1=1")},
	{id: "MB-21", sets: sets("model.fine_grained_activation_offloading=true", "model.offload_modules=[core_attn]", "te_version=2.9")},
	{id: "MB-01", sets: sets(te, "model.cuda_graph_scope=[attn]"), fail: true,
		msg: "Transformer engine's RNG tracker is required for cudagraphs, it can be enabled with use_te_rng_tracker=True'."},
	{id: "MB-01", sets: sets(te, "model.cuda_graph_scope=[attn]", rngOn)},
	{id: "MB-01", mb: "0.4", model: hybridModel, sets: sets(te, "model.cuda_graph_scope=[mamba]")}, // the hybrid provider does not assert it
	{id: "MB-01", mb: "0.7", model: hybridModel, sets: sets(te, "model.cuda_graph_modules=[attn,mamba]", noScope)},
	{id: "MB-01", launcher: LauncherMLM, sets: sets(te, "model.cuda_graph_scope=[attn]")}, // pretrain_gpt.py runs no MB code
	{id: "MB-10", mb: "0.7", model: moeModel, sets: sets(te, "model.cuda_graph_modules=[attn,moe_router]", noScope, rngOn, "dataset.enable_in_batch_packing=true"), fail: true,
		msg: "Packed MoE padding masks do not support router-scoped Transformer Engine CUDA graphs in the pinned MCore. Use an attention-only CUDA graph scope or disable scoped CUDA graphs."},
	{id: "MB-10", mb: "0.7", model: moeModel, sets: sets(te, "model.cuda_graph_modules=[attn]", noScope, rngOn, "dataset.enable_in_batch_packing=true")},
	{id: "MB-19", sets: sets(te, "model.cuda_graph_scope=[mamba]", rngOn, "model.cuda_graph_warmup_steps=0"), fail: true,
		msg: "CUDA Graphs should have been created."},
	{id: "MB-19", mb: "0.6", model: deepseekModel, sets: sets(te, "model.cuda_graph_modules=[mlp]", noScope, rngOn, "model.cuda_graph_warmup_steps=0", "model.pipeline_model_parallel_size=2"), fail: true,
		msg: "CUDA Graphs should have been created."},
	{id: "MB-19", mb: "0.6", model: deepseekModel, sets: sets(te, "model.cuda_graph_modules=[mlp]", noScope, rngOn, "model.cuda_graph_warmup_steps=0")},
	{id: "MB-19", sets: sets(te, "model.cuda_graph_scope=[mamba]", rngOn, "model.cuda_graph_warmup_steps=1")},
	{id: "MB-19", sets: sets(te, "model.cuda_graph_scope=[attn]", rngOn, "model.cuda_graph_warmup_steps=0")},
	{id: "MB-19", sets: sets(te, "model.cuda_graph_scope=[mamba]", rngOn, "model.cuda_graph_warmup_steps=0", "ddp.overlap_param_gather=false")},
	{id: "MB-19", sets: sets(te, "model.cuda_graph_scope=[mamba]", rngOn, "model.cuda_graph_warmup_steps=0", "ddp.use_megatron_fsdp=true")},
	{id: "MB-19", mb: "0.3", sets: sets(te, "model.cuda_graph_scope=[mamba]", rngOn, "model.cuda_graph_warmup_steps=0")},
	{id: "ARG-06", sets: sets(te, "model.cuda_graph_scope=[attn]", rngOn, "env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"), fail: true,
		msg: "Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using CUDA Graph with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."},
	{id: "ARG-06", sets: sets(te, "model.cuda_graph_scope=[attn]", rngOn, "env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "env.NCCL_GRAPH_REGISTER=0")},
	{id: "ARG-03", launcher: LauncherMLM, sets: sets(local, "model.cuda_graph_scope=[full_iteration]", rngOn, "rerun_state_machine.check_for_nan_in_loss=false"), fail: true,
		msg: "--no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-scope=full_iteration for training. Note: If you are trying to use full_iteration CUDA graphs for inference, please use --cuda-graph-scope full_iteration_inference instead"},
	{id: "ARG-03", launcher: LauncherMLM, mb: "0.3", sets: sets(local, "model.cuda_graph_scope=[full_iteration]", rngOn, "rerun_state_machine.check_for_nan_in_loss=false"), fail: true,
		msg: "--no-check-for-nan-in-loss-and-grad should be set with full_iteration CUDA graph"},
	{id: "ARG-03", launcher: LauncherMLM, mb: "0.6", sets: sets("model.cuda_graph_impl=full_iteration", "model.cuda_graph_modules=[]", noScope, rngOn, "rerun_state_machine.check_for_nan_in_loss=false"), fail: true,
		msg: "--no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-impl=full_iteration for training."},
	{id: "ARG-03", launcher: LauncherMLM, sets: sets(local, "model.cuda_graph_scope=[full_iteration]", rngOn, "rerun_state_machine.check_for_nan_in_loss=false", "ddp.check_for_nan_in_grad=false")},
	{id: "ARG-03", launcher: LauncherMLM, sets: sets(local, "model.cuda_graph_scope=[full_iteration]", rngOn, "ddp.check_for_nan_in_grad=false"), fail: true,
		msg: "--no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-scope=full_iteration for training. Note: If you are trying to use full_iteration CUDA graphs for inference, please use --cuda-graph-scope full_iteration_inference instead"},
	// An MB job never runs validate_args: MB-03 checks only the loss half.
	{id: "ARG-03", sets: sets(local, "model.cuda_graph_scope=[full_iteration]", rngOn, "rerun_state_machine.check_for_nan_in_loss=false")},
	{id: "ARG-07", launcher: LauncherMLM, model: moeModel, sets: sets("model.delay_wgrad_compute=true", overlap, "te_version=2.7.0"), fail: true,
		msg: "overlap_grad_reduce is only supported with TE >= 2.8.0 when enabling delay_wgrad_compute"},
	{id: "ARG-07", launcher: LauncherMLM, model: moeModel, sets: sets("model.delay_wgrad_compute=true", overlap, "te_version=2.8.0")},
	{id: "ARG-07", model: moeModel, sets: sets("model.delay_wgrad_compute=true", overlap, "te_version=2.7.0")}, // MB's own check (MB-11) needs 2.7.0
	{id: "ARG-08", launcher: LauncherMLM, model: moeModel, sets: sets("model.delay_wgrad_compute=true", overlap, te, "model.cuda_graph_scope=[attn]", rngOn, "te_version=2.11"), fail: true,
		msg: "CUDA graph with delay_wgrad_compute requires TE version >= 2.12.0."},
	{id: "ARG-08", launcher: LauncherMLM, model: moeModel, sets: sets("model.delay_wgrad_compute=true", overlap, te, "model.cuda_graph_scope=[attn]", rngOn, "te_version=2.12")},
	{id: "ARG-08", model: moeModel, sets: sets("model.delay_wgrad_compute=true", overlap, te, "model.cuda_graph_scope=[attn]", rngOn, "te_version=2.11")}, // an MB job
	{id: "ARG-09", launcher: LauncherMLM, model: moeModel, sets: sets("model.delay_wgrad_compute=true", overlap, te, "model.cuda_graph_scope=[attn]", rngOn, "model.gradient_accumulation_fusion=false"), fail: true,
		msg: "CUDA graph with delay_wgrad_compute requires gradient_accumulation_fusion to be enabled. This is because the default gradient accumulation does not use static memory addresses, which breaks CUDA graph requirements."},
	{id: "ARG-09", launcher: LauncherMLM, model: moeModel, sets: sets("model.delay_wgrad_compute=true", overlap, te, "model.cuda_graph_scope=[attn]", rngOn, "model.gradient_accumulation_fusion=false", "ddp.overlap_grad_reduce=false")},
	{id: "ARG-10", launcher: LauncherMLM, model: moeModel, sets: sets("model.delay_wgrad_compute=true", overlap, te, "model.cuda_graph_scope=[attn]", rngOn, "model.add_bias_linear=true"), fail: true,
		msg: "CUDA graph with delay_wgrad_compute doesn't support attn bias for now."},
	{id: "ARG-10", launcher: LauncherMLM, model: moeModel, sets: sets("model.delay_wgrad_compute=true", overlap, te, "model.cuda_graph_scope=[attn]", rngOn)},
	{id: "ARG-05", launcher: LauncherMLM, sets: sets(te, "model.cuda_graph_scope=[attn]"), fail: true,
		note: "te_rng_tracker is not enabled, enabling it for CUDA graphs."},
	{id: "ARG-05", sets: sets(te, "model.cuda_graph_scope=[attn]")}, // MB rejects instead (MB-01)
	{id: "ARG-05", launcher: LauncherMLM, sets: sets(te, "model.cuda_graph_scope=[attn]", rngOn)},
}

func TestRules(t *testing.T) {
	for _, rc := range ruleCases {
		if rc.mb == "" {
			rc.mb = "0.4"
		}
		t.Run(rc.name(), func(t *testing.T) {
			r := run(t, rc)
			var got *Violation
			for i := range r.Violations {
				if r.Violations[i].ID == rc.id {
					got = &r.Violations[i]
				}
			}
			var notes []string
			for _, n := range r.Notes {
				if id, rest, _ := strings.Cut(n, ": "); id == rc.id {
					notes = append(notes, rest)
				}
			}
			rule := ruleByID(rc.id)
			switch {
			case rule.Kind == Reject && rc.fail:
				if got == nil {
					t.Fatalf("%s did not fire; got %v", rc.id, r.Violations)
				}
				if got.Message != rc.msg {
					t.Errorf("message\n got: %q\nwant: %q", got.Message, rc.msg)
				}
			case rule.Kind == Reject:
				if got != nil {
					t.Errorf("%s fired: %s", rc.id, got.Message)
				}
			case rc.fail:
				if !slices.Contains(notes, rc.note) {
					t.Errorf("note %q missing; %s notes: %q", rc.note, rc.id, notes)
				}
			default:
				if len(notes) > 0 {
					t.Errorf("unexpected %s notes: %q", rc.id, notes)
				}
			}
		})
	}
}

// messageMatches reports whether msg is one of a rule's message
// templates, {...} standing for any value.
func messageMatches(templates []string, msg string) bool {
	for _, tpl := range templates {
		parts := regexp.MustCompile(`\{[^{}]*\}`).Split(tpl, -1)
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		if regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(msg) {
			return true
		}
	}
	return false
}

// What a rule documents as its messages is what it prints: every message
// of the rule cases is one of its templates.
func TestRuleMessagesAreDocumented(t *testing.T) {
	for _, rc := range ruleCases {
		if !rc.fail || rc.msg == "" {
			continue
		}
		if r := ruleByID(rc.id); !messageMatches(r.Messages, rc.msg) {
			t.Errorf("%s prints %q, which none of its Messages documents", rc.id, rc.msg)
		}
	}
}

// Every rule of the table has a configuration that trips it and one that
// does not.
func TestEveryRuleHasPassAndFailCase(t *testing.T) {
	pass, fail := map[string]bool{}, map[string]bool{}
	for _, rc := range ruleCases {
		if rc.fail {
			fail[rc.id] = true
		} else {
			pass[rc.id] = true
		}
	}
	for _, r := range rules {
		if !pass[r.ID] || !fail[r.ID] {
			t.Errorf("%s: pass case %v, fail case %v", r.ID, pass[r.ID], fail[r.ID])
		}
	}
}

func TestRuleTableIsConsistent(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range rules {
		if seen[r.ID] {
			t.Errorf("%s listed twice", r.ID)
		}
		seen[r.ID] = true
		if len(r.Gens) == 0 || len(r.stages) == 0 || r.Source == "" {
			t.Errorf("%s: gens %v, stages %v, source %q", r.ID, r.Gens, r.stages, r.Source)
		}
		if r.Kind == Reject && (r.when == nil || len(r.Messages) == 0 || r.Fix == "") {
			t.Errorf("%s: reject rule without predicate, messages or fix", r.ID)
		}
		if r.Kind == AutoFix && (len(r.Messages) > 0 || r.Fix != "") {
			t.Errorf("%s: an auto-fix prints no message and needs no fix", r.ID)
		}
		if r.Summary == "" || strings.Contains(r.Summary, "\n") || len(r.Summary) > 70 || r.Condition == "" {
			t.Errorf("%s: summary %q (one line, at most 70 characters), condition %q", r.ID, r.Summary, r.Condition)
		}
		if r.Kind == AutoFix && r.ID != "PERF-06" && (r.when == nil || r.fix == nil) {
			t.Errorf("%s: auto-fix rule without predicate or fix", r.ID)
		}
		if r.Shadow != "" && !slices.ContainsFunc(rules, func(o Rule) bool { return o.ID == r.Shadow }) {
			t.Errorf("%s: shadow %s is not a rule", r.ID, r.Shadow)
		}
		for _, f := range r.Fields {
			if strings.HasPrefix(f, envPrefix) {
				continue
			}
			known := false
			for _, g := range r.Gens {
				for _, sf := range Schema(g) {
					known = known || sf.Key == f
				}
			}
			// A rule of both generations may name the field of each.
			if _, ok := lookupField(f); !known && !ok {
				t.Errorf("%s reads unknown field %s", r.ID, f)
			}
		}
	}
}
