package stepmodel

import (
	"math"
	"slices"
	"strings"

	"cgtune/presets"
)

// builder turns an architecture and layout into ops. The per-layer kernel
// sequences follow what Megatron-Core with Transformer Engine launches in
// bf16 (one launch per op; fp8 casts are folded into the GEMMs):
//
//	dense layer  fwd 11, bwd 15
//	MoE layer    fwd 36 (+1 host sync when dropless), bwd 31; a shared expert adds 3 and 5
//	Mamba layer  fwd 11, bwd 13
//	gated delta-net mixer  fwd 14, bwd 20
//
// With TP > 1 every block adds two sequence-parallel collectives each way;
// with CP > 1 attention adds one KV exchange each way (the gated delta-net
// two all-to-alls). The newer kinds' blocks are in gdn.go, dsv4.go and
// mtp.go.
//
// TestKernelCountsPerLayer and TestGatedDeltaNetLayerOps pin these numbers.
type builder struct {
	a          presets.Arch
	l          presets.Layout
	tp, cp, ep int
	etp        int
	T, Ts      float64 // tokens per micro-batch on this rank; Ts after sequence parallel
	gemmScale  float64
	dropless   bool
	// capacity is moe_expert_capacity_factor of drop-and-pad experts (0:
	// dropless or none): every expert's input is padded to it.
	capacity float64
}

func (b *builder) mem(name, scope string, kind OpKind, bytes float64) Op {
	return Op{Name: name, Kind: kind, Scope: scope, Bytes: bytes}
}

func (b *builder) gemm(name, scope string, m, k, n float64) Op {
	return Op{Name: name, Kind: KindGEMM, Scope: scope, FLOPs: 2 * m * k * n,
		Bytes: (m*k + k*n + m*n) * bf16, RateScale: b.gemmScale}
}

func (b *builder) coll(name, scope string, bytes float64, link string) Op {
	return Op{Name: name, Kind: KindCollective, Scope: scope, Bytes: bytes, Link: link}
}

// tpLink is the link a TP collective uses: TP stays inside a node.
func (b *builder) tpComm(name, scope string) []Op {
	if b.tp == 1 {
		return nil
	}
	bytes := b.T * float64(b.a.Hidden) * bf16 * float64(b.tp-1) / float64(b.tp)
	return []Op{b.coll(name, scope, bytes, LinkNVLink)}
}

// nvlinkDomain is how many GPUs share NVLink: a GB200/GB300 NVL72 rack,
// otherwise one 8-GPU node.
func (b *builder) nvlinkDomain() int {
	if strings.HasPrefix(b.l.GPU, "gb") {
		return 72
	}
	return 8
}

// epAllToAll is an expert-parallel all-to-all of bytes per GPU: the share
// for peers inside the NVLink domain moves over NVLink while the rest
// crosses the network.
func (b *builder) epAllToAll(name, scope string, bytes float64) Op {
	local := min(b.ep, max(1, b.nvlinkDomain()/b.tp))
	out := bytes * float64(b.ep-1) / float64(b.ep)
	op := b.coll(name, scope, out, LinkNVLink)
	if b.ep > 1 {
		op.NetFrac = float64(b.ep-local) / float64(b.ep-1)
	}
	return op
}

func backward(op Op) Op {
	op.Backward = true
	op.Name += "_bwd"
	return op
}

// gemmBwd is the data-gradient and weight-gradient GEMMs of a forward GEMM.
func gemmBwd(op Op) []Op {
	d, w := op, op
	d.Name, w.Name = op.Name+"_dgrad", op.Name+"_wgrad"
	d.Backward, w.Backward = true, true
	return []Op{d, w}
}

