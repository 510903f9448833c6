package recipe

import (
	"fmt"
	"slices"
	"strings"

	"cgtune/presets"
)

// Kind says whether a rule rejects a configuration or changes it.
type Kind int

const (
	Reject  Kind = iota // the stack raises: the configuration cannot run
	AutoFix             // the stack rewrites the configuration and goes on
)

func (k Kind) String() string {
	if k == AutoFix {
		return "auto-fix"
	}
	return "reject"
}

// Rule is one validation rule of Megatron-Bridge, Megatron-Core or MB's perf
// harness; Source names the file it was read from.
type Rule struct {
	ID string
	// Summary says in a few words what the rule checks (cgtune rules, the
	// plan line's counts of rejected candidates).
	Summary string
	// Condition says when it fires, for which releases and launchers.
	Condition string
	// Messages are what the stack prints when it fires, as its source
	// writes them ({...} stands for a value), one per check or release;
	// none for an auto-fix.
	Messages []string
	// Fix says what to change; "" for an auto-fix.
	Fix string
	// Enabling are the changes of settings that lift the rule (a Reject
	// rule): applied to a recipe it rejects, it passes. The what-if rows
	// of a search and cgtune rules ID name them.
	Enabling []Change
	Fields   []string // the recipe fields the predicate reads
	Gens     []presets.Generation
	// MinMB and MaxMB bound the Megatron-Bridge minor versions (0.N) whose
	// pinned code has the rule; 0 means no bound.
	MinMB, MaxMB int
	Kind         Kind
	// Source is where the rule and its message were read.
	Source string
	// Shadow names a rule that checks the same thing earlier in MB's
	// start-up; when it fired, this one is not reported again.
	Shadow string
	// Launcher is the only launcher whose start-up has the rule; "" for
	// every launcher (Megatron-Core's own checks).
	Launcher Launcher

	stages []stage
	when   func(*state) bool   // Reject: violated; AutoFix: applies
	msg    func(*state) string // Reject: the exact message (nil: Messages[0])
	hint   func(*state) string // Reject: what to do instead, where the message does not say ("" for none)
	fix    func(*state) string // AutoFix: rewrite, return the note ("" for none)
	after  func(*state)        // MCore's normalisation right after this check
}

// AppliesTo reports whether the rule exists for generation gen in MB 0.mb.
func (r Rule) AppliesTo(gen presets.Generation, mb int) bool {
	return slices.Contains(r.Gens, gen) && (r.MinMB == 0 || mb >= r.MinMB) && (r.MaxMB == 0 || mb <= r.MaxMB)
}

// message is the exact message the rule's violation prints.
func (r *Rule) message(s *state) string {
	if r.msg != nil {
		return r.msg(s)
	}
	return r.Messages[0]
}

// RunsUnder reports whether a job started by launcher l meets the rule.
func (r Rule) RunsUnder(l Launcher) bool { return r.Launcher == "" || r.Launcher == l }

// Rules returns the rule table in evaluation order.
func Rules() []Rule { return slices.Clone(rules) }

func ruleByID(id string) *Rule {
	for i := range rules {
		if rules[i].ID == id {
			return &rules[i]
		}
	}
	panic("recipe: no rule " + id)
}

var (
	both   = []presets.Generation{presets.G2, presets.G3}
	onlyG2 = []presets.Generation{presets.G2}
	onlyG3 = []presets.Generation{presets.G3}
)

const (
	srcTC    = "MLM megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__"
	srcCGC   = "MLM megatron/core/transformer/cuda_graph_config.py"
	srcARGS  = "MLM megatron/training/arguments.py validate_args"
	srcMBCFG = "MB src/megatron/bridge/training/config.py ConfigContainer.validate"
	srcMBUCG = "MB src/megatron/bridge/utils/cuda_graph.py validate_cuda_graph_configuration"
	srcMBCO  = "MB src/megatron/bridge/training/comm_overlap.py CommOverlapConfig._get_model_comm_overlap_cfgs"
	srcOVR   = "MB scripts/performance/utils/overrides.py _set_cuda_graph_overrides"
	srcARGP  = "MB scripts/performance/argument_parser.py"
)

// byGen picks the G2 or G3 wording of a message.
func byGen(g2, g3 string) func(*state) string {
	return func(s *state) string {
		if s.gen == presets.G2 {
			return g2
		}
		return g3
	}
}

// validTEScopes is the harness's valid_te_scopes list (PERF-05).
var validTEScopes = []string{"attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba"}

// localOffloadable are the offload modules a local per-layer graph can
// offload (TC-30, TC-32).
var localOffloadable = []string{"expert_fc1", "moe_act", "fused_group_mlp"}

