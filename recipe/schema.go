package recipe

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"cgtune/presets"
)

// Type is the type of a recipe field as MB/MCore declare it.
type Type int

const (
	TBool      Type = iota
	TInt            // Python int
	TFloat          // Python float; integers are accepted
	TEnum           // one string of Allowed
	TList           // list of Allowed; a plain string is split on commas, as MCore does
	TIntOrList      // int or list of int (moe_layer_freq)
	TVersion        // dotted version such as 2.11 or 2.11.0
	TString         // free text (environment variables)
)

// Field is one known recipe setting.
type Field struct {
	Key      string
	Type     Type
	Nullable bool
	Allowed  []string // TEnum values or TList elements
	OnlyG3   []string // elements of Allowed that only G3's MCore knows
	Min      *int     // TInt lower bound, nil for none
	Max      *int     // TInt upper bound, nil for none
	// Probability bounds a TFloat to [0, 1): a dropout is the chance an
	// element is zeroed (torch.nn.Dropout's p); 1 would drop everything.
	Probability bool
	Gen         presets.Generation
	Doc         string
}

func minInt(n int) *int { return &n }

// maxInt is an upper bound; the sizes share presets' bounds, so a value
// --set accepts is one a preset could hold.
func maxInt(n int) *int { return &n }

// scopeNames are the G2 CudaGraphScope / G3 CudaGraphModule names a recipe
// can write into its scope field, plus the two special strings MCore
// accepts there ("full" and the deprecated "full_iteration").
// full_iteration_inference is left out: it only selects inference graphs.
var scopeNames = []string{"full", "full_iteration", "attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba"}

// allGens marks a field both generations have.
const allGens presets.Generation = 0

