package stepmodel

import (
	"math"
	"slices"

	"cgtune/presets"
)

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

// chunkSaved is what the layers of one model chunk (kinds) save for one
// micro-batch, and what recomputing them needs beside that, once, while
// the backward recomputes (transient). Full recompute works per model
// chunk (TransformerBlock._checkpointed_forward, megatron/core/transformer/
// transformer_block.py): the uniform method checkpoints each group of
// recompute_num_layers layers, which keeps only the group's input and
// recomputes the group's activations in the backward, the last group's
// while every group's input is still held; the block method checkpoints
// the chunk's first recompute_num_layers layers one by one and keeps the
// rest whole. The first cpu_offloading_num_layers layers' activations go
// to the host: layer i's device copy is freed when layer L−N+i starts, so
// at the peak the device holds the other layers' own activations
// (Transformer Engine 2.18 transformer_engine/pytorch/cpu_offload.py,
// DefaultOffloadSynchronizer, which TransformerBlock's
// get_cpu_offload_context builds).
func (x activations) chunkSaved(kinds []presets.LayerKind, l presets.Layout) (saved, transient float64) {
	n := len(kinds)
	if n == 0 {
		return 0, 0
	}
	per := make([]float64, n)
	for i, k := range kinds {
		per[i] = x.layer(k)
		saved += per[i]
	}
	mean := saved / float64(n)
	input := x.tokens * 2 * float64(x.a.Hidden) * x.sp // a layer's input, bf16
	if l.FullRecompute() {
		g := min(n, max(1, l.RecomputeLayers))
		if l.RecomputeMethod == "block" {
			// The checkpointed layers come first, so their backward
			// recomputes them after the rest of the chunk's backward has
			// freed that much and more.
			saved = float64(g)*input + sumOf(per[g:])
			if g == n {
				transient = mean
			}
		} else {
			groups := (n + g - 1) / g
			saved = float64(groups) * input
			transient = float64(g) * mean
		}
	}
	if off := min(l.CPUOffloadLayers, n-1); off > 0 {
		if l.FullRecompute() {
			saved -= float64(off) * saved / float64(n)
		} else {
			saved = sumOf(per[off:])
		}
	}
	return saved, transient
}