// rules is the one rule table, in the order the launcher's start-up meets
// them (Check runs it stage by stage). It is never modified.
//
// Left out, on purpose:
//   - TC-07 (element type): YAML and Hydra only produce strings, and an
//     unknown name is a KeyError in MCore, which cgtune reports as a bad
//     value when it reads the file or --set (exit 2).
//   - TC-08, TC-10, TC-11, TC-14, TC-40, ARG-14..ARG-18: inference and RL
//     graphs (full_iteration_inference, inference_cuda_graph_scope,
//     batch-invariant MoE, RL flags); cgtune tunes training graphs only, so
//     the schema does not accept those values.
//   - TC-41: G1 (MB v0.2) only; cgtune targets G2 and G3.
//   - ARG-01, ARG-02, ARG-04: Megatron-LM's command-line spellings of
//     TC-01/TC-02, TC-04 and TC-15 (LauncherMLM only); a recipe sets the
//     fields, so the TC rules report the same configurations in MCore's
//     wording.
//   - ARG-11, ARG-12, ARG-13, ARG-19: Megatron-LM launcher checks on what a
//     recipe does not hold (delayed wgrad without gradient-accumulation
//     fusion, GTP's CUDA_GRAPHS_USE_NODE_PRIORITY, --hybrid-context-parallel,
//     NVTE_CPU_OFFLOAD_V1; MB's own version of the last is MB-21).
//   - RT-*: asserts inside capture and replay (TE importable, schedule
//     order, tensor-only inputs, ...): they depend on the running program,
//     not on the recipe.
//   - MB-16, MB-17: MB adjusts HybridEP padding and the load helper's
//     settings; neither rejects nor changes the graph configuration of a
//     training recipe.
//   - Checks on settings the schema does not hold, though some come before
//     a rule here: torch >= 2.6 for EP overlap; ncclep with EP overlap and
//     expert_fc1 offloading; the legacy grouped GEMM with delayed wgrad
//     (MB 0.3's MCore); the selective recompute modules' own requirements
//     (moe_act needs grouped GEMM, mla_up_proj MLA); Megatron-FSDP v2's
//     contract before MB-06 (BF16 parameters, data parallelism only, no
//     MoE, no clipping, ...) and v1's environment; Energon packing's batch
//     size, per-token loss and average_in_collective before MB-09.
//   - What the comm-overlap setup does to the DDP and optimizer configs
//     (overlap_grad_reduce and overlap_param_gather follow the data-parallel
//     size): MB-19 reads the recipe's overlap_param_gather as set.
var rules = []Rule{
	// --- perf harness (ApplyHarnessFlags drives these in its own order) ---
	// The harness parses its flags with argparse, whose type functions
	// (is_cuda_graph_impl_valid, is_cuda_graph_scope_valid in every MB
	// release from v0.3.0) raise ValueError; argparse drops that message
	// and prints its own, with the value's repr (Python's argparse.py
	// _get_value), then exits 2.
	{ID: "PERF-01", Summary: "--cuda_graph_impl names an impl the harness knows",
		Condition: "The perf harness's --cuda_graph_impl is not none, local or transformer_engine; argparse rejects it before anything is set.",
		Messages:  []string{"argument --cuda_graph_impl: invalid is_cuda_graph_impl_valid value: {value!r}"},
		Fix:       "Give none, local or transformer_engine; a full-iteration graph is --cuda_graph_impl local --cuda_graph_scope full_iteration.",
		Fields:    []string{"model.cuda_graph_impl"}, Gens: both, Kind: Reject, Launcher: LauncherMB, Source: srcARGP + " is_cuda_graph_impl_valid",
		stages: []stage{stageHarness},
		when:   func(s *state) bool { return s.cand.Impl != "" && !slices.Contains(presets.Impls, s.cand.Impl) },
		msg: func(s *state) string {
			return "argument --cuda_graph_impl: invalid is_cuda_graph_impl_valid value: " + pyRepr(s.cand.Impl)
		},
		hint: func(s *state) string {
			return "the harness takes " + strings.Join(presets.Impls, ", ") +
				"; a full-iteration graph is --cuda_graph_impl local --cuda_graph_scope full_iteration"
		}},
	{ID: "PERF-02", Summary: "--cuda_graph_scope names scopes the harness knows",
		Condition: "An element of the harness's comma-separated --cuda_graph_scope is not full_iteration, attn, mlp, moe, moe_router, moe_preprocess or mamba; argparse rejects it.",
		Messages:  []string{"argument --cuda_graph_scope: invalid is_cuda_graph_scope_valid value: {value!r}"},
		Fix:       "Give a comma-separated list of those names, without brackets or spaces.",
		Fields:    []string{"model.cuda_graph_scope", "model.cuda_graph_modules"}, Gens: both, Kind: Reject, Launcher: LauncherMB, Source: srcARGP + " is_cuda_graph_scope_valid",
		stages: []stage{stageHarness},
		when: func(s *state) bool {
			for _, sc := range s.cand.Scopes {
				if !slices.Contains(presets.Scopes, sc) {
					return true
				}
			}
			return false
		},
		msg: func(s *state) string {
			return "argument --cuda_graph_scope: invalid is_cuda_graph_scope_valid value: " + pyRepr(strings.Join(s.cand.Scopes, ","))
		},
		hint: func(s *state) string {
			return "the harness takes a comma-separated list of " + strings.Join(presets.Scopes, ", ")
		}},
	{ID: "PERF-03", Summary: "full_iteration is alone in --cuda_graph_scope",
		Condition: "MB 0.6+: --cuda_graph_scope lists full_iteration with another scope.",
		Messages:  []string{"full_iteration CUDA graph scope cannot be combined with other scopes."},
		Fix:       "Give full_iteration alone: a full-iteration graph holds every layer.",
		Fields:    []string{"model.cuda_graph_scope", "model.cuda_graph_modules"}, Gens: both, MinMB: 6, Kind: Reject, Launcher: LauncherMB, Source: srcOVR,
		stages: []stage{stageHarness},
		when: func(s *state) bool {
			return slices.Contains(s.cand.Scopes, presets.ScopeFullIteration) && !slices.Equal(s.cand.Scopes, []string{presets.ScopeFullIteration})
		}},
	{ID: "PERF-04", Summary: "full_iteration is not a transformer_engine scope",
		Condition: "MB 0.6+: --cuda_graph_scope full_iteration with --cuda_graph_impl transformer_engine.",
		Messages:  []string{"full_iteration CUDA graph scope cannot use cuda_graph_impl=transformer_engine."},
		Fix:       "Give --cuda_graph_impl local --cuda_graph_scope full_iteration.",
		Fields:    []string{"model.cuda_graph_impl", "model.cuda_graph_scope", "model.cuda_graph_modules"}, Gens: both, MinMB: 6, Kind: Reject, Launcher: LauncherMB, Source: srcOVR,
		stages: []stage{stageHarness},
		when: func(s *state) bool {
			return slices.Contains(s.cand.Scopes, presets.ScopeFullIteration) && s.impl() == presets.ImplTE
		}},
	// MB v0.3/v0.4 check the --cuda_graph_scope flag itself, v0.5 the
	// recipe's cuda_graph_scope after the flag (a string such as the
	// recipe's "full" is iterated by character and fails), v0.6+ the module
	// names MB derives, which the schema keeps within the six.
	{ID: "PERF-05", Summary: "a transformer_engine graph gets scopes the harness accepts",
		Condition: `impl transformer_engine and the scope the harness checks is not a list of attn, mlp, moe, moe_router, moe_preprocess, mamba: MB 0.3/0.4 iterate the --cuda_graph_scope flag (missing: a TypeError), 0.5 the recipe's cuda_graph_scope after the flag (its "full" string or None fails), 0.6+ the module names MB derives.`,
		Messages:  []string{"Invalid cuda graph scope: {scopes}. Valid options are: ['attn', 'mlp', 'moe', 'moe_router', 'moe_preprocess', 'mamba']", "'NoneType' object is not iterable"},
		Fix:       "Give --cuda_graph_scope with per-layer scopes; for a whole-layer transformer_engine graph on MB 0.3-0.5, give the Hydra overrides model.cuda_graph_impl=transformer_engine model.cuda_graph_scope=[] instead of the flags (cgtune emit --format flags writes them).",
		Fields:    []string{"model.cuda_graph_impl", "model.cuda_graph_scope", "model.cuda_graph_modules"}, Gens: both, Kind: Reject, Launcher: LauncherMB, Source: srcOVR,
		stages: []stage{stageHarness},
		when: func(s *state) bool {
			if s.impl() != presets.ImplTE {
				return false
			}
			switch {
			case s.mb <= 4:
				if !s.scopeGiven {
					return true
				}
				return !allIn(s.cand.Scopes, validTEScopes)
			case s.mb == 5:
				v := s.v("model.cuda_graph_scope")
				if v.Null {
					return true
				}
				if v.Scalar {
					return v.Str != ""
				}
				return !allIn(v.List, validTEScopes)
			}
			return !allIn(s.moduleNames(), validTEScopes)
		},
		msg: func(s *state) string {
			var got string
			switch {
			case s.mb <= 4:
				if !s.scopeGiven {
					// `all(... for scope in cuda_graph_scope)` with no flag.
					return "'NoneType' object is not iterable"
				}
				got = pyList(s.cand.Scopes)
			case s.mb == 5:
				v := s.v("model.cuda_graph_scope")
				switch {
				case v.Null:
					got = "None"
				case v.Scalar:
					got = v.Str
				default:
					got = pyList(v.List)
				}
			default:
				got = pyList(s.moduleNames())
			}
			return fmt.Sprintf("Invalid cuda graph scope: %s. Valid options are: %s", got, pyList(validTEScopes))
		},
		hint: func(s *state) string {
			switch {
			case s.mb <= 4 && !s.scopeGiven:
				return fmt.Sprintf("MB 0.%d's perf harness iterates --cuda_graph_scope, which was not given, and refuses an empty one: "+
					"a whole-layer transformer_engine graph cannot be set with its flags; give it as the Hydra overrides "+
					"model.cuda_graph_impl=transformer_engine model.cuda_graph_scope=[] without --cuda_graph_impl "+
					"(cgtune emit --impl transformer_engine --format flags writes them)", s.mb)
			case s.mb == 5 && s.v("model.cuda_graph_scope").Null:
				return "MB 0.5's perf harness needs the recipe's cuda_graph_scope to be a list: for a whole-layer graph " +
					"set model.cuda_graph_scope=[] (cgtune emit --impl transformer_engine --format flags writes it)"
			}
			return ""
		}},
	{ID: "PERF-06", Summary: "the harness sets the companions of a graph",
		Condition: "The harness turns the TE RNG tracker on for any impl but none (off for none, and clears the scope) and, for a full-iteration graph, the NaN checks off; each change is a note.",
		Fields:    []string{"model.cuda_graph_impl", "rng.te_rng_tracker", "model.use_te_rng_tracker", "rerun_state_machine.check_for_nan_in_loss", "ddp.check_for_nan_in_grad"},
		Gens:      both, Kind: AutoFix, Launcher: LauncherMB, Source: srcOVR + "; NaN-grad: _set_common_perf_overrides (v0.4) / perf_recipes/_common.py _benchmark_common",
		stages: []stage{stageHarness}}, // applied step by step in ApplyHarnessFlags

	// --- MB comm-overlap setup (runs before ConfigContainer.validate) ---
	// MB v0.7's runtime_config_update turns EP overlap and delayed wgrad off
	// everywhere for Energon native packing, before the comm-overlap setup
	// (ConfigContainer._disable_native_energon_packing_moe_overlap).
	// --- MB runtime_config_update: the recipe's mixed precision, first ---
	{ID: "MB-23", Summary: "TE 2.7 for fp4",
		Condition: "An fp4 recipe (model.fp4 set by its mixed-precision recipe) with Transformer Engine below 2.7.0.dev0.",
		Messages:  []string{"fp4 requires Transformer Engine >= 2.7.0.dev0 for NVFP4BlockScaling support."},
		Fix:       "Use Transformer Engine 2.7 or later, or another precision.",
		Fields:    []string{"model.fp4", "te_version"}, Gens: both, Kind: Reject, Launcher: LauncherMB,
		Source: "MB src/megatron/bridge/training/mixed_precision.py MixedPrecisionConfig.finalize",
		stages: []stage{stageCommOverlap},
		when:   func(s *state) bool { return !s.null("model.fp4") && s.teBelow("2.7.0") }},
	{ID: "MB-22", Summary: "Energon packing turns EP overlap off",
		Condition: "MB 0.7: with Energon native packing (dataset.packing_buffer_size set), EP communication overlap and delayed wgrad are turned off on the model and in comm_overlap before the comm-overlap setup; the warning is the note.",
		Fields: []string{"dataset.packing_buffer_size", "model.overlap_moe_expert_parallel_comm", "model.delay_wgrad_compute",
			"comm_overlap.overlap_moe_expert_parallel_comm", "comm_overlap.delay_wgrad_compute"},
		Gens: onlyG3, MinMB: 7, Kind: AutoFix, Launcher: LauncherMB, Source: "MB src/megatron/bridge/training/config.py runtime_config_update, ConfigContainer._disable_native_energon_packing_moe_overlap",
		stages: []stage{stageCommOverlap},
		when: func(s *state) bool {
			if s.null("dataset.packing_buffer_size") {
				return false
			}
			for _, f := range commOverlapFields {
				if s.b("model."+f) || s.b("comm_overlap."+f) {
					return true
				}
			}
			return false
		},
		fix: func(s *state) string {
			for _, f := range commOverlapFields {
				s.set("model."+f, Value{Bool: false})
				if s.c.hasCommOverlap() {
					s.set("comm_overlap."+f, Value{Bool: false})
				}
			}
			return "Disabling MoE expert-parallel communication overlap and delayed weight-gradient compute because overlap switches MCore to combined-1F1B schedule-plan execution, but the current VLM path does not forward visual inputs or packed-sequence metadata through that plan."
		}},
	// MB's own copy of MCore's EP-overlap checks (TC-39), for the value the
	// recipe's comm_overlap asks for, in its own order and words, with a
	// num_moe_experts check MCore does not make.
	{ID: "MB-18", Summary: "the settings MB's EP overlap needs",
		Condition: "The recipe's comm_overlap turns EP communication overlap on, and the model has EP 1, no MoE (num_moe_experts None or 1), a dispatcher other than alltoall/flex, neither bf16 nor fp16, PP > 1 without VP, full recompute, a recompute method or layer count, moe recomputed (MB 0.6+), an overlapped shared expert, or more MTP layers than allowed (MB 0.3-0.5: only 1; 0.6+: at most 1); the first in MB's order. MB checks this before Megatron-Core's TC-39.",
		Messages:  []string{"overlap_moe_expert_parallel_comm is only supported when expert_model_parallel_size > 1", "'>' not supported between instances of 'NoneType' and 'int'", "overlap_moe_expert_parallel_comm is only supported when num_moe_experts > 1,                     but got {num_moe_experts}", "overlap_moe_expert_parallel_comm is only supported when moe_token_dispatcher_type == 'alltoall' or 'flex',                      but got {moe_token_dispatcher_type}", "overlap_moe_expert_parallel_comm is only supported when using bf16 or fp16 models", "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified when pipeline_model_parallel_size > 1", "disable full recomputation when enabling overlap_moe_expert_parallel_comm", "disable recomputation method when enabling overlap_moe_expert_parallel_comm", "recompute_num_layers must be None when enabling overlap_moe_expert_parallel_comm", "disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm", "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm", "MTP layernum only supports 1 when enabling overlap_moe_expert_parallel_comm.", "MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm."},
		Fix:       "Change the setting the message names, or turn the overlap off with comm_overlap.overlap_moe_expert_parallel_comm=false.",
		Enabling:  []Change{epOverlapOff},
		Fields: []string{"comm_overlap.overlap_moe_expert_parallel_comm", "model.expert_model_parallel_size", "model.num_moe_experts",
			"model.moe_token_dispatcher_type", "model.bf16", "model.fp16", "model.pipeline_model_parallel_size", "model.virtual_pipeline_model_parallel_size",
			"model.recompute_granularity", "model.recompute_method", "model.recompute_num_layers", "model.recompute_modules", "model.moe_shared_expert_overlap", "model.mtp_num_layers"},
		Gens: both, Kind: Reject, Launcher: LauncherMB, Source: srcMBCO,
		stages: []stage{stageCommOverlap},
		when:   func(s *state) bool { return mbEPOverlapError(s) != "" },
		msg:    mbEPOverlapError},
	{ID: "MB-11", Summary: "TE 2.7 for delayed wgrad",
		Condition: "The recipe's comm_overlap delays wgrad (delay_wgrad_compute) with overlap_grad_reduce or gradient_accumulation_fusion on, and TE is older than 2.7.0.",
		Messages:  []string{"TE version >= 2.7.0 is required for {overlap_grad_reduce|gradient_accumulation_fusion} when usingdelay_wgrad_compute. Current TE version: {te_version}"},
		Fix:       "Use TE 2.7.0 or newer, or set comm_overlap.delay_wgrad_compute=false.",
		Enabling:  []Change{teAtLeast("2.7"), delayedWgradOff},
		Fields:    []string{"comm_overlap.delay_wgrad_compute", "ddp.overlap_grad_reduce", "model.gradient_accumulation_fusion", "te_version"},
		Gens:      both, Kind: Reject, Launcher: LauncherMB, Source: srcMBCO,
		stages: []stage{stageCommOverlap},
		when: func(s *state) bool {
			return s.b("comm_overlap.delay_wgrad_compute") && s.teBelow("2.7.0") &&
				(s.b("ddp.overlap_grad_reduce") || s.b("model.gradient_accumulation_fusion"))
		},
		// Two adjacent f-strings without a space: "usingdelay_wgrad_compute" is what MB prints.
		msg: func(s *state) string {
			what := "gradient_accumulation_fusion"
			if s.b("ddp.overlap_grad_reduce") {
				what = "overlap_grad_reduce"
			}
			return fmt.Sprintf("TE version >= 2.7.0 is required for %s when usingdelay_wgrad_compute. Current TE version: %s", what, s.str("te_version"))
		}},
	{ID: "MB-12", Summary: "delayed wgrad needs EP overlap",
		Condition: "The recipe's comm_overlap delays wgrad without EP communication overlap on the model or in comm_overlap.",
		Messages:  []string{"overlap_moe_expert_parallel_comm is required for delay_wgrad_compute"},
		Fix:       "Set comm_overlap.overlap_moe_expert_parallel_comm=true, or comm_overlap.delay_wgrad_compute=false.",
		Enabling:  []Change{delayedWgradOff},
		Fields:    []string{"comm_overlap.delay_wgrad_compute", "comm_overlap.overlap_moe_expert_parallel_comm", "model.overlap_moe_expert_parallel_comm"},
		Gens:      both, Kind: Reject, Launcher: LauncherMB, Source: srcMBCO,
		stages: []stage{stageCommOverlap},
		when: func(s *state) bool {
			return s.b("comm_overlap.delay_wgrad_compute") &&
				!(s.b("model.overlap_moe_expert_parallel_comm") || s.b("comm_overlap.overlap_moe_expert_parallel_comm"))
		}},
	// MB-13..MB-15 first appear in MB v0.4.0, but there they compare the
	// scope list with CudaGraphScope members (comm_overlap.py); MB runs the
	// comm-overlap setup before model.finalize(), whose
	// TransformerConfig.__post_init__ turns the recipe's strings into
	// members, and a string never equals one (MCore d7288711 enums.py:
	// CudaGraphScope is a plain Enum). So they never fire before v0.5.0,
	// which matches names (has_cuda_graph_module).
	{ID: "MB-13", Summary: "TE 2.12 for delayed wgrad in a graph",
		Condition: "MB 0.5+: the recipe's comm_overlap delays wgrad, its wgrad sits in a graph (attn captured, or moe_router with a shared expert that is not overlapped), and TE is older than 2.12.0. MB 0.4 has the check but compares scope names with CudaGraphScope members, which never match.",
		Messages:  []string{"CUDA graph with delay_wgrad_compute requires TE version >= 2.12.0."},
		Fix:       "Use TE 2.12.0 or newer, or capture neither attn nor moe_router.",
		Enabling:  []Change{teAtLeast("2.12"), delayedWgradOff},
		Fields:    []string{"comm_overlap.delay_wgrad_compute", "model.cuda_graph_scope", "model.cuda_graph_modules", "model.moe_shared_expert_intermediate_size", "model.moe_shared_expert_overlap", "te_version"},
		Gens:      onlyG3, MinMB: 5, Kind: Reject, Launcher: LauncherMB, Source: srcMBCO,
		stages: []stage{stageCommOverlap},
		when: func(s *state) bool {
			return s.b("comm_overlap.delay_wgrad_compute") && s.wgradInGraph() && s.teBelow("2.12.0")
		}},
	{ID: "MB-14", Summary: "grad-accumulation fusion for delayed wgrad in a graph",
		Condition: "MB 0.5+: the recipe's comm_overlap delays wgrad, its wgrad sits in a graph, and gradient_accumulation_fusion is off.",
		Messages:  []string{"CUDA graph with delay_wgrad_compute requires gradient_accumulation_fusion to be enabled. This is because default gradient accumulation does not use static memory addresses, which breaks CUDA graph requirements."},
		Fix:       "Set model.gradient_accumulation_fusion=true.",
		Enabling:  []Change{gradAccFusion, delayedWgradOff},
		Fields:    []string{"comm_overlap.delay_wgrad_compute", "model.cuda_graph_scope", "model.cuda_graph_modules", "model.gradient_accumulation_fusion"},
		Gens:      onlyG3, MinMB: 5, Kind: Reject, Launcher: LauncherMB, Source: srcMBCO,
		stages: []stage{stageCommOverlap},
		when: func(s *state) bool {
			return s.b("comm_overlap.delay_wgrad_compute") && s.wgradInGraph() && !s.b("model.gradient_accumulation_fusion")
		}},
	{ID: "MB-15", Summary: "no attention bias for delayed wgrad in an attn graph",
		Condition: "MB 0.5+: the recipe's comm_overlap delays wgrad, attn is captured, and add_bias_linear or add_qkv_bias is on.",
		Messages:  []string{"CUDA graph with delay_wgrad_compute does not support attention bias for now."},
		Fix:       "Leave attn out of the graph, or turn delayed wgrad off.",
		Enabling:  []Change{delayedWgradOff},
		Fields:    []string{"comm_overlap.delay_wgrad_compute", "model.cuda_graph_scope", "model.cuda_graph_modules", "model.add_bias_linear", "model.add_qkv_bias"},
		Gens:      onlyG3, MinMB: 5, Kind: Reject, Launcher: LauncherMB, Source: srcMBCO,
		stages: []stage{stageCommOverlap},
		when: func(s *state) bool {
			return s.b("comm_overlap.delay_wgrad_compute") && s.hasModule(presets.ScopeAttn) &&
				(s.b("model.add_bias_linear") || s.b("model.add_qkv_bias"))
		}},

	// --- MB >= 0.6: ConfigContainer.validate before model.finalize() ---
	// The packing checks validate() makes before the graph ones; an offline
	// packing recipe has its offline_packing_specs (MB refuses one without
	// the other).
	{ID: "MB-20", Summary: "offline packing settings",
		Condition: "MB 0.6+: offline and in-batch packing together, or offline_packing_specs.pad_cu_seqlens without pad_to_max_length (the dataset's or its dataset_kwargs'); checked before MB's graph checks.",
		Messages:  []string{"enable_offline_packing and enable_in_batch_packing are mutually exclusive.", "offline_packing_specs.pad_cu_seqlens=True requires dataset pad_to_max_length=True."},
		Fix:       "Use one way of packing; with pad_cu_seqlens set dataset.pad_to_max_length=true.",
		Fields: []string{"dataset.enable_offline_packing", "dataset.enable_in_batch_packing", "dataset.offline_packing_specs.pad_cu_seqlens",
			"dataset.pad_to_max_length", "dataset.dataset_kwargs.pad_to_max_length"},
		Gens: onlyG3, MinMB: 6, Kind: Reject, Launcher: LauncherMB, Source: srcMBCFG,
		stages: []stage{stagePreFinalize},
		when:   func(s *state) bool { return packingError(s) != "" },
		msg:    packingError},
	{ID: "MB-07", Summary: "offline packing with graphs pads to the maximum length",
		Condition: "MB 0.6+: offline packing with a training graph (full iteration or transformer_engine) and pad_to_max_length off in the dataset and in its dataset_kwargs.",
		Messages:  []string{"Offline packing with CUDA graphs requires dataset pad_to_max_length=True."},
		Fix:       "Set dataset.pad_to_max_length=true.",
		Fields:    []string{"dataset.enable_offline_packing", "dataset.pad_to_max_length", "dataset.dataset_kwargs.pad_to_max_length", "model.cuda_graph_impl"},
		Gens:      onlyG3, MinMB: 6, Kind: Reject, Launcher: LauncherMB, Source: srcMBCFG,
		stages: []stage{stagePreFinalize},
		when: func(s *state) bool {
			return s.b("dataset.enable_offline_packing") && (s.fullIteration() || s.impl() == presets.ImplTE) && !s.padToMaxLength()
		}},
	{ID: "MB-08", Summary: "packed attention graphs pad cu_seqlens",
		Condition: "MB 0.6+: offline packing with a graph that holds packed attention (full iteration, or a whole-layer or attn transformer_engine graph) and offline_packing_specs.pad_cu_seqlens off.",
		Messages:  []string{"Packed attention CUDA graphs require offline_packing_specs.pad_cu_seqlens=True. Enable it for full-iteration, whole-layer, or attention-scoped capture."},
		Fix:       "Set dataset.offline_packing_specs.pad_cu_seqlens=true.",
		Fields:    []string{"dataset.enable_offline_packing", "dataset.offline_packing_specs.pad_cu_seqlens", "model.cuda_graph_impl", "model.cuda_graph_modules"},
		Gens:      onlyG3, MinMB: 6, Kind: Reject, Launcher: LauncherMB, Source: srcMBCFG,
		stages: []stage{stagePreFinalize},
		when: func(s *state) bool {
			mods := s.moduleNames()
			captures := s.fullIteration() || (s.impl() == presets.ImplTE && (len(mods) == 0 || slices.Contains(mods, presets.ScopeAttn)))
			return s.b("dataset.enable_offline_packing") && captures && !s.b("dataset.offline_packing_specs.pad_cu_seqlens")
		}},
	// MB v0.7's Energon packing block in validate(), before its CUDA-graph
	// configuration check; the batch-size, per-token-loss and
	// average_in_collective checks before it are not recipe fields cgtune
	// models.
	{ID: "MB-09", Summary: "no CUDA graph with Energon packing",
		Condition: "MB 0.7: Energon native packing (dataset.packing_buffer_size set) with MTP layers, any CUDA graph, or PP > 1; the first in MB's order.",
		Messages:  []string{"Energon native sequence packing does not support MTP.", "Energon native sequence packing does not support CUDA graphs.", "Energon native sequence packing does not yet support pipeline parallelism."},
		Fix:       "Use cuda_graph_impl none with Energon packing, or another way of packing.",
		Fields:    []string{"dataset.packing_buffer_size", "model.cuda_graph_impl", "model.mtp_num_layers", "model.pipeline_model_parallel_size"},
		Gens:      onlyG3, MinMB: 7, Kind: Reject, Launcher: LauncherMB, Source: srcMBCFG,
		stages: []stage{stagePreFinalize},
		when:   func(s *state) bool { return energonPackingError(s) != "" },
		msg:    energonPackingError},
	// A local graph that is not full-iteration; the local inference-graph
	// exemption needs inference_cuda_graph_scope, which is unset before
	// model.finalize() in a training recipe.
	{ID: "MB-05", Summary: "impl local only for a full-iteration graph",
		Condition: "MB 0.6+: cuda_graph_impl local for anything but a full-iteration graph (checked before model.finalize() and again in provide).",
		Messages:  []string{`Megatron Bridge supports model.cuda_graph_impl="local" only for full-iteration CUDA graphs{ with scopes [...]}. Use model.cuda_graph_impl="transformer_engine" for scoped CUDA graph capture such as "attn" or "mlp".`},
		Fix:       "Use transformer_engine for per-layer scopes, or local with full_iteration.",
		Fields:    []string{"model.cuda_graph_impl", "model.cuda_graph_modules", "model.cuda_graph_scope"},
		Gens:      onlyG3, MinMB: 6, Kind: Reject, Launcher: LauncherMB, Source: srcMBUCG,
		stages: []stage{stagePreFinalize},
		when: func(s *state) bool {
			return s.impl() == presets.ImplLocal && !s.fullIteration()
		},
		msg: func(s *state) string {
			mods := ""
			if m := s.moduleNames(); len(m) > 0 {
				mods = " with scopes " + pyList(m)
			}
			return `Megatron Bridge supports model.cuda_graph_impl="local" only for full-iteration CUDA graphs` + mods +
				`. Use model.cuda_graph_impl="transformer_engine" for scoped CUDA graph capture such as "attn" or "mlp".`
		}},
	// v0.4 clears after model.finalize() (config.py: cuda_graph_scope = []),
	// v0.5 likewise with clear_cuda_graph_modules, v0.6+ before it too;
	// v0.3 never clears.
	{ID: "MB-04", Summary: "impl none clears the scope",
		Condition: "MB 0.4+: with cuda_graph_impl none MB clears the scope (G2) or the modules (G3); a cleared scope is a note.",
		Fields:    []string{"model.cuda_graph_impl", "model.cuda_graph_scope", "model.cuda_graph_modules"},
		Gens:      both, MinMB: 4, Kind: AutoFix, Launcher: LauncherMB, Source: srcMBUCG + " / " + srcMBCFG,
		stages: []stage{stagePreFinalize, stageMB},
		when: func(s *state) bool {
			if s.impl() != presets.ImplNone {
				return false
			}
			if s.gen == presets.G2 {
				v := s.v("model.cuda_graph_scope")
				return v.Null || v.Scalar || len(v.List) > 0
			}
			m, sc := s.v("model.cuda_graph_modules"), s.v("model.cuda_graph_scope")
			return !sc.Null || m.Null || m.Scalar || len(m.List) > 0
		},
		fix: func(s *state) string {
			cleared := s.moduleNames()
			if s.gen == presets.G2 {
				s.set("model.cuda_graph_scope", Value{List: []string{}})
			} else {
				s.set("model.cuda_graph_modules", Value{List: []string{}})
				s.set("model.cuda_graph_scope", Value{Null: true})
			}
			if len(cleared) == 0 {
				return ""
			}
			return fmt.Sprintf("cuda_graph_impl is none: cleared the CUDA graph scope %s", pyList(cleared))
		}},

	// --- MCore TransformerConfig.__post_init__ ---
	// MCore's MoE checks before its CUDA-graph block, on the fields the
	// graph rules read; a negative capacity factor reads as None (dropless)
	// from here on.
	{ID: "TC-43", Summary: "the MoE settings the graph rules read",
		Condition: "Megatron-Core's MoE checks before its graph ones: EP > 1 without MoE; padding on the flex dispatcher's deepep backend; an overlapped shared expert with a dispatcher other than alltoall (and, from MB 0.5, flex); padding without a capacity factor (a negative one reads as none).",
		Messages:  []string{"num_moe_experts must be non None to use expert-parallel.", "Flex token dispatcher with deepep backend does not support moe_pad_expert_input_to_capacity", "moe_shared_expert_overlap only works with alltoall token dispatcher.", "moe_shared_expert_overlap only works with alltoall or flex token dispatcher.", "moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity"},
		Fix:       "Change the setting the message names; drop-and-pad on the flex dispatcher needs the hybridep backend.",
		Fields: []string{"model.expert_model_parallel_size", "model.num_moe_experts", "model.moe_token_dispatcher_type", "model.moe_flex_dispatcher_backend", "model.moe_pad_expert_input_to_capacity",
			"model.moe_shared_expert_intermediate_size", "model.moe_shared_expert_overlap", "model.moe_expert_capacity_factor"},
		Gens: both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when:   func(s *state) bool { return moeSettingsError(s) != "" },
		msg:    moeSettingsError,
		after: func(s *state) {
			if k := "model.moe_expert_capacity_factor"; !s.null(k) && s.f(k) < 0 {
				s.set(k, Value{Null: true})
			}
		}},
	// Among MCore's MoE checks, before its CUDA-graph block. MB v0.5's
	// MCore (d0b3b775) checks the op fuser first and knows hybridep only.
	{ID: "TC-42", Summary: "HybridEP's per-rank budget has its backend and the op fuser",
		Condition: "MB 0.5+: moe_expert_rank_capacity_factor set with a backend other than hybridep or ncclep (MB 0.5: hybridep), or with hybridep and use_transformer_engine_op_fuser off (MB 0.5 checks the op fuser first).",
		Messages:  []string{"moe_expert_rank_capacity_factor requires moe_flex_dispatcher_backend to be 'hybridep' or 'ncclep'.", "moe_expert_rank_capacity_factor with the 'hybridep' backend requires use_transformer_engine_op_fuser to be enabled.", "moe_expert_rank_capacity_factor requires use_transformer_engine_op_fuser to be enabled.", "moe_expert_rank_capacity_factor requires moe_flex_dispatcher_backend to be 'hybridep'."},
		Fix:       "Set model.moe_flex_dispatcher_backend=hybridep and model.use_transformer_engine_op_fuser=true, or unset the rank capacity factor.",
		Fields:    []string{"model.moe_expert_rank_capacity_factor", "model.moe_flex_dispatcher_backend", "model.use_transformer_engine_op_fuser"},
		Gens:      onlyG3, MinMB: 5, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when:   func(s *state) bool { return rankCapacityError(s) != "" },
		msg:    rankCapacityError},
	// MCore's CPU-offloading and recompute checks, after its MoE ones.
	{ID: "TC-44", Summary: "CPU offloading and recompute settings",
		Condition: "Megatron-Core's checks before its graph ones: CPU offloading of as many layers as the model has or more, with PP > 1 or with recompute; full recompute without a method or a layer count; selective recompute with a layer count.",
		Messages:  []string{"CPU offloading can be done only for layers less than {num_layers}", "Currently there is no support for Pipeline parallelism with CPU offloading", "CPU offloading does not work when activation recomputation is enabled", `Using recompute_granularity: full so recompute_method must be "block" or "uniform"`, "When using recompute_granularity: full recompute_num_layers must be between 1 and num_layers_per_pipeline_rank: {layers_per_stage}", "When using recompute_granularity: selective recompute_num_layers must be None."},
		Fix:       "Change the setting the message names.",
		Fields:    []string{"model.cpu_offloading", "model.cpu_offloading_num_layers", "model.pipeline_model_parallel_size", "model.recompute_granularity", "model.recompute_method", "model.recompute_num_layers"},
		Gens:      both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when:   func(s *state) bool { return recomputeSettingsError(s) != "" },
		msg:    recomputeSettingsError},
	// MCore's fine-grained offloading checks, after its recompute ones.
	{ID: "TC-46", Summary: "fine-grained offloading's own settings",
		Condition: "Fine-grained activation offloading with CPU offloading, with attn_proj but not core_attn, or (MB 0.6+) offloading expert_fc1, moe_act or fused_group_mlp while selective recompute recomputes moe, fused_group_mlp without the op fuser or with expert_fc1 or moe_act.",
		Messages: []string{"fine_grained_activation_offloading cannot be enabled with cpu_offloading.",
			"attn_proj cannot be set to offload_modules alone without core_attn because the input of attn_proj is the output of core_attn, which is needed in core_attn.backward().",
			"Cannot offload {modules} while recomputing the entire MoE layer. 'moe' in recompute_modules wraps the full MoE forward in a checkpoint, so offloading activations inside it is redundant and will cause errors. Either remove 'moe' from --recompute-modules or remove {modules} from --offload-modules.",
			"fused_group_mlp requires use_transformer_engine_op_fuser.",
			"fused_group_mlp offloads the whole fused grouped MLP and cannot be combined with expert_fc1 or moe_act. Remove: {modules}"},
		Fix: "Change the setting the message names.",
		Fields: []string{"model.fine_grained_activation_offloading", "model.cpu_offloading", "model.offload_modules", "model.recompute_granularity", "model.recompute_modules",
			"model.use_transformer_engine_op_fuser"},
		Gens: both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when:   func(s *state) bool { return offloadSettingsError(s) != "" },
		msg:    offloadSettingsError},
	{ID: "TC-47", Summary: "paged stash has a per-rank budget and no expert offloading",
		Condition: "MB 0.5+: moe_paged_stash with CPU offloading, without moe_expert_rank_capacity_factor, or with expert_fc1, moe_act or (MB 0.6+) fused_group_mlp among the offload modules.",
		Messages: []string{"moe_paged_stash cannot be enabled with cpu_offloading.",
			"moe_paged_stash requires moe_expert_rank_capacity_factor to be set; there is no need to use paged stashing without it.",
			"When moe_paged_stash is enabled, offload_modules must not include expert_fc1, moe_act, or fused_group_mlp (paged stash covers those activations). Remove: {modules}",
			"When moe_paged_stash is enabled, offload_modules must not include expert_fc1 or moe_act (paged stash covers those activations). Remove: {modules}"},
		Fix:    "Turn paged stash off, or set the rank capacity factor and offload no expert activations.",
		Fields: []string{"model.moe_paged_stash", "model.cpu_offloading", "model.moe_expert_rank_capacity_factor", "model.offload_modules"},
		Gens:   onlyG3, MinMB: 5, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when:   func(s *state) bool { return pagedStashError(s) != "" },
		msg:    pagedStashError},
	// moe_router_padding_for_fp8 is the alias that turns
	// moe_router_padding_for_quantization on, checked just before the
	// CUDA-graph block.
	{ID: "TC-45", Summary: "router padding has fp8/fp4 and an a2a dispatcher",
		Condition: "moe_router_padding_for_quantization (or its alias moe_router_padding_for_fp8, which turns it on) without fp8 or fp4, or with the allgather dispatcher.",
		Messages:  []string{"fp8/fp4 must be specified when moe_router_padding_for_quantization is True.", "allgather and alltoall_seq dispatcher does not support moe_router_padding_for_quantization."},
		Fix:       "Use it with fp8/fp4 and the alltoall or flex dispatcher, or turn it off.",
		Fields:    []string{"model.moe_router_padding_for_fp8", "model.moe_router_padding_for_quantization", "model.fp8", "model.fp4", "model.moe_token_dispatcher_type"},
		Gens:      both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			padded := s.b("model.moe_router_padding_for_fp8") || s.b("model.moe_router_padding_for_quantization")
			return padded && (s.null("model.fp8") && s.null("model.fp4") || s.str("model.moe_token_dispatcher_type") == "allgather")
		},
		msg: func(s *state) string {
			if s.null("model.fp8") && s.null("model.fp4") {
				return "fp8/fp4 must be specified when moe_router_padding_for_quantization is True."
			}
			return "allgather and alltoall_seq dispatcher does not support moe_router_padding_for_quantization."
		}},
	{ID: "TC-01", Summary: "no legacy graph flag with cuda_graph_impl",
		Condition: "enable_cuda_graph or external_cuda_graph set while cuda_graph_impl is not none.",
		Messages:  []string{"Do not use enable_cuda_graph or external_cuda_graph with cuda_graph_impl."},
		Fix:       "Drop the legacy flag; cuda_graph_impl says it.",
		Fields:    []string{"model.enable_cuda_graph", "model.external_cuda_graph", "model.cuda_graph_impl"}, Gens: both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return (s.b("model.enable_cuda_graph") || s.b("model.external_cuda_graph")) && s.impl() != presets.ImplNone
		}},
	{ID: "TC-02", Summary: "not both legacy graph flags",
		Condition: "enable_cuda_graph and external_cuda_graph both set.",
		Messages:  []string{"enable_cuda_graph and external_cuda_graph cannot be enabled at the same time."},
		Fix:       "Set cuda_graph_impl instead of either.",
		Fields:    []string{"model.enable_cuda_graph", "model.external_cuda_graph"}, Gens: both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when:   func(s *state) bool { return s.b("model.enable_cuda_graph") && s.b("model.external_cuda_graph") }},
	{ID: "TC-03", Summary: "a legacy graph flag becomes cuda_graph_impl",
		Condition: "enable_cuda_graph (local) or external_cuda_graph (transformer_engine) with cuda_graph_impl none: Megatron-Core sets the impl and warns.",
		Fields:    []string{"model.enable_cuda_graph", "model.external_cuda_graph", "model.cuda_graph_impl"}, Gens: both, Kind: AutoFix, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return (s.b("model.enable_cuda_graph") || s.b("model.external_cuda_graph")) && s.impl() == presets.ImplNone
		},
		fix: func(s *state) string {
			if s.b("model.external_cuda_graph") {
				s.set("model.cuda_graph_impl", Value{Str: presets.ImplTE})
				return "external_cuda_graph is deprecated, use cuda_graph_impl=transformer_engine instead."
			}
			s.set("model.cuda_graph_impl", Value{Str: presets.ImplLocal})
			return "enable_cuda_graph is deprecated, use cuda_graph_impl=local instead."
		}},
	{ID: "TC-04", Summary: "not cuda_graph_scope and cuda_graph_modules together",
		Condition: `G3: cuda_graph_scope set while cuda_graph_modules is something other than "full", None or [].`,
		Messages:  []string{"cuda_graph_scope and cuda_graph_modules cannot be set together."},
		Fix:       "Set model.cuda_graph_scope=null next to cuda_graph_modules.",
		Fields:    []string{"model.cuda_graph_scope", "model.cuda_graph_modules"}, Gens: onlyG3, MinMB: 5, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			if s.null("model.cuda_graph_scope") {
				return false
			}
			m := s.v("model.cuda_graph_modules")
			// `cuda_graph_modules in ("full", None, [])`
			return !(m.Null || (m.Scalar && m.Str == "full") || (!m.Scalar && len(m.List) == 0))
		}},
	{ID: "TC-05", Summary: "cuda_graph_scope moves to cuda_graph_modules",
		Condition: `G3: the deprecated cuda_graph_scope is copied into cuda_graph_modules and cleared (the recipes' own "full" without a note).`,
		Fields:    []string{"model.cuda_graph_scope", "model.cuda_graph_modules"}, Gens: onlyG3, MinMB: 5, Kind: AutoFix, Source: srcTC,
		stages: []stage{stageMCore},
		when:   func(s *state) bool { return !s.null("model.cuda_graph_scope") },
		fix: func(s *state) string {
			sc := s.v("model.cuda_graph_scope")
			s.set("model.cuda_graph_modules", sc.clone())
			s.set("model.cuda_graph_scope", Value{Null: true})
			// Every MB recipe writes the alias as "full"; warning about
			// that default on every check would bury the notes that matter.
			if len(s.mods()) == 0 {
				return ""
			}
			return "cuda_graph_scope is deprecated, use cuda_graph_modules instead."
		}},
	{ID: "TC-06", Summary: "full is alone in the scope",
		Condition: `The scope (G2) or modules (G3) list "full" with another name.`,
		Messages:  []string{"full scope cannot be used with other scopes."},
		Fix:       "Give [] for the whole layer, or the per-layer names without full.",
		Fields:    []string{"model.cuda_graph_scope", "model.cuda_graph_modules"}, Gens: both, Kind: Reject, Source: srcCGC + " normalize_cuda_graph_modules (G3); " + srcTC + " (G2)",
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			raw := s.rawMods()
			return slices.Contains(raw, "full") && len(raw) != 1
		},
		after: func(s *state) { s.setMods(s.mods()) }},
	{ID: "TC-09", Summary: "full_iteration is not a transformer_engine scope",
		Condition: "impl transformer_engine with full_iteration in the scope (G2) or modules (G3).",
		Messages:  []string{"To use full iteration cuda graph, please use cuda_graph_impl=local instead of cuda_graph_impl=transformer_engine.", "cuda_graph_modules='full_iteration' cannot be combined with cuda_graph_impl='transformer_engine'."},
		Fix:       "Use impl local with full_iteration (G2) or impl full_iteration (G3).",
		Fields:    []string{"model.cuda_graph_impl", "model.cuda_graph_scope", "model.cuda_graph_modules"}, Gens: both, Kind: Reject,
		Source: srcCGC + " validate_deprecated_cuda_graph_modules_migration_inputs (G3); " + srcTC + " (G2)",
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.impl() == presets.ImplTE && s.has(presets.ScopeFullIteration)
		},
		msg: byGen("To use full iteration cuda graph, please use cuda_graph_impl=local instead of cuda_graph_impl=transformer_engine.",
			"cuda_graph_modules='full_iteration' cannot be combined with cuda_graph_impl='transformer_engine'.")},
	{ID: "TC-12", Summary: "the full_iteration module becomes the impl",
		Condition: "G3: full_iteration in cuda_graph_modules with an impl other than transformer_engine: Megatron-Core sets cuda_graph_impl full_iteration and warns.",
		Fields:    []string{"model.cuda_graph_modules", "model.cuda_graph_impl"}, Gens: onlyG3, MinMB: 5, Kind: AutoFix, Source: srcTC + "; " + srcCGC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.has(presets.ScopeFullIteration) && s.impl() != presets.ImplTE
		},
		fix: func(s *state) string {
			s.set("model.cuda_graph_impl", Value{Str: "full_iteration"})
			s.setMods(slices.DeleteFunc(s.mods(), func(m string) bool { return m == presets.ScopeFullIteration }))
			return "cuda_graph_modules 'full_iteration' is deprecated. Use cuda_graph_impl='full_iteration' instead."
		}},
	{ID: "TC-13", Summary: "an impl this Megatron-Core knows",
		Condition: "G2: cuda_graph_impl is not none, local or transformer_engine (full_iteration is G3's).",
		Messages:  []string{"Invalid cuda graph implementation: {cuda_graph_impl}"},
		Fix:       "Use impl local with scope full_iteration for a full-iteration graph on MB 0.3/0.4.",
		Fields:    []string{"model.cuda_graph_impl"}, Gens: onlyG2, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.impl() != presets.ImplNone && s.impl() != presets.ImplTE && s.impl() != presets.ImplLocal
		},
		msg: func(s *state) string { return "Invalid cuda graph implementation: " + s.impl() }},
	{ID: "TC-15", Summary: "impl full_iteration has no modules",
		Condition: "G3: impl full_iteration with per-layer modules.",
		Messages:  []string{`cuda_graph_modules must be empty when cuda_graph_impl="full_iteration".`},
		Fix:       "Give cuda_graph_modules=[] with impl full_iteration.",
		Fields:    []string{"model.cuda_graph_impl", "model.cuda_graph_modules"}, Gens: onlyG3, MinMB: 5, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when:   func(s *state) bool { return s.impl() == "full_iteration" && len(s.mods()) > 0 }},
	// G2 rejects CPU offloading with any impl, G3 allows it with full_iteration.
	{ID: "TC-16", Summary: "no CUDA graph with CPU offloading",
		Condition: "A graph with cpu_offloading on; G3 allows a full-iteration graph.",
		Messages:  []string{"CUDA graphs not supported with CPU offloading."},
		Fix:       "Turn CPU offloading off, or use a full-iteration graph (G3).",
		Fields:    []string{"model.cpu_offloading", "model.cuda_graph_impl"}, Gens: both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.impl() != presets.ImplNone && s.b("model.cpu_offloading") && (s.gen == presets.G2 || s.impl() != "full_iteration")
		}},
	{ID: "TC-17", Summary: "local captures moe_router and moe_preprocess together",
		Condition: "impl local with one of moe_router and moe_preprocess: Megatron-Core adds the other.",
		Fields:    []string{"model.cuda_graph_impl", "model.cuda_graph_scope", "model.cuda_graph_modules"}, Gens: both, Kind: AutoFix, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			r, p := s.has(presets.ScopeMoERouter), s.has(presets.ScopeMoEPreprocess)
			return s.impl() == presets.ImplLocal && (r || p) && !(r && p)
		},
		fix: func(s *state) string {
			added := presets.ScopeMoEPreprocess
			if !s.has(presets.ScopeMoERouter) {
				added = presets.ScopeMoERouter
			}
			s.setMods(append(s.mods(), added))
			return "cuda_graph_impl=local captures moe_router and moe_preprocess together: added " + added
		}},
	{ID: "TC-18", Summary: "not moe and moe_router in one graph",
		Condition: "A per-layer graph (local or transformer_engine; G2 any impl) with both moe and moe_router.",
		Messages:  []string{"cuda_graph_scope must not contain both moe and moe_router.", "cuda_graph_modules must not contain both moe and moe_router."},
		Fix:       "Capture moe (the whole MoE block, drop-and-pad) or moe_router, not both.",
		Fields:    []string{"model.cuda_graph_scope", "model.cuda_graph_modules"}, Gens: both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.layerImpl() && s.has(presets.ScopeMoE) && s.has(presets.ScopeMoERouter)
		},
		msg: byGen("cuda_graph_scope must not contain both moe and moe_router.", "cuda_graph_modules must not contain both moe and moe_router.")},
	{ID: "TC-19", Summary: "moe_preprocess comes with moe_router",
		Condition: "A per-layer graph with moe_preprocess and without moe_router.",
		Messages:  []string{"moe_preprocess cuda graph is only supported with moe_router cuda graph."},
		Fix:       "Add moe_router.",
		Fields:    []string{"model.cuda_graph_scope", "model.cuda_graph_modules"}, Gens: both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.layerImpl() && s.has(presets.ScopeMoEPreprocess) && !s.has(presets.ScopeMoERouter)
		}},
	{ID: "TC-20", Summary: "MoE scopes need an MoE model",
		Condition: "moe or moe_router captured on a model without MoE (num_moe_experts None or 1).",
		Messages:  []string{"moe cuda graph is only supported for MoE."},
		Fix:       "Leave the MoE scopes out on a dense model.",
		Fields:    []string{"model.num_moe_experts", "model.cuda_graph_scope", "model.cuda_graph_modules"}, Gens: both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.layerImpl() && !s.moe() && (s.has(presets.ScopeMoE) || s.has(presets.ScopeMoERouter))
		}},
	{ID: "TC-21", Summary: "mlp needs a dense layer",
		Condition: "mlp captured on an MoE model whose every layer is MoE (moe_layer_freq 1, or a list without 0).",
		Messages:  []string{"mlp cuda graph is only supported for dense layers, but not found in the model."},
		Fix:       "Capture moe, moe_router or attn instead.",
		Fields:    []string{"model.num_moe_experts", "model.moe_layer_freq", "model.cuda_graph_scope", "model.cuda_graph_modules"}, Gens: both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.layerImpl() && s.moe() && s.allLayersMoE() && s.has(presets.ScopeMLP)
		}},
	{ID: "TC-22", Summary: "the moe scope needs drop-and-pad experts",
		Condition: "moe captured with dropless experts (no capacity factor, or no padding to it).",
		Messages:  []string{"moe cuda graph is only supported with drop-padding MoE."},
		Fix:       "Set model.moe_expert_capacity_factor=1.0 and model.moe_pad_expert_input_to_capacity=true, or capture moe_router instead.",
		Enabling:  []Change{dropAndPad},
		Fields:    []string{"model.num_moe_experts", "model.moe_expert_capacity_factor", "model.moe_pad_expert_input_to_capacity", "model.cuda_graph_scope", "model.cuda_graph_modules"},
		Gens:      both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.layerImpl() && s.moe() && s.dropless() && s.has(presets.ScopeMoE)
		}},
	{ID: "TC-23", Summary: "no moe_preprocess with host syncs in the dispatch",
		Condition: "moe_preprocess captured with dropless experts on the alltoall dispatcher that has a capacity factor or router padding for fp8.",
		Messages:  []string{"moe_preprocess cuda graph is not supported when there are DtoH copies and synchronizations in the preprocess step."},
		Fix:       "Use drop-and-pad experts, the flex dispatcher, or leave moe_preprocess out.",
		Enabling:  []Change{dropAndPad},
		Fields:    []string{"model.num_moe_experts", "model.moe_expert_capacity_factor", "model.moe_pad_expert_input_to_capacity", "model.moe_token_dispatcher_type", "model.moe_router_padding_for_fp8", "model.cuda_graph_scope", "model.cuda_graph_modules"},
		Gens:      both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.layerImpl() && s.moe() && s.dropless() && s.str("model.moe_token_dispatcher_type") == "alltoall" &&
				(!s.null("model.moe_expert_capacity_factor") || s.b("model.moe_router_padding_for_fp8")) && s.has(presets.ScopeMoEPreprocess)
		}},
	// G2 tests "scope == [full_iteration]", G3 "impl == full_iteration".
	{ID: "TC-24", Summary: "full recompute only with a full-iteration graph",
		Condition: "Full recompute with a per-layer graph.",
		Messages:  []string{"full recompute is only supported with full iteration CUDA graph."},
		Fix:       "Use selective recompute, or a full-iteration graph.",
		Fields:    []string{"model.recompute_granularity", "model.cuda_graph_impl", "model.cuda_graph_scope"}, Gens: both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			g := s.v("model.recompute_granularity")
			if s.impl() == presets.ImplNone || g.Null || g.Str == "selective" {
				return false
			}
			if s.gen == presets.G2 {
				return !slices.Equal(s.mods(), []string{presets.ScopeFullIteration})
			}
			return s.impl() != "full_iteration"
		}},
	// The source writes the rest of the sentence ("--cuda-graph-impl
	// transformer_engine.") as a separate statement after the assert, so
	// the message really ends after "with: ".
	{ID: "TC-25", Summary: "no moe recompute with a moe_router graph",
		Condition: "Selective recompute of moe with a transformer_engine graph that captures moe_router.",
		Messages:  []string{"moe recompute is not supported with moe_router CUDA graph with: "},
		Fix:       "Leave moe out of recompute_modules, or moe_router out of the graph.",
		Fields:    []string{"model.recompute_granularity", "model.recompute_modules", "model.cuda_graph_impl", "model.cuda_graph_scope", "model.cuda_graph_modules"},
		Gens:      both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.impl() == presets.ImplTE && s.selective() && s.recomputes("moe") && s.has(presets.ScopeMoERouter)
		}},
	{ID: "TC-26", Summary: "no attention dropout in graphed attention recompute",
		Condition: "Selective recompute of core_attn, attention dropout on, and attention captured (attn, the whole layer or the iteration).",
		Messages:  []string{"attention dropout is not supported with graphed attention recomputation."},
		Fix:       "Set model.attention_dropout=0.0, or stop recomputing core_attn.",
		Fields:    []string{"model.recompute_granularity", "model.recompute_modules", "model.attention_dropout", "model.cuda_graph_scope", "model.cuda_graph_modules"},
		Gens:      both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.impl() != presets.ImplNone && s.selective() && s.f("model.attention_dropout") != 0 &&
				(s.fullCG() || s.has(presets.ScopeAttn)) && s.recomputes("core_attn")
		}},
	{ID: "TC-27", Summary: "no hidden dropout in graphed MLP/MoE recompute",
		Condition: "Selective recompute of mlp or moe, hidden dropout on, and that block captured.",
		Messages:  []string{"hidden dropout is not supported with graphed MLP/MoE recomputation."},
		Fix:       "Set model.hidden_dropout=0.0, or stop recomputing it.",
		Fields:    []string{"model.recompute_granularity", "model.recompute_modules", "model.hidden_dropout", "model.cuda_graph_scope", "model.cuda_graph_modules"},
		Gens:      both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			if s.impl() == presets.ImplNone || !s.selective() || s.f("model.hidden_dropout") == 0 {
				return false
			}
			mlp := (s.fullCG() || s.has(presets.ScopeMLP)) && s.recomputes("mlp")
			moe := (s.fullCG() || s.has(presets.ScopeMoE)) && s.recomputes("moe")
			return mlp || moe
		}},
	{ID: "TC-28", Summary: "no input jitter in graphed moe recompute",
		Condition: "Selective recompute of moe with moe_input_jitter_eps set and moe captured.",
		Messages:  []string{"moe_input_jitter_eps is not supported with graphed moe recomputation."},
		Fix:       "Unset model.moe_input_jitter_eps, or stop recomputing moe.",
		Fields:    []string{"model.recompute_granularity", "model.recompute_modules", "model.moe_input_jitter_eps", "model.cuda_graph_scope", "model.cuda_graph_modules"},
		Gens:      both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.impl() != presets.ImplNone && s.selective() && !s.null("model.moe_input_jitter_eps") &&
				(s.fullCG() || s.has(presets.ScopeMoE)) && s.recomputes("moe")
		}},
	{ID: "TC-29", Summary: "no shared-expert recompute in local graphs with GTP under fp8/fp4",
		Condition: "MB 0.6+: impl local, GTP (gtp_weight_remat_size > 1), fp8 or fp4, a shared expert that is not overlapped and is captured, and shared_experts recomputed.",
		Messages:  []string{"GTP + local CUDA graphs that capture shared_experts (moe_router/moe scope) cannot recompute it under fp8/fp4: te_checkpoint requires .backward(), but the local fwd-graph warmup uses .grad(). Drop 'shared_experts' from --recompute-modules (GTP-shard + offload instead), or use --cuda-graph-impl full_iteration."},
		Fix:       "Drop shared_experts from recompute_modules, or use impl full_iteration.",
		Fields:    []string{"model.gtp_weight_remat_size", "model.cuda_graph_impl", "model.fp8", "model.fp4", "model.moe_shared_expert_intermediate_size", "model.moe_shared_expert_overlap", "model.cuda_graph_modules", "model.recompute_granularity", "model.recompute_modules"},
		Gens:      onlyG3, MinMB: 6, Kind: Reject, Source: srcTC + " (MLM cd4afffa, pinned by MB v0.6.0)",
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.impl() == presets.ImplLocal && s.selective() && s.i("model.gtp_weight_remat_size") > 1 &&
				(!s.null("model.fp8") || !s.null("model.fp4")) &&
				!s.null("model.moe_shared_expert_intermediate_size") && !s.b("model.moe_shared_expert_overlap") &&
				(s.fullCG() || s.has(presets.ScopeMoE) || s.has(presets.ScopeMoERouter)) && s.recomputes("shared_experts")
		}},
	{ID: "TC-30", Summary: "local graphs offload only expert modules",
		Condition: "MB 0.6+: impl local with fine-grained offloading of modules other than expert_fc1, moe_act, fused_group_mlp.",
		Messages:  []string{"fine-grained activation offloading with cuda_graph_impl='local' only supports offload_modules 'expert_fc1', 'moe_act', and 'fused_group_mlp'. Unsupported offload_modules: {modules}."},
		Fix:       "Offload only those modules, or use transformer_engine.",
		Fields:    []string{"model.fine_grained_activation_offloading", "model.offload_modules", "model.cuda_graph_impl"},
		Gens:      onlyG3, MinMB: 6, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.impl() == presets.ImplLocal && s.b("model.fine_grained_activation_offloading") && len(s.unsupportedLocalOffload()) > 0
		},
		msg: func(s *state) string {
			return "fine-grained activation offloading with cuda_graph_impl='local' only supports offload_modules 'expert_fc1', 'moe_act', and 'fused_group_mlp'. " +
				"Unsupported offload_modules: " + pyList(s.unsupportedLocalOffload()) + "."
		}},
	{ID: "TC-31", Summary: "no whole-layer local graph with offloading",
		Condition: "MB 0.6+: impl local with an empty module list (the whole layer) and fine-grained offloading.",
		Messages:  []string{"fine-grained activation offloading with cuda_graph_impl='local' is not supported with whole-layer CUDA graph capture."},
		Fix:       "Give per-layer modules, or use transformer_engine.",
		Fields:    []string{"model.fine_grained_activation_offloading", "model.cuda_graph_impl", "model.cuda_graph_modules"},
		Gens:      onlyG3, MinMB: 6, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.impl() == presets.ImplLocal && s.b("model.fine_grained_activation_offloading") && len(s.mods()) == 0
		}},
	// MB v0.5's MCore (d0b3b775) has the older wording and no local
	// partial-MoE exemption.
	{ID: "TC-32", Summary: "offloading needs transformer_engine or local partial MoE graphs",
		Condition: "MB 0.5+: fine-grained offloading with an impl other than transformer_engine and full_iteration, except (MB 0.6+) local graphs offloading only expert modules without moe captured.",
		Messages:  []string{"fine-grained activation offloading is only supported with transformer_engine CUDA graph implementation or local CUDA graph implementation with full_iteration scope.", "fine-grained activation offloading is only supported with transformer_engine CUDA graph implementation or local CUDA graph implementation with partial MoE offload. Local partial CUDA graphs are supported only for expert_fc1, moe_act, or fused_group_mlp offload when the full MoE module is not captured."},
		Fix:       "Use transformer_engine graphs with offloading.",
		Fields:    []string{"model.fine_grained_activation_offloading", "model.offload_modules", "model.cuda_graph_impl", "model.cuda_graph_modules"},
		Gens:      onlyG3, MinMB: 5, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			if s.impl() == presets.ImplNone || !s.b("model.fine_grained_activation_offloading") {
				return false
			}
			if s.impl() == presets.ImplTE || s.impl() == "full_iteration" {
				return false
			}
			off := s.offloadSet()
			partial := s.mb >= 6 && s.impl() == presets.ImplLocal && len(off) > 0 && allIn(off, localOffloadable) && !s.has(presets.ScopeMoE)
			return !partial
		},
		msg: func(s *state) string {
			if s.mb <= 5 {
				return "fine-grained activation offloading is only supported with transformer_engine CUDA graph implementation or local CUDA graph implementation with full_iteration scope."
			}
			return "fine-grained activation offloading is only supported with transformer_engine CUDA graph implementation or local CUDA graph implementation with partial MoE offload. " +
				"Local partial CUDA graphs are supported only for expert_fc1, moe_act, or fused_group_mlp offload when the full MoE module is not captured."
		}},
	{ID: "TC-33", Summary: "no moe graph with offloading",
		Condition: "MB 0.5+: fine-grained offloading with moe captured.",
		Messages:  []string{"Token-drop MoE is temporarily not supported with activation offloading."},
		Fix:       "Capture moe_router instead, or turn offloading off.",
		Fields:    []string{"model.fine_grained_activation_offloading", "model.cuda_graph_modules"},
		Gens:      onlyG3, MinMB: 5, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.impl() != presets.ImplNone && s.b("model.fine_grained_activation_offloading") && s.has(presets.ScopeMoE)
		}},
	{ID: "TC-34", Summary: "offloading needs a warm-up",
		Condition: "MB 0.5+: a graph with fine-grained offloading and cuda_graph_warmup_steps 0.",
		Messages:  []string{"cuda_graph_warmup_steps must be greater than 0 when enabling fine-grained activation offloading."},
		Fix:       "Give a warm-up of 1 or more.",
		Fields:    []string{"model.fine_grained_activation_offloading", "model.cuda_graph_warmup_steps"},
		Gens:      onlyG3, MinMB: 5, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.impl() != presets.ImplNone && s.b("model.fine_grained_activation_offloading") && s.i("model.cuda_graph_warmup_steps") <= 0
		}},
	{ID: "TC-35", Summary: "offloading with full iteration limits the in-flight offloads",
		Condition: "MB 0.5+: impl full_iteration with fine-grained offloading and fine_grained_offloading_max_inflight_offloads unset or negative.",
		Messages:  []string{"fine_grained_offloading_max_inflight_offloads must be a non-negative integer when using fine-grained activation offloading with full-iteration CUDA graphs"},
		Fix:       "Set model.fine_grained_offloading_max_inflight_offloads to 0 or more.",
		Fields:    []string{"model.fine_grained_activation_offloading", "model.cuda_graph_impl", "model.fine_grained_offloading_max_inflight_offloads"},
		Gens:      onlyG3, MinMB: 5, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			k := "model.fine_grained_offloading_max_inflight_offloads"
			return s.impl() == "full_iteration" && s.b("model.fine_grained_activation_offloading") && (s.null(k) || s.i(k) < 0)
		}},
	// TC-39 is MCore's EP-overlap block; its checks come before TC-36 there.
	// The wording and the MTP limits changed between MB releases.
	{ID: "TC-39", Summary: "the settings Megatron-Core's EP overlap needs",
		Condition: "overlap_moe_expert_parallel_comm on the model and PP > 1 without VP, EP 1, a dispatcher other than alltoall/flex, full recompute, a recompute method or layer count, moe recomputed (MB 0.4+), neither bf16 nor fp16, an overlapped shared expert, or more MTP layers than allowed (MB 0.3/0.4 also need PP > 1 with one); the first in Megatron-Core's order. Not repeated after MB-18.",
		Messages:  []string{"If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified when pipeline_model_parallel_size > 1", "overlap_moe_expert_parallel_comm is only supported with expert model parallelism", "overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher", "disable full recomputation when enabling overlap_moe_expert_parallel_comm", "disable recomputation method when enabling overlap_moe_expert_parallel_comm", "recompute_num_layers must be None when enabling overlap_moe_expert_parallel_comm", "disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm", "overlap_moe_expert_parallel_comm is only supported with bf16 or fp16 model", "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm", "MTP layernum only supports 1 when enabling overlap_moe_expert_parallel_comm.", "MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm.", "Pipeline model parallel size must be larger than 1 when enabling overlap_moe_expert_parallel_comm with MTP layer."},
		Fix:       "Change the setting the message names, or turn the overlap off with the key that sets it (comm_overlap.overlap_moe_expert_parallel_comm where the recipe has a comm_overlap config).",
		Enabling:  []Change{epOverlapOff},
		Fields: []string{"model.overlap_moe_expert_parallel_comm", "model.pipeline_model_parallel_size", "model.virtual_pipeline_model_parallel_size",
			"model.expert_model_parallel_size", "model.moe_token_dispatcher_type", "model.recompute_granularity", "model.recompute_method",
			"model.recompute_num_layers", "model.recompute_modules", "model.bf16", "model.fp16", "model.moe_shared_expert_overlap", "model.mtp_num_layers"},
		Gens: both, Kind: Reject, Source: srcTC, Shadow: "MB-18",
		stages: []stage{stageMCore},
		when:   func(s *state) bool { return epOverlapError(s) != "" },
		msg:    epOverlapError,
		hint:   overlapOnHint},
	{ID: "TC-36", Summary: "no moe or mlp graph with EP overlap",
		Condition: "EP communication overlap with a transformer_engine graph capturing moe or mlp (G2: also any impl but transformer_engine).",
		Messages:  []string{"CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm"},
		Fix:       "Capture neither moe nor mlp, or turn the overlap off with the key that sets it (comm_overlap.overlap_moe_expert_parallel_comm where the recipe has a comm_overlap config).",
		Enabling:  []Change{epOverlapOff},
		Fields:    []string{"model.overlap_moe_expert_parallel_comm", "model.cuda_graph_impl", "model.cuda_graph_scope", "model.cuda_graph_modules"},
		Gens:      both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			if !s.b("model.overlap_moe_expert_parallel_comm") || s.impl() == presets.ImplNone {
				return false
			}
			moeOrMLP := s.has(presets.ScopeMoE) || s.has(presets.ScopeMLP)
			if s.gen == presets.G2 {
				// G2 asserts impl == transformer_engine as part of the check.
				return s.impl() != presets.ImplTE || moeOrMLP
			}
			return s.impl() == presets.ImplTE && moeOrMLP
		},
		hint: func(s *state) string {
			k := s.c.commOverlapKey("overlap_moe_expert_parallel_comm")
			return fmt.Sprintf("EP communication overlap is on, %s=true: graph neither moe nor mlp, or set %s=false", k, k)
		}},
	{ID: "TC-38", Summary: "delayed wgrad needs EP overlap",
		Condition: "delay_wgrad_compute on the model without overlap_moe_expert_parallel_comm. Not repeated after MB-12.",
		Messages:  []string{"overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute"},
		Fix:       "Turn the overlap on, or delayed wgrad off, with the keys that set them.",
		Enabling:  []Change{delayedWgradOff},
		Fields:    []string{"model.delay_wgrad_compute", "model.overlap_moe_expert_parallel_comm"}, Gens: both, Kind: Reject, Source: srcTC, Shadow: "MB-12",
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.b("model.delay_wgrad_compute") && !s.b("model.overlap_moe_expert_parallel_comm")
		},
		hint: func(s *state) string {
			return fmt.Sprintf("set %s=true, or %s=false", s.c.commOverlapKey("overlap_moe_expert_parallel_comm"), s.c.commOverlapKey("delay_wgrad_compute"))
		}},
	{ID: "TC-37", Summary: "TE 2.10 for delayed wgrad with transformer_engine graphs",
		Condition: "delay_wgrad_compute with impl transformer_engine and TE older than 2.10.0.",
		Messages:  []string{"TE version >= 2.10.0 is required for delay_wgrad_compute with partial cuda graph"},
		Fix:       "Use TE 2.10.0 or newer, or turn delayed wgrad off.",
		Enabling:  []Change{teAtLeast("2.10"), delayedWgradOff},
		Fields:    []string{"model.delay_wgrad_compute", "model.cuda_graph_impl", "te_version"}, Gens: both, Kind: Reject, Source: srcTC,
		stages: []stage{stageMCore},
		when: func(s *state) bool {
			return s.b("model.delay_wgrad_compute") && s.impl() == presets.ImplTE && s.teBelow("2.10.0")
		},
		hint: func(s *state) string {
			return fmt.Sprintf("delayed wgrad is on, %s=true", s.c.commOverlapKey("delay_wgrad_compute"))
		}},

	// --- MB ConfigContainer.validate after model.finalize() ---
	{ID: "MB-02", Summary: "MB keeps the two TE RNG-tracker flags in sync",
		Condition: "rng.te_rng_tracker or model.use_te_rng_tracker on: MB turns the other on too.",
		Fields:    []string{"rng.te_rng_tracker", "model.use_te_rng_tracker"}, Gens: both, Kind: AutoFix, Launcher: LauncherMB, Source: srcMBCFG,
		stages: []stage{stageMB},
		when: func(s *state) bool {
			r, m := s.b("rng.te_rng_tracker"), s.b("model.use_te_rng_tracker")
			return r != m
		},
		fix: func(s *state) string {
			from, to := "rng.te_rng_tracker", "model.use_te_rng_tracker"
			if s.b(to) {
				from, to = to, from
			}
			s.set("rng.te_rng_tracker", Value{Bool: true})
			s.set("model.use_te_rng_tracker", Value{Bool: true})
			return fmt.Sprintf("%s=True because %s=True (MB keeps the two in sync)", to, from)
		}},
	{ID: "MB-06", Summary: "no CUDA graph with Megatron-FSDP v2",
		Condition: "MB 0.7: Megatron-FSDP version 2 with an optimizer graph, a model graph or megatron_fsdp_cuda_graph_mode (after its other contract checks, which cgtune does not model).",
		Messages:  []string{"MFSDP V2 does not support optimizer CUDA graphs.", "MFSDP V2 does not support CUDA graphs."},
		Fix:       "Use Megatron-FSDP version 1, or no graph.",
		Fields:    []string{"ddp.use_megatron_fsdp", "ddp.megatron_fsdp_version", "optimizer.optimizer_cuda_graph", "model.cuda_graph_impl", "ddp.megatron_fsdp_cuda_graph_mode"},
		Gens:      onlyG3, MinMB: 7, Kind: Reject, Launcher: LauncherMB, Source: srcMBCFG + " _validate_and_apply_megatron_fsdp_v2_configs",
		stages: []stage{stageMB},
		when: func(s *state) bool {
			v2 := s.b("ddp.use_megatron_fsdp") && s.str("ddp.megatron_fsdp_version") == "2"
			return v2 && (s.b("optimizer.optimizer_cuda_graph") || s.impl() != presets.ImplNone || s.b("ddp.megatron_fsdp_cuda_graph_mode"))
		},
		msg: func(s *state) string {
			if s.b("optimizer.optimizer_cuda_graph") {
				return "MFSDP V2 does not support optimizer CUDA graphs."
			}
			return "MFSDP V2 does not support CUDA graphs."
		}},
	// MB's fine-grained offloading check (_validate_fine_grained_activation_offloading),
	// after Megatron-Core's, whatever the graph.
	{ID: "MB-21", Summary: "MB's requirements for fine-grained offloading",
		Condition: "Fine-grained activation offloading with the local layer spec, or with TE 2.10+ and NVTE_CPU_OFFLOAD_V1 not 1 in the job's environment; whatever the graph.",
		Messages:  []string{"Fine-grained activation offloading is only supported with transformer_engine implementation. Current transformer_impl: {transformer_impl}", "For fine-grained activation offloading with TE >= 2.10.0, NVTE_CPU_OFFLOAD_V1 environment variable should be set to 1 to avoid offloading weights."},
		Fix:       "Use the transformer_engine layer spec and set NVTE_CPU_OFFLOAD_V1=1 in the job's environment.",
		Fields:    []string{"model.fine_grained_activation_offloading", "model.transformer_impl", "te_version", "env.NVTE_CPU_OFFLOAD_V1"},
		Gens:      both, Kind: Reject, Launcher: LauncherMB, Source: srcMBCFG + " _validate_fine_grained_activation_offloading",
		stages: []stage{stageMB},
		when: func(s *state) bool {
			return s.b("model.fine_grained_activation_offloading") &&
				(s.str("model.transformer_impl") != "transformer_engine" || !s.teBelow("2.10.0") && s.env("NVTE_CPU_OFFLOAD_V1") != "1")
		},
		msg: func(s *state) string {
			if impl := s.str("model.transformer_impl"); impl != "transformer_engine" {
				return "Fine-grained activation offloading is only supported with transformer_engine implementation. Current transformer_impl: " + impl
			}
			return "For fine-grained activation offloading with TE >= 2.10.0, NVTE_CPU_OFFLOAD_V1 environment variable should be set to 1 to avoid offloading weights."
		}},
	{ID: "MB-03", Summary: "a full-iteration graph needs the loss NaN check off",
		Condition: "A full-iteration graph with rerun_state_machine.check_for_nan_in_loss on.",
		Messages:  []string{"check_for_nan_in_loss must be disabled when using full_iteration CUDA graph. Set rerun_state_machine.check_for_nan_in_loss=False."},
		Fix:       "Set rerun_state_machine.check_for_nan_in_loss=false.",
		Enabling:  []Change{nanChecksOff},
		Fields:    []string{"model.cuda_graph_impl", "model.cuda_graph_scope", "model.cuda_graph_modules", "rerun_state_machine.check_for_nan_in_loss"},
		Gens:      both, Kind: Reject, Launcher: LauncherMB, Source: srcMBCFG,
		stages: []stage{stageMB},
		when: func(s *state) bool {
			return s.fullIteration() && s.b("rerun_state_machine.check_for_nan_in_loss")
		}},
	// --- MB GPTModelProvider.provide ---
	// Only the GPT provider asserts it: a hybrid (Mamba) model's provider
	// (MB models/mamba/mamba_provider.py MambaModelProvider.provide to v0.5,
	// models/hybrid/hybrid_provider.py HybridModelProvider.provide from
	// v0.6) does not.
	{ID: "MB-01", Summary: "graphs need the TE RNG tracker",
		Condition: "A graph with model.use_te_rng_tracker off when MB's GPT provider builds the model (the hybrid provider does not check).",
		Messages:  []string{"Transformer engine's RNG tracker is required for cudagraphs, it can be enabled with use_te_rng_tracker=True'."},
		Fix:       "Set model.use_te_rng_tracker=true and rng.te_rng_tracker=true (the perf harness sets both).",
		Fields:    []string{"model.cuda_graph_impl", "model.use_te_rng_tracker"}, Gens: both, Kind: Reject, Launcher: LauncherMB, Source: "MB src/megatron/bridge/models/gpt_provider.py GPTModelProvider.provide",
		stages: []stage{stageProvide},
		when: func(s *state) bool {
			return s.impl() != presets.ImplNone && !s.b("model.use_te_rng_tracker") && !s.hybrid()
		}},

	// --- MCore's Megatron-FSDP wrapper: MB wraps the provided model with
	// MCore's FullyShardedDataParallel (MLM megatron/training/models/
	// dist_utils.py _ddp_wrap), whose V1 (megatron_fsdp_version 1) asserts
	// this in __init__. It sees the impl after MCore's normalisation, so a
	// full-iteration graph (G3 impl full_iteration) passes. The assert just
	// before it, on ddp.fsdp_double_buffer with EP overlap, is not about
	// graphs and not modelled. MB v0.3/v0.4's MCore has neither.
	{ID: "FSDP-01", Summary: "no per-layer graph with Megatron-FSDP and EP overlap",
		Condition: "MB 0.5+: Megatron-FSDP version 1 with EP communication overlap and a per-layer graph (local or transformer_engine).",
		Messages:  []string{"1F1B overlap with FSDP does not support per-layer CUDA graphs (cuda_graph_impl={cuda_graph_impl!r}). Use cuda_graph_impl='full_iteration' or disable CUDA graphs (cuda_graph_impl='none')."},
		Fix:       "Use a full-iteration graph or none, or turn the overlap off with the key that sets it.",
		Enabling:  []Change{epOverlapOff},
		Fields: []string{"ddp.use_megatron_fsdp", "ddp.megatron_fsdp_version", "model.overlap_moe_expert_parallel_comm",
			"comm_overlap.overlap_moe_expert_parallel_comm", "model.cuda_graph_impl"},
		Gens: onlyG3, MinMB: 5, Kind: Reject, Source: "MLM megatron/core/distributed/fsdp/mcore_fsdp_adapter.py FullyShardedDataParallelV1.__init__ (FullyShardedDataParallel before core 0.20)",
		stages: []stage{stageProvide},
		when: func(s *state) bool {
			return s.b("ddp.use_megatron_fsdp") && s.str("ddp.megatron_fsdp_version") == "1" &&
				s.b("model.overlap_moe_expert_parallel_comm") && s.impl() != presets.ImplNone && s.impl() != "full_iteration"
		},
		msg: func(s *state) string {
			return "1F1B overlap with FSDP does not support per-layer CUDA graphs (cuda_graph_impl=" + pyRepr(s.impl()) + "). " +
				"Use cuda_graph_impl='full_iteration' or disable CUDA graphs (cuda_graph_impl='none')."
		},
		hint: overlapOnHint},

	// --- Megatron-LM's launcher: validate_args, in its order, before MLM
	// builds the TransformerConfig (LauncherMLM only; MB never calls it) ---
	// MLM has one check_for_nan_in_loss_and_grad flag; a recipe's two NaN
	// checks are its two halves.
	{ID: "ARG-03", Summary: "a full-iteration graph needs the NaN checks off",
		Condition: "Megatron-LM's launcher: a full-iteration graph with its one NaN check on (a recipe's loss or grad check).",
		Messages:  []string{"--no-check-for-nan-in-loss-and-grad should be set with full_iteration CUDA graph", "--no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-scope=full_iteration for training. Note: If you are trying to use full_iteration CUDA graphs for inference, please use --cuda-graph-scope full_iteration_inference instead", "--no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-impl=full_iteration for training."},
		Fix:       "Pass --no-check-for-nan-in-loss-and-grad (rerun_state_machine.check_for_nan_in_loss=false, ddp.check_for_nan_in_grad=false).",
		Enabling:  []Change{nanChecksOff},
		Fields:    []string{"model.cuda_graph_impl", "model.cuda_graph_scope", "rerun_state_machine.check_for_nan_in_loss", "ddp.check_for_nan_in_grad"},
		Gens:      both, Kind: Reject, Source: srcARGS, Launcher: LauncherMLM,
		stages: []stage{stageArgs},
		when: func(s *state) bool {
			return s.fullIteration() && (s.b("rerun_state_machine.check_for_nan_in_loss") || s.b("ddp.check_for_nan_in_grad"))
		},
		msg: func(s *state) string {
			switch {
			case s.mb <= 3:
				return "--no-check-for-nan-in-loss-and-grad should be set with full_iteration CUDA graph"
			case s.gen == presets.G2:
				return "--no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-scope=full_iteration for training. Note: If you are trying to use full_iteration CUDA graphs for inference, please use --cuda-graph-scope full_iteration_inference instead"
			}
			return "--no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-impl=full_iteration for training."
		}},
	{ID: "ARG-07", Summary: "TE 2.8 for delayed wgrad with overlapped grad reduce",
		Condition: "Megatron-LM's launcher: delay_wgrad_compute with overlap_grad_reduce and TE older than 2.8.0.",
		Messages:  []string{"overlap_grad_reduce is only supported with TE >= 2.8.0 when enabling delay_wgrad_compute"},
		Fix:       "Use TE 2.8.0 or newer, or turn delayed wgrad off.",
		Enabling:  []Change{teAtLeast("2.8"), delayedWgradOff},
		Fields:    []string{"model.delay_wgrad_compute", "ddp.overlap_grad_reduce", "te_version"}, Gens: both, Kind: Reject, Source: srcARGS, Launcher: LauncherMLM,
		stages: []stage{stageArgs},
		when: func(s *state) bool {
			return s.b("model.delay_wgrad_compute") && s.b("ddp.overlap_grad_reduce") && s.teBelow("2.8.0")
		}},
	{ID: "ARG-08", Summary: "TE 2.12 for delayed wgrad in a graph",
		Condition: "Megatron-LM's launcher: delayed wgrad with overlap_grad_reduce, its wgrad in a graph, and TE older than 2.12.0.",
		Messages:  []string{"CUDA graph with delay_wgrad_compute requires TE version >= 2.12.0."},
		Fix:       "Use TE 2.12.0 or newer, or capture neither attn nor moe_router.",
		Enabling:  []Change{teAtLeast("2.12"), delayedWgradOff},
		Fields:    []string{"model.delay_wgrad_compute", "ddp.overlap_grad_reduce", "model.cuda_graph_scope", "model.cuda_graph_modules", "model.moe_shared_expert_intermediate_size", "model.moe_shared_expert_overlap", "te_version"},
		Gens:      both, MinMB: 4, Kind: Reject, Source: srcARGS, Launcher: LauncherMLM,
		stages: []stage{stageArgs},
		when: func(s *state) bool {
			return s.b("model.delay_wgrad_compute") && s.b("ddp.overlap_grad_reduce") && s.wgradInGraph() && s.teBelow("2.12.0")
		}},
	{ID: "ARG-09", Summary: "grad-accumulation fusion for delayed wgrad in a graph",
		Condition: "Megatron-LM's launcher: delayed wgrad with overlap_grad_reduce, its wgrad in a graph, and gradient_accumulation_fusion off.",
		Messages:  []string{"CUDA graph with delay_wgrad_compute requires gradient_accumulation_fusion to be enabled. This is because the default gradient accumulation does not use static memory addresses, which breaks CUDA graph requirements."},
		Fix:       "Turn gradient_accumulation_fusion on.",
		Enabling:  []Change{gradAccFusion, delayedWgradOff},
		Fields:    []string{"model.delay_wgrad_compute", "ddp.overlap_grad_reduce", "model.cuda_graph_scope", "model.cuda_graph_modules", "model.gradient_accumulation_fusion"},
		Gens:      both, MinMB: 4, Kind: Reject, Source: srcARGS, Launcher: LauncherMLM,
		stages: []stage{stageArgs},
		when: func(s *state) bool {
			return s.b("model.delay_wgrad_compute") && s.b("ddp.overlap_grad_reduce") && s.wgradInGraph() && !s.b("model.gradient_accumulation_fusion")
		}},
	{ID: "ARG-10", Summary: "no attention bias for delayed wgrad in an attn graph",
		Condition: "Megatron-LM's launcher: delayed wgrad with overlap_grad_reduce, attn captured, and a linear or qkv bias.",
		Messages:  []string{"CUDA graph with delay_wgrad_compute doesn't support attn bias for now."},
		Fix:       "Leave attn out of the graph, or turn delayed wgrad off.",
		Enabling:  []Change{delayedWgradOff},
		Fields:    []string{"model.delay_wgrad_compute", "ddp.overlap_grad_reduce", "model.cuda_graph_scope", "model.cuda_graph_modules", "model.add_bias_linear", "model.add_qkv_bias"},
		Gens:      both, MinMB: 4, Kind: Reject, Source: srcARGS, Launcher: LauncherMLM,
		stages: []stage{stageArgs},
		when: func(s *state) bool {
			return s.b("model.delay_wgrad_compute") && s.b("ddp.overlap_grad_reduce") && s.hasModule(presets.ScopeAttn) &&
				(s.b("model.add_bias_linear") || s.b("model.add_qkv_bias"))
		}},
	// MLM's one --te-rng-tracker flag is both of a recipe's fields.
	{ID: "ARG-05", Summary: "Megatron-LM turns the TE RNG tracker on",
		Condition: "Megatron-LM's launcher: a graph with Transformer Engine (layer spec or impl) and the TE RNG tracker off: it turns it on and warns.",
		Fields:    []string{"model.cuda_graph_impl", "model.transformer_impl", "rng.te_rng_tracker", "model.use_te_rng_tracker"},
		Gens:      both, Kind: AutoFix, Source: srcARGS, Launcher: LauncherMLM,
		stages: []stage{stageArgs},
		when: func(s *state) bool {
			te := s.impl() == presets.ImplTE || s.str("model.transformer_impl") == "transformer_engine"
			return s.impl() != presets.ImplNone && te && !s.b("rng.te_rng_tracker") && !s.b("model.use_te_rng_tracker")
		},
		fix: func(s *state) string {
			s.set("rng.te_rng_tracker", Value{Bool: true})
			s.set("model.use_te_rng_tracker", Value{Bool: true})
			return "te_rng_tracker is not enabled, enabling it for CUDA graphs."
		}},
	// MLM's validate_args asserts this at start-up; for an MB job
	// TECudaGraphHelper.__init__ (MLM megatron/core/transformer/
	// cuda_graphs.py) asserts it when it is built before the training loop.
	{ID: "ARG-06", Summary: "NCCL_GRAPH_REGISTER=0 with expandable segments",
		Condition: "impl transformer_engine with PYTORCH_CUDA_ALLOC_CONF holding expandable_segments:True and NCCL_GRAPH_REGISTER not 0 in the job's environment (Megatron-LM's launcher at start-up; for an MB job TECudaGraphHelper before the training loop).",
		Messages:  []string{"Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using CUDA Graph with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."},
		Fix:       "Set NCCL_GRAPH_REGISTER=0 in the job's environment.",
		Fields:    []string{"model.cuda_graph_impl", "env.PYTORCH_CUDA_ALLOC_CONF", "env.NCCL_GRAPH_REGISTER"}, Gens: both, Kind: Reject,
		Source: "MLM megatron/core/transformer/cuda_graphs.py TECudaGraphHelper.__init__; " + srcARGS,
		stages: []stage{stageArgs, stageRuntime},
		when: func(s *state) bool {
			return s.impl() == presets.ImplTE && strings.Contains(s.env("PYTORCH_CUDA_ALLOC_CONF"), "expandable_segments:True") &&
				s.env("NCCL_GRAPH_REGISTER") != "0"
		}},

	// --- run time: MB's forward step in the first training iteration ---
	// MB's forward step checks this when a packed batch carries a padding
	// mask, which MB's SFT packers (offline and in-batch) emit.
	{ID: "MB-10", Summary: "no router-scoped TE graph with packed MoE",
		Condition: "MB 0.7: packed sequences (offline or in-batch) on an MoE model with a transformer_engine graph that captures the router (whole layer, moe, moe_router or moe_preprocess); checked in the first forward step.",
		Messages:  []string{"Packed MoE padding masks do not support router-scoped Transformer Engine CUDA graphs in the pinned MCore. Use an attention-only CUDA graph scope or disable scoped CUDA graphs."},
		Fix:       "Capture attn only, or no per-layer graph.",
		Fields:    []string{"dataset.enable_offline_packing", "dataset.enable_in_batch_packing", "model.num_moe_experts", "model.cuda_graph_impl", "model.cuda_graph_modules"},
		Gens:      onlyG3, MinMB: 7, Kind: Reject, Launcher: LauncherMB, Source: "MB src/megatron/bridge/training/gpt_step.py _validate_packed_moe_cuda_graph",
		stages: []stage{stageRuntime},
		when: func(s *state) bool {
			packed := s.b("dataset.enable_offline_packing") || s.b("dataset.enable_in_batch_packing")
			if !packed || s.null("model.num_moe_experts") || s.impl() != presets.ImplTE {
				return false
			}
			mods := s.moduleNames()
			return len(mods) == 0 || slices.ContainsFunc(mods, func(m string) bool {
				return m == presets.ScopeMoE || m == presets.ScopeMoERouter || m == presets.ScopeMoEPreprocess
			})
		}},
	// --- run time: the end of the first training iteration ---
	// With no warm-up, TE graphs are captured at the top of the first
	// iteration; when the forward pre-hook is toggled for the distributed
	// optimizer's overlapped parameter gather, MB asserts at its end that
	// the helper captured graphs, which it did not on a pipeline rank with
	// no graphable layer. MB v0.3's MCore (b0cc2706) marks graphs created
	// even then.
	{ID: "MB-19", Summary: "every pipeline rank has a layer to graph without warm-up",
		Condition: "MB 0.4+: impl transformer_engine, no warm-up, the forward pre-hook toggled (distributed optimizer with overlapped parameter gather, no Megatron-FSDP), and a pipeline rank with no layer the scope graphs: MB asserts after the first iteration that graphs were captured.",
		Messages:  []string{"CUDA Graphs should have been created."},
		Fix:       "Give a warm-up of 1 or more, or a scope that graphs a layer on every rank.",
		Fields: []string{"model.cuda_graph_impl", "model.cuda_graph_warmup_steps", "model.cuda_graph_scope", "model.cuda_graph_modules",
			"ddp.use_megatron_fsdp", "ddp.use_distributed_optimizer", "optimizer.use_distributed_optimizer", "ddp.overlap_param_gather",
			"model.pipeline_model_parallel_size", "model.virtual_pipeline_model_parallel_size"},
		Gens: both, MinMB: 4, Kind: Reject, Launcher: LauncherMB, Source: "MB src/megatron/bridge/training/train.py train",
		stages: []stage{stageRuntime},
		when: func(s *state) bool {
			// should_disable_forward_pre_hook; ConfigContainer.validate
			// keeps the two distributed-optimizer flags in sync.
			toggled := !s.b("ddp.use_megatron_fsdp") && (s.b("ddp.use_distributed_optimizer") || s.b("optimizer.use_distributed_optimizer")) &&
				s.b("ddp.overlap_param_gather")
			return s.impl() == presets.ImplTE && s.i("model.cuda_graph_warmup_steps") == 0 && toggled && s.graphlessRank() >= 0
		},
		hint: func(s *state) string {
			return fmt.Sprintf("pipeline rank %d holds no layer the scope %s graphs; give a warm-up of 1 or more, or a scope that graphs a layer on every rank",
				s.graphlessRank(), pyList(s.mods()))
		}},
}

