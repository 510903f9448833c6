package stepmodel

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"cgtune/presets"
)

// MemoryBreakdown is one rank's device memory in the real job, in MiB,
// by what holds it. Fits compares Total with the job GPU's memory.
//
// Total is Weights + Gradients + Optimizer + the larger of Activations and
// MainGrads (the optimizer step's fp32 gradients come after the
// activations are freed) + Graphs + Slack + Context.
type MemoryBreakdown struct {
	Weights   int64 `json:"weights"`
	Gradients int64 `json:"gradients"` // the gradient buffer
	Optimizer int64 `json:"optimizer"` // main parameters and Adam state, after sharding
	// MainGrads are the distributed optimizer's fp32 gradients of its shard
	// at the optimizer step.
	MainGrads   int64 `json:"main_grads"`
	Activations int64 `json:"activations"` // eager, with the step's temporaries
	// Graphs is what capturing adds over eager.
	Graphs  int64 `json:"graphs"`
	Slack   int64 `json:"allocator_slack"` // the caching allocator's reserve above what is allocated
	Context int64 `json:"context"`         // CUDA context, workspaces, NCCL buffers: outside the allocator
	Total   int64 `json:"total"`
	GPUMiB  int64 `json:"gpu_mib"` // the job GPU's memory it was compared with
	Fits    bool  `json:"fits"`
}

// Reserved is what the framework's caching allocator reserves at the peak:
// the total less the context outside it (torch.cuda.max_memory_reserved).
func (m *MemoryBreakdown) Reserved() int64 { return m.Total - m.Context }