// schema is every field cgtune understands, in the order `cgtune check`
// documents them. Field names are MB's ConfigContainer paths (model.* is
// MCore's TransformerConfig, read from MLM transformer_config.py and
// model_parallel_config.py at the commits MB v0.4.0 and v0.6.0 pin).
var schema = []Field{
	// CUDA graphs (MLM megatron/core/transformer/transformer_config.py).
	{Key: "model.cuda_graph_impl", Type: TEnum, Allowed: []string{"none", "local", "transformer_engine", "full_iteration"},
		Doc: "G2's MCore has no full_iteration impl; TC-13 rejects it there, as MCore would"},
	{Key: "model.cuda_graph_scope", Type: TList, Nullable: true, Allowed: scopeNames,
		Doc: "G2: the scope list; G3: deprecated alias of cuda_graph_modules"},
	{Key: "model.cuda_graph_modules", Type: TList, Nullable: true, Allowed: scopeNames, Gen: presets.G3},
	{Key: "model.cuda_graph_warmup_steps", Type: TInt, Min: minInt(0), Max: maxInt(presets.MaxWarmup)},
	{Key: "model.enable_cuda_graph", Type: TBool, Doc: "deprecated: cuda_graph_impl=local"},
	{Key: "model.external_cuda_graph", Type: TBool, Doc: "deprecated: cuda_graph_impl=transformer_engine"},
	{Key: "model.use_te_rng_tracker", Type: TBool},
	{Key: "rng.te_rng_tracker", Type: TBool},
	{Key: "rerun_state_machine.check_for_nan_in_loss", Type: TBool},
	{Key: "ddp.check_for_nan_in_grad", Type: TBool},
	{Key: "optimizer.optimizer_cuda_graph", Type: TBool},
	{Key: "model.cpu_offloading", Type: TBool},
	{Key: "model.cpu_offloading_num_layers", Type: TInt, Min: minInt(0), Max: maxInt(presets.MaxLayers),
		Doc: "layers whose activations go to the host while cpu_offloading is on"},

	// Optimizer and gradient buffer: they move each rank's memory.
	{Key: "optimizer.use_precision_aware_optimizer", Type: TBool,
		Doc: "MB's perf harness turns it on for every bf16 Adam run whatever the recipe says (scripts/performance/run_script.py)"},
	{Key: "ddp.grad_reduce_in_fp32", Type: TBool,
		Doc: "MB copies mixed_precision.grad_reduce_in_fp32 onto it at start-up (mixed_precision.py update_config_with_precision_overrides): set that one"},
	{Key: "mixed_precision.grad_reduce_in_fp32", Type: TBool,
		Doc: "the gradient buffer's dtype: fp32 when true, bf16 otherwise (MB's perf recipes set false in _benchmark_common)"},

	// MoE.
	{Key: "model.num_moe_experts", Type: TInt, Nullable: true, Min: minInt(1), Max: maxInt(presets.MaxExperts)},
	{Key: "model.moe_layer_freq", Type: TIntOrList},
	{Key: "model.moe_expert_capacity_factor", Type: TFloat, Nullable: true},
	{Key: "model.moe_pad_expert_input_to_capacity", Type: TBool},
	{Key: "model.moe_token_dispatcher_type", Type: TEnum, Allowed: []string{"allgather", "alltoall", "flex"}},
	{Key: "model.moe_router_padding_for_fp8", Type: TBool, Doc: "deprecated alias: turns moe_router_padding_for_quantization on"},
	{Key: "model.moe_router_padding_for_quantization", Type: TBool,
		Doc: "pads the router's token counts for fp8/fp4 GEMMs (MLM transformer_config.py); MB's fp8 and fp4 MoE perf recipes set it (MB src/megatron/bridge/perf_recipes/qwen/b200/qwen3_moe.py)"},
	{Key: "model.moe_input_jitter_eps", Type: TFloat, Nullable: true},
	{Key: "model.moe_shared_expert_intermediate_size", Type: TInt, Nullable: true, Min: minInt(1), Max: maxInt(presets.MaxFFN)},
	{Key: "model.moe_shared_expert_overlap", Type: TBool},
	{Key: "model.moe_pad_experts_for_cuda_graph_inference", Type: TBool,
		Doc: "pads experts for inference decode graphs only; a training step never reads it (MLM megatron/core/inference/text_generation_controllers/text_generation_controller.py); MB's full-iteration MoE perf recipes set it (MB src/megatron/bridge/perf_recipes/qwen/common.py)"},
	{Key: "model.moe_flex_dispatcher_backend", Type: TEnum, Nullable: true, Allowed: []string{"deepep", "hybridep", "ncclep"}, OnlyG3: []string{"ncclep"},
		Doc: "the flex dispatcher's backend (MLM megatron/core/transformer/transformer_config.py; MB src/megatron/bridge/training/flex_dispatcher_backend.py); null makes MB fall back to alltoall"},
	{Key: "model.moe_expert_rank_capacity_factor", Type: TFloat, Nullable: true, Gen: presets.G3,
		Doc: "HybridEP/NCCL-EP static per-rank token budget: with the flex dispatcher the dispatch has static shapes and no host sync (MLM megatron/core/transformer/moe/token_dispatcher.py _HybridEPManager.setup_metadata)"},
	{Key: "model.moe_paged_stash", Type: TBool, Gen: presets.G3,
		Doc: "stashes the experts' activations in paged buffers sized by the per-rank budget (MLM transformer_config.py); MB's DeepSeek-V4 perf recipes set it"},
	{Key: "model.moe_paged_stash_buffer_size_factor_cuda", Type: TFloat, Gen: presets.G3,
		Doc: "the paged stash's device buffer: |factor| × the schedule's peak of the experts' tokens in flight, the average ones where positive (MLM megatron/core/transformer/moe/paged_stash.py allocate_stash_buffers)"},
	{Key: "model.moe_paged_stash_buffer_size_factor_cpu", Type: TFloat, Gen: presets.G3,
		Doc: "the same for the paged stash's pinned host buffer; 0 for none (MLM megatron/core/transformer/moe/paged_stash.py allocate_stash_buffers)"},
	{Key: "model.use_transformer_engine_op_fuser", Type: TBool,
		Doc: "TE's operation-fuser layer spec, which HybridEP's per-rank budget needs (TC-42); MB's _benchmark_common turns it off and some perf recipes back on (MB src/megatron/bridge/perf_recipes/_common.py, gpt_oss/common.py); G2 has it too, as a field of MB's own GPT provider (MB v0.4.0 src/megatron/bridge/models/gpt_provider.py)"},

	// Recompute and dropout.
	{Key: "model.recompute_granularity", Type: TEnum, Nullable: true, Allowed: []string{"full", "selective"}},
	{Key: "model.recompute_method", Type: TEnum, Nullable: true, Allowed: []string{"uniform", "block"}},
	{Key: "model.recompute_num_layers", Type: TInt, Nullable: true, Min: minInt(1), Max: maxInt(presets.MaxLayers)},
	{Key: "model.recompute_modules", Type: TList, Nullable: true,
		Allowed: []string{"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts", "gdn_norm_out", "mhc"},
		OnlyG3:  []string{"gdn_norm_out", "mhc"},
		Doc:     "mhc recomputes DeepSeek-V4's hyper-connections, in the Megatron-Core its recipes need (newer than the one MB HEAD pins; MB src/megatron/bridge/perf_recipes/deepseek/gb300/deepseek_v4.py)"},
	{Key: "model.attention_dropout", Type: TFloat, Probability: true},
	{Key: "model.hidden_dropout", Type: TFloat, Probability: true},

	// Fine-grained activation offloading.
	{Key: "model.fine_grained_activation_offloading", Type: TBool},
	{Key: "model.offload_modules", Type: TList, Nullable: true,
		Allowed: []string{"attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act", "fused_group_mlp"},
		OnlyG3:  []string{"fused_group_mlp"}},
	{Key: "model.fine_grained_offloading_max_inflight_offloads", Type: TInt, Nullable: true, Gen: presets.G3},
	{Key: "model.delay_offload_until_cuda_graph", Type: TBool},

	// EP overlap and delayed wgrad. MB's perf recipes and harness set the
	// comm_overlap.* copies, which MB later copies onto the model.
	{Key: "model.overlap_moe_expert_parallel_comm", Type: TBool},
	{Key: "model.delay_wgrad_compute", Type: TBool},
	{Key: "comm_overlap.overlap_moe_expert_parallel_comm", Type: TBool, Nullable: true},
	{Key: "comm_overlap.delay_wgrad_compute", Type: TBool, Nullable: true},
	{Key: "model.gradient_accumulation_fusion", Type: TBool},
	{Key: "model.add_bias_linear", Type: TBool},
	{Key: "model.add_qkv_bias", Type: TBool},
	{Key: "ddp.overlap_grad_reduce", Type: TBool},
	{Key: "ddp.overlap_param_gather", Type: TBool},
	{Key: "ddp.use_distributed_optimizer", Type: TBool},
	{Key: "optimizer.use_distributed_optimizer", Type: TBool},

	// Parallelism.
	{Key: "model.tensor_model_parallel_size", Type: TInt, Min: minInt(1), Max: maxInt(presets.MaxDegree)},
	{Key: "model.pipeline_model_parallel_size", Type: TInt, Min: minInt(1), Max: maxInt(presets.MaxDegree)},
	{Key: "model.virtual_pipeline_model_parallel_size", Type: TInt, Nullable: true, Min: minInt(1), Max: maxInt(presets.MaxVP)},
	{Key: "model.context_parallel_size", Type: TInt, Min: minInt(1), Max: maxInt(presets.MaxDegree)},
	{Key: "model.expert_model_parallel_size", Type: TInt, Min: minInt(1), Max: maxInt(presets.MaxDegree)},
	{Key: "model.expert_tensor_parallel_size", Type: TInt, Nullable: true, Min: minInt(1), Max: maxInt(presets.MaxDegree)},
	{Key: "model.sequence_parallel", Type: TBool},
	{Key: "model.mtp_num_layers", Type: TInt, Nullable: true, Min: minInt(0), Max: maxInt(presets.MaxLayers)},
	{Key: "model.pipeline_model_parallel_layout", Type: TString, Nullable: true,
		Doc: "the layers of each virtual pipeline stage (MLM megatron/core/transformer/pipeline_parallel_layer_layout.py); moves each rank's memory"},
	{Key: "model.account_for_embedding_in_pipeline_split", Type: TBool,
		Doc: "the even pipeline split counts the embedding as a layer (MLM transformer_block.py get_num_layers_to_build)"},
	{Key: "model.account_for_loss_in_pipeline_split", Type: TBool,
		Doc: "the even pipeline split counts the loss as a layer (MLM transformer_block.py get_num_layers_to_build)"},
	// The batch and sequence (MB src/megatron/bridge/training/config.py
	// TrainingConfig; MCore GPTDatasetConfig.sequence_length, which MB's
	// validate() asserts equals model.seq_length).
	{Key: "train.global_batch_size", Type: TInt, Min: minInt(1), Max: maxInt(presets.MaxGBS)},
	{Key: "train.micro_batch_size", Type: TInt, Min: minInt(1), Max: maxInt(presets.MaxMBS)},
	{Key: "model.seq_length", Type: TInt, Min: minInt(1), Max: maxInt(presets.MaxSeq)},
	{Key: "dataset.sequence_length", Type: TInt, Min: minInt(1), Max: maxInt(presets.MaxSeq)},
	{Key: "model.gtp_weight_remat_size", Type: TInt, Min: minInt(1), Max: maxInt(presets.MaxDegree), Gen: presets.G3},

	// Precision (MB mixed_precision.py recipes write these model fields).
	{Key: "model.bf16", Type: TBool},
	{Key: "model.fp16", Type: TBool},
	{Key: "model.fp8", Type: TEnum, Nullable: true, Allowed: []string{"e4m3", "hybrid"}},
	{Key: "model.fp8_recipe", Type: TEnum, Allowed: []string{"delayed", "tensorwise", "mxfp8", "blockwise", "custom"}},
	{Key: "model.fp4", Type: TEnum, Nullable: true, Allowed: []string{"e2m1"}},
	{Key: "model.fp4_recipe", Type: TEnum, Allowed: []string{"nvfp4", "custom"}},

	// Packing and Megatron-FSDP (MB-06..MB-10).
	{Key: "dataset.enable_offline_packing", Type: TBool},
	{Key: "dataset.enable_in_batch_packing", Type: TBool},
	{Key: "dataset.pad_to_max_length", Type: TBool},
	{Key: "dataset.dataset_kwargs.pad_to_max_length", Type: TBool,
		Doc: "the fine-tuning dataset's keyword argument, which MB's packing checks read besides dataset.pad_to_max_length (MB src/megatron/bridge/training/config.py ConfigContainer.validate)"},
	{Key: "dataset.offline_packing_specs.pad_cu_seqlens", Type: TBool},
	{Key: "dataset.packing_buffer_size", Type: TInt, Nullable: true, Min: minInt(1),
		Doc: "set on an Energon dataset: Energon native sequence packing"},
	{Key: "ddp.use_megatron_fsdp", Type: TBool},
	{Key: "ddp.megatron_fsdp_version", Type: TEnum, Allowed: []string{"1", "2"}},
	{Key: "ddp.megatron_fsdp_cuda_graph_mode", Type: TBool},

	{Key: "model.transformer_impl", Type: TEnum, Allowed: []string{"transformer_engine", "local"},
		Doc: "the layer spec (MLM transformer_config.py transformer_impl); MB builds Transformer Engine's where it is installed, local otherwise; moves activation memory"},
	{Key: "te_version", Type: TVersion, Doc: "Transformer Engine version; default: the one MB's uv.lock pins"},
}