// epOverlapError returns the first message of MCore's
// overlap_moe_expert_parallel_comm block that the config trips, or "".
func epOverlapError(s *state) string {
	if !s.b("model.overlap_moe_expert_parallel_comm") {
		return ""
	}
	mtp, mtpNull := s.i("model.mtp_num_layers"), s.null("model.mtp_num_layers")
	switch {
	case s.i("model.pipeline_model_parallel_size") > 1 && s.null("model.virtual_pipeline_model_parallel_size"):
		return "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified when pipeline_model_parallel_size > 1"
	case s.i("model.expert_model_parallel_size") <= 1:
		return "overlap_moe_expert_parallel_comm is only supported with expert model parallelism"
	case !slices.Contains([]string{"alltoall", "flex"}, s.str("model.moe_token_dispatcher_type")):
		return "overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher"
	case s.str("model.recompute_granularity") == "full" && !s.null("model.recompute_granularity"):
		return "disable full recomputation when enabling overlap_moe_expert_parallel_comm"
	case !s.null("model.recompute_method"):
		return "disable recomputation method when enabling overlap_moe_expert_parallel_comm"
	case !s.null("model.recompute_num_layers"):
		return "recompute_num_layers must be None when enabling overlap_moe_expert_parallel_comm"
	case s.mb >= 4 && s.recomputes("moe"):
		return "disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm"
	case !s.b("model.bf16") && !s.b("model.fp16"):
		return "overlap_moe_expert_parallel_comm is only supported with bf16 or fp16 model"
	case s.b("model.moe_shared_expert_overlap"):
		return "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm"
	case s.mb <= 5 && !mtpNull && mtp != 1:
		return "MTP layernum only supports 1 when enabling overlap_moe_expert_parallel_comm."
	case s.mb >= 6 && !mtpNull && mtp > 1:
		return "MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm."
	case s.mb <= 4 && !mtpNull && mtp == 1 && s.i("model.pipeline_model_parallel_size") <= 1:
		return "Pipeline model parallel size must be larger than 1 when enabling overlap_moe_expert_parallel_comm with MTP layer."
	}
	return ""
}