func (b *builder) layer(lt *LayerTrace) {
	var fwd, bwd []Op
	add := func(f []Op, bw []Op) {
		fwd = append(fwd, f...)
		bwd = append(bw, bwd...) // backward runs in reverse order
	}
	switch lt.Kind.Mixer() {
	case presets.MixerAttention:
		add(b.withHyperConnection(b.attention()))
	case presets.MixerGDN:
		add(b.withHyperConnection(b.gatedDeltaNet()))
	case presets.MixerDSv4:
		add(b.withHyperConnection(b.compressedAttention(lt.Kind.CompressRatio())))
	case presets.MixerMamba:
		add(b.mamba())
	}
	switch lt.Kind.FFN() {
	case presets.FFNMLP:
		add(b.withHyperConnection(b.mlp(presets.ScopeMLP)))
	case presets.FFNMoE:
		add(b.withHyperConnection(b.moe()))
	}
	lt.Fwd, lt.Bwd = fwd, bwd
}

// qkvProjections are the attention's Q, K and V projections (MLA's down
// and up projections with their norms, or GQA's fused qkv_proj) for heads
// query heads per rank, with the per-head Q·K and V dimensions.
func (b *builder) qkvProjections(heads float64) (ops []Op, qkDim, vDim float64) {
	a := b.a
	s := presets.ScopeAttn
	h := float64(a.Hidden)
	tp := float64(b.tp)
	if a.MLA != nil {
		m := a.MLA
		qkDim, vDim = float64(m.QKHeadDim+m.QKRopeDim), float64(m.VHeadDim)
		return []Op{
			b.gemm("q_down_proj", s, b.T, h, float64(m.QLoraRank)),
			b.mem("q_layernorm", s, KindNorm, 2*b.T*float64(m.QLoraRank)*bf16),
			b.gemm("q_up_proj", s, b.T, float64(m.QLoraRank), heads*qkDim),
			b.gemm("kv_down_proj", s, b.T, h, float64(m.KVLoraRank+m.QKRopeDim)),
			b.mem("kv_layernorm", s, KindNorm, 2*b.T*float64(m.KVLoraRank)*bf16),
			b.gemm("kv_up_proj", s, b.T, float64(m.KVLoraRank), heads*float64(m.QKHeadDim+m.VHeadDim)),
		}, qkDim, vDim
	}
	d := float64(a.HeadDim)
	qkDim, vDim = d, d
	kv := math.Max(1, float64(a.KVGroups)/tp)
	q := heads
	if a.AttentionOutputGate {
		q = 2 * heads // the gate is projected with the query (SelfAttention.linear_qkv_out_dim)
	}
	return []Op{b.gemm("qkv_proj", s, b.T, h, (q+2*kv)*d)}, qkDim, vDim
}

