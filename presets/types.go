// Package presets holds the data cgtune works from and its vocabulary:
// built-in model presets (Model, Arch, Layout), team presets shared as
// YAML files, candidates (Candidate, Space) and the Megatron-Bridge
// generations.
package presets

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Model is one built-in or inline model preset: an architecture plus the
// default parallel layouts Megatron-Bridge's perf recipes use per GPU.
type Model struct {
	Name    string            `yaml:"name" json:"name"`
	Display string            `yaml:"display" json:"display"`
	Family  string            `yaml:"family" json:"family"`
	Arch    Arch              `yaml:"arch" json:"arch"`
	Layouts map[string]Layout `yaml:"layouts" json:"layouts"` // key: GPU name (h100, b200, gb200, ...)
	Source  string            `yaml:"source,omitempty" json:"source,omitempty"`
}

// Arch is the shape of the network, enough to build the op trace of one
// training step and to evaluate the rules that depend on the model.
type Arch struct {
	Layers        int    `yaml:"layers" json:"layers"`
	Hidden        int    `yaml:"hidden" json:"hidden"`
	FFNHidden     int    `yaml:"ffn_hidden" json:"ffn_hidden"`
	Heads         int    `yaml:"heads" json:"heads"`
	KVGroups      int    `yaml:"kv_groups" json:"kv_groups"` // 0 when attention is MLA
	HeadDim       int    `yaml:"head_dim" json:"head_dim"`
	Vocab         int    `yaml:"vocab" json:"vocab"`
	AddBiasLinear bool   `yaml:"add_bias_linear,omitempty" json:"add_bias_linear,omitempty"`
	AddQKVBias    bool   `yaml:"add_qkv_bias,omitempty" json:"add_qkv_bias,omitempty"`
	Activation    string `yaml:"activation,omitempty" json:"activation,omitempty"` // swiglu (default), squared_relu, ...
	MoE           *MoE   `yaml:"moe,omitempty" json:"moe,omitempty"`
	MLA           *MLA   `yaml:"mla,omitempty" json:"mla,omitempty"`
	Mamba         *Mamba `yaml:"mamba,omitempty" json:"mamba,omitempty"`
	// HybridPattern is Megatron's hybrid_override_pattern, one character per
	// layer: M Mamba, * attention, - dense MLP, E MoE. Empty for a plain
	// transformer, where every layer is attention followed by MLP or MoE.
	HybridPattern string `yaml:"hybrid_pattern,omitempty" json:"hybrid_pattern,omitempty"`
	// MTPHybridOverridePattern is MCore's mtp_hybrid_override_pattern: the
	// layers of each multi-token-prediction block of a hybrid model, in
	// HybridPattern's symbols ("*E" for Nemotron 3 Super: attention, then
	// MoE). Empty for a transformer's MTP block or no MTP.
	MTPHybridOverridePattern string `yaml:"mtp_hybrid_override_pattern,omitempty" json:"mtp_hybrid_override_pattern,omitempty"`
	// ExperimentalAttentionVariant is MCore's experimental_attention_variant
	// (MLM megatron/core/transformer/transformer_config.py): gated_delta_net
	// (Qwen3-Next: LinearAttention layers between softmax ones), dsa, or MB's
	// dsv4_hybrid (DeepSeek-V4: CompressedAttention in every layer). Empty
	// for softmax attention in every attention layer.
	ExperimentalAttentionVariant string `yaml:"experimental_attention_variant,omitempty" json:"experimental_attention_variant,omitempty"`
	// AttentionOutputGate is MCore's attention_output_gate: the attention
	// output is multiplied by a sigmoid gate projected from the layer input
	// (Qwen3-Next's gated attention; the query projection doubles).
	AttentionOutputGate bool                 `yaml:"attention_output_gate,omitempty" json:"attention_output_gate,omitempty"`
	LinearAttention     *LinearAttention     `yaml:"linear_attention,omitempty" json:"linear_attention,omitempty"`
	CompressedAttention *CompressedAttention `yaml:"compressed_attention,omitempty" json:"compressed_attention,omitempty"`
	HyperConnections    *HyperConnections    `yaml:"hyper_connections,omitempty" json:"hyper_connections,omitempty"`
}