// overlapOnHint names the key that turns EP communication overlap on, as
// the recipe spells it.
func overlapOnHint(s *state) string {
	k := s.c.commOverlapKey("overlap_moe_expert_parallel_comm")
	return fmt.Sprintf("EP communication overlap is on, %s=true; %s=false turns it off", k, k)
}

// moeSettingsError is the first of TC-43's checks the config trips, or "".
func moeSettingsError(s *state) string {
	pad := s.b("model.moe_pad_expert_input_to_capacity")
	disp := s.str("model.moe_token_dispatcher_type")
	backend := s.v("model.moe_flex_dispatcher_backend")
	capacity := s.v("model.moe_expert_capacity_factor")
	switch {
	case s.i("model.expert_model_parallel_size") > 1 && s.null("model.num_moe_experts"):
		return "num_moe_experts must be non None to use expert-parallel."
	case disp == "flex" && pad && !backend.Null && backend.Str == "deepep":
		return "Flex token dispatcher with deepep backend does not support moe_pad_expert_input_to_capacity"
	case !s.null("model.moe_shared_expert_intermediate_size") && s.b("model.moe_shared_expert_overlap") && s.mb <= 4 && disp != "alltoall":
		return "moe_shared_expert_overlap only works with alltoall token dispatcher."
	case !s.null("model.moe_shared_expert_intermediate_size") && s.b("model.moe_shared_expert_overlap") && s.mb >= 5 && disp != "alltoall" && disp != "flex":
		return "moe_shared_expert_overlap only works with alltoall or flex token dispatcher."
	case pad && (capacity.Null || capacity.Float < 0):
		return "moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity"
	}
	return ""
}

