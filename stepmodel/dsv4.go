package stepmodel

import (
	"math"
	"strings"

	"cgtune/presets"
)

// compressedAttention is DeepSeek-V4's hybrid attention of one layer
// (DSv4HybridSelfAttention with CompressedSparseAttention; Megatron-Core
// newer than MB HEAD pins: NVIDIA/Megatron-LM megatron/core/transformer/
// experimental_attention_variant/deepseek_v4_hybrid_attention.py and
// csa.py): the query through q_lora_rank (q_down_proj, q_layernorm,
// q_up_proj to heads × v_head_dim, a weightless RMS norm), one key-value
// head projected straight from the input (kv_up_proj, kv_layernorm), rope;
// at compression ratio r > 1 the Compressor pools groups of r tokens
// (wkv and wgate projections, coff = 2 overlapping windows at r = 4, 1 at
// r = 128), and at r = 4 the CSAIndexer scores the compressed entries
// (wq_b from the query latent, weights_proj, its own compressor) and keeps
// dsa_indexer_topk of them; the sparse attention reads the sliding window
// plus those entries (all of the causal ones at r = 128); then the
// inverse rope of the output, the grouped low-rank output projection
// (o_groups groups to o_lora_rank each) and linear_proj.
func (b *builder) compressedAttention(ratio int) (fwd, bwd []Op) {
	a := b.a
	m, ca := a.MLA, a.CompressedAttention
	s := presets.ScopeAttn
	h, tp := float64(a.Hidden), float64(b.tp)
	heads := float64(a.Heads) / tp
	D := float64(m.VHeadDim)
	ql := float64(m.QLoraRank)
	groups := math.Max(1, float64(m.OGroups)/tp)
	or := float64(m.OLoraRank)
	seq := float64(b.l.Seq)

	norm := b.mem("input_layernorm", s, KindNorm, 2*b.Ts*h*bf16)
	proj := []Op{
		b.gemm("q_down_proj", s, b.T, h, ql),
		b.mem("q_layernorm", s, KindNorm, 2*b.T*ql*bf16),
		b.gemm("q_up_proj", s, b.T, ql, heads*D),
		b.mem("q_rms_norm", s, KindElementwise, 2*b.T*heads*D*bf16),
		b.gemm("kv_up_proj", s, b.T, h, D),
		b.mem("kv_layernorm", s, KindNorm, 2*b.T*D*bf16),
		b.mem("rope", s, KindElementwise, 2*b.T*(heads+1)*D*bf16),
	}
	keys := math.Min(float64(ca.CSAWindowSize), seq) // the sliding window
	if ratio > 1 {
		proj = append(proj, b.compressor("compressor", s, ratio, D)...)
	}
	switch {
	case ratio == 4:
		proj = append(proj, b.csaIndexer(s, ratio)...)
		keys += math.Min(float64(ca.DSAIndexerTopK), seq/float64(ratio))
	case ratio > 4:
		keys += seq / float64(ratio) / 2 // the causal half of the compressed entries
	}
	// Single-head keys and values of v_head_dim: QKᵀ and AV per head.
	core := Op{Name: "sparse_attention", Kind: KindAttention, Scope: s, FLOPs: 2 * 2 * b.T * heads * keys * D, Bytes: (2*heads*D + 2*D) * b.T * bf16}
	post := []Op{b.mem("inverse_rope", s, KindElementwise, 2*b.T*heads*D*bf16)}
	if grouped(m) {
		proj := b.gemm("o_group_proj", s, b.T, heads*D/groups, groups*or)
		proj.FLOPs /= groups // the einsum multiplies each group by its own slice
		post = append(post, proj, b.gemm("out_proj", s, b.T, groups*or, h))
	} else {
		post = append(post, b.gemm("out_proj", s, b.T, heads*D, h))
	}
	resid := b.mem("residual_add", s, KindElementwise, 3*b.Ts*h*bf16)

	fwd = append(fwd, norm)
	fwd = append(fwd, b.tpComm("sp_all_gather", s)...)
	fwd = append(fwd, proj...)
	fwd = append(fwd, core)
	fwd = append(fwd, post...)
	fwd = append(fwd, b.tpComm("sp_reduce_scatter", s)...)
	fwd = append(fwd, resid)

	bwd = append(bwd, backward(resid))
	bwd = append(bwd, b.tpComm("sp_all_gather_bwd", s)...)
	bwd = append(bwd, reverseOps(post)...)
	cb := backward(core)
	cb.FLOPs *= 2 // dQ, dK, dV
	bwd = append(bwd, cb)
	bwd = append(bwd, reverseOps(proj)...)
	bwd = append(bwd, b.tpComm("sp_reduce_scatter_bwd", s)...)
	nb := backward(norm)
	nb.Bytes *= 1.5
	return fwd, append(bwd, nb)
}