// LinearAttention describes the gated delta-net layers of a model with
// experimental_attention_variant gated_delta_net (Qwen3-Next): linear
// attention with a causal convolution in place of softmax attention in
// most layers. Field names and meanings are MCore's (MLM
// megatron/core/transformer/transformer_config.py, "linear attention";
// MB src/megatron/bridge/models/qwen/qwen3_next_bridge.py sets them from
// the HF config).
type LinearAttention struct {
	// LinearAttentionFreq is linear_attention_freq as an integer N: of
	// every N layers, N-1 are linear attention and the N-th softmax
	// attention. 0 when LinearAttentionPattern gives the layers instead.
	LinearAttentionFreq int `yaml:"linear_attention_freq,omitempty" json:"linear_attention_freq,omitempty"`
	// LinearAttentionPattern is linear_attention_freq as a list, one entry
	// per layer: 1 linear attention, 0 softmax attention.
	LinearAttentionPattern []int `yaml:"linear_attention_pattern,omitempty" json:"linear_attention_pattern,omitempty"`
	LinearConvKernelDim    int   `yaml:"linear_conv_kernel_dim" json:"linear_conv_kernel_dim"`
	LinearKeyHeadDim       int   `yaml:"linear_key_head_dim" json:"linear_key_head_dim"`     // query and key head dim
	LinearValueHeadDim     int   `yaml:"linear_value_head_dim" json:"linear_value_head_dim"` // value and gate head dim
	LinearNumKeyHeads      int   `yaml:"linear_num_key_heads" json:"linear_num_key_heads"`
	LinearNumValueHeads    int   `yaml:"linear_num_value_heads" json:"linear_num_value_heads"`
}

// CompressedAttention is DeepSeek-V4's per-layer hybrid attention (MB
// src/megatron/bridge/models/deepseek/deepseek_v4_bridge.py; the fields
// need an MCore newer than the one MB HEAD pins): every layer attends over
// a sliding window, and layers with a compression ratio also over the
// sequence compressed by that ratio, selected by a DSA indexer at ratio 4.
type CompressedAttention struct {
	// CSACompressRatios is csa_compress_ratios, one entry per decoder layer
	// then per MTP layer: 0 sliding window only, 4 compressed sparse
	// attention (indexer top-k), 128 heavily compressed attention.
	CSACompressRatios []int `yaml:"csa_compress_ratios" json:"csa_compress_ratios"`
	CSAWindowSize     int   `yaml:"csa_window_size" json:"csa_window_size"` // sliding window, tokens
	DSAIndexerNHeads  int   `yaml:"dsa_indexer_n_heads" json:"dsa_indexer_n_heads"`
	DSAIndexerHeadDim int   `yaml:"dsa_indexer_head_dim" json:"dsa_indexer_head_dim"`
	DSAIndexerTopK    int   `yaml:"dsa_indexer_topk" json:"dsa_indexer_topk"` // compressed entries each query keeps
}

// HyperConnections are DeepSeek-V4's manifold hyper-connections
// (enable_hyper_connections, MB src/megatron/bridge/models/deepseek/
// deepseek_v4_bridge.py): the residual stream is NumResidualStreams wide
// and each layer mixes the streams through a Sinkhorn-normalised matrix.
type HyperConnections struct {
	NumResidualStreams    int `yaml:"num_residual_streams" json:"num_residual_streams"`
	MHCSinkhornIterations int `yaml:"mhc_sinkhorn_iterations" json:"mhc_sinkhorn_iterations"`
}

