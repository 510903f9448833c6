package stepmodel

import "cgtune/presets"

// gdnChunk is the chunk length of flash-linear-attention's chunked gated
// delta rule (fla/ops/gated_delta_rule/chunk.py, BT = 64), the kernel
// Megatron-Core's GatedDeltaNet calls for training.
const gdnChunk = 64.0

// gatedDeltaNet is a gated delta-net mixer as Megatron-Core runs it
// (GatedDeltaNet.forward, MLM megatron/core/ssm/gated_delta_net/gdn.py
// and common.py at the commit MB HEAD pins, 2a75ac1): the input norm
// fused with in_proj (q, k, v, the output gate z, beta and alpha in one
// GEMM), the causal convolution over q, k and v, the kernel inputs (L2
// norm of q and k, the decay g and write strength beta), the chunked
// gated delta rule, the gated RMSNorm and out_proj. The layer sits under
// self_attention, so its ops carry the attn scope.
//
// The chunked rule is flash-linear-attention's chunk_gated_delta_rule:
// six kernels forward (chunk_local_cumsum, chunk_scaled_dot_kkt_fwd,
// solve_tril, recompute_w_u_fwd, chunk_gated_delta_rule_fwd_h,
// chunk_fwd_o) and ten backward. Per token and value head, with chunk C,
// key dim dk and value dim dv, the forward does 2·C·dk for K·Kᵀ within the
// chunk, C²/3 for the triangular solve, 2·C·(dk+dv) for the WY factors w
// and u, 4·dk·dv for the state update across chunks and 2·dk·dv +
// 2·C·(dk+dv) for the output (Yang, Kautz, Hatamizadeh, "Gated Delta
// Networks", ICLR 2025, the chunkwise form); the backward twice that.
func (b *builder) gatedDeltaNet() (fwd, bwd []Op) {
	la := b.a.LinearAttention
	s := presets.ScopeAttn
	h := float64(b.a.Hidden)
	tp := float64(b.tp)
	dk, dv := float64(la.LinearKeyHeadDim), float64(la.LinearValueHeadDim)
	qk := dk * float64(la.LinearNumKeyHeads) / tp  // q (and k) width on this rank
	v := dv * float64(la.LinearNumValueHeads) / tp // v (and z) width
	nv := float64(la.LinearNumValueHeads) / tp     // value heads on this rank
	conv := 2*qk + v
	C := gdnChunk

	norm := b.mem("input_layernorm", s, KindNorm, 2*b.Ts*h*bf16)
	in := b.gemm("in_proj", s, b.T, h, 2*qk+2*v+2*nv)
	conv1d := Op{Name: "causal_conv1d", Kind: KindElementwise, Scope: s,
		FLOPs: 2 * b.T * conv * float64(la.LinearConvKernelDim), Bytes: 2 * b.T * conv * bf16}
	l2 := b.mem("qk_l2norm", s, KindElementwise, 2*b.T*2*qk*bf16)
	gates := b.mem("gates", s, KindElementwise, b.T*(2*nv*bf16+2*nv*4))
	scan := func(name string, flops float64, bytes float64) Op {
		return Op{Name: name, Kind: KindAttention, Scope: s, FLOPs: b.T * nv * flops, Bytes: b.T * bytes}
	}
	rule := []Op{
		b.mem("gdr_chunk_local_cumsum", s, KindElementwise, 2*b.T*nv*4),
		scan("gdr_scaled_dot_kkt", 2*C*dk, (qk+nv*C)*bf16),
		scan("gdr_solve_tril", C*C/3, 2*nv*C*4),
		scan("gdr_recompute_w_u", 2*C*(dk+dv), (qk+2*v+nv*C)*bf16),
		scan("gdr_fwd_h", 4*dk*dv, (qk+2*v)*bf16),
		scan("gdr_fwd_o", 2*dk*dv+2*C*(dk+dv), (2*qk+2*v)*bf16),
	}
	gnorm := b.mem("gated_rmsnorm", s, KindNorm, 3*b.T*v*bf16)
	out := b.gemm("out_proj", s, b.T, v, h)
	resid := b.mem("residual_add", s, KindElementwise, 3*b.Ts*h*bf16)

	fwd = append(fwd, norm)
	fwd = append(fwd, b.tpComm("sp_all_gather", s)...)
	fwd = append(fwd, in)
	fwd = append(fwd, b.cpAllToAll("gdn_cp_a2a", s, (2*qk+2*v+2*nv)*bf16)...)
	fwd = append(fwd, conv1d, l2, gates)
	fwd = append(fwd, rule...)
	fwd = append(fwd, gnorm)
	fwd = append(fwd, b.cpAllToAll("gdn_cp_a2a_out", s, v*bf16)...)
	fwd = append(fwd, out)
	fwd = append(fwd, b.tpComm("sp_reduce_scatter", s)...)
	fwd = append(fwd, resid)

	bwd = append(bwd, backward(resid))
	bwd = append(bwd, b.tpComm("sp_all_gather_bwd", s)...)
	bwd = append(bwd, gemmBwd(out)...)
	bwd = append(bwd, b.cpAllToAll("gdn_cp_a2a_out_bwd", s, v*bf16)...)
	bwd = append(bwd, backward(gnorm))
	bwd = append(bwd, gdnRuleBackward(rule)...)
	bwd = append(bwd, backward(gates), backward(l2), backward(conv1d))
	bwd = append(bwd, b.cpAllToAll("gdn_cp_a2a_bwd", s, (2*qk+2*v+2*nv)*bf16)...)
	bwd = append(bwd, gemmBwd(in)...)
	bwd = append(bwd, b.tpComm("sp_reduce_scatter_bwd", s)...)
	nb := backward(norm)
	nb.Bytes *= 1.5
	return fwd, append(bwd, nb)
}