// compressor is csa.py's Compressor at ratio r over width d: the wkv and
// wgate projections from the input (coff·d each, duplicated over TP),
// the gated pooling of each group of r tokens, the norm and rope of the
// T/r compressed entries.
func (b *builder) compressor(prefix, scope string, r int, d float64) []Op {
	h := float64(b.a.Hidden)
	coff := 1.0
	if r == 4 {
		coff = 2
	}
	n := b.T / float64(r)
	return []Op{
		b.gemm(prefix+"_wkv", scope, b.T, h, coff*d),
		b.gemm(prefix+"_wgate", scope, b.T, h, coff*d),
		b.mem(prefix+"_pool", scope, KindElementwise, 2*b.T*coff*d*bf16+n*d*bf16),
		b.mem(prefix+"_norm_rope", scope, KindNorm, 2*n*d*bf16),
	}
}

// csaIndexer is csa.py's CSAIndexer: the index queries from the query
// latent (wq_b), the head weights (weights_proj), its own compressor of
// dsa_indexer_head_dim, the scores of every causal compressed entry, and
// the top-k.
func (b *builder) csaIndexer(scope string, r int) []Op {
	a := b.a
	ca := a.CompressedAttention
	ih, id := float64(ca.DSAIndexerNHeads), float64(ca.DSAIndexerHeadDim)
	entries := float64(b.l.Seq) / float64(r) / 2 // causal half
	ops := []Op{
		b.gemm("indexer_wq_b", scope, b.T, float64(a.MLA.QLoraRank), ih*id),
		b.gemm("indexer_weights_proj", scope, b.T, float64(a.Hidden), ih),
	}
	ops = append(ops, b.compressor("indexer_compressor", scope, r, id)...)
	return append(ops,
		Op{Name: "indexer_scores", Kind: KindAttention, Scope: scope, FLOPs: 2 * b.T * entries * ih * id, Bytes: b.T * (ih*id*bf16 + entries*4)},
		b.mem("indexer_topk", scope, KindElementwise, b.T*(entries*4+float64(ca.DSAIndexerTopK)*8)))
}

// reverseOps is the backward of a run of forward ops, in reverse: a GEMM's
// data and weight gradients, every other op once.
func reverseOps(ops []Op) []Op {
	var out []Op
	for i := len(ops) - 1; i >= 0; i-- {
		if ops[i].Kind == KindGEMM {
			out = append(out, gemmBwd(ops[i])...)
		} else {
			out = append(out, backward(ops[i]))
		}
	}
	return out
}