// The memory model predicts one rank's device memory in the real job at
// its peak, by what holds it. Megatron-Core with Megatron-Bridge's
// performance recipes is the reference (Megatron-LM core_v0.16.0 to
// core_v0.20.0, Megatron-Bridge 0.3 to 0.7); the framework's measured peaks
// are the judge (docs/memory-validation-2026-12-02.md has the measured
// error).
//
// Persistent, for the whole run:
//
// Weights: the model's parameters in bf16, 2 bytes each (Float16Module
// casts the model); Megatron-Bridge's fp8 and fp4 recipes make the
// quantized weight the primary one (weightBytesOf).
//
// Gradients: Megatron DDP's contiguous gradient buffer
// (megatron/core/distributed/param_and_grad_buffer.py), one element per
// parameter, bf16 as MB's performance recipes set it (grad_reduce_in_fp32
// False, perf_recipes/_common.py _benchmark_common), fp32 otherwise.
//
// Optimizer: Adam's fp32 main parameters and its exp_avg and exp_avg_sq
// (fp32, or bf16 with the precision-aware optimizer), sharded by the
// distributed optimizer (every MB recipe uses it): dense parameters over
// DP×CP (DDP's intra_dp_cp_group), expert parameters over the expert
// data-parallel group, world / (ETP·EP·PP) (parallel_state.py). Megatron-LM
// docs/user-guide/features/dist_optimizer.md gives the totals. With
// Megatron-FSDP (optim_grads_params) weights and gradients shard too, and
// two layers' weights are gathered at a time (fsdp_double_buffer).
//
// Coming and going within a step:
//
// Activations: what the forward pass saves for the backward, per layer and
// micro-batch, times the micro-batches in flight on the stage (1F1B keeps
// min(PP − stage, M), the interleaved schedule
// (PP − stage − 1)·2 + (VP − 1)·PP + 1 model chunks:
// pipeline_parallel/schedules.py get_pp_rank_microbatches), plus the loss's
// and one layer's backward temporaries. The per-layer figures follow
// Korthikanti et al., "Reducing Activation Recomputation in Large
// Transformer Models" (2022), for bf16 (GEMM inputs quantized under fp8
// and fp4 recipes: gemmInputBytes), no dropout (MB recipes train
// without), sequence parallelism with TP > 1, and the layer spec: Transformer
// Engine's flash attention keeps no s² tensor; Megatron-Core's local spec
// (a node without Transformer Engine) keeps the fp32 softmax and the bf16
// probabilities, 6 bytes per head and key per token, and its backward
// needs 12 more for one layer (transformer/dot_product_attention.py,
// fusions/fused_softmax.py without the fused kernel). Selective recompute
// drops what it recomputes, full recompute keeps a layer group's input,
// offloading moves what it offloads to the host.
//
// Main gradients: with a bf16 gradient buffer the distributed optimizer
// copies its shard's gradients to fp32 at the optimizer step
// (distrib_optimizer.py _copy_model_grads_to_main_grads, 4 bytes per
// parameter of the shard); they live from the step until the next one
// zeroes them, after the activations are freed, so the eager peak is the
// larger of the two.
//
// Graphs: what capturing adds over eager (measured on the framework as the
// graphed step's peak reserved memory less the eager step's). A graph pool
// holds the activations its regions save, in place of eager's, but the
// pool's memory cannot be lent to the optimizer step's main gradients as
// freed activations are: with per-layer graphs (local, or Transformer
// Engine's make_graphed_callables, captured in schedule order into one
// pool) the step needs persistent + graphed activations + static buffers +
// the larger of the rest of the activations and the main gradients; a
// full-iteration graph's pool holds all of the step's activations beside
// the main gradients. Static buffers: each graphed region's forward input
// and output and backward gradient input and output, per layer and
// captured runner (Megatron-Core's CudaGraphManager keeps one runner per
// layer with PP = 1, one per micro-batch otherwise; without Transformer
// Engine its buffers are not weak references and stay allocated,
// transformer/cuda_graphs.py _CudagraphGlobalRecord.create_cudagraphs);
// Transformer Engine's graphs reuse the buffers of micro-batches whose
// backward ran (_reuse_graph_input_output_buffers), so the micro-batches in
// flight hold them. A full-iteration graph adds its static input copies of
// every micro-batch (full_cuda_graph.py StaticBufferLoader).
//
// Allocator slack: the caching allocator's reserved memory above what is
// allocated, 8% of what comes and goes in a step (fitted on the framework's
// dense eager peaks; see the validation document for the shapes it was
// checked on; with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which
// most of MB's perf recipes set, it measured the same).
//
// Context: the CUDA context, cuBLAS and Transformer Engine workspaces and
// the NCCL buffers of the job's communicators, outside the allocator.
const (
	weightBytes       = 2.0 // bf16 parameter
	mainParamBytes    = 4.0 // fp32 main parameter
	fp32GradBytes     = 4.0
	bf16GradBytes     = 2.0
	jobContextMiB     = 3072 // CUDA context (~0.5 GiB), cuBLAS/TE workspaces, NCCL buffers
	bytesPerMiB       = 1 << 20
	attnLSEBytesPerHd = 4.0 // flash attention's fp32 log-sum-exp per head and token
	// localAttnSaved and localAttnBwd are the bytes per head, key and token
	// the local spec's unfused attention saves (fp32 softmax output, bf16
	// probabilities) and its backward's temporaries need (the gradients of
	// the probabilities, bf16, and of the scores, fp32, twice).
	localAttnSaved = 6.0
	localAttnBwd   = 12.0
	// localLossBytes is what Megatron-Core's vocab-parallel cross entropy
	// keeps per token and vocabulary entry: the bf16 logits, their fp32
	// softmax, and the fp32 gradient of its backward.
	localLossBytes = 10.0
	allocatorSlack = 0.08
)

// MemoryOptions are job settings the memory model needs that a layout does
// not hold; the zero value is what MB's performance recipes set.
type MemoryOptions struct {
	GradReduceInFP32       bool  `json:"grad_reduce_in_fp32,omitempty"`
	NoDistributedOptimizer bool  `json:"no_distributed_optimizer,omitempty"`
	ContextMiB             int64 `json:"context_mib,omitempty"` // 0: jobContextMiB
}

// JobGPUMiB is the memory of the real job's GPU (the layout's GPU type in
// the spec table); fallback when the layout names no known GPU.
func JobGPUMiB(l presets.Layout, fallback int64) int64 {
	if r, ok := SpecFor(l.GPU); ok && l.GPU != "" {
		return r.MemoryMiB
	}
	return fallback
}