func sumOf(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

// kept is what a graphed region's pool keeps of the activations it
// saves, with the stage's offloaded layers: offloaded activations leave
// the pool as they leave eager memory.
func (x activations) kept(region float64, layers int) float64 {
	n := min(x.l.CPUOffloadLayers, layers-1)
	if n <= 0 {
		return region
	}
	return region * (1 - float64(n)/float64(layers))
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

// blockPerToken is the bytes one token saves in the block the op scope
// names for a layer of kind k, on this rank (the new mixers:
// memory_kinds.go). Derivations, h hidden, bf16 = 2 bytes:
//
//	attn  GQA: norm input 2h·sp, QKV GEMM input q·h·sp, Q K V after rotary
//	      2(H+2G)d/TP, attention output 2Hd/TP (and a quantized copy
//	      q·Hd/TP for the output projection when q ≠ 2), LSE 4H/TP
//	      MLA: the latents and their norms, Q K V up-projections, output
//	mlp   norm input 2h·sp, fc1 input q·h·sp, fc1 output 2·up/TP (up = 2F
//	      for SwiGLU), activation output q·F/TP
//	moe_router  norm input 2h·sp, router input 2h·sp, fp32 logits and
//	      probabilities 8E·sp, shared expert fc1 output and activation
//	moe_preprocess  the routing map, E·sp bytes
//	moe   k·sp·ETP routed copies of: expert input q·h, fc1 output
//	      2·upE/ETP, activation output q·FE/ETP, permuted probability 4
//	      (expertsPerToken)
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
	switch scope {
	case presets.ScopeAttn:
		return x.attentionPerToken(k, norm, gemmIn)
	case presets.ScopeMLP:
		if x.off("mlp_norm") {
			norm = 0
		}
		if x.re("mlp") {
			return norm
		}
		return norm + gemmIn + x.ffnPerToken(float64(a.FFNHidden), x.tp)
	case presets.ScopeMoERouter:
		if a.MoE == nil {
			return 0
		}
		if x.re("moe") {
			return norm
		}
		v := norm + gemmIn + 8*float64(a.MoE.Experts)*x.sp
		if a.MoE.SharedExpertFFN > 0 && !x.re("shared_experts") {
			v += x.ffnPerToken(float64(a.MoE.SharedExpertFFN), x.tp) + x.sharedExpertGate()
		}
		return v
	case presets.ScopeMoEPreprocess:
		if a.MoE == nil || x.re("moe") {
			return 0
		}
		return float64(a.MoE.Experts) * x.sp
	case presets.ScopeMoE:
		if a.MoE == nil || x.re("moe") || x.stashes() {
			return 0 // the paged stash holds them (stash.go)
		}
		return x.expertsPerToken() * x.budgetPadding()
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

// attentionPerToken is what an attention block saves per token (the
// attn rows of blockPerToken's table), given its norm output and GEMM
// input bytes as blockPerToken computed them.
func (x activations) attentionPerToken(k presets.LayerKind, norm, gemmIn float64) float64 {
	a := x.a
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
}

// ffnPerToken is what a feed-forward of width f split over tp saves per
// token: fc1's output (bf16, for the activation's backward) and the
// activation's output (fc2's input).
func (x activations) ffnPerToken(f, tp float64) float64 {
	up := 2 * f
	if x.a.Activation == "squared_relu" {
		up = f
	}
	return 2*up/tp + x.q*f/tp
}

// expertsPerToken is what the routed experts save, per token of the
// micro-batch: the router runs on the rank's sequence-parallel share of
// the tokens (S/TP), each routed top-k times, and the expert
// tensor-parallel group all-gathers its members' tokens before the
// experts, whose FFN it splits (MoEAlltoAllTokenDispatcher,
// megatron/core/transformer/moe/token_dispatcher.py: num_local_tokens
// S/TP·B; dispatch_postprocess gathers over expt_tp). Per routed copy:
// the expert input q·h, the fc1 output and activation output of the
// ETP-split FFN, the permuted probability (4); a latent MoE's experts
// take moe_latent_size-wide tokens (moeWidth), and an offloaded
// fused_group_mlp keeps only the probability (experts.py).
func (x activations) expertsPerToken() float64 {
	m := x.a.MoE
	f := float64(m.FFNHidden)
	up := 2 * f
	if x.a.Activation == "squared_relu" {
		up = f
	}
	input, prob := x.q*x.moeWidth(), 4.0
	copies := float64(m.TopK) * x.sp * x.etp
	if x.off("fused_group_mlp") {
		return copies * prob
	}
	if x.off("expert_fc1") {
		input = 0
	}
	act := x.q * f
	if x.re("moe_act") || x.off("moe_act") {
		act = 0
	}
	// Copies per token: top-k × sp × etp; each keeps its input and
	// probability whole and 1/etp of the FFN's intermediates.
	return copies * (input + prob + (2*up+act)/x.etp)
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
// (tensor_parallel/cross_entropy.py). Each MTP block's head runs there too
// (GPTModel._postprocess calls process_mtp_loss where post_process is set).
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
	l := w.Layout
	return v*inFlightMicroBatches(l.PPSize(), l.VPSize(), w.Stage, w.MicroBatches, w.Spec.Options.EPOverlap) + x.head()
}

// budgetPadding is how many times the average routed tokens the experts'
// saved tensors hold: with moe_expert_rank_capacity_factor the flex
// dispatcher hands the experts a static budget of (tokens per rank)·top-k·
// factor rows (token_dispatcher.py _HybridEPManager.setup_metadata,
// num_permuted_tokens; the NCCL EP backend's fixed receive buffer alike,
// Megatron-LM 2a75ac1), padded past the real tokens; without it the
// tensors hold the tokens routed.
func (x activations) budgetPadding() float64 {
	if f := x.l.RankCapacityFactor; f > 0 {
		return f
	}
	return 1
}
