package engine

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"cgtune/presets"
)

// The memory model predicts one rank's device memory in the real job:
// what the job's GPU must hold, by what holds it. Megatron-Core with
// Megatron-Bridge's performance recipes is the reference (Megatron-LM
// core_v0.16.0 to core_v0.20.0, Megatron-Bridge 0.3 to 0.7):
//
// Weights: the model's parameters in bf16, 2 bytes each
// (Float16Module casts the model; fp8 and fp4 recipes keep bf16 weights
// plus Transformer Engine's cached low-precision copy of each weight,
// reused across the step's micro-batches: 1 byte per parameter for fp8,
// half a byte for fp4).
//
// Gradients: Megatron DDP's contiguous gradient buffer
// (megatron/core/distributed/param_and_grad_buffer.py), one element per
// parameter, fp32 with ddp.grad_reduce_in_fp32 and bf16 otherwise;
// Megatron-Bridge's performance recipes set grad_reduce_in_fp32 = False
// (perf_recipes/_common.py _benchmark_common). With a bf16 buffer the
// distributed optimizer keeps fp32 main gradients of its shard, 4 bytes per
// parameter over the sharding group (optimizer/distrib_optimizer.py, the
// shard's main_grad).
//
// Optimizer: Adam's fp32 main parameters, exp_avg and exp_avg_sq,
// 12 bytes per parameter, sharded over the data-parallel group by the
// distributed optimizer (use_distributed_optimizer, set by every MB
// recipe). Megatron-LM docs/user-guide/features/dist_optimizer.md gives the
// totals this adds up to: bf16 parameters with fp32 gradients 6 + 12/d
// bytes per parameter, 16-bit gradients 4 + 16/d. Dense parameters shard
// over DP×CP (DDP's intra_dp_cp_group), expert parameters over the expert
// data-parallel group, world / (ETP·EP·PP) (parallel_state.py).
//
// Activations: what the forward pass saves for the backward, per layer and
// micro-batch, times the micro-batches in flight on the stage: 1F1B keeps
// min(PP − stage, M) in flight, the interleaved schedule
// (PP − stage − 1)·2 + (VP − 1)·PP + 1 model chunks
// (pipeline_parallel/schedules.py get_pp_rank_microbatches). The per-layer
// figures follow Korthikanti et al., "Reducing Activation Recomputation
// in Large Transformer Models" (2022), for bf16 with flash attention (no
// s² term), no dropout masks (MB recipes train without dropout), sequence
// parallelism with TP > 1 (norm inputs and GEMM inputs saved before the
// all-gather, /TP), and the layout's selective recompute modules dropping
// what they recompute; see activations below.
//
// Graphs: the graph pools and static buffers of the capture plan. A
// forward graph's pool keeps the activations of what it covers (they are
// no longer in the activations figure); graphs captured in schedule order
// into one pool reuse the memory of micro-batches whose backward has run,
// so the pool holds the in-flight micro-batches; static input and output
// buffers are per graph and captured micro-batch. A full-iteration graph
// holds the iteration's activations and every micro-batch's static inputs.
//
// Context: the CUDA context, cuBLAS workspaces, NCCL buffers of the job's
// communicators and the caching allocator's slack.
const (
	weightBytes       = 2.0  // bf16 parameter
	adamStateBytes    = 12.0 // fp32 main parameter, exp_avg, exp_avg_sq
	fp32GradBytes     = 4.0
	bf16GradBytes     = 2.0
	jobContextMiB     = 3072 // CUDA context (~0.5 GiB), cuBLAS/TE workspaces, NCCL buffers, allocator slack
	bytesPerMiB       = 1 << 20
	attnLSEBytesPerHd = 4.0 // flash attention's fp32 log-sum-exp per head and token
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
// in flight, the last the logits).
//
// A framework profile, when given, replaces the model's graph memory with
// what the framework's graphs measured per region, layer and micro-batch.
func PredictMemory(w *Workload, p *CapturePlan, prof *FrameworkProfile, gpuMiB int64, opt MemoryOptions) *MemoryBreakdown {
	pp := w.Layout.PPSize()
	stages := []int{0}
	if pp > 1 {
		stages = append(stages, pp-1)
	}
	var best *MemoryBreakdown
	for _, s := range stages {
		m := stageMemory(w, p, prof, s, opt)
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

// stageMemory is the breakdown of pipeline stage s.
func stageMemory(w *Workload, p *CapturePlan, prof *FrameworkProfile, s int, opt MemoryOptions) *MemoryBreakdown {
	l := w.Layout
	a := w.Spec.Model.Arch
	kinds := stageKinds(w, s)
	pp := l.PPSize()
	dense, expert := 0.0, 0.0
	b := &builder{a: a, l: l, tp: l.TPSize(), ep: l.EPSize(), etp: l.ETPSize()}
	for _, k := range kinds {
		d, e := b.layerParamsSplit(k)
		dense += d
		expert += e
	}
	vocab := float64(a.Vocab) * float64(a.Hidden) / float64(l.TPSize())
	if s == 0 {
		dense += vocab // embedding
	}
	if s == pp-1 {
		dense += vocab // output layer (untied in MB's LLM recipes)
	}
	params := dense + expert
	dDense := float64(max(1, l.NumGPUs/(l.TPSize()*pp)))              // DP×CP
	dExpert := float64(max(1, l.NumGPUs/(l.ETPSize()*l.EPSize()*pp))) // expert data-parallel
	shard := func(bytes float64) float64 { return bytes * (dense/dDense + expert/dExpert) }
	if opt.NoDistributedOptimizer {
		shard = func(bytes float64) float64 { return bytes * params }
	}

	weights := weightBytes * params
	switch {
	case strings.HasPrefix(l.Precision, "fp8"):
		weights += params
	case strings.HasPrefix(l.Precision, "nvfp4"), strings.HasPrefix(l.Precision, "fp4"):
		weights += params / 2
	}
	grads := bf16GradBytes * params
	if opt.GradReduceInFP32 {
		grads = fp32GradBytes * params
	} else {
		grads += shard(fp32GradBytes) // the distributed optimizer's fp32 main gradients
	}
	optim := shard(adamStateBytes)

	act := newActivations(w)
	inflight := inFlight(l, w.MicroBatches, s)
	var eagerAct, graphs float64
	layerAct := 0.0
	for _, k := range kinds {
		layerAct += act.layer(k)
	}
	head := 0.0
	if s == pp-1 {
		head = act.head()
	}
	switch {
	case p == nil || !p.Graphed():
		eagerAct = inflight*layerAct + head
	case p.FullIteration != nil:
		// The graph holds the iteration's activations and the static
		// inputs of every micro-batch.
		graphs = inflight*layerAct + head + float64(w.MicroBatches)*w.StaticInputBytes()
		switch fi := prof.fullIteration(); {
		case fi != nil && fi.GraphMiBPerLayer > 0 && w.Layout.PPSize() == 1:
			// Measured: fixed + per layer (one micro-batch in flight), plus
			// the static inputs of the job's micro-batches.
			graphs = (fi.GraphMiBFixed+fi.GraphMiBPerLayer*float64(len(w.Layers)))*bytesPerMiB +
				float64(w.MicroBatches)*w.StaticInputBytes()
		case fi != nil && fi.GraphMiBPerMicroBatch > 0:
			graphs = fi.GraphMiBPerMicroBatch * bytesPerMiB * float64(w.MicroBatches)
		}
	default:
		poolMBs := math.Min(float64(p.RealCaptured), inflight)
		fixed := false
		for _, r := range graphedRegions(w, p, kinds, act) {
			eagerAct += inflight * -r.pool
			if reg, ok := prof.regionMemory(r.kind, r.name); ok {
				// Measured pool and static buffers of one micro-batch, and
				// once the capture's fixed part.
				graphs += poolMBs*reg + (float64(p.RealCaptured)-poolMBs)*r.static
				if !fixed {
					graphs += prof.GraphPoolFixedMiB * bytesPerMiB
					fixed = true
				}
				continue
			}
			graphs += poolMBs*r.pool + float64(p.RealCaptured)*r.static
		}
		eagerAct += inflight*layerAct + head
	}
	ctx := opt.ContextMiB
	if ctx == 0 {
		ctx = jobContextMiB
	}
	m := &MemoryBreakdown{
		Weights: mib(weights), Gradients: mib(grads), Optimizer: mib(optim),
		Activations: mib(eagerAct), Graphs: mib(graphs), Context: ctx,
	}
	m.Total = m.Weights + m.Gradients + m.Optimizer + m.Activations + m.Graphs + m.Context
	return m
}

func mib(b float64) int64 { return int64(math.Ceil(b / bytesPerMiB)) }

// stageKinds lists the layer kinds of pipeline stage s (the same balanced
// split BuildWorkload uses).
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
	return kinds[first:last]
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
// activations its pool keeps per micro-batch and its forward and backward
// graphs' static buffers per captured micro-batch.
type graphedRegion struct {
	kind         presets.LayerKind
	name         string
	pool, static float64
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
	per := 4 * w.StaticBufferBytes() // forward input and output, backward gradient input and output
	var out []graphedRegion
	for _, k := range kinds {
		for _, s := range byKind[k] {
			out = append(out, graphedRegion{kind: k, name: s.Region, pool: act.region(k, s.Ops), static: per})
		}
	}
	return out
}

// regionMemory is the measured graph memory of a region per layer and
// micro-batch, in bytes.
func (p *FrameworkProfile) regionMemory(k presets.LayerKind, name string) (float64, bool) {
	if p == nil {
		return 0, false
	}
	r, ok := p.region(string(k), name)
	if !ok || r.GraphMiB <= 0 {
		return 0, false
	}
	return r.GraphMiB * bytesPerMiB, true
}

// activations gives the bytes the forward pass saves for the backward,
// per layer and micro-batch on one rank.
type activations struct {
	a         presets.Arch
	tokens    float64 // tokens of one micro-batch on this rank: MBS·seq/CP
	tp, etp   float64
	sp        float64 // 1/TP with sequence parallelism (TP > 1), else 1
	recompute []string
}

func newActivations(w *Workload) activations {
	l := w.Layout
	tp := float64(l.TPSize())
	return activations{a: w.Spec.Model.Arch, tokens: float64(l.MBS*l.Seq) / float64(l.CPSize()),
		tp: tp, etp: float64(l.ETPSize()), sp: 1 / tp, recompute: l.RecomputeModules}
}

func (x activations) re(m string) bool { return slices.Contains(x.recompute, m) }

// perToken is the bytes one token saves in the block the op scope names
// (per layer, on this rank). Derivations, h hidden, bf16 = 2 bytes:
//
//	attn  GQA: norm input 2h·sp, QKV GEMM input 2h·sp, Q K V after rotary
//	      2(H+2G)d/TP, attention output 2Hd/TP, LSE 4H/TP
//	      MLA: the latents and their norms, Q K V up-projections, output
//	mlp   norm input 2h·sp, fc1 input 2h·sp, fc1 output 2·up/TP (up = 2F
//	      for SwiGLU), activation output 2F/TP
//	moe_router  norm input 2h·sp, router input 2h·sp, fp32 logits and
//	      probabilities 8E, shared expert fc1 output and activation
//	moe_preprocess  the routing map, E bytes
//	moe   k routed copies of: expert input 2h, fc1 output 2·upE/ETP,
//	      activation output 2FE/ETP, permuted probability 4
//	moe_postprocess  k expert outputs kept for the unpermute 2h each
//	mamba norm input 2h·sp, in_proj input 2h·sp, in_proj output (z, x,
//	      B, C, dt: 2·(2·d_inner + 2·groups·state + heads)/TP), the scan
//	      output and the gated norm's output 2·d_inner/TP each; the fused
//	      mem-efficient path (mamba_split_conv1d_scan_combined) recomputes
//	      the convolution and the chunk states in the backward
//
// Recompute modules drop what they recompute: layernorm the norm outputs
// (GEMM inputs), mlp and moe everything but the block's input, moe_act the
// expert activation outputs, shared_experts the shared expert's
// intermediates, mla_up_proj the Q K V up-projections; core_attn saves
// nothing with flash attention, which keeps no s² tensor.
func (x activations) perToken(scope string) float64 {
	a := x.a
	h := float64(a.Hidden)
	norm := 2 * h * x.sp
	gemmIn := 2 * h * x.sp
	if x.re("layernorm") {
		gemmIn = 0
	}
	ffn := func(f, tp float64) float64 { // fc1 output and activation output
		up := 2 * f
		if a.Activation == "squared_relu" {
			up = f
		}
		return 2*up/tp + 2*f/tp
	}
	switch scope {
	case presets.ScopeAttn:
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
		return norm + gemmIn + 2*(heads+2*kv)*d + 2*heads*d + attnLSEBytesPerHd*heads
	case presets.ScopeMLP:
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
			v += ffn(float64(a.MoE.SharedExpertFFN), x.tp)
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
		per := 2*h + ffn(float64(m.FFNHidden), x.etp) + 4
		if x.re("moe_act") {
			per -= 2 * float64(m.FFNHidden) / x.etp
		}
		return float64(m.TopK) * per
	case ScopeMoEPostprocess:
		if a.MoE == nil || x.re("moe") {
			return 0
		}
		return float64(a.MoE.TopK) * 2 * h
	case presets.ScopeMamba:
		mm := a.Mamba
		if mm == nil {
			return 0
		}
		dIn := float64(mm.Heads*mm.HeadDim) / x.tp
		gN := float64(mm.Groups*mm.StateDim) / x.tp
		inW := 2*dIn + 2*gN + float64(mm.Heads)/x.tp
		return norm + gemmIn + 2*inW + 2*dIn + 2*dIn
	}
	return 0
}

// layerScopes are the op scopes each layer kind has.
var layerScopes = map[presets.LayerKind][]string{
	presets.LayerDense:     {presets.ScopeAttn, presets.ScopeMLP},
	presets.LayerMoE:       {presets.ScopeAttn, presets.ScopeMoERouter, presets.ScopeMoEPreprocess, presets.ScopeMoE, ScopeMoEPostprocess},
	presets.LayerAttention: {presets.ScopeAttn},
	presets.LayerMLP:       {presets.ScopeMLP},
	presets.LayerMoEOnly:   {presets.ScopeMoERouter, presets.ScopeMoEPreprocess, presets.ScopeMoE, ScopeMoEPostprocess},
	presets.LayerMamba:     {presets.ScopeMamba},
}

// layer is the bytes one layer of kind k saves per micro-batch.
func (x activations) layer(k presets.LayerKind) float64 {
	var v float64
	for _, s := range layerScopes[k] {
		v += x.perToken(s)
	}
	return v * x.tokens
}

// region is the bytes the ops of one graphed region save per micro-batch:
// the blocks (op scopes) it covers.
func (x activations) region(k presets.LayerKind, ops []Op) float64 {
	var seen []string
	var v float64
	for _, o := range ops {
		if !slices.Contains(seen, o.Scope) && slices.Contains(layerScopes[k], o.Scope) {
			seen = append(seen, o.Scope)
			v += x.perToken(o.Scope)
		}
	}
	return v * x.tokens
}

// head is what the last stage's final norm, output layer and loss keep for
// one micro-batch: norm input and output-layer input 2h·sp each, and the
// bf16 logits, whose buffer Transformer Engine's fused cross-entropy
// (cross_entropy_fusion_impl "te" in MB's performance recipes) reuses for
// the gradient.
func (x activations) head() float64 {
	h := float64(x.a.Hidden)
	return x.tokens * (4*h*x.sp + 2*float64(x.a.Vocab)/x.tp)
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
	if m := b.a.MoE; m != nil && (k == presets.LayerMoE || k == presets.LayerMoEOnly) {
		h := float64(b.a.Hidden)
		f := float64(m.FFNHidden)
		per := 3 * h * f
		if b.a.Activation == "squared_relu" {
			per = 2 * h * f
		}
		expert = float64(m.Experts) / float64(b.ep) * per / float64(b.etp)
	}
	return all - expert, expert
}

// Describe is the breakdown in one line, for notes and logs.
func (m *MemoryBreakdown) Describe() string {
	fits := "fits"
	if !m.Fits {
		fits = "DOES NOT FIT"
	}
	return fmt.Sprintf("job memory per rank: weights %d + gradients %d + optimizer %d + activations %d + graphs %d + context %d = %d MiB of %d MiB (%s)",
		m.Weights, m.Gradients, m.Optimizer, m.Activations, m.Graphs, m.Context, m.Total, m.GPUMiB, fits)
}