// attention is the self-attention block: norm, QKV, rotary, core attention,
// output projection, residual; GQA or MLA.
func (b *builder) attention() (fwd, bwd []Op) {
	a := b.a
	s := presets.ScopeAttn
	h := float64(a.Hidden)
	tp := float64(b.tp)
	heads := float64(a.Heads) / tp
	seqKV := float64(b.l.Seq) // with CP each rank's queries still see the whole sequence
	qkvOps, qkDim, vDim := b.qkvProjections(heads)
	norm := b.mem("input_layernorm", s, KindNorm, 2*b.Ts*h*bf16)
	rotary := b.mem("rotary", s, KindElementwise, 2*b.T*heads*qkDim*2*bf16)
	// Causal attention does half of the QKᵀ and AV products.
	attnFLOPs := 0.5 * 2 * b.T * seqKV * heads * (qkDim + vDim)
	core := Op{Name: "core_attention", Kind: KindAttention, Scope: s, FLOPs: attnFLOPs, Bytes: 4 * b.T * heads * qkDim * bf16}
	proj := b.gemm("out_proj", s, b.T, heads*vDim, h)
	resid := b.mem("residual_add", s, KindElementwise, 3*b.Ts*h*bf16)

	fwd = append(fwd, norm)
	fwd = append(fwd, b.tpComm("sp_all_gather", s)...)
	fwd = append(fwd, qkvOps...)
	fwd = append(fwd, rotary)
	if b.cp > 1 {
		// Ring attention passes K and V of every other CP rank.
		kvBytes := 2 * b.T * heads * qkDim * bf16 * float64(b.cp-1)
		fwd = append(fwd, b.coll("cp_kv_exchange", s, kvBytes, LinkNVLink))
	}
	fwd = append(fwd, core)
	// attention_output_gate: the output times the sigmoid of the gate
	// (Attention._apply_output_gate, one fused kernel each way).
	gate := b.mem("output_gate", s, KindElementwise, 3*b.T*heads*vDim*bf16)
	if a.AttentionOutputGate {
		fwd = append(fwd, gate)
	}
	fwd = append(fwd, proj)
	fwd = append(fwd, b.tpComm("sp_reduce_scatter", s)...)
	fwd = append(fwd, resid)

	bwd = append(bwd, backward(resid))
	bwd = append(bwd, b.tpComm("sp_all_gather_bwd", s)...)
	bwd = append(bwd, gemmBwd(proj)...)
	if a.AttentionOutputGate {
		bwd = append(bwd, backward(gate))
	}
	cb := backward(core)
	cb.FLOPs *= 2 // dQ, dK, dV
	bwd = append(bwd, cb)
	if b.cp > 1 {
		kvBytes := 2 * b.T * heads * qkDim * bf16 * float64(b.cp-1)
		bwd = append(bwd, b.coll("cp_kv_grad_exchange", s, kvBytes, LinkNVLink))
	}
	bwd = append(bwd, backward(rotary))
	for i := len(qkvOps) - 1; i >= 0; i-- {
		if qkvOps[i].Kind == KindGEMM {
			bwd = append(bwd, gemmBwd(qkvOps[i])...)
		} else {
			bwd = append(bwd, backward(qkvOps[i]))
		}
	}
	bwd = append(bwd, b.tpComm("sp_reduce_scatter_bwd", s)...)
	nb := backward(norm)
	nb.Bytes *= 1.5
	bwd = append(bwd, nb)
	return fwd, bwd
}

// ffn is a two-GEMM feed-forward of width f over t tokens of the hidden
// size: fc1, activation, fc2.
func (b *builder) ffn(prefix, scope string, t, f float64) (fwd, bwd []Op) {
	return b.ffnOf(prefix, scope, t, float64(b.a.Hidden), f)
}

// ffnOf is ffn over tokens of width h (a latent MoE's experts work in
// moe_latent_size).
func (b *builder) ffnOf(prefix, scope string, t, h, f float64) (fwd, bwd []Op) {
	up := f
	if b.a.Activation != "squared_relu" {
		up = 2 * f // SwiGLU: gate and up projections in one GEMM
	}
	fc1 := b.gemm(prefix+"fc1", scope, t, h, up)
	act := b.mem(prefix+"activation", scope, KindElementwise, t*(up+f)*bf16)
	fc2 := b.gemm(prefix+"fc2", scope, t, f, h)
	fwd = []Op{fc1, act, fc2}
	actB := backward(act)
	actB.Bytes *= 1.5
	bwd = append(gemmBwd(fc2), actB)
	bwd = append(bwd, gemmBwd(fc1)...)
	return fwd, bwd
}

func (b *builder) mlp(scope string) (fwd, bwd []Op) {
	h := float64(b.a.Hidden)
	norm := b.mem("pre_mlp_layernorm", scope, KindNorm, 2*b.Ts*h*bf16)
	resid := b.mem("residual_add", scope, KindElementwise, 3*b.Ts*h*bf16)
	f, fb := b.ffn("", scope, b.T, float64(b.a.FFNHidden)/float64(b.tp))
	fwd = append(fwd, norm)
	fwd = append(fwd, b.tpComm("sp_all_gather", scope)...)
	fwd = append(fwd, f...)
	fwd = append(fwd, b.tpComm("sp_reduce_scatter", scope)...)
	fwd = append(fwd, resid)
	bwd = append(bwd, backward(resid))
	bwd = append(bwd, b.tpComm("sp_all_gather_bwd", scope)...)
	bwd = append(bwd, fb...)
	bwd = append(bwd, b.tpComm("sp_reduce_scatter_bwd", scope)...)
	nb := backward(norm)
	nb.Bytes *= 1.5
	return fwd, append(bwd, nb)
}