// PredictMemory is one rank's memory in the real job for plan p of
// workload w, compared with a GPU of gpuMiB. Of the pipeline's stages it
// reports the one that needs most (the first holds the most micro-batches
// in flight, the last the logits). The framework profile is not used:
// graph memory is modelled from the capture plan (a framework run's
// measured graph memory replaces it through SetGraphs where the run is the
// job).
func PredictMemory(w *Workload, p *CapturePlan, _ *FrameworkProfile, gpuMiB int64, opt MemoryOptions) *MemoryBreakdown {
	pp := w.Layout.PPSize()
	stages := []int{0}
	if pp > 1 {
		stages = append(stages, pp-1)
	}
	var best *MemoryBreakdown
	for _, s := range stages {
		m := stageMemory(w, p, s, opt)
		if best == nil || m.Total > best.Total {
			best = m
		}
	}
	best.GPUMiB = gpuMiB
	best.judge()
	return best
}

// judge says whether the total fits the GPU (always, when its memory is
// unknown).
func (m *MemoryBreakdown) judge() {
	m.Fits = m.GPUMiB <= 0 || m.Total <= m.GPUMiB
}

// SetGraphs replaces the graph memory (by one measured on the framework,
// say) and judges the total again.
func (m *MemoryBreakdown) SetGraphs(mib int64) {
	m.Total += mib - m.Graphs
	m.Graphs = mib
	m.judge()
}

// stageFigures are one stage's memory figures in bytes, before a candidate.
type stageFigures struct {
	weights, grads, optim float64 // persistent
	mainGrads             float64 // the optimizer step's fp32 gradients
	act                   float64 // eager activations and temporaries at the step's peak
}

func (f stageFigures) persistent() float64 { return f.weights + f.grads + f.optim }

// eagerPeak is the eager step's peak: the activations or, after them, the
// optimizer step's main gradients.
func (f stageFigures) eagerPeak() float64 { return f.persistent() + math.Max(f.act, f.mainGrads) }

// stageMemory is the breakdown of pipeline stage s.
func stageMemory(w *Workload, p *CapturePlan, s int, opt MemoryOptions) *MemoryBreakdown {
	kinds := stageKinds(w, s)
	f := persistentMemory(w, kinds, s, opt)
	act := newActivations(w)
	inflight := inFlight(w.Layout, w.MicroBatches, s)
	layers := act.stageLayers(kinds, w.Layout)
	f.act = inflight*layers + act.backwardTemporaries(kinds)
	if s == w.Layout.PPSize()-1 {
		f.act += act.head()
	}
	graphs := 0.0
	if p != nil && p.Graphed() {
		graphs = graphedPeak(w, p, graphedKinds(w, p, s, kinds), act, f, inflight) - f.eagerPeak()
	}
	slack := allocatorSlack * (f.act + f.mainGrads)
	ctx := opt.ContextMiB
	if ctx == 0 {
		ctx = jobContextMiB
	}
	m := &MemoryBreakdown{
		Weights: mib(f.weights), Gradients: mib(f.grads), Optimizer: mib(f.optim), MainGrads: mib(f.mainGrads),
		Activations: mib(f.act), Graphs: mib(math.Max(0, graphs)), Slack: mib(slack), Context: ctx,
	}
	m.Total = m.Weights + m.Gradients + m.Optimizer + max(m.Activations, m.MainGrads) + m.Graphs + m.Slack + m.Context
	return m
}