// recomputeSettingsError is the first of TC-44's checks the config trips,
// or "".
func recomputeSettingsError(s *state) string {
	cpu := s.b("model.cpu_offloading")
	g := s.v("model.recompute_granularity")
	pp := max(s.i("model.pipeline_model_parallel_size"), 1)
	layers := len(s.c.model.Arch.LayerKinds())
	switch {
	case cpu && s.i("model.cpu_offloading_num_layers") >= layers:
		return fmt.Sprintf("CPU offloading can be done only for layers less than %d", layers)
	case cpu && pp > 1:
		return "Currently there is no support for Pipeline parallelism with CPU offloading"
	case cpu && !g.Null:
		return "CPU offloading does not work when activation recomputation is enabled"
	case g.Null:
		return ""
	case g.Str == "full" && s.null("model.recompute_method"):
		return `Using recompute_granularity: full so recompute_method must be "block" or "uniform"`
	case g.Str == "full" && s.null("model.recompute_num_layers"):
		return fmt.Sprintf("When using recompute_granularity: full recompute_num_layers must be between 1 and num_layers_per_pipeline_rank: %d",
			layers/pp)
	case g.Str == "selective" && !s.null("model.recompute_num_layers"):
		return "When using recompute_granularity: selective recompute_num_layers must be None."
	}
	return ""
}