// MoE describes the mixture-of-experts part of a model.
type MoE struct {
	Experts         int `yaml:"experts" json:"experts"`
	TopK            int `yaml:"top_k" json:"top_k"`
	FFNHidden       int `yaml:"ffn_hidden" json:"ffn_hidden"`
	SharedExpertFFN int `yaml:"shared_expert_ffn,omitempty" json:"shared_expert_ffn,omitempty"`
	// FirstDenseLayers is the number of leading dense layers
	// (moe_layer_freq = [0]*n + [1]*rest); 0 means every layer is MoE.
	FirstDenseLayers int    `yaml:"first_dense_layers,omitempty" json:"first_dense_layers,omitempty"`
	Router           string `yaml:"router,omitempty" json:"router,omitempty"` // softmax (default), sigmoid or sqrtsoftplus
	// MoELatentSize is MCore's moe_latent_size (Nemotron 3 Super and Ultra's
	// latent MoE): tokens are projected to this width before the routed
	// experts and back after them; 0 for none.
	MoELatentSize int `yaml:"moe_latent_size,omitempty" json:"moe_latent_size,omitempty"`
	// MoESharedExpertGate is MCore's moe_shared_expert_gate: the shared
	// expert's output is scaled by a sigmoid gate (Qwen3-Next).
	MoESharedExpertGate bool `yaml:"moe_shared_expert_gate,omitempty" json:"moe_shared_expert_gate,omitempty"`
	// MoENHashLayers is moe_n_hash_layers (MB's DeepSeek-V4 bridge): the
	// first that many MoE layers route by a fixed token-id hash instead of
	// the learned router.
	MoENHashLayers int `yaml:"moe_n_hash_layers,omitempty" json:"moe_n_hash_layers,omitempty"`
}

// MLA is DeepSeek's multi-latent attention.
type MLA struct {
	QLoraRank  int `yaml:"q_lora_rank" json:"q_lora_rank"`
	KVLoraRank int `yaml:"kv_lora_rank" json:"kv_lora_rank"`
	QKHeadDim  int `yaml:"qk_head_dim" json:"qk_head_dim"`
	QKRopeDim  int `yaml:"qk_rope_dim" json:"qk_rope_dim"`
	VHeadDim   int `yaml:"v_head_dim" json:"v_head_dim"`
	// OGroups and OLoraRank are DeepSeek-V4's grouped low-rank output
	// projection (o_groups, o_lora_rank in MB's DeepSeek-V4 bridge): the
	// heads' outputs are projected in OGroups groups to OLoraRank each,
	// then to hidden. 0 for MCore's plain output projection.
	OGroups   int `yaml:"o_groups,omitempty" json:"o_groups,omitempty"`
	OLoraRank int `yaml:"o_lora_rank,omitempty" json:"o_lora_rank,omitempty"`
}

// Mamba describes the Mamba-2 mixer of a hybrid model.
type Mamba struct {
	StateDim int `yaml:"state_dim" json:"state_dim"`
	Heads    int `yaml:"heads" json:"heads"`
	HeadDim  int `yaml:"head_dim" json:"head_dim"`
	Groups   int `yaml:"groups" json:"groups"`
}