// envPrefix is the section for environment variables (env.NCCL_GRAPH_REGISTER).
const envPrefix = "env."

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Schema returns the fields known in generation gen, in schema order.
func Schema(gen presets.Generation) []Field {
	var out []Field
	for _, f := range schema {
		if f.Gen == allGens || f.Gen == gen {
			out = append(out, f)
		}
	}
	return out
}

func lookupField(key string) (Field, bool) {
	for _, f := range schema {
		if f.Key == key {
			return f, true
		}
	}
	return Field{}, false
}

// allowed lists what a field accepts, for error messages.
func (f Field) allowed(gen presets.Generation) string {
	var s string
	switch f.Type {
	case TBool:
		s = "true, false"
	case TInt:
		s = "an integer"
		switch {
		case f.Min != nil && f.Max != nil:
			s += fmt.Sprintf(" from %d to %d", *f.Min, *f.Max)
		case f.Min != nil:
			s += fmt.Sprintf(" >= %d", *f.Min)
		case f.Max != nil:
			s += fmt.Sprintf(" <= %d", *f.Max)
		}
	case TFloat:
		s = "a number"
		if f.Probability {
			s = "a probability: a number from 0 up to but not including 1"
		}
	case TEnum:
		s = strings.Join(f.elems(gen), ", ")
	case TList:
		s = "a list of: " + strings.Join(f.elems(gen), ", ")
	case TIntOrList:
		s = "an integer, or a list of 0 and 1 per layer"
	case TVersion:
		s = "a version such as 2.11 or 2.11.0"
	case TString:
		s = "a string"
	}
	if f.Nullable {
		s += ", null"
	}
	return s
}