// persistentMemory is what the stage holds for the whole run, and the
// optimizer step's main gradients.
func persistentMemory(w *Workload, kinds []presets.LayerKind, s int, opt MemoryOptions) stageFigures {
	l := w.Layout
	a := w.Spec.Model.Arch
	pp := l.PPSize()
	b := &builder{a: a, l: l, tp: l.TPSize(), ep: l.EPSize(), etp: l.ETPSize()}
	dense, expert, maxLayer := 0.0, 0.0, 0.0
	for _, k := range kinds {
		d, e := b.layerParamsSplit(k)
		dense += d
		expert += e
		maxLayer = math.Max(maxLayer, d+e)
	}
	vocab := float64(a.Vocab) * float64(a.Hidden) / float64(l.TPSize())
	if s == 0 {
		dense += vocab // embedding
	}
	if s == pp-1 {
		d, e := b.repeatedMTPParams(l)
		dense += vocab + b.mtpParams(l.MTPLayers, pp) - d // the output layer (untied in MB's LLM recipes), the MTP blocks' projections and embedding
		expert -= e
	}
	params := dense + expert
	dDense := float64(max(1, l.NumGPUs/(l.TPSize()*pp)))              // DP×CP
	dExpert := float64(max(1, l.NumGPUs/(l.ETPSize()*l.EPSize()*pp))) // expert data-parallel
	distributed := !opt.NoDistributedOptimizer && !l.NoDistributedOptimizer
	shard := func(bytes float64) float64 { return bytes * (dense/dDense + expert/dExpert) }
	if !distributed && !l.FSDP {
		shard = func(bytes float64) float64 { return bytes * params }
	}
	states := 2 * fp32GradBytes // exp_avg, exp_avg_sq
	if l.OptimizerStates == "bf16" {
		states = 2 * bf16GradBytes
	}
	var f stageFigures
	f.weights = weightBytesOf(l.Precision) * params
	gradBytes := bf16GradBytes
	if opt.GradReduceInFP32 || l.GradReduceInFP32 {
		gradBytes = fp32GradBytes
	}
	f.grads = gradBytes * params
	f.optim = shard(mainParamBytes + states)
	switch {
	case gradBytes == fp32GradBytes && (distributed || l.FSDP):
		// The fp32 buffer is the main gradient: nothing is copied.
	case distributed || l.FSDP:
		f.mainGrads = shard(fp32GradBytes)
	default:
		f.mainGrads = fp32GradBytes * params // Float16Optimizer's fp32 copy of every gradient
	}
	if l.FSDP {
		// optim_grads_params: weights and gradients shard like the
		// optimizer state; the units being gathered (two layers with
		// fsdp_double_buffer) hold their whole weights and gradients.
		gathered := 2 * maxLayer * (weightBytes + gradBytes)
		f.weights = shard(f.weights/params) + gathered/2
		f.grads = shard(gradBytes) + gathered/2
	}
	return f
}

// graphedPeak is the graphed step's peak. Per-layer graphs hold their
// regions' activations in the pool, beside the larger of the other
// activations and the main gradients, plus their static buffers; a
// full-iteration graph's pool holds every activation beside the main
// gradients, plus the static inputs of every micro-batch.
func graphedPeak(w *Workload, p *CapturePlan, kinds []presets.LayerKind, act activations, f stageFigures, inflight float64) float64 {
	if p.FullIteration != nil {
		return f.persistent() + f.act + f.mainGrads + float64(w.MicroBatches)*w.StaticInputBytes()
	}
	regions := graphedRegions(w, p, kinds, act)
	pooled := 0.0
	attnGraphed := false
	for _, r := range regions {
		pooled += inflight * act.kept(r.pool, len(kinds))
		attnGraphed = attnGraphed || r.attn
	}
	if attnGraphed {
		pooled += act.backwardTemporaries(kinds) // the graphed attention's backward runs in the pool
	}
	static := float64(len(regions)) * staticRunners(w, p, inflight) * 4 * w.StaticBufferBytes()
	return f.persistent() + pooled + static + math.Max(f.act-pooled, f.mainGrads)
}

// staticRunners is how many copies of a graphed region's static buffers
// the capture keeps: Megatron-Core's local runners one per layer with
// PP = 1 and one per captured micro-batch otherwise (weak references with
// Transformer Engine installed free all but those in flight);
// Transformer Engine's graphs reuse those of finished micro-batches, so
// the micro-batches in flight hold them.
func staticRunners(w *Workload, p *CapturePlan, inflight float64) float64 {
	runners := float64(max(1, p.RealCaptured))
	if p.Candidate.Impl == presets.ImplTE || w.Spec.Options.LayerSpec != "local" {
		return math.Min(runners, math.Max(1, math.Ceil(inflight)))
	}
	return runners
}

func mib(b float64) int64 { return int64(math.Ceil(b / bytesPerMiB)) }

// weightBytesOf is the bytes a weight holds per parameter: bf16, or with
// Megatron-Bridge's fp8 and fp4 recipes, which make the low-precision
// copy the primary weight (mixed_precision.py sets fp8_param_gather /
// fp4_param_gather; the fp32 master copy is the optimizer's), the
// quantized data in both the layout the forward reads and the transposed
// one the backward reads (Transformer Engine caches it between them), with
// their scales.
func weightBytesOf(precision string) float64 {
	switch {
	case strings.HasPrefix(precision, "fp8"):
		return 2
	case strings.HasPrefix(precision, "nvfp4"), strings.HasPrefix(precision, "fp4"):
		return 2 * (0.5 + 1.0/16)
	}
	return weightBytes
}