// Layout is a parallel layout: how the job is split over GPUs and how big a
// step is. Zero TP/PP/CP/EP/ETP/VP mean "not set" and read as 1 (VP: none).
type Layout struct {
	GPU              string   `yaml:"gpu,omitempty" json:"gpu,omitempty"`
	NumGPUs          int      `yaml:"num_gpus" json:"num_gpus"`
	Precision        string   `yaml:"precision" json:"precision"` // bf16, fp8cs, fp8mx, nvfp4, ...
	TP               int      `yaml:"tp,omitempty" json:"tp"`
	PP               int      `yaml:"pp,omitempty" json:"pp"`
	VP               int      `yaml:"vp,omitempty" json:"vp,omitempty"`
	CP               int      `yaml:"cp,omitempty" json:"cp"`
	EP               int      `yaml:"ep,omitempty" json:"ep"`
	ETP              int      `yaml:"etp,omitempty" json:"etp,omitempty"`
	GBS              int      `yaml:"gbs" json:"gbs"`
	MBS              int      `yaml:"mbs" json:"mbs"`
	Seq              int      `yaml:"seq" json:"seq"`
	Dispatcher       string   `yaml:"dispatcher,omitempty" json:"dispatcher,omitempty"` // alltoall, allgather, flex
	SequenceParallel bool     `yaml:"sequence_parallel,omitempty" json:"sequence_parallel,omitempty"`
	RecomputeModules []string `yaml:"recompute_modules,omitempty" json:"recompute_modules,omitempty"`
	// RecomputeGranularity is MCore's recompute_granularity: "" (none, or
	// selective when RecomputeModules are set), "selective" or "full".
	RecomputeGranularity string `yaml:"recompute_granularity,omitempty" json:"recompute_granularity,omitempty"`
	// RecomputeLayers is recompute_num_layers of a full recompute: with the
	// uniform method each group of that many layers keeps only its input,
	// with the block method the first that many layers of each model chunk
	// do.
	RecomputeLayers int `yaml:"recompute_layers,omitempty" json:"recompute_layers,omitempty"`
	// RecomputeMethod is MCore's recompute_method of a full recompute: ""
	// or "uniform", or "block" (what the perf harness's -rl sets,
	// scripts/performance/utils/overrides.py _set_recompute_overrides).
	RecomputeMethod string `yaml:"recompute_method,omitempty" json:"recompute_method,omitempty"`
	// CUDAGraph is the CUDA-graph setting the recipe ships, in the perf
	// harness's vocabulary (a full-iteration graph is impl local with scope
	// full_iteration); nil when the recipe leaves the library default, none.
	CUDAGraph *Candidate `yaml:"cuda_graph,omitempty" json:"cuda_graph,omitempty"`
	// The settings below move one rank's memory; their zero values are what
	// MB's perf recipes set unless they say otherwise.
	//
	// FSDP is ddp.use_megatron_fsdp with optim_grads_params sharding:
	// parameters, gradients and optimizer state sharded over data parallel.
	FSDP bool `yaml:"fsdp,omitempty" json:"fsdp,omitempty"`
	// CPUOffloadLayers is model.cpu_offloading_num_layers with
	// cpu_offloading on and cpu_offloading_weights off: that many layers'
	// activations live in host memory between forward and backward.
	CPUOffloadLayers int `yaml:"cpu_offload_layers,omitempty" json:"cpu_offload_layers,omitempty"`
	// OffloadModules are model.offload_modules of fine-grained activation
	// offloading (fine_grained_activation_offloading on).
	OffloadModules []string `yaml:"offload_modules,omitempty" json:"offload_modules,omitempty"`
	// Optimizer is optimizer.optimizer where it is not Adam: "dist_muon",
	// Megatron-Core's layer-wise distributed Muon (Kimi K2's recipes), or
	// "" for Adam.
	Optimizer string `yaml:"optimizer,omitempty" json:"optimizer,omitempty"`
	// OptimizerStates is the dtype of Adam's exp_avg and exp_avg_sq: "" for
	// fp32, "bf16" for the precision-aware optimizer's bf16 states.
	OptimizerStates string `yaml:"optimizer_states,omitempty" json:"optimizer_states,omitempty"`
	// NoDistributedOptimizer: the recipe turns the distributed optimizer off
	// (every MB perf recipe leaves it on).
	NoDistributedOptimizer bool `yaml:"no_distributed_optimizer,omitempty" json:"no_distributed_optimizer,omitempty"`
	// GradReduceInFP32 is ddp.grad_reduce_in_fp32 (MB's perf recipes set it
	// False in _benchmark_common; some recipes turn it back on).
	GradReduceInFP32 bool `yaml:"grad_reduce_in_fp32,omitempty" json:"grad_reduce_in_fp32,omitempty"`
	// MTPLayers is mtp_num_layers: multi-token-prediction layers on the
	// last pipeline stage (or where PipelineLayout puts them).
	MTPLayers int `yaml:"mtp_layers,omitempty" json:"mtp_layers,omitempty"`
	// MTPUseRepeatedLayer is mtp_use_repeated_layer: one MTP block's layers
	// are built and applied MTPLayers times (MLM megatron/core/transformer/
	// multi_token_prediction.py MultiTokenPredictionBlock; Nemotron 3
	// Super, Ultra and 3.5 Lightning's recipes set it), so its parameters
	// are held once.
	MTPUseRepeatedLayer bool `yaml:"mtp_use_repeated_layer,omitempty" json:"mtp_use_repeated_layer,omitempty"`
	// PipelineLayout is MCore's pipeline_model_parallel_layout as the
	// recipe writes it ("Et|(tt|)*30mL": E embedding, t decoder layer, m
	// MTP layer, L loss, | between virtual stages; PipelineParallelLayerLayout
	// in megatron/core/transformer/pipeline_parallel_layer_layout.py).
	// Empty: MCore's even split.
	PipelineLayout string `yaml:"pipeline_layout,omitempty" json:"pipeline_layout,omitempty"`
	// AccountForEmbedding and AccountForLoss are
	// account_for_embedding_in_pipeline_split and
	// account_for_loss_in_pipeline_split: the even split counts the
	// embedding (the loss) as a layer, so the first (last) virtual stage
	// builds one decoder layer fewer (get_num_layers_to_build in
	// megatron/core/transformer/transformer_block.py).
	AccountForEmbedding bool `yaml:"account_for_embedding,omitempty" json:"account_for_embedding,omitempty"`
	AccountForLoss      bool `yaml:"account_for_loss,omitempty" json:"account_for_loss,omitempty"`
	// PrecisionAwareOptimizer is the recipe's own
	// optimizer.use_precision_aware_optimizer. Megatron-Bridge's perf
	// harness turns it on for every bf16 Adam run whatever the recipe says
	// (scripts/performance/run_script.py); OutsideHarness says the job
	// does not run through it.
	PrecisionAwareOptimizer bool `yaml:"precision_aware_optimizer,omitempty" json:"precision_aware_optimizer,omitempty"`
	// OutsideHarness: the job runs the recipe without Megatron-Bridge's
	// perf harness (scripts/performance/run_script.py), so only the
	// recipe's own settings apply. The built-in layouts are run through it.
	OutsideHarness bool `yaml:"outside_harness,omitempty" json:"outside_harness,omitempty"`
	// RankCapacityFactor is model.moe_expert_rank_capacity_factor: the
	// flex dispatcher's static per-rank budget, which gives each rank's
	// experts (tokens per rank)·top-k·factor rows whatever the routing
	// (MLM megatron/core/transformer/moe/token_dispatcher.py
	// _HybridEPManager.setup_metadata); 0 when unset (None).
	RankCapacityFactor float64 `yaml:"rank_capacity_factor,omitempty" json:"rank_capacity_factor,omitempty"`
	// PagedStash is model.moe_paged_stash with its buffer factors; nil
	// when off.
	PagedStash *PagedStash `yaml:"paged_stash,omitempty" json:"paged_stash,omitempty"`
	// Settings are further recipe fields the recipe sets that cgtune's rules
	// read, as dotted Megatron-Bridge keys and --set values
	// (model.moe_pad_experts_for_cuda_graph_inference: "true", say). They
	// seed the recipe before any --set.
	Settings map[string]string `yaml:"settings,omitempty" json:"settings,omitempty"`
	// Source names the MB recipe (file and function) the layout was taken
	// from, and any deviation from it.
	Source string `yaml:"source,omitempty" json:"source,omitempty"`
}