// inRange reports whether n is within the field's Min and Max.
func (f Field) inRange(n int) bool {
	return (f.Min == nil || n >= *f.Min) && (f.Max == nil || n <= *f.Max)
}

func (f Field) elems(gen presets.Generation) []string {
	if gen == presets.G3 || len(f.OnlyG3) == 0 {
		return f.Allowed
	}
	var out []string
	for _, a := range f.Allowed {
		if !slices.Contains(f.OnlyG3, a) {
			out = append(out, a)
		}
	}
	return out
}

// Value is one field's value. Which members are meaningful depends on the
// field's Type.
type Value struct {
	Null  bool
	Bool  bool
	Int   int
	Float float64
	Str   string   // TEnum, TVersion, TString; TList when Scalar
	List  []string // TList elements (a Scalar string split on commas)
	Ints  []int    // TIntOrList in list form
	// Scalar marks a TList written as a plain string ("full", "attn,mlp"):
	// MCore treats the string "full" differently from the list ["full"]
	// (TC-04), so the form is kept.
	Scalar bool
	// IsList marks a TIntOrList written as a list.
	IsList bool
}

func (v Value) clone() Value {
	v.List = slices.Clone(v.List)
	v.Ints = slices.Clone(v.Ints)
	return v
}

// Recipe is a recipe's settings as a flat map of dotted keys, seeded from a
// model preset and layout and then overridden by a YAML file, --set values
// and the perf-harness flags. The zero value is not usable; use New.
type Recipe struct {
	gen  presets.Generation
	mb   int // Megatron-Bridge minor version (0.N)
	vals map[string]Value
	// model and layout are what the recipe was seeded from: the capture
	// plan of its CUDA-graph setting is built on them (CheckWithCapture).
	model  presets.Model
	layout presets.Layout
	// overridden marks the keys an override (a file, --set) wrote, as
	// opposed to the recipe itself: the perf recipe's own changes come
	// before overrides and do not undo them (ApplyHarnessFlags).
	overridden map[string]bool
}