// withHyperConnection wraps a block (the attention or the feed-forward of
// a layer) in DeepSeek-V4's manifold-constrained hyper-connection when the
// model has one (enable_hyper_connections; HyperConnectionModule, NVIDIA/
// Megatron-LM megatron/core/transformer/hyper_connection.py): before the
// block, the n residual streams' RMS scale and mapping_proj (n·h to
// n²+2n), the mappings H_pre, H_post and the Sinkhorn-normalised H_res,
// and the aggregation of the streams into the block's input; after it, the
// residual mix H_res·x plus H_post times the block's output. The ops
// before the block take its first op's scope (attn, mlp or moe_router),
// the one after it its last op's (attn, mlp or moe_postprocess): the
// connection is part of the block the layer runs in _forward_attention or
// _forward_mlp, and a graph of part of the block holds the part beside
// it. On Blackwell Megatron-Bridge's DeepSeek-V4 bridge turns on
// the fused kernels (use_fused_mhc, deepseek_v4_supports_blackwell_fused_
// kernels); elsewhere each Sinkhorn iteration is a row and a column
// normalisation.
func (b *builder) withHyperConnection(fwd, bwd []Op) ([]Op, []Op) {
	hc := b.a.HyperConnections
	if hc == nil || len(fwd) == 0 {
		return fwd, bwd
	}
	s, last := fwd[0].Scope, fwd[len(fwd)-1].Scope
	n := float64(hc.NumResidualStreams)
	h := float64(b.a.Hidden)
	t := b.Ts
	streams := t * n * h * bf16
	pre := []Op{
		b.mem("hc_rms", s, KindNorm, streams),
		b.gemm("hc_mapping_proj", s, t, n*h, n*n+2*n),
		b.mem("hc_compute_h", s, KindElementwise, 2*t*(n*n+2*n)*4),
	}
	sinkhorn := b.mem("hc_sinkhorn", s, KindElementwise, 2*t*n*n*4)
	if b.fusedHyperConnection() {
		pre = append(pre, sinkhorn)
	} else {
		for range 2 * hc.MHCSinkhornIterations {
			pre = append(pre, sinkhorn)
		}
	}
	pre = append(pre, b.mem("hc_aggregate", s, KindElementwise, streams+t*h*bf16))
	post := b.mem("hc_res_post", last, KindElementwise, 2*streams+t*h*bf16)

	f := append(append(pre, fwd...), post)
	bw := append([]Op{backward(post)}, bwd...)
	return f, append(bw, reverseOps(pre)...)
}

// fusedHyperConnection reports whether the job runs the fused mHC kernels:
// on Blackwell (compute capability 10 and later: every GPU type but the
// Hopper ones).
func (b *builder) fusedHyperConnection() bool {
	g := strings.ToLower(b.l.GPU)
	return g != "h100" && g != "h200"
}

// compressedAttentionParams is one DeepSeek-V4 attention's parameters on
// this rank at compression ratio r: q_down_proj (duplicated over TP),
// q_up_proj, kv_up_proj, the grouped output projection and linear_proj
// (DSv4HybridSelfAttention), the compressor at r > 1 (wkv, wgate and its
// position bias ape, duplicated) and the indexer at r = 4 (wq_b,
// weights_proj, its compressor).
func (b *builder) compressedAttentionParams(r int) float64 {
	a := b.a
	m, ca := a.MLA, a.CompressedAttention
	h, tp := float64(a.Hidden), float64(b.tp)
	heads, D := float64(a.Heads), float64(m.VHeadDim)
	ql, or := float64(m.QLoraRank), float64(m.OLoraRank)
	out := heads * D * h // a plain output projection
	if grouped(m) {
		out = heads*D*or + float64(m.OGroups)*or*h
	}
	p := h*ql + (ql*heads*D+out)/tp + h*D
	comp := func(d float64) float64 {
		coff := 1.0
		if r == 4 {
			coff = 2
		}
		return 2*h*coff*d + float64(r)*coff*d
	}
	if r > 1 {
		p += comp(D)
	}
	if r == 4 {
		ih, id := float64(ca.DSAIndexerNHeads), float64(ca.DSAIndexerHeadDim)
		p += ql*ih*id + h*ih + comp(id)
	}
	return p
}

// hyperConnectionParams is one HyperConnectionModule's parameters:
// mapping_proj (n·h to n²+2n), the RMS norm over the n streams, the bias
// and the three gating factors; none without hyper-connections.
func (b *builder) hyperConnectionParams() float64 {
	hc := b.a.HyperConnections
	if hc == nil {
		return 0
	}
	n, h := float64(hc.NumResidualStreams), float64(b.a.Hidden)
	return n*h*(n*n+2*n) + n*h + n*n + 2*n + 3
}

// grouped reports whether the attention projects its output through
// o_groups low-rank groups (DeepSeek-V4) rather than straight to hidden.
func grouped(m *presets.MLA) bool { return m.OGroups > 0 && m.OLoraRank > 0 }