// moe is the MoE block as Megatron-Core runs it (TopKRouter with the
// aux-loss path, the token dispatcher, grouped-GEMM experts): router (and
// a shared expert not overlapped with EP comm), preprocess (token counts
// per expert, exchanged over EP), then the token-count sync when dropless,
// permute, dispatch, expert GEMMs, combine and unpermute. The router and
// dispatcher launch many small kernels whose host cost dominates: that is
// what moe_router and moe_preprocess graphs remove. A latent MoE
// (moe_latent_size) projects the tokens down in MoELayer.preprocess and
// back up in MoELayer.postprocess (MLM megatron/core/transformer/moe/
// moe_layer.py): dispatch, experts and combine move latent-wide tokens.
func (b *builder) moe() (fwd, bwd []Op) {
	m := b.a.MoE
	h := float64(b.a.Hidden)
	width := h // of the tokens the dispatcher moves
	if m.MoELatentSize > 0 {
		width = float64(m.MoELatentSize)
	}
	routerOps, sharedF, sharedB := b.moeRouter()
	pre := b.moePreprocess(width)
	experts, expertsB := b.moeExperts(width)
	post, postB := b.moePostprocess(width)
	fwd = append(append(append(append(append(fwd, routerOps...), sharedF...), pre...), experts...), post...)
	bwd = append(bwd, postB...)
	bwd = append(bwd, expertsB...)
	bwd = append(bwd, moeReverse(pre)...)
	bwd = append(bwd, sharedB...)
	bwd = append(bwd, moeReverse(routerOps[1:])...)
	bwd = append(bwd, b.tpComm("sp_reduce_scatter_bwd", presets.ScopeMoERouter)...)
	nb := backward(routerOps[0])
	nb.Bytes *= 1.5
	return fwd, append(bwd, nb)
}

// moeReverse is the backward of MoE ops: autograd replays the
// differentiable ones in reverse; the count bookkeeping has no backward.
func moeReverse(ops []Op) []Op {
	var out []Op
	for i := len(ops) - 1; i >= 0; i-- {
		o := ops[i]
		switch {
		case o.Kind == KindGEMM:
			out = append(out, gemmBwd(o)...)
		case o.Kind == KindSync, o.Kind == KindCollective && o.Name == "ep_token_counts_exchange",
			o.Name == "routing_map_scatter", o.Name == "aux_loss_tokens_per_expert", o.Name == "aux_loss_tracker",
			o.Name == "permute_index", o.Name == "grouped_gemm_offsets", o.Name == "tokens_per_expert",
			o.Name == "local_tokens_per_expert", o.Name == "output_splits", o.Name == "routing_map_flatten":
		default:
			out = append(out, backward(o))
		}
	}
	return out
}