// offloadSettingsError is MCore's check of the fine-grained offloading
// settings (transformer_config.py __post_init__): the first message it
// raises, or "". A set of modules prints as Python prints a set; MCore
// iterates it in hash order, so several are written sorted.
func offloadSettingsError(s *state) string {
	if !s.b("model.fine_grained_activation_offloading") {
		return ""
	}
	mods := names(s.v("model.offload_modules"))
	in := func(names ...string) []string {
		var out []string
		for _, n := range names {
			if slices.Contains(mods, n) {
				out = append(out, n)
			}
		}
		return out
	}
	switch {
	case s.b("model.cpu_offloading"):
		return "fine_grained_activation_offloading cannot be enabled with cpu_offloading."
	case slices.Contains(mods, "attn_proj") && !slices.Contains(mods, "core_attn"):
		return "attn_proj cannot be set to offload_modules alone without core_attn because the input of attn_proj is the output of core_attn, which is needed in core_attn.backward()."
	case s.mb < 6:
		return ""
	case s.selective() && s.recomputes("moe") && len(in("moe_act", "expert_fc1", "fused_group_mlp")) > 0:
		set := pySet(in("expert_fc1", "fused_group_mlp", "moe_act"))
		return "Cannot offload " + set + " while recomputing the entire MoE layer. 'moe' in recompute_modules wraps the full MoE forward in a checkpoint, " +
			"so offloading activations inside it is redundant and will cause errors. Either remove 'moe' from --recompute-modules or remove " + set + " from --offload-modules."
	case slices.Contains(mods, "fused_group_mlp") && !s.b("model.use_transformer_engine_op_fuser"):
		return "fused_group_mlp requires use_transformer_engine_op_fuser."
	case slices.Contains(mods, "fused_group_mlp") && len(in("expert_fc1", "moe_act")) > 0:
		return "fused_group_mlp offloads the whole fused grouped MLP and cannot be combined with expert_fc1 or moe_act. Remove: " + pySet(in("expert_fc1", "moe_act"))
	}
	return ""
}

