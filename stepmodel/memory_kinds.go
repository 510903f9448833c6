package stepmodel

import (
	"math"

	"cgtune/presets"
)

// The activations the new layer kinds save per token and layer, on this
// rank, in the terms of activations.perToken (h hidden, sp 1/TP with
// sequence parallelism, q the bytes of a saved GEMM input, bf16 = 2
// bytes). docs/engines.md lists them with their sources.

// perToken is the bytes one token saves in the block the op scope names
// for a layer of kind k: the block's own (blockPerToken) and, with
// hyper-connections, the connection around it.
func (x activations) perToken(k presets.LayerKind, scope string) float64 {
	v := x.blockPerToken(k, scope)
	if x.a.HyperConnections != nil && scope == hyperConnectionScope(k, scope) {
		v += x.hyperConnection()
	}
	return v
}

// hyperConnectionScope is the op scope a hyper-connection around the
// block of scope takes (its first: attn for the mixer, mlp or moe_router
// for the feed-forward); "" when scope is not a block's first.
func hyperConnectionScope(k presets.LayerKind, scope string) string {
	switch scope {
	case presets.ScopeAttn:
		if k.HasSelfAttention() {
			return scope
		}
	case presets.ScopeMLP, presets.ScopeMoERouter:
		return scope
	}
	return ""
}

// hyperConnection is what one HyperConnectionModule keeps per token: the n
// residual streams it reads (2·n·h·sp, for mapping_proj's weight gradient
// and the aggregation's and the residual mix's backward), the block output
// H_post scales (2·h·sp) and the fp32 mappings (2·4·(n²+2n)). The mhc
// recompute module (MHCBlockRecomputeManager) recomputes the connection's
// outputs from its input: only the streams stay.
func (x activations) hyperConnection() float64 {
	n := float64(x.a.HyperConnections.NumResidualStreams)
	h := float64(x.a.Hidden)
	streams := 2 * n * h * x.sp
	if x.re("mhc") {
		return streams
	}
	return streams + 2*h*x.sp + 8*(n*n+2*n)
}

// gatedDeltaNet is what a gated delta-net layer's mixer keeps per token
// (GatedDeltaNet.forward, MLM megatron/core/ssm/gated_delta_net/gdn.py at
// 2a75ac1): the norm input and in_proj's input (norm, gemmIn); in_proj's
// output, 2·(2qk + 2v + 2nv), which the convolution (q, k, v), the gated
// norm (z) and the gates (beta, alpha) read back; the convolution's
// output, 2·(2qk + v), the L2 norm's input; the rule's inputs: q and k
// normalised and repeated to the value heads, 2·2·dk·nv, v (2v), and g and
// beta in fp32 (8·nv), flash-linear-attention recomputing its chunk
// states in the backward; the rule's output, the gated norm's input (2v);
// and the gated norm's output, out_proj's input (q·v), which the
// gdn_norm_out recompute module drops. qk, v and nv are the key width,
// the value width and the value heads over TP.
func (x activations) gatedDeltaNet(norm, gemmIn float64) float64 {
	la := x.a.LinearAttention
	if la == nil {
		return norm + gemmIn
	}
	dk := float64(la.LinearKeyHeadDim)
	qk := dk * float64(la.LinearNumKeyHeads) / x.tp
	v := float64(la.LinearValueHeadDim*la.LinearNumValueHeads) / x.tp
	nv := float64(la.LinearNumValueHeads) / x.tp
	saved := norm + gemmIn + 2*(2*qk+2*v+2*nv) + 2*(2*qk+v) + 2*2*dk*nv + 2*v + 8*nv + 2*v
	if !x.re("gdn_norm_out") {
		saved += x.q * v
	}
	return saved
}

// compressedAttention is what a DeepSeek-V4 attention at compression
// ratio r keeps per token (DSv4HybridSelfAttention and csa.py): the norm
// input and the projections' input (norm, gemmIn); the query latent
// before and after its norm (2·2·q_lora); the query and the key-value head
// after their up-projections and after the norms and rope (2·2·(H/TP + 1)·D,
// which the mla_up_proj recompute module recomputes); at r > 1 the
// compressor's kv and gate projections (2·2·coff·D) and its pooled entries
// (2·D/r); at r = 4 the indexer's queries and head weights (2·ih·(id + 1))
// and the selected entries' indices (8·topk); the sparse attention's
// output and log-sum-exp (2·H/TP·D + 4·H/TP), unless offloaded (core_attn);
// the output after the inverse rope, the grouped projection's input
// (2·H/TP·D), and linear_proj's input (q·G/TP·o_lora), unless offloaded
// (attn_proj).
func (x activations) compressedAttention(r int, norm, gemmIn float64) float64 {
	a := x.a
	m, ca := a.MLA, a.CompressedAttention
	if m == nil || ca == nil {
		return norm + gemmIn
	}
	heads := float64(a.Heads) / x.tp
	D := float64(m.VHeadDim)
	v := norm + gemmIn + 2*2*float64(m.QLoraRank)
	if !x.re("mla_up_proj") {
		v += 2 * 2 * (heads + 1) * D
	}
	if r > 1 {
		coff := 1.0
		if r == 4 {
			coff = 2
		}
		v += 2*2*coff*D + 2*D/float64(r)
	}
	if r == 4 {
		ih, id := float64(ca.DSAIndexerNHeads), float64(ca.DSAIndexerHeadDim)
		v += 2*ih*(id+1) + 8*float64(ca.DSAIndexerTopK)
	}
	if !x.re("core_attn") && !x.off("core_attn") {
		v += 2*heads*D + attnLSEBytesPerHd*heads
	}
	v += 2 * heads * D
	if !x.off("attn_proj") {
		in := heads * D // linear_proj's input: the heads' outputs, or their groups' low-rank projections
		if grouped(m) {
			in = math.Max(1, float64(m.OGroups)/x.tp) * float64(m.OLoraRank)
		}
		v += x.q * in
	}
	return v
}

// moeWidth is the width of the tokens an MoE's experts receive: the
// hidden size, or moe_latent_size.
func (x activations) moeWidth() float64 {
	if l := x.a.MoE.MoELatentSize; l > 0 {
		return float64(l)
	}
	return float64(x.a.Hidden)
}

// latentPostprocess is what a latent MoE's fc2_latent_proj keeps per
// token: its latent-wide input (q·moe_latent_size); nothing without one.
func (x activations) latentPostprocess() float64 {
	if x.a.MoE == nil || x.a.MoE.MoELatentSize == 0 || x.re("moe") {
		return 0
	}
	return x.q * float64(x.a.MoE.MoELatentSize)
}

// sharedExpertGate is what moe_shared_expert_gate keeps per token: the
// shared expert's output, which the gate's backward multiplies (2·h·sp),
// and the gate's sigmoid in fp32 (4).
func (x activations) sharedExpertGate() float64 {
	if !x.a.MoE.MoESharedExpertGate {
		return 0
	}
	return 2*float64(x.a.Hidden)*x.sp + 4
}

// graphedKinds is the kinds of chunk c's layers (kinds, chunkKinds')
// whose graphs the plan captures per layer: all of them less the
// multi-token-prediction blocks' layers when the mechanism leaves those
// eager (mtpGraphable).
func graphedKinds(w *Workload, p *CapturePlan, c Chunk, kinds []presets.LayerKind) []presets.LayerKind {
	if c.MTP == 0 || p == nil || mtpGraphable(p, w) {
		return kinds
	}
	n := len(w.Spec.Model.Arch.MTPLayerKinds(c.MTP))
	return kinds[:max(0, len(kinds)-n)]
}