// moeRouter is the pre-MLP norm, the router and its aux loss, and the
// shared expert (run with the router when not overlapped with EP comm;
// moe_shared_expert_gate scales its output by a sigmoid gate projected
// from the input, SharedExpertMLP).
func (b *builder) moeRouter() (ops, sharedF, sharedB []Op) {
	m := b.a.MoE
	h := float64(b.a.Hidden)
	E, k := float64(m.Experts), float64(m.TopK)
	routed := b.T * k
	r := presets.ScopeMoERouter
	small := func(name string, bytes float64) Op { return b.mem(name, r, KindElementwise, bytes) }
	probs := b.T * E * 4 // fp32 router scores
	norm := b.mem("pre_mlp_layernorm", r, KindNorm, 2*b.Ts*h*bf16)
	router := b.gemm("router_gemm", r, b.T, h, E)
	router.RateScale = 0.5 // the router GEMM runs in fp32
	ops = []Op{norm}
	ops = append(ops, b.tpComm("sp_all_gather", r)...)
	ops = append(ops, small("router_input_fp32", b.T*h*(bf16+4)), router,
		small("router_score", 2*probs), small("router_topk", probs+2*routed*4),
		small("routing_map_scatter", b.T*E*5),
		small("aux_loss_tokens_per_expert", b.T*E), small("aux_loss_probs_sum", probs),
		small("aux_loss_product", 2*E*4), small("aux_loss_scale", 64),
		small("aux_loss_tracker", 64))
	if m.SharedExpertFFN > 0 {
		sharedF, sharedB = b.ffn("shared_", r, b.T, float64(m.SharedExpertFFN)/float64(b.tp))
		if m.MoESharedExpertGate {
			gate := b.gemm("shared_expert_gate", r, b.T, h, 1)
			mul := small("shared_expert_gate_mul", 3*b.T*h*bf16)
			sharedF = append(sharedF, gate, mul)
			sharedB = append(append([]Op{backward(mul)}, gemmBwd(gate)...), sharedB...)
		}
	}
	return ops, sharedF, sharedB
}

// moePreprocess is MoELayer.preprocess: the latent down-projection, if
// any, and the dispatcher's token counts per expert, exchanged over EP.
func (b *builder) moePreprocess(width float64) []Op {
	m := b.a.MoE
	E := float64(m.Experts)
	p := presets.ScopeMoEPreprocess
	small := func(name string, bytes float64) Op { return b.mem(name, p, KindElementwise, bytes) }
	var pre []Op
	if m.MoELatentSize > 0 {
		pre = append(pre, b.gemm("fc1_latent_proj", p, b.T, float64(b.a.Hidden), width))
	}
	return append(pre,
		small("tokens_per_expert", b.T*E+E*4),
		b.epAllToAll("ep_token_counts_exchange", p, E*4*float64(b.ep)),
		small("local_tokens_per_expert", E*4*float64(b.ep)),
		small("output_splits", E*4*float64(b.ep)),
		small("routing_map_flatten", 2*b.T*E))
}

// moeExperts is the token-count sync when dropless, permute, dispatch,
// the grouped expert GEMMs and the combine, over tokens of width.
func (b *builder) moeExperts(width float64) (fwd, bwd []Op) {
	m := b.a.MoE
	E, k := float64(m.Experts), float64(m.TopK)
	routed := b.T * k // token copies this rank sends (and, balanced, receives)
	// Drop-and-pad experts pad every expert's input to its capacity,
	// capacity factor × the balanced share: capacity·E = factor·T·k rows
	// after the permute (MLM megatron/core/transformer/moe/
	// token_dispatcher.py, the drop_and_pad branches, with moe_utils.py
	// get_capacity); the dispatch, the expert GEMMs and the combine move
	// and compute that many rows.
	padded := routed
	if b.capacity > 0 {
		padded = routed * b.capacity
	}
	x := presets.ScopeMoE
	small := func(name string, bytes float64) Op { return b.mem(name, x, KindElementwise, bytes) }
	if b.dropless {
		fwd = append(fwd, Op{Name: "token_counts_to_host", Kind: KindSync, Scope: x, Bytes: E * float64(b.ep) * 8, HostSync: true})
	}
	permute := []Op{
		small("permute_index", b.T*E*5),
		small("permute_gather", 2*padded*width*bf16),
		small("permute_probs", 2*routed*4),
	}
	dispatch := b.epAllToAll("ep_alltoall_dispatch", x, padded*width*bf16)
	sortc := small("sort_chunks_by_expert", 2*padded*width*bf16)
	offsets := small("grouped_gemm_offsets", E*8)
	ef, eb := b.ffnOf("experts_", x, padded, width, float64(m.FFNHidden)/float64(b.etp))
	unsort := small("unsort_chunks", 2*padded*width*bf16)
	combine := b.epAllToAll("ep_alltoall_combine", x, padded*width*bf16)
	fwd = append(fwd, permute...)
	fwd = append(fwd, dispatch, sortc, offsets)
	fwd = append(fwd, ef...)
	fwd = append(fwd, unsort, combine)
	bwd = append(bwd, backward(combine), backward(unsort))
	bwd = append(bwd, eb...)
	bwd = append(bwd, backward(sortc), backward(dispatch))
	return fwd, append(bwd, moeReverse(permute)...)
}