// teVersionByMB is the Transformer Engine version each MB release's uv.lock
// pins (MB tags v0.3.0 2.12.0, v0.4.0 2.14.0, v0.5.0 2.16.0, v0.6.0 2.17.1,
// HEAD/0.7 2.18.0): what a recipe run in MB's own container gets.
var teVersionByMB = map[int]string{3: "2.12.0", 4: "2.14.0", 5: "2.16.0", 6: "2.17.1", 7: "2.18.0"}

// parseMB returns the generation and the minor version of an MB version.
func parseMB(v string) (presets.Generation, int, error) {
	gen, err := presets.ParseMBridge(v)
	if err != nil {
		return 0, 0, err
	}
	minor, _ := strconv.Atoi(strings.TrimPrefix(strings.TrimPrefix(v, "v"), "0."))
	return gen, minor, nil
}

// New returns the recipe settings of model m on layout l as
// Megatron-Bridge version mbridge would start from: the model and layout
// give the architecture, parallelism and precision; everything else is the
// MCore/MB default a perf recipe leaves alone (defaults.go).
func New(m presets.Model, l presets.Layout, mbridge string) (*Recipe, error) {
	gen, mb, err := parseMB(mbridge)
	if err != nil {
		return nil, err
	}
	c := &Recipe{gen: gen, mb: mb, vals: make(map[string]Value, len(schema)+4), model: m, layout: l.Clone()}
	for _, table := range []map[string]Value{commonDefaults, generationDefaults[gen]} {
		for k, v := range table {
			c.vals[k] = v.clone()
		}
	}
	c.vals["te_version"] = Value{Str: teVersionByMB[mb]}
	c.setModel(m.Arch)
	c.setMoE(m.Arch, l)
	c.setRecompute(l)
	c.setOffload(l)
	c.setMemoryDefaults(l)
	if err := c.setExpertBudget(m.Name, l, mbridge); err != nil {
		return nil, err
	}
	c.setParallel(l)
	if err := c.setPrecision(l.Precision); err != nil {
		return nil, err
	}
	if err := c.checkDefaults(m.Name); err != nil {
		return nil, err
	}
	if err := c.applyLayoutSettings(m.Name, l, mbridge); err != nil {
		return nil, err
	}
	return c, nil
}

// checkDefaults checks every value New wrote like any override: the
// defaults come from preset data, and a bad preset fails here rather than
// inside a rule.
func (c *Recipe) checkDefaults(model string) error {
	for _, k := range slices.Sorted(maps.Keys(c.vals)) {
		f, ok := c.field(k)
		if !ok {
			return fmt.Errorf("internal: default for unknown field %s", k)
		}
		if err := checkValue(f, c.vals[k], c.gen); err != nil {
			return fmt.Errorf("model %s: field %s: %w", model, k, err)
		}
	}
	return nil
}

// applyLayoutSettings applies the recipe's further settings (the layout's
// Settings), as the recipe writes them before any user override.
func (c *Recipe) applyLayoutSettings(model string, l presets.Layout, mbridge string) error {
	for _, k := range slices.Sorted(maps.Keys(l.Settings)) {
		if f, ok := lookupField(k); ok && f.Gen != allGens && f.Gen != c.gen {
			return fmt.Errorf("model %s: the %s layout's recipe sets %s, which Megatron-Bridge %s (%s) does not have (allowed: --mbridge %s)",
				model, layoutName(l), k, mbridge, c.gen, strings.Join(mbridgeOf(f.Gen), ", "))
		}
		if err := c.applySet(k+"="+l.Settings[k], false); err != nil {
			return fmt.Errorf("model %s: the %s layout's settings: %s", model, layoutName(l), strings.TrimPrefix(err.Error(), "--set "))
		}
	}
	return nil
}

func layoutName(l presets.Layout) string {
	if l.GPU == "" {
		return "given"
	}
	return l.GPU
}

// mbridgeOf lists the Megatron-Bridge versions of generation gen.
func mbridgeOf(gen presets.Generation) []string {
	var out []string
	for _, v := range presets.MBridgeVersions {
		if g, _ := presets.ParseMBridge(v); g == gen {
			out = append(out, v)
		}
	}
	return out
}