// PagedStash is Megatron-Core's paged stash of the routed experts' saved
// tensors (model.moe_paged_stash, MLM megatron/core/transformer/moe/
// paged_stash.py): the real tokens of each MoE layer's saved tensors are
// copied into one persistent device buffer per dtype and width, sized
// once from the first training iteration.
type PagedStash struct {
	// CUDAFactor is moe_paged_stash_buffer_size_factor_cuda: the device
	// buffer is |factor| times the schedule's peak of the tokens in
	// flight (positive: the average tokens, negative: the tokens routed).
	CUDAFactor float64 `yaml:"cuda_factor" json:"cuda_factor"`
	// HostFactor is moe_paged_stash_buffer_size_factor_cpu: the same for
	// a pinned host buffer that takes what the device buffer cannot; 0
	// for none.
	HostFactor float64 `yaml:"host_factor" json:"host_factor"`
}

// Megatron-Core's defaults of the paged stash's buffer factors
// (TransformerConfig, megatron/core/transformer/transformer_config.py).
const (
	DefaultPagedStashCUDAFactor = 1.10
	DefaultPagedStashHostFactor = 0.0
)

func atLeast1(v int) int {
	if v < 1 {
		return 1
	}
	return v
}

// Clone returns a deep copy of l: its slices, map and graph setting are the
// copy's own.
func (l Layout) Clone() Layout {
	l.RecomputeModules = slices.Clone(l.RecomputeModules)
	l.OffloadModules = slices.Clone(l.OffloadModules)
	l.Settings = maps.Clone(l.Settings)
	if l.PagedStash != nil {
		s := *l.PagedStash
		l.PagedStash = &s
	}
	if l.CUDAGraph != nil {
		g := *l.CUDAGraph
		g.Scopes = slices.Clone(g.Scopes)
		l.CUDAGraph = &g
	}
	return l
}