// moePostprocess is what follows the combine: MoELayer.postprocess
// (unpermute, the latent up-projection) and the layer's bias-dropout-add,
// what the hybrid MoETransformerLayer captures as its postprocess graph.
func (b *builder) moePostprocess(width float64) (fwd, bwd []Op) {
	m := b.a.MoE
	h := float64(b.a.Hidden)
	routed := b.T * float64(m.TopK)
	q := ScopeMoEPostprocess
	fwd = []Op{
		b.mem("unpermute_scale_probs", q, KindElementwise, 2*routed*width*bf16),
		b.mem("unpermute_scatter_add", q, KindElementwise, routed*width*bf16+b.T*width*bf16),
	}
	if m.MoELatentSize > 0 {
		fwd = append(fwd, b.gemm("fc2_latent_proj", q, b.T, width, h))
	}
	unpermute := fwd
	resid := b.mem("residual_add", q, KindElementwise, 3*b.Ts*h*bf16)
	fwd = append(append(slices.Clone(fwd), b.tpComm("sp_reduce_scatter", q)...), resid)
	bwd = append(bwd, backward(resid))
	bwd = append(bwd, b.tpComm("sp_all_gather_bwd", q)...)
	return fwd, append(bwd, moeReverse(unpermute)...)
}

// mamba is a Mamba-2 mixer layer: in_proj, causal conv, the chunked SSD
// scan (five kernels in mamba_ssm), gated norm and out_proj.
func (b *builder) mamba() (fwd, bwd []Op) {
	mm := b.a.Mamba
	s := presets.ScopeMamba
	h := float64(b.a.Hidden)
	tp := float64(b.tp)
	dIn := float64(mm.Heads*mm.HeadDim) / tp
	N := float64(mm.StateDim)
	g := float64(mm.Groups)
	nh := float64(mm.Heads) / tp
	inW := 2*dIn + 2*g*N/tp + nh
	const chunk = 256.0
	norm := b.mem("input_layernorm", s, KindNorm, 2*b.Ts*h*bf16)
	in := b.gemm("in_proj", s, b.T, h, inW)
	conv := b.mem("conv1d", s, KindElementwise, 2*b.T*(dIn+2*g*N/tp)*bf16)
	// SSD: intra-chunk quadratic part plus the inter-chunk state recurrence.
	scanFLOPs := 2*b.T*chunk*dIn + 4*b.T*dIn*N
	scan := []Op{
		b.mem("ssd_chunk_cumsum", s, KindElementwise, 2*b.T*nh*4),
		{Name: "ssd_chunk_state", Kind: KindAttention, Scope: s, FLOPs: scanFLOPs / 4, Bytes: b.T * dIn * bf16},
		b.mem("ssd_state_passing", s, KindElementwise, 2*(b.T/chunk)*dIn*N*4),
		{Name: "ssd_bmm_chunk", Kind: KindAttention, Scope: s, FLOPs: scanFLOPs / 4, Bytes: b.T * g * N * bf16},
		{Name: "ssd_chunk_scan", Kind: KindAttention, Scope: s, FLOPs: scanFLOPs / 2, Bytes: 2 * b.T * dIn * bf16},
	}
	gnorm := b.mem("gated_rmsnorm", s, KindNorm, 3*b.T*dIn*bf16)
	out := b.gemm("out_proj", s, b.T, dIn, h)
	resid := b.mem("residual_add", s, KindElementwise, 3*b.Ts*h*bf16)
	fwd = append(fwd, norm)
	fwd = append(fwd, b.tpComm("sp_all_gather", s)...)
	fwd = append(fwd, in, conv)
	fwd = append(fwd, scan...)
	fwd = append(fwd, gnorm, out)
	fwd = append(fwd, b.tpComm("sp_reduce_scatter", s)...)
	fwd = append(fwd, resid)

	bwd = append(bwd, backward(resid))
	bwd = append(bwd, b.tpComm("sp_all_gather_bwd", s)...)
	bwd = append(bwd, gemmBwd(out)...)
	bwd = append(bwd, backward(gnorm))
	for i := len(scan) - 1; i >= 0; i-- {
		o := backward(scan[i])
		o.FLOPs *= 2
		bwd = append(bwd, o)
	}
	bwd = append(bwd, backward(conv))
	bwd = append(bwd, gemmBwd(in)...)
	bwd = append(bwd, b.tpComm("sp_reduce_scatter_bwd", s)...)
	nb := backward(norm)
	nb.Bytes *= 1.5
	return fwd, append(bwd, nb)
}