// gemmInputBytes is the bytes per element of a GEMM input saved for the
// backward's weight gradient: Transformer Engine saves it quantized when
// the recipe computes in fp8 or fp4.
func gemmInputBytes(precision string) float64 {
	switch {
	case strings.HasPrefix(precision, "fp8"):
		return 1
	case strings.HasPrefix(precision, "nvfp4"), strings.HasPrefix(precision, "fp4"):
		return 0.5 + 1.0/16
	}
	return 2
}

// stageKinds lists the layer kinds of pipeline stage s (the same balanced
// split BuildWorkload uses), with the multi-token-prediction layers on the
// last stage.
func stageKinds(w *Workload, s int) []presets.LayerKind {
	kinds := w.Spec.Model.Arch.LayerKinds()
	if len(kinds) == 0 {
		kinds = make([]presets.LayerKind, 0, len(w.Layers))
		for _, lt := range w.Layers {
			kinds = append(kinds, lt.Kind)
		}
		return kinds
	}
	pp := w.Layout.PPSize()
	per := (len(kinds) + pp - 1) / pp
	first := min(len(kinds), s*per)
	last := min(len(kinds), first+per)
	out := slices.Clone(kinds[first:last])
	if s == pp-1 {
		out = append(out, w.Spec.Model.Arch.MTPLayerKinds(w.Layout.MTPLayers)...)
	}
	return out
}

// inFlight is how many micro-batches' activations stage s holds at its
// peak, in units of the whole stage's layers (an interleaved model chunk
// is 1/VP of them).
func inFlight(l presets.Layout, m, s int) float64 {
	pp, vp := l.PPSize(), l.VPSize()
	if pp == 1 {
		return 1
	}
	if vp == 1 {
		return float64(min(pp-s, m))
	}
	chunks := min((pp-s-1)*2+(vp-1)*pp+1, m*vp)
	return float64(chunks) / float64(vp)
}

// graphedRegion is one graphed region of one layer of a stage: the
// activations its pool keeps per micro-batch, and whether it holds the
// layer's attention.
type graphedRegion struct {
	kind presets.LayerKind
	name Region
	pool float64
	attn bool
}

// graphedRegions lists the plan's graphed regions over the layers of a
// stage (the plan covers the emulated stage; every layer of a kind is
// planned alike).
func graphedRegions(w *Workload, p *CapturePlan, kinds []presets.LayerKind, act activations) []graphedRegion {
	byKind := map[presets.LayerKind][]Segment{}
	// add records the graphed forward segments of each layer kind not seen yet.
	add := func(layers []LayerPlan) {
		for _, lp := range layers {
			if _, ok := byKind[lp.Kind]; ok {
				continue
			}
			var segs []Segment
			for _, s := range lp.Fwd {
				if s.Graphed() {
					segs = append(segs, s)
				}
			}
			byKind[lp.Kind] = segs
		}
	}
	add(p.Layers)
	if slices.ContainsFunc(kinds, func(k presets.LayerKind) bool { _, ok := byKind[k]; return !ok }) {
		// The stage has layer kinds the emulated stage lacks (leading dense
		// layers on the first stage): plan every layer of the model; a
		// layer's ops do not depend on the pipeline split.
		l := w.Layout
		l.PP, l.VP = 1, 0
		if all, err := BuildWorkload(w.Spec.Model, l, w.Spec.Options); err == nil {
			add(PlanCapture(all, p.Candidate, p.Generation).Layers)
		}
	}
	var out []graphedRegion
	for _, k := range kinds {
		for _, s := range byKind[k] {
			attn := slices.ContainsFunc(s.Ops, func(o Op) bool { return o.Scope == presets.ScopeAttn })
			out = append(out, graphedRegion{kind: k, name: s.Region, pool: act.region(k, s.Ops), attn: attn})
		}
	}
	return out
}

// activations gives the bytes the forward pass saves for the backward,
// per layer and micro-batch on one rank.
type activations struct {
	a         presets.Arch
	l         presets.Layout
	tokens    float64 // tokens of one micro-batch on this rank: MBS·seq/CP
	keys      float64 // keys each token attends over (seq/CP)
	tp, etp   float64
	sp        float64 // 1/TP with sequence parallelism (TP > 1), else 1
	recompute []string
	offload   []string
	local     bool    // Megatron-Core's local spec: unfused attention and loss
	q         float64 // bytes per element of a saved GEMM input (gemmInputBytes)
}