// FullRecompute reports whether the recipe recomputes whole layers.
func (l Layout) FullRecompute() bool { return l.RecomputeGranularity == "full" }

// PrecisionAware reports whether the job's Adam is the precision-aware
// optimizer: the recipe turns it on, or the perf harness does for a bf16
// run with Adam (run_script.py: compute_dtype "bf16" and optimizer
// "adam").
func (l Layout) PrecisionAware() bool {
	bf16Run := l.Precision == "" || l.Precision == "bf16"
	return l.PrecisionAwareOptimizer || (!l.OutsideHarness && bf16Run && !l.LayerWiseMuon())
}

// LayerWiseMuon reports whether the job trains with Megatron-Core's
// layer-wise distributed Muon.
func (l Layout) LayerWiseMuon() bool { return l.Optimizer == OptimizerDistMuon }

// OptimizerDistMuon is Layout.Optimizer for Megatron-Core's layer-wise
// distributed Muon (optimizer "dist_muon", or "muon" with
// use_layer_wise_distributed_optimizer).
const OptimizerDistMuon = "dist_muon"

// Optimizers are the values Layout.Optimizer takes.
func Optimizers() []string { return []string{"adam", OptimizerDistMuon} }

// ShippedGraph is the recipe's own CUDA-graph setting: CUDAGraph, or none
// with the default warm-up when the recipe ships none.
func (l Layout) ShippedGraph() Candidate {
	if l.CUDAGraph == nil || l.CUDAGraph.Impl == "" || l.CUDAGraph.Impl == ImplNone {
		return Candidate{Impl: ImplNone, Scopes: []string{}, Warmup: DefaultWarmup}
	}
	c := *l.CUDAGraph
	c.Scopes = slices.Clone(c.Scopes)
	if c.Scopes == nil {
		c.Scopes = []string{}
	}
	return c
}

// Degrees with unset values read as 1.
func (l Layout) TPSize() int  { return atLeast1(l.TP) }
func (l Layout) PPSize() int  { return atLeast1(l.PP) }
func (l Layout) CPSize() int  { return atLeast1(l.CP) }
func (l Layout) EPSize() int  { return atLeast1(l.EP) }
func (l Layout) ETPSize() int { return atLeast1(l.ETP) }
func (l Layout) VPSize() int  { return atLeast1(l.VP) }

// DP is the data-parallel size: GPUs over TP×PP×CP.
func (l Layout) DP() int {
	// Saturating: a layout that was never validated must not divide by a
	// product that wrapped around to zero.
	d := l.NumGPUs / mulSat(l.TPSize(), l.PPSize(), l.CPSize())
	return atLeast1(d)
}

// MicroBatches is the number of micro-batches one rank runs per step,
// GBS / (MBS × DP), as get_num_microbatches() computes it.
func (l Layout) MicroBatches() int {
	return atLeast1(l.GBS / mulSat(atLeast1(l.MBS), l.DP()))
}

// Generation is the Megatron-Bridge API generation cgtune targets (docs/sources.md).
type Generation int

const (
	// G2: MB v0.3–v0.4; field cuda_graph_scope; full_iteration is a scope of impl local.
	G2 Generation = 2
	// G3: MB v0.5+; field cuda_graph_modules; impl full_iteration; local only for full iteration (v0.6+).
	G3 Generation = 3
)

// MBridgeVersions are the --mbridge values cgtune accepts.
var MBridgeVersions = []string{"0.3", "0.4", "0.5", "0.6", "0.7"}

// ParseMBridge maps a Megatron-Bridge version to its generation.
func ParseMBridge(v string) (Generation, error) {
	switch strings.TrimPrefix(v, "v") {
	case "0.3", "0.4":
		return G2, nil
	case "0.5", "0.6", "0.7":
		return G3, nil
	}
	return 0, fmt.Errorf("unknown Megatron-Bridge version %q (allowed: %s)", v, strings.Join(MBridgeVersions, ", "))
}