// head is the last stage's final norm, output layer and fused cross-entropy,
// forward and backward (they run back to back before the layers' backward).
func (b *builder) head() []Op {
	h := float64(b.a.Hidden)
	v := float64(b.a.Vocab) / float64(b.tp)
	norm := b.mem("final_layernorm", ScopeOther, KindNorm, 2*b.Ts*h*bf16)
	out := b.gemm("output_layer", ScopeOther, b.T, h, v)
	ce := b.mem("cross_entropy", ScopeOther, KindElementwise, 2*b.T*v*4)
	ops := []Op{norm}
	ops = append(ops, b.tpComm("sp_all_gather", ScopeOther)...)
	ops = append(ops, out, ce, backward(ce))
	ops = append(ops, gemmBwd(out)...)
	ops = append(ops, b.tpComm("sp_reduce_scatter_bwd", ScopeOther)...)
	nb := backward(norm)
	nb.Bytes *= 1.5
	return append(ops, nb)
}

// optimizer is the distributed Adam step over this rank's shard: grad-norm
// (with its host read of the norm), multi-tensor Adam in chunks, and the
// bf16 parameter copy. Gradient reduce-scatter and parameter all-gather
// overlap with compute in MB's perf recipes and are left out.
func (b *builder) optimizer(shard float64) []Op {
	const chunkParams = 256e6 // parameters per multi-tensor-apply launch group
	chunks := int(math.Max(1, math.Ceil(shard/chunkParams)))
	per := shard / float64(chunks)
	var ops []Op
	for i := 0; i < chunks; i++ {
		ops = append(ops, Op{Name: "grad_norm", Kind: KindOptimizer, Scope: ScopeOther, Bytes: per * 4})
	}
	ops = append(ops, b.coll("grad_norm_allreduce", ScopeOther, 8, LinkNetwork))
	ops = append(ops, Op{Name: "grad_norm_to_host", Kind: KindSync, Scope: ScopeOther, Bytes: 8, HostSync: true})
	for i := 0; i < chunks; i++ {
		// fp32 param, grad, exp_avg, exp_avg_sq read and written; bf16 param written.
		ops = append(ops, Op{Name: "adam", Kind: KindOptimizer, Scope: ScopeOther, Bytes: per * (4*4*2 + 2)})
	}
	for i := 0; i < chunks; i++ {
		ops = append(ops, Op{Name: "zero_grad", Kind: KindOptimizer, Scope: ScopeOther, Bytes: per * 4})
	}
	return ops
}