// setPrecision writes the model fields MB's mixed-precision recipe of that
// name sets (MB src/megatron/bridge/training/mixed_precision.py).
func (c *Recipe) setPrecision(p string) error {
	set := func(fp8, fp8Recipe, fp4 string) {
		c.vals["model.bf16"] = Value{Bool: true}
		c.vals["model.fp16"] = Value{Bool: false}
		c.vals["model.fp8"] = Value{Null: fp8 == "", Str: fp8}
		c.vals["model.fp8_recipe"] = Value{Str: fp8Recipe}
		c.vals["model.fp4"] = Value{Null: fp4 == "", Str: fp4}
		c.vals["model.fp4_recipe"] = Value{Str: "nvfp4"}
	}
	switch p {
	case "", "bf16":
		set("", "delayed", "") // MCore's fp8_recipe default is "delayed"
	case "fp8ds":
		set("hybrid", "delayed", "")
	case "fp8cs":
		set("hybrid", "tensorwise", "")
	case "fp8sc":
		set("hybrid", "blockwise", "")
	case "fp8mx":
		set("e4m3", "mxfp8", "")
	case "nvfp4":
		set("", "delayed", "e2m1")
	default:
		return fmt.Errorf("unknown precision %q (allowed: %s)", p, strings.Join(presets.Precisions(), ", "))
	}
	return nil
}

// Generation is the MB API generation the config follows.
func (c *Recipe) Generation() presets.Generation { return c.gen }

// Clone returns an independent copy.
func (c *Recipe) Clone() *Recipe {
	// A value is replaced, never changed in place (setValue stores a
	// clone), so the copies may share their values' lists.
	return &Recipe{gen: c.gen, mb: c.mb, vals: maps.Clone(c.vals), model: c.model, layout: c.layout.Clone(), overridden: maps.Clone(c.overridden)}
}

// Get returns the value of key; env.NAME keys that were never set read as
// an empty string, like os.getenv(NAME, "").
func (c *Recipe) Get(key string) (Value, bool) {
	v, ok := c.vals[key]
	if !ok && strings.HasPrefix(key, envPrefix) && envNameRe.MatchString(key[len(envPrefix):]) {
		return Value{}, true
	}
	return v, ok
}

// Keys lists the keys that have a value, sorted.
func (c *Recipe) Keys() []string { return slices.Sorted(maps.Keys(c.vals)) }

// field returns the schema entry of key in this config's generation;
// env.NAME keys are free-text fields.
func (c *Recipe) field(key string) (Field, bool) {
	if strings.HasPrefix(key, envPrefix) {
		if !envNameRe.MatchString(key[len(envPrefix):]) {
			return Field{}, false
		}
		return Field{Key: key, Type: TString, Nullable: true}, true
	}
	f, ok := lookupField(key)
	if !ok || (f.Gen != allGens && f.Gen != c.gen) {
		return Field{}, false
	}
	return f, true
}

// unknownField is the error for a key this generation does not have.
func (c *Recipe) unknownField(key string) string {
	if f, ok := lookupField(key); ok && f.Gen != c.gen {
		if key == "model.cuda_graph_modules" {
			return fmt.Sprintf("unknown field %s (Megatron-Bridge 0.%d is %s: it has no such field; use model.cuda_graph_scope)", key, c.mb, c.gen)
		}
		return fmt.Sprintf("unknown field %s (Megatron-Bridge 0.%d is %s: it has no such field)", key, c.mb, c.gen)
	}
	if strings.HasPrefix(key, envPrefix) {
		return fmt.Sprintf("bad environment variable name in %s", printable(key))
	}
	return fmt.Sprintf("unknown field %s", printable(key))
}

// printable is s as it goes into a one-line message: as written, or
// quoted when it holds a newline or another character a terminal would
// not show as itself.
func printable(s string) string {
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		return q
	}
	return s
}

// setValue stores v under key after checking it against the schema.
func (c *Recipe) setValue(key string, v Value) error {
	f, ok := c.field(key)
	if !ok {
		return fmt.Errorf("%s", c.unknownField(key))
	}
	if err := checkValue(f, v, c.gen); err != nil {
		return fmt.Errorf("field %s: %w", key, err)
	}
	if f.Type == TString && v.Null {
		delete(c.vals, key) // unset variable
		return nil
	}
	c.vals[key] = v.clone()
	return nil
}