func (g Generation) String() string { return fmt.Sprintf("G%d", int(g)) }

// Implementations and scopes in the vocabulary of the MB perf harness
// (--cuda_graph_impl / --cuda_graph_scope), which is what cgtune's flags and
// candidates use in both generations.
const (
	ImplNone  = "none"
	ImplLocal = "local"
	ImplTE    = "transformer_engine"

	ScopeFullIteration = "full_iteration"
	ScopeAttn          = "attn"
	ScopeMLP           = "mlp"
	ScopeMoE           = "moe"
	ScopeMoERouter     = "moe_router"
	ScopeMoEPreprocess = "moe_preprocess"
	ScopeMamba         = "mamba"
)

// Impls are the harness's VALID_CUDA_GRAPH_IMPLS.
var Impls = []string{ImplNone, ImplLocal, ImplTE}

// Scopes are the harness's VALID_CUDA_GRAPH_SCOPES, in its order.
var Scopes = []string{ScopeFullIteration, ScopeAttn, ScopeMLP, ScopeMoE, ScopeMoERouter, ScopeMoEPreprocess, ScopeMamba}

// LayerScopes are the six per-layer module names (CudaGraphModule).
var LayerScopes = []string{ScopeAttn, ScopeMLP, ScopeMoE, ScopeMoERouter, ScopeMoEPreprocess, ScopeMamba}

// Candidate is one CUDA-graph configuration: impl, scopes and warm-up steps.
// An empty Scopes with a graph impl means the whole layer.
type Candidate struct {
	Impl   string   `yaml:"impl" json:"impl"`
	Scopes []string `yaml:"scopes" json:"scopes"`
	Warmup int      `yaml:"warmup" json:"warmup"`
	// WhatIf names the enabling changes (cgtune rules ID lists them) a
	// what-if row applies to the recipe before the candidate: a candidate
	// the recipe rejects today, priced with the changes that let it run.
	// Empty for a candidate the recipe allows; never read from a preset.
	WhatIf []string `yaml:"-" json:"what_if,omitempty"`
}

// FullIteration reports whether the candidate is one full-iteration graph.
func (c Candidate) FullIteration() bool {
	return c.Impl != ImplNone && slices.Contains(c.Scopes, ScopeFullIteration)
}

// Graphed reports whether the candidate captures anything.
func (c Candidate) Graphed() bool { return c.Impl != ImplNone && c.Impl != "" }

// ScopeString is the scopes joined with commas, "" for the whole layer.
func (c Candidate) ScopeString() string { return strings.Join(c.Scopes, ",") }

// Key identifies a candidate in journals and tables: impl/scopes/wN.
func (c Candidate) Key() string {
	s := c.ScopeString()
	if c.Impl == ImplNone {
		s = "-"
	} else if s == "" {
		s = "layer"
	}
	if len(c.WhatIf) > 0 {
		s += "+" + strings.Join(c.WhatIf, "+")
	}
	return fmt.Sprintf("%s/%s/w%d", c.Impl, s, c.Warmup)
}

// Space is the set of configurations a search may try.
type Space struct {
	Impls   []string   `yaml:"impls" json:"impls"`
	Scopes  [][]string `yaml:"scopes,omitempty" json:"scopes,omitempty"` // explicit scope sets; empty = every subset
	Warmups []int      `yaml:"warmups" json:"warmups"`
}

// CanonicalScopes orders a scope set as the harness lists its scopes, so
// that {moe_router, attn} and {attn, moe_router} are one candidate. Names
// the harness does not know stay, at the end, for PERF-02 to reject.
func CanonicalScopes(set []string) []string {
	out := slices.Clone(set)
	if out == nil {
		out = []string{}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		ia, ib := slices.Index(Scopes, a), slices.Index(Scopes, b)
		if ia < 0 {
			ia = len(Scopes)
		}
		if ib < 0 {
			ib = len(Scopes)
		}
		return ia - ib
	})
	return slices.Compact(out)
}