// layerParams is the parameters of one layer held by this rank: its
// mixer's and its feed-forward block's, with a hyper-connection module
// around each when the model has them.
func (b *builder) layerParams(k presets.LayerKind) float64 {
	var p float64
	switch k.Mixer() {
	case presets.MixerAttention:
		p += b.attentionParams() + b.hyperConnectionParams()
	case presets.MixerGDN:
		p += b.gatedDeltaNetParams() + b.hyperConnectionParams()
	case presets.MixerDSv4:
		p += b.compressedAttentionParams(k.CompressRatio()) + b.hyperConnectionParams()
	case presets.MixerMamba:
		mm := b.a.Mamba
		h := float64(b.a.Hidden)
		dIn := float64(mm.Heads * mm.HeadDim)
		inW := 2*dIn + 2*float64(mm.Groups*mm.StateDim) + float64(mm.Heads)
		p += (h*inW + dIn*h) / float64(b.tp)
	}
	switch k.FFN() {
	case presets.FFNMLP:
		p += b.ffnParams(float64(b.a.Hidden), float64(b.a.FFNHidden))/float64(b.tp) + b.hyperConnectionParams()
	case presets.FFNMoE:
		p += b.moeDenseParams() + b.expertParams() + b.hyperConnectionParams()
	}
	return p
}

// attentionParams is a softmax attention's projections on this rank (GQA,
// the query doubled by attention_output_gate, or MLA).
func (b *builder) attentionParams() float64 {
	a := b.a
	h := float64(a.Hidden)
	tp := float64(b.tp)
	if a.MLA != nil {
		m := a.MLA
		heads := float64(a.Heads)
		return (h*float64(m.QLoraRank) + float64(m.QLoraRank)*heads*float64(m.QKHeadDim+m.QKRopeDim) +
			h*float64(m.KVLoraRank+m.QKRopeDim) + float64(m.KVLoraRank)*heads*float64(m.QKHeadDim+m.VHeadDim) +
			heads*float64(m.VHeadDim)*h) / tp
	}
	d := float64(a.HeadDim)
	q := float64(a.Heads)
	if a.AttentionOutputGate {
		q *= 2
	}
	return (h*(q+2*float64(a.KVGroups))*d + float64(a.Heads)*d*h) / tp
}

// ffnParams is a feed-forward's two (squared ReLU) or three (gated)
// weight matrices between width h and f.
func (b *builder) ffnParams(h, f float64) float64 {
	if b.a.Activation == "squared_relu" {
		return 2 * h * f
	}
	return 3 * h * f
}

// moeDenseParams is an MoE block's parameters that are not routed
// experts: the router, the shared expert and its gate (split over TP),
// and a latent MoE's two projections (duplicated over TP,
// MoELayer.fc1_latent_proj and fc2_latent_proj).
func (b *builder) moeDenseParams() float64 {
	m := b.a.MoE
	h := float64(b.a.Hidden)
	p := h * float64(m.Experts)
	if m.SharedExpertFFN > 0 {
		p += b.ffnParams(h, float64(m.SharedExpertFFN)) / float64(b.tp)
		if m.MoESharedExpertGate {
			p += h
		}
	}
	if m.MoELatentSize > 0 {
		p += 2 * h * float64(m.MoELatentSize)
	}
	return p
}

// expertParams is this rank's routed experts: E/EP experts, each over
// tokens of the hidden size or moe_latent_size, split over ETP.
func (b *builder) expertParams() float64 {
	m := b.a.MoE
	width := float64(b.a.Hidden)
	if m.MoELatentSize > 0 {
		width = float64(m.MoELatentSize)
	}
	return float64(m.Experts) / float64(b.ep) * b.ffnParams(width, float64(m.FFNHidden)) / float64(b.etp)
}