// checkValue verifies a typed value against a field, for defaults and for
// values set from code.
func checkValue(f Field, v Value, gen presets.Generation) error {
	if v.Null {
		if !f.Nullable {
			return fmt.Errorf("bad value null (allowed: %s)", f.allowed(gen))
		}
		return nil
	}
	bad := func(s string) error { return fmt.Errorf("bad value %q (allowed: %s)", s, f.allowed(gen)) }
	switch f.Type {
	case TInt:
		if !f.inRange(v.Int) {
			return bad(strconv.Itoa(v.Int))
		}
	case TEnum:
		if !slices.Contains(f.elems(gen), v.Str) {
			return bad(v.Str)
		}
	case TList:
		for _, e := range v.List {
			if !slices.Contains(f.elems(gen), e) {
				return bad(e)
			}
		}
	case TIntOrList:
		if v.IsList {
			for _, n := range v.Ints {
				if n != 0 && n != 1 {
					return bad(strconv.Itoa(n))
				}
			}
		} else if v.Int < 1 {
			return bad(strconv.Itoa(v.Int))
		}
	case TVersion:
		if !versionRe.MatchString(v.Str) {
			return bad(v.Str)
		}
	case TFloat:
		if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) || (f.Probability && !(v.Float >= 0 && v.Float < 1)) {
			return bad(strconv.FormatFloat(v.Float, 'g', -1, 64))
		}
	}
	return nil
}

var versionRe = regexp.MustCompile(`^\d+\.\d+(\.\d+)?$`)

// raw is an untyped value as YAML or a Hydra override spells it, before it
// is checked against a field.
type raw struct {
	null   bool
	tag    string // !!bool, !!int, !!float, !!str
	text   string
	isList bool
	elems  []raw
	line   int
}

// show renders a raw value for "bad value ..." messages.
func (r raw) show() string {
	if r.null {
		return "null"
	}
	if !r.isList {
		return r.text
	}
	parts := make([]string, len(r.elems))
	for i, e := range r.elems {
		parts[i] = e.show()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// badValue is a coercion failure: the offending text (a whole value or one
// list element) and the line it is on.
type badValue struct {
	text string
	line int
}

// coerce converts r to a value of field f. A list field also takes a
// comma-separated string, which MCore splits (transformer_config.py).
func coerce(f Field, r raw, gen presets.Generation) (Value, *badValue) {
	whole := &badValue{text: r.show(), line: r.line}
	if r.null {
		if f.Nullable {
			return Value{Null: true}, nil
		}
		return Value{}, whole
	}
	if r.isList && f.Type != TList && f.Type != TIntOrList {
		return Value{}, whole
	}
	switch f.Type {
	case TBool:
		if r.tag != "!!bool" {
			return Value{}, whole
		}
		return Value{Bool: strings.EqualFold(r.text, "true")}, nil
	case TInt:
		n, err := strconv.Atoi(r.text)
		if r.tag != "!!int" || err != nil || !f.inRange(n) {
			return Value{}, whole
		}
		return Value{Int: n}, nil
	case TFloat:
		x, err := strconv.ParseFloat(r.text, 64)
		if (r.tag != "!!int" && r.tag != "!!float") || err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return Value{}, whole
		}
		return Value{Float: x}, nil
	case TEnum:
		if !slices.Contains(f.elems(gen), r.text) {
			return Value{}, whole
		}
		return Value{Str: r.text}, nil
	case TVersion:
		if !versionRe.MatchString(r.text) {
			return Value{}, whole
		}
		return Value{Str: r.text}, nil
	case TString:
		return Value{Str: r.text}, nil
	case TIntOrList:
		return coerceIntOrList(r, whole)
	case TList:
		return coerceList(r, f.elems(gen), whole)
	}
	return Value{}, whole
}

// coerceIntOrList converts r to a TIntOrList value: a count (1 or more),
// or a list of 0s and 1s, one per layer (moe_layer_freq).
func coerceIntOrList(r raw, whole *badValue) (Value, *badValue) {
	if !r.isList {
		n, err := strconv.Atoi(r.text)
		if r.tag != "!!int" || err != nil || n < 1 {
			return Value{}, whole
		}
		return Value{Int: n}, nil
	}
	ints := make([]int, 0, len(r.elems))
	for _, e := range r.elems {
		n, err := strconv.Atoi(e.text)
		if e.isList || e.tag != "!!int" || err != nil || (n != 0 && n != 1) {
			return Value{}, &badValue{text: e.show(), line: e.line}
		}
		ints = append(ints, n)
	}
	return Value{IsList: true, Ints: ints}, nil
}

// coerceList converts r to a TList value of the allowed elems: a list, or
// a comma-separated string kept as written (Scalar).
func coerceList(r raw, elems []string, whole *badValue) (Value, *badValue) {
	if !r.isList {
		if r.tag != "!!str" {
			return Value{}, whole
		}
		v := Value{Scalar: true, Str: r.text, List: splitScope(r.text)}
		for _, e := range v.List {
			if !slices.Contains(elems, e) {
				return Value{}, &badValue{text: e, line: r.line}
			}
		}
		return v, nil
	}
	list := make([]string, 0, len(r.elems))
	for _, e := range r.elems {
		if e.isList || e.null || !slices.Contains(elems, e.text) {
			return Value{}, &badValue{text: e.show(), line: e.line}
		}
		list = append(list, e.text)
	}
	return Value{List: list}, nil
}

// splitScope splits a comma string the way MCore does ("" is no scope).
func splitScope(s string) []string {
	if s == "" {
		return []string{}
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// --- Hydra-style --set ---------------------------------------------------

var (
	hydraIntRe   = regexp.MustCompile(`^[+-]?\d+$`)
	hydraFloatRe = regexp.MustCompile(`^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$`)
)

// parseHydraScalar types one token as Hydra's override grammar would.
func parseHydraScalar(tok string) raw {
	tok = strings.TrimSpace(tok)
	if len(tok) >= 2 && (tok[0] == '\'' || tok[0] == '"') && tok[len(tok)-1] == tok[0] {
		return raw{tag: "!!str", text: tok[1 : len(tok)-1]}
	}
	switch {
	case strings.EqualFold(tok, "null"):
		return raw{null: true}
	case strings.EqualFold(tok, "true"), strings.EqualFold(tok, "false"):
		return raw{tag: "!!bool", text: strings.ToLower(tok)}
	case hydraIntRe.MatchString(tok):
		return raw{tag: "!!int", text: strings.TrimPrefix(tok, "+")}
	case hydraFloatRe.MatchString(tok):
		return raw{tag: "!!float", text: tok}
	}
	return raw{tag: "!!str", text: tok}
}

// parseHydraValue parses the right-hand side of key=value: a scalar, a
// bracketed list, or (for list fields) a bare comma list.
func parseHydraValue(s string, listField bool) raw {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		inner := strings.TrimSpace(s[1 : len(s)-1])
		r := raw{isList: true, elems: []raw{}}
		if inner != "" {
			for _, p := range strings.Split(inner, ",") {
				r.elems = append(r.elems, parseHydraScalar(p))
			}
		}
		return r
	}
	if listField && strings.Contains(s, ",") {
		r := raw{isList: true}
		for _, p := range strings.Split(s, ",") {
			r.elems = append(r.elems, parseHydraScalar(p))
		}
		return r
	}
	return parseHydraScalar(s)
}

// maxEcho is the longest --set argument an error repeats whole.
const maxEcho = 256

// clipEcho is s cut to maxEcho bytes (at a rune boundary), marked.
func clipEcho(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:runeCut(s, maxEcho)], len(s))
}