func newActivations(w *Workload) activations {
	l := w.Layout
	tp := float64(l.TPSize())
	seq := float64(l.Seq) / float64(l.CPSize())
	return activations{a: w.Spec.Model.Arch, l: l, tokens: float64(l.MBS) * seq, keys: seq,
		tp: tp, etp: float64(l.ETPSize()), sp: 1 / tp, recompute: l.RecomputeModules, offload: l.OffloadModules,
		local: w.Spec.Options.LayerSpec == "local", q: gemmInputBytes(l.Precision)}
}

func (x activations) re(m string) bool { return slices.Contains(x.recompute, m) }

func (x activations) off(m string) bool { return slices.Contains(x.offload, m) }

// stageLayers is the bytes the stage's layers save for one micro-batch:
// every layer's, or with full recompute each group of recompute_layers
// layers' input plus one group's activations while it is recomputed; the
// layers whose activations go to the host (cpu_offloading_num_layers)
// keep none, save the one being copied.
func (x activations) stageLayers(kinds []presets.LayerKind, l presets.Layout) float64 {
	per := make([]float64, len(kinds))
	sum := 0.0
	for i, k := range kinds {
		per[i] = x.layer(k)
		sum += per[i]
	}
	if len(kinds) == 0 {
		return 0
	}
	mean := sum / float64(len(kinds))
	if l.FullRecompute() {
		group := float64(max(1, l.RecomputeLayers))
		input := x.tokens * 2 * float64(x.a.Hidden) * x.sp
		sum = float64(len(kinds))/group*input + group*mean
	}
	if n := min(l.CPUOffloadLayers, len(kinds)); n > 0 {
		sum -= float64(n-1) * mean
	}
	return sum
}

// kept is what a graphed region's pool keeps of the activations it
// saves, with the stage's offloaded layers: offloaded activations leave
// the pool as they leave eager memory.
func (x activations) kept(region float64, layers int) float64 {
	n := min(x.l.CPUOffloadLayers, layers)
	if n <= 1 || layers == 0 {
		return region
	}
	return region * (1 - float64(n-1)/float64(layers))
}

// backwardTemporaries is what one layer's backward needs beyond the saved
// activations: with the local spec's unfused attention, the gradients of
// the probabilities and scores (localAttnBwd bytes per head, key and
// token); Transformer Engine's fused attention needs no such tensor.
func (x activations) backwardTemporaries(kinds []presets.LayerKind) float64 {
	if !x.local || !slices.ContainsFunc(kinds, func(k presets.LayerKind) bool { return k.Mixer() == presets.MixerAttention }) {
		return 0
	}
	return x.tokens * localAttnBwd * float64(x.a.Heads) / x.tp * x.keys
}