// pagedStashError is MCore's check of moe_paged_stash
// (transformer_config.py __post_init__): the first message it raises, or "".
func pagedStashError(s *state) string {
	if !s.b("model.moe_paged_stash") {
		return ""
	}
	covered, list := []string{"expert_fc1", "fused_group_mlp", "moe_act"}, "expert_fc1, moe_act, or fused_group_mlp"
	if s.mb < 6 {
		covered, list = []string{"expert_fc1", "moe_act"}, "expert_fc1 or moe_act"
	}
	var conflict []string
	for _, m := range covered {
		if slices.Contains(names(s.v("model.offload_modules")), m) {
			conflict = append(conflict, m)
		}
	}
	switch {
	case s.b("model.cpu_offloading"):
		return "moe_paged_stash cannot be enabled with cpu_offloading."
	case s.null("model.moe_expert_rank_capacity_factor"):
		return "moe_paged_stash requires moe_expert_rank_capacity_factor to be set; there is no need to use paged stashing without it."
	case len(conflict) > 0:
		return "When moe_paged_stash is enabled, offload_modules must not include " + list + " (paged stash covers those activations). Remove: " + pySet(conflict)
	}
	return ""
}

// rankCapacityError is MCore's check of moe_expert_rank_capacity_factor
// (transformer_config.py __post_init__): the first message it raises, or "".
func rankCapacityError(s *state) string {
	if v, ok := s.c.Get("model.moe_expert_rank_capacity_factor"); !ok || v.Null {
		return ""
	}
	backend := s.v("model.moe_flex_dispatcher_backend")
	hybridep := !backend.Null && backend.Str == "hybridep"
	fuser := s.b("model.use_transformer_engine_op_fuser")
	if s.mb <= 5 {
		switch {
		case !fuser:
			return "moe_expert_rank_capacity_factor requires use_transformer_engine_op_fuser to be enabled."
		case !hybridep:
			return "moe_expert_rank_capacity_factor requires moe_flex_dispatcher_backend to be 'hybridep'."
		}
		return ""
	}
	switch {
	case !hybridep && (backend.Null || backend.Str != "ncclep"):
		return "moe_expert_rank_capacity_factor requires moe_flex_dispatcher_backend to be 'hybridep' or 'ncclep'."
	case hybridep && !fuser:
		return "moe_expert_rank_capacity_factor with the 'hybridep' backend requires use_transformer_engine_op_fuser to be enabled."
	}
	return ""
}