// quoteEcho quotes a bad value for an error, cut short when it is long.
func quoteEcho(s string) string {
	if len(s) <= maxEcho {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:runeCut(s, maxEcho)], len(s))
}

// runeCut is the largest n <= max that cuts s between runes.
func runeCut(s string, max int) int {
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return max
}

// ApplySet applies one `--set key=value` override. Errors name the flag:
// `--set model.xyz=...: ...`.
//
// A user's override of a model field the recipe's comm_overlap overwrites
// when MB starts is refused, naming the key that wins.
func (c *Recipe) ApplySet(arg string) error { return c.applySet(arg, true) }

// applySet is ApplySet; user is false for the recipe's own settings.
func (c *Recipe) applySet(arg string, user bool) error {
	flag := printable(arg)
	key, val, ok := strings.Cut(arg, "=")
	key = strings.TrimSpace(key)
	if len(arg) > maxEcho && ok {
		// A value too long to read is named by its size, and the bad
		// part of it quoted once, cut short: a message stays one line.
		flag = fmt.Sprintf("%s=<a value of %d bytes>", printable(clipEcho(key)), len(val))
	}
	if !ok || key == "" {
		return fmt.Errorf("--set %s: expected KEY=VALUE", flag)
	}
	f, known := c.field(key)
	if !known {
		return fmt.Errorf("--set %s: %s", flag, c.unknownField(key))
	}
	r := parseHydraValue(val, f.Type == TList || f.Type == TIntOrList)
	v, bad := coerce(f, r, c.gen)
	if bad != nil {
		return fmt.Errorf("--set %s: field %s: bad value %s (allowed: %s)", flag, key, quoteEcho(bad.text), f.allowed(c.gen))
	}
	if user {
		if err := c.overriddenByCommOverlap(key, strings.TrimSpace(val)); err != nil {
			return fmt.Errorf("--set %s: %w", flag, err)
		}
	}
	set := c.setValue
	if user {
		set = c.override
	}
	if err := set(key, v); err != nil {
		return fmt.Errorf("--set %s: %w", flag, err)
	}
	return nil
}

// override is setValue for an override's value: the key is marked as set
// by the user.
func (c *Recipe) override(key string, v Value) error {
	if err := c.setValue(key, v); err != nil {
		return err
	}
	if c.overridden == nil {
		c.overridden = map[string]bool{}
	}
	c.overridden[key] = true
	return nil
}