// blockPerToken is the bytes one token saves in the block the op scope names
// for a layer of kind k, on this rank (the new mixers: memory_kinds.go).
// Derivations, h hidden, bf16 = 2 bytes:
//
//	attn  GQA: norm input 2h·sp, QKV GEMM input q·h·sp, Q K V after rotary
//	      2(H+2G)d/TP, attention output 2Hd/TP (and a quantized copy
//	      q·Hd/TP for the output projection when q ≠ 2), LSE 4H/TP
//	      MLA: the latents and their norms, Q K V up-projections, output
//	mlp   norm input 2h·sp, fc1 input q·h·sp, fc1 output 2·up/TP (up = 2F
//	      for SwiGLU), activation output q·F/TP
//	moe_router  norm input 2h·sp, router input 2h·sp, fp32 logits and
//	      probabilities 8E, shared expert fc1 output and activation
//	moe_preprocess  the routing map, E bytes
//	moe   k routed copies of: expert input q·h, fc1 output 2·upE/ETP,
//	      activation output q·FE/ETP, permuted probability 4
//	moe_postprocess  k expert outputs kept for the unpermute 2h each
//	mamba norm input 2h·sp, in_proj input q·h·sp, in_proj output (z, x,
//	      B, C, dt: 2·(2·d_inner + 2·groups·state + heads)/TP), the scan
//	      output 2·d_inner/TP and the gated norm's output (out_proj's
//	      input) q·d_inner/TP; the fused
//	      mem-efficient path (mamba_split_conv1d_scan_combined) recomputes
//	      the convolution and the chunk states in the backward
//
// q is gemmInputBytes: 2 for bf16. Recompute modules drop what they
// recompute: layernorm the norm outputs (GEMM inputs), mlp and moe everything but the block's input, moe_act the
// expert activation outputs, shared_experts the shared expert's
// intermediates, mla_up_proj the Q K V up-projections; core_attn saves
// nothing with flash attention, which keeps no s² tensor.
func (x activations) blockPerToken(k presets.LayerKind, scope string) float64 {
	a := x.a
	h := float64(a.Hidden)
	norm := 2 * h * x.sp
	gemmIn := x.q * h * x.sp
	if x.re("layernorm") {
		gemmIn = 0
	}
	ffn := func(f, tp float64) float64 { // fc1 output (bf16, for the activation's backward) and activation output (fc2's input)
		up := 2 * f
		if a.Activation == "squared_relu" {
			up = f
		}
		return 2*up/tp + x.q*f/tp
	}
	switch scope {
	case presets.ScopeAttn:
		switch k.Mixer() {
		case presets.MixerGDN:
			return x.gatedDeltaNet(norm, gemmIn)
		case presets.MixerDSv4:
			return x.compressedAttention(k.CompressRatio(), norm, gemmIn)
		}
		heads := float64(a.Heads) / x.tp
		if a.MLA != nil {
			m := a.MLA
			lat := 2*2*float64(m.QLoraRank) + 2*2*float64(m.KVLoraRank) + 2*float64(m.QKRopeDim)
			qkv := 2*heads*float64(m.QKHeadDim+m.QKRopeDim)*2 + 2*heads*float64(m.VHeadDim)
			if x.re("mla_up_proj") {
				qkv = 0
			}
			return norm + gemmIn + lat + qkv + 2*heads*float64(m.VHeadDim) + attnLSEBytesPerHd*heads
		}
		d := float64(a.HeadDim)
		kv := math.Max(1, float64(a.KVGroups)/x.tp)
		if x.off("attn_norm") {
			norm = 0
		}
		if x.off("qkv_linear") {
			gemmIn = 0
		}
		core := 2*(heads+2*kv)*d + attnLSEBytesPerHd*heads // Q K V after rotary, flash attention's LSE
		if x.local {
			core = 2*(heads+2*kv)*d + localAttnSaved*heads*x.keys
		}
		if x.re("core_attn") || x.off("core_attn") {
			core = 0
		}
		// The attention's output, kept in bf16 by the fused attention's
		// backward and as the output projection's input; quantized, the
		// projection keeps its own copy.
		out := 2 * heads * d
		if x.q != 2 {
			out += x.q * heads * d
		}
		if a.AttentionOutputGate {
			out += 2 * 2 * heads * d // the gate and the output it scales (_apply_output_gate)
		}
		if x.off("attn_proj") {
			out = 0
		}
		return norm + gemmIn + core + out
	case presets.ScopeMLP:
		if x.off("mlp_norm") {
			norm = 0
		}
		if x.re("mlp") {
			return norm
		}
		return norm + gemmIn + ffn(float64(a.FFNHidden), x.tp)
	case presets.ScopeMoERouter:
		if a.MoE == nil {
			return 0
		}
		if x.re("moe") {
			return norm
		}
		v := norm + gemmIn + 8*float64(a.MoE.Experts)
		if a.MoE.SharedExpertFFN > 0 && !x.re("shared_experts") {
			v += ffn(float64(a.MoE.SharedExpertFFN), x.tp) + x.sharedExpertGate()
		}
		return v
	case presets.ScopeMoEPreprocess:
		if a.MoE == nil || x.re("moe") {
			return 0
		}
		return float64(a.MoE.Experts)
	case presets.ScopeMoE:
		if a.MoE == nil || x.re("moe") {
			return 0
		}
		m := a.MoE
		width := x.moeWidth()
		per := x.q*width + ffn(float64(m.FFNHidden), x.etp) + 4
		if x.off("fused_group_mlp") {
			return float64(m.TopK) * 4 // the fused grouped MLP offloads all it saves (experts.py)
		}
		if x.off("expert_fc1") {
			per -= x.q * width
		}
		if x.re("moe_act") || x.off("moe_act") {
			per -= x.q * float64(m.FFNHidden) / x.etp
		}
		return float64(m.TopK) * per
	case ScopeMoEPostprocess:
		// The experts apply the routing probabilities in their activation
		// (megatron/core/transformer/moe/experts.py), so the unpermute keeps
		// no expert output for the probabilities' gradient; a latent MoE's
		// fc2_latent_proj keeps its input.
		return x.latentPostprocess()
	case presets.ScopeMamba:
		mm := a.Mamba
		if mm == nil {
			return 0
		}
		dIn := float64(mm.Heads*mm.HeadDim) / x.tp
		gN := float64(mm.Groups*mm.StateDim) / x.tp
		inW := 2*dIn + 2*gN + float64(mm.Heads)/x.tp
		return norm + gemmIn + 2*inW + 2*dIn + x.q*dIn
	}
	return 0
}