// gdnRuleBackward is flash-linear-attention's chunk_gated_delta_rule_bwd:
// the forward's w, u and h recomputed (chunk_scaled_dot_kkt_fwd,
// solve_tril, recompute_w_u_fwd, chunk_gated_delta_rule_fwd_h), then
// chunk_bwd_dv_local, chunk_gated_delta_rule_bwd_dhu, chunk_bwd_dqkwg,
// prepare_wy_repr_bwd and the reverse cumsum of the decay's gradient: ten
// kernels, the gradient ones at twice their forward's FLOPs.
func gdnRuleBackward(rule []Op) []Op {
	kkt, tril, wu, h, o := rule[1], rule[2], rule[3], rule[4], rule[5]
	grad := func(name string, from Op, scale float64) Op {
		g := backward(from)
		g.Name, g.FLOPs = name, from.FLOPs*scale
		return g
	}
	return []Op{
		grad("gdr_recompute_kkt", kkt, 1), grad("gdr_recompute_solve_tril", tril, 1),
		grad("gdr_recompute_w_u", wu, 1), grad("gdr_recompute_h", h, 1),
		grad("gdr_bwd_dv_local", o, 1), grad("gdr_bwd_dhu", h, 2),
		grad("gdr_bwd_dqkwg", o, 2), grad("gdr_bwd_wy_repr", wu, 2),
		grad("gdr_bwd_kkt", kkt, 1), grad("gdr_chunk_local_cumsum", rule[0], 1),
	}
}

// cpAllToAll is a context-parallel all-to-all of bytes per token (the
// gated delta-net trades the sequence split for a head split around its
// kernel, a2a_cp_to_hp and a2a_hp_to_cp); none without CP.
func (b *builder) cpAllToAll(name, scope string, bytesPerToken float64) []Op {
	if b.cp == 1 {
		return nil
	}
	return []Op{b.coll(name, scope, b.T*bytesPerToken*float64(b.cp-1)/float64(b.cp), LinkNVLink)}
}

// gatedDeltaNetParams is a gated delta-net's parameters on this rank
// (_GDNBase.__init__): in_proj (q, k, v, z, beta, alpha), the depthwise
// conv1d over q, k and v, dt_bias and A_log per value head, the output
// norm and out_proj.
func (b *builder) gatedDeltaNetParams() float64 {
	la := b.a.LinearAttention
	h := float64(b.a.Hidden)
	qk := float64(la.LinearKeyHeadDim * la.LinearNumKeyHeads)
	v := float64(la.LinearValueHeadDim * la.LinearNumValueHeads)
	nv := float64(la.LinearNumValueHeads)
	conv := (2*qk + v) * float64(la.LinearConvKernelDim)
	return (h*(2*qk+2*v+2*nv)+conv+2*nv+v*h)/float64(b.tp) + float64(la.LinearValueHeadDim)
}