// energonPackingError is the first of MB-09's checks the config trips, or "".
func energonPackingError(s *state) string {
	if s.null("dataset.packing_buffer_size") {
		return ""
	}
	switch {
	case !s.null("model.mtp_num_layers") && s.i("model.mtp_num_layers") > 0:
		return "Energon native sequence packing does not support MTP."
	case s.impl() != presets.ImplNone:
		return "Energon native sequence packing does not support CUDA graphs."
	case s.i("model.pipeline_model_parallel_size") > 1:
		return "Energon native sequence packing does not yet support pipeline parallelism."
	}
	return ""
}

// packingError is the first of MB's packing checks that fails before its
// CUDA-graph ones (MB-20), or "".
func packingError(s *state) string {
	offline := s.b("dataset.enable_offline_packing")
	switch {
	case offline && s.b("dataset.enable_in_batch_packing"):
		return "enable_offline_packing and enable_in_batch_packing are mutually exclusive."
	case offline && s.b("dataset.offline_packing_specs.pad_cu_seqlens") && !s.padToMaxLength():
		return "offline_packing_specs.pad_cu_seqlens=True requires dataset pad_to_max_length=True."
	}
	return ""
}

// mbEPOverlapError returns the first message of MB's EP-overlap block
// (comm_overlap.py _get_model_comm_overlap_cfgs, run when the recipe's
// comm_overlap turns the overlap on) that the config trips, or "". The
// model fields are the recipe's own: MB checks them before it copies
// comm_overlap's values onto the model. The torch >= 2.6 assert is left
// out (not a recipe field).
func mbEPOverlapError(s *state) string {
	if v := s.v("comm_overlap.overlap_moe_expert_parallel_comm"); v.Null || !v.Bool {
		return ""
	}
	mtp, mtpNull := s.i("model.mtp_num_layers"), s.null("model.mtp_num_layers")
	// Two messages continue a line inside an f-string with a backslash: the
	// next line's indentation stays in the message.
	switch {
	case s.i("model.expert_model_parallel_size") <= 1:
		return "overlap_moe_expert_parallel_comm is only supported when expert_model_parallel_size > 1"
	case s.null("model.num_moe_experts"):
		return "'>' not supported between instances of 'NoneType' and 'int'" // None > 1
	case s.i("model.num_moe_experts") <= 1:
		return fmt.Sprintf("overlap_moe_expert_parallel_comm is only supported when num_moe_experts > 1, %20sbut got %d", "", s.i("model.num_moe_experts"))
	case !slices.Contains([]string{"alltoall", "flex"}, s.str("model.moe_token_dispatcher_type")):
		return fmt.Sprintf("overlap_moe_expert_parallel_comm is only supported when moe_token_dispatcher_type == 'alltoall' or 'flex',%22sbut got %s", "", s.str("model.moe_token_dispatcher_type"))
	case !s.b("model.bf16") && !s.b("model.fp16"):
		return "overlap_moe_expert_parallel_comm is only supported when using bf16 or fp16 models"
	case s.i("model.pipeline_model_parallel_size") > 1 && s.null("model.virtual_pipeline_model_parallel_size"):
		return "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified when pipeline_model_parallel_size > 1"
	case s.str("model.recompute_granularity") == "full" && !s.null("model.recompute_granularity"):
		return "disable full recomputation when enabling overlap_moe_expert_parallel_comm"
	case !s.null("model.recompute_method"):
		return "disable recomputation method when enabling overlap_moe_expert_parallel_comm"
	case !s.null("model.recompute_num_layers"):
		return "recompute_num_layers must be None when enabling overlap_moe_expert_parallel_comm"
	// `"moe" not in (recompute_modules or [])`: None is no module here,
	// before MCore reads it as ["core_attn"].
	case s.mb >= 6 && slices.Contains(names(s.v("model.recompute_modules")), "moe"):
		return "disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm"
	case s.b("model.moe_shared_expert_overlap"):
		return "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm"
	case s.mb <= 5 && !mtpNull && mtp != 1:
		return "MTP layernum only supports 1 when enabling overlap_moe_expert_parallel_comm."
	case s.mb >= 6 && !mtpNull && mtp > 1:
		return "MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm."
	}
	return ""
}

// unsupportedLocalOffload is TC-30's sorted(offload_modules - {...}).
func (s *state) unsupportedLocalOffload() []string {
	var out []string
	for _, m := range s.offloadSet() {
		if !slices.Contains(localOffloadable, m) {
			out = append(out, m)
		}
	}
	return out
}

func allIn(xs, set []string) bool {
	for _, x := range xs {
		if !slices.Contains(set, x) {
			return false
		}
	}
	return true
}