// layerScopes are the op scopes a layer kind has: its mixer's (attn for
// every self_attention module, mamba) and its feed-forward block's.
func layerScopes(k presets.LayerKind) []string {
	var out []string
	switch {
	case k.HasSelfAttention():
		out = append(out, presets.ScopeAttn)
	case k.Mixer() == presets.MixerMamba:
		out = append(out, presets.ScopeMamba)
	}
	switch k.FFN() {
	case presets.FFNMLP:
		out = append(out, presets.ScopeMLP)
	case presets.FFNMoE:
		out = append(out, presets.ScopeMoERouter, presets.ScopeMoEPreprocess, presets.ScopeMoE, ScopeMoEPostprocess)
	}
	return out
}

// layer is the bytes one layer of kind k saves per micro-batch.
func (x activations) layer(k presets.LayerKind) float64 {
	var v float64
	for _, s := range layerScopes(k) {
		v += x.perToken(k, s)
	}
	return v * x.tokens
}

// region is the bytes the ops of one graphed region save per micro-batch:
// the blocks (op scopes) it covers.
func (x activations) region(k presets.LayerKind, ops []Op) float64 {
	var seen []string
	var v float64
	for _, o := range ops {
		if !slices.Contains(seen, o.Scope) && slices.Contains(layerScopes(k), o.Scope) {
			seen = append(seen, o.Scope)
			v += x.perToken(k, o.Scope)
		}
	}
	return v * x.tokens
}

// head is what the last stage's final norm, output layer and loss keep for
// one micro-batch: norm input and output-layer input 2h·sp each, and the
// bf16 logits, whose buffer Transformer Engine's fused cross-entropy
// (cross_entropy_fusion_impl "te" in MB's performance recipes) reuses for
// the gradient; Megatron-Core's own vocab-parallel cross entropy (the local
// spec) keeps an fp32 softmax and makes an fp32 gradient beside them
// (tensor_parallel/cross_entropy.py).
func (x activations) head() float64 {
	h := float64(x.a.Hidden)
	loss := 2.0
	if x.local {
		loss = localLossBytes
	}
	return x.tokens * (4*h*x.sp + loss*float64(x.a.Vocab)/x.tp) * float64(1+x.l.MTPLayers)
}

// iteration is what a full-iteration graph's pool holds: one stage's
// activations of the micro-batches in flight, and the loss's.
func (x activations) iteration(w *Workload) float64 {
	var v float64
	for _, lt := range w.Layers {
		v += x.layer(lt.Kind)
	}
	return v*inFlight(w.Layout, w.MicroBatches, w.Stage) + x.head()
}

// layerParamsSplit is layerParams split into dense parameters and expert
// parameters (which shard over the expert data-parallel group).
func (b *builder) layerParamsSplit(k presets.LayerKind) (dense, expert float64) {
	all := b.layerParams(k)
	if b.a.MoE != nil && k.FFN() == presets.FFNMoE {
		expert = b.expertParams()
	}
	return all - expert, expert
}

// Describe is the breakdown in one line, for notes and logs.
func (m *MemoryBreakdown) Describe() string {
	fits := "fits"
	if !m.Fits {
		fits = "DOES NOT FIT"
	}
	return fmt.Sprintf("job memory per rank: weights %d + gradients %d + optimizer %d + the larger of activations %d and the optimizer step's fp32 gradients %d + graphs %d + allocator slack %d + context %d = %d MiB of %d MiB (%s)",
		m.Weights, m.Gradients, m.Optimizer, m.Activations, m.MainGrads, m.Graphs, m.Slack, m.Context, m.Total, m.GPUMiB, fits)
}
