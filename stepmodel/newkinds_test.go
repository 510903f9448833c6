package stepmodel

import (
	"math"
	"slices"
	"strings"
	"testing"

	"cgtune/presets"
)

// The architectures of MB HEAD's new perf-recipe models, as their
// published HuggingFace configs give them (the values MB's bridges read).
var (
	// Qwen/Qwen3-Next-80B-A3B-Instruct config.json (MB HEAD
	// tests/unit_tests/models/qwen/test_qwen3_next_bridge.py repeats it):
	// 48 layers, hidden 2048, 16 heads of 256 with 2 KV groups, every 4th
	// layer full attention with an output gate, the gated delta-net with
	// 16 key heads and 32 value heads of 128 and a 4-wide convolution, 512
	// experts top-10 of 512 with a gated shared expert of 512.
	qwen3Next = presets.Model{Name: "qwen3_next_80b_a3b", Arch: presets.Arch{Layers: 48, Hidden: 2048, FFNHidden: 5120, Heads: 16, KVGroups: 2, HeadDim: 256, Vocab: 151936,
		MoE:                          &presets.MoE{Experts: 512, TopK: 10, FFNHidden: 512, SharedExpertFFN: 512, MoESharedExpertGate: true},
		ExperimentalAttentionVariant: "gated_delta_net", AttentionOutputGate: true,
		LinearAttention: &presets.LinearAttention{LinearAttentionFreq: 4, LinearConvKernelDim: 4, LinearKeyHeadDim: 128, LinearValueHeadDim: 128,
			LinearNumKeyHeads: 16, LinearNumValueHeads: 32}}}
	// nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16 config.json: 88 hybrid
	// layers, hidden 4096, 32 heads of 128 with 2 KV groups, Mamba-2 with
	// 128 heads of 64, state 128, 8 groups, 512 experts top-22 of 2688 in
	// a latent of 1024, a shared expert of 5376, squared ReLU, the MTP
	// block "*E".
	nemotron3Super = presets.Model{Name: "nemotron_3_super", Arch: presets.Arch{Layers: 88, Hidden: 4096, FFNHidden: 2688, Heads: 32, KVGroups: 2, HeadDim: 128, Vocab: 131072,
		Activation:               "squared_relu",
		MoE:                      &presets.MoE{Experts: 512, TopK: 22, FFNHidden: 2688, SharedExpertFFN: 5376, Router: "sigmoid", MoELatentSize: 1024},
		Mamba:                    &presets.Mamba{StateDim: 128, Heads: 128, HeadDim: 64, Groups: 8},
		HybridPattern:            "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME",
		MTPHybridOverridePattern: "*E"}}
	// deepseek-ai/DeepSeek-V4-Flash config.json as MB HEAD's
	// src/megatron/bridge/models/deepseek/deepseek_v4_bridge.py reads it
	// (its comments give Flash's values): hidden 4096, 64 heads of 512 with
	// rope 64 and one key-value head, q_lora_rank 1024, o_groups 8 of
	// o_lora_rank 1024, window 128, indexer 64 heads of 128 keeping 512,
	// 4 residual streams, 256 experts top-6 of 2048, one shared. Four
	// layers, one of each ratio, keep the tests small.
	dsv4 = presets.Model{Name: "dsv4", Arch: presets.Arch{Layers: 4, Hidden: 4096, FFNHidden: 2048, Heads: 64, HeadDim: 512, Vocab: 129280,
		MoE:                          &presets.MoE{Experts: 256, TopK: 6, FFNHidden: 2048, SharedExpertFFN: 2048, Router: "sqrtsoftplus", MoENHashLayers: 3},
		MLA:                          &presets.MLA{QLoraRank: 1024, KVLoraRank: 512, QKHeadDim: 448, QKRopeDim: 64, VHeadDim: 512, OGroups: 8, OLoraRank: 1024},
		ExperimentalAttentionVariant: "dsv4_hybrid",
		CompressedAttention: &presets.CompressedAttention{CSACompressRatios: []int{0, 4, 128, 4, 0}, CSAWindowSize: 128,
			DSAIndexerNHeads: 64, DSAIndexerHeadDim: 128, DSAIndexerTopK: 512},
		HyperConnections: &presets.HyperConnections{NumResidualStreams: 4, MHCSinkhornIterations: 20}}}
)

func opsNamed(ops []Op, name string) []Op {
	var out []Op
	for _, o := range ops {
		if o.Name == name {
			out = append(out, o)
		}
	}
	return out
}

func oneOp(t *testing.T, ops []Op, name string) Op {
	t.Helper()
	got := opsNamed(ops, name)
	if len(got) != 1 {
		t.Fatalf("%d ops named %s, want 1", len(got), name)
	}
	return got[0]
}

func sumFLOPs(ops []Op, pred func(Op) bool) float64 {
	var f float64
	for _, o := range ops {
		if pred(o) {
			f += o.FLOPs
		}
	}
	return f
}

// A gated delta-net layer's ops, against a hand computation from the
// architecture: in_proj's width is q, k, v, z, beta and alpha
// (_GDNBase.in_proj_dim = 2·qk + 2·v + 2·value heads, MLM
// megatron/core/ssm/gated_delta_net/gdn.py), out_proj maps v back to the
// hidden size, and the chunked rule does, per token and value head,
// 2·C·dk + C²/3 + 4·C·(dk+dv) + 6·dk·dv (the chunkwise gated delta rule
// of Yang, Kautz, Hatamizadeh, "Gated Delta Networks", ICLR 2025, as
// flash-linear-attention's chunk_gated_delta_rule computes it, C = 64).
func TestGatedDeltaNetLayerOps(t *testing.T) {
	for _, tp := range []int{1, 2} {
		l := single
		l.TP, l.NumGPUs = tp, tp
		w, err := BuildWorkload(qwen3Next, l, WorkloadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lt := w.Layers[0]
		if lt.Kind != presets.LayerGDNMoE || w.Layers[3].Kind != presets.LayerMoE {
			t.Fatalf("layer kinds %s, %s", lt.Kind, w.Layers[3].Kind)
		}
		T := float64(l.MBS * l.Seq)
		h, qk, v, nv := 2048.0, 16*128.0, 32*128.0, 32.0
		tpf := float64(tp)
		if got, want := oneOp(t, lt.Fwd, "in_proj").FLOPs, 2*T*h*(2*qk+2*v+2*nv)/tpf; math.Abs(got-want) > 1 {
			t.Errorf("TP%d in_proj %.4g FLOPs, want %.4g", tp, got, want)
		}
		if got, want := oneOp(t, lt.Fwd, "out_proj").FLOPs, 2*T*v/tpf*h; math.Abs(got-want) > 1 {
			t.Errorf("TP%d out_proj %.4g FLOPs, want %.4g", tp, got, want)
		}
		C, dk, dv := 64.0, 128.0, 128.0
		rule := T * nv / tpf * (2*C*dk + C*C/3 + 4*C*(dk+dv) + 6*dk*dv)
		got := sumFLOPs(lt.Fwd, func(o Op) bool { return strings.HasPrefix(o.Name, "gdr_") })
		if math.Abs(got-rule)/rule > 1e-9 {
			t.Errorf("TP%d chunked rule %.4g FLOPs, want %.4g", tp, got, rule)
		}
		if b := sumFLOPs(lt.Bwd, func(o Op) bool { return strings.HasPrefix(o.Name, "gdr_") }); b < 2*rule {
			t.Errorf("TP%d the rule's backward %.4g FLOPs is less than twice its forward %.4g", tp, b, rule)
		}
		// The whole mixer is self_attention: every op before the MoE's
		// pre-MLP norm carries the attn scope, and none syncs with the host.
		attn := func(o Op) bool { return o.Scope == presets.ScopeAttn }
		end := slices.IndexFunc(lt.Fwd, func(o Op) bool { return o.Name == "pre_mlp_layernorm" })
		if n := count(lt.Fwd[:end], attn); n != end || end != 14+2*(tp-1) {
			t.Errorf("TP%d: %d of the mixer's %d forward ops are attn (6 of the rule, 8 around it, 2 collectives with TP)", tp, n, end)
		}
		if n := count(lt.Bwd, attn); n != 20+2*(tp-1) {
			t.Errorf("TP%d: %d attn backward ops, want 20 (10 of the rule)", tp, n)
		}
		if count(lt.Fwd[:end], func(o Op) bool { return o.HostSync }) != 0 {
			t.Error("the gated delta-net has a host sync")
		}
	}
}

// attention_output_gate projects a gate with the query (SelfAttention:
// linear_qkv_out_dim += kv_channels·heads) and multiplies the output by
// its sigmoid (Attention._apply_output_gate), one op each way.
func TestAttentionOutputGate(t *testing.T) {
	w, err := BuildWorkload(qwen3Next, single, WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lt := w.Layers[3]
	T := float64(single.MBS * single.Seq)
	if got, want := oneOp(t, lt.Fwd, "qkv_proj").FLOPs, 2*T*2048*(2*16+2*2)*256.0; math.Abs(got-want) > 1 {
		t.Errorf("qkv_proj %.4g FLOPs, want %.4g", got, want)
	}
	oneOp(t, lt.Fwd, "output_gate")
	oneOp(t, lt.Bwd, "output_gate_bwd")
	m := qwen3Next
	m.Arch.AttentionOutputGate = false
	w, _ = BuildWorkload(m, single, WorkloadOptions{})
	if len(opsNamed(w.Layers[3].Fwd, "output_gate")) != 0 {
		t.Error("an output gate without attention_output_gate")
	}
}

// The parameters the models' own names give, within 2%: Qwen3-Next 80B,
// Nemotron 3 Super 120B (the gated delta-net, the gated attention, the
// latent MoE and the hybrid layers each counted; MTP left out).
func TestTotalParamsMatchTheModelNames(t *testing.T) {
	for _, c := range []struct {
		m    presets.Model
		want float64
	}{{qwen3Next, 80e9}, {nemotron3Super, 120e9}} {
		w, err := BuildWorkload(c.m, single, WorkloadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rel := math.Abs(w.ParamsLocal-c.want) / c.want; rel > 0.02 {
			t.Errorf("%s: %.2fB parameters, the name says %.0fB", c.m.Name, w.ParamsLocal/1e9, c.want/1e9)
		}
	}
}

// A latent MoE projects tokens to moe_latent_size in MoELayer.preprocess
// and back in postprocess (MLM megatron/core/transformer/moe/
// moe_layer.py): the dispatcher moves latent-wide tokens and the experts
// map latent to ffn and back.
func TestLatentMoEOps(t *testing.T) {
	l := single
	l.EP, l.NumGPUs = 8, 8
	w, err := BuildWorkload(nemotron3Super, l, WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lt := w.Layers[1]
	if lt.Kind != presets.LayerMoEOnly {
		t.Fatalf("layer 1 is %s", lt.Kind)
	}
	T := float64(l.MBS * l.Seq)
	h, lat, f, k := 4096.0, 1024.0, 2688.0, 22.0
	down, up := oneOp(t, lt.Fwd, "fc1_latent_proj"), oneOp(t, lt.Fwd, "fc2_latent_proj")
	if down.Scope != presets.ScopeMoEPreprocess || up.Scope != ScopeMoEPostprocess {
		t.Errorf("latent projections in %s and %s, want moe_preprocess and moe_postprocess", down.Scope, up.Scope)
	}
	if math.Abs(down.FLOPs-2*T*h*lat) > 1 || math.Abs(up.FLOPs-2*T*lat*h) > 1 {
		t.Errorf("latent projections %.4g and %.4g FLOPs", down.FLOPs, up.FLOPs)
	}
	if got, want := oneOp(t, lt.Fwd, "ep_alltoall_dispatch").Bytes, T*k*lat*bf16*7/8; math.Abs(got-want) > 1 {
		t.Errorf("dispatch moves %.4g bytes, want %.4g (latent-wide tokens)", got, want)
	}
	if got, want := oneOp(t, lt.Fwd, "experts_fc1").FLOPs, 2*T*k*lat*f; math.Abs(got-want) > 1 {
		t.Errorf("experts_fc1 %.4g FLOPs, want %.4g", got, want)
	}
}

// DeepSeek-V4's attention by compression ratio (csa.py): the sparse
// attention reads the sliding window and, at ratio 4, the indexer's top-k
// compressed entries, at 128 the causal half of all of them, QKᵀ and AV
// over v_head_dim for every head; a compressor (two projections of
// coff·D, coff 2 at ratio 4) exists only at r > 1 and the indexer only at 4.
func TestCompressedAttentionByRatio(t *testing.T) {
	l := single
	l.Seq = 8192 // the top-k (512) is not the causal half of the entries (1024)
	w, err := BuildWorkload(dsv4, l, WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	T, S := float64(l.MBS*l.Seq), float64(l.Seq)
	h, H, D := 4096.0, 64.0, 512.0
	for i, c := range []struct {
		ratio      int
		keys, coff float64
		indexer    bool
	}{{0, 128, 0, false}, {4, 128 + 512, 2, true}, {128, 128 + S/128/2, 1, false}} {
		lt := w.Layers[i]
		if lt.Kind.CompressRatio() != c.ratio {
			t.Fatalf("layer %d ratio %d, want %d", i, lt.Kind.CompressRatio(), c.ratio)
		}
		if got, want := oneOp(t, lt.Fwd, "sparse_attention").FLOPs, 4*T*H*c.keys*D; math.Abs(got-want) > 1 {
			t.Errorf("ratio %d: attention %.4g FLOPs, want %.4g", c.ratio, got, want)
		}
		wkv := opsNamed(lt.Fwd, "compressor_wkv")
		switch {
		case c.coff == 0 && len(wkv) != 0, c.coff > 0 && len(wkv) != 1:
			t.Errorf("ratio %d: %d compressors", c.ratio, len(wkv))
		case c.coff > 0 && math.Abs(wkv[0].FLOPs-2*T*h*c.coff*D) > 1:
			t.Errorf("ratio %d: compressor %.4g FLOPs", c.ratio, wkv[0].FLOPs)
		}
		if got := len(opsNamed(lt.Fwd, "indexer_scores")) == 1; got != c.indexer {
			t.Errorf("ratio %d: indexer %t", c.ratio, got)
		}
		if c.indexer {
			if got, want := oneOp(t, lt.Fwd, "indexer_scores").FLOPs, 2*T*(S/4/2)*64*128; math.Abs(got-want) > 1 {
				t.Errorf("indexer scores %.4g FLOPs, want %.4g", got, want)
			}
		}
	}
}

// Manifold hyper-connections (HyperConnectionModule) wrap each block: the
// mapping projection of the n streams (n·h to n²+2n per token) before it,
// the residual mix after it, in the block's own scope; the unfused
// Sinkhorn (Hopper) is two kernels per iteration, the fused one (Blackwell,
// use_fused_mhc) one. The streams widen what passes between layers.
func TestHyperConnectionWrapsEachBlock(t *testing.T) {
	for _, c := range []struct {
		gpu      string
		sinkhorn int
	}{{"gb200", 1}, {"h100", 40}} {
		l := single
		l.GPU = c.gpu
		w, err := BuildWorkload(dsv4, l, WorkloadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lt := w.Layers[0]
		maps := opsNamed(lt.Fwd, "hc_mapping_proj")
		if len(maps) != 2 || maps[0].Scope != presets.ScopeAttn || maps[1].Scope != presets.ScopeMoERouter {
			t.Fatalf("%s: %d mapping projections in %v", c.gpu, len(maps), maps)
		}
		T, n, h := float64(single.MBS*single.Seq), 4.0, 4096.0
		if got, want := maps[0].FLOPs, 2*T*n*h*(n*n+2*n); math.Abs(got-want) > 1 {
			t.Errorf("mapping projection %.4g FLOPs, want %.4g", got, want)
		}
		if got := len(opsNamed(lt.Fwd, "hc_sinkhorn")); got != 2*c.sinkhorn {
			t.Errorf("%s: %d Sinkhorn kernels in the layer, want %d per block", c.gpu, got, c.sinkhorn)
		}
		if lt.Fwd[0].Name != "hc_rms" || lt.Fwd[len(lt.Fwd)-1].Name != "hc_res_post" {
			t.Errorf("%s: the layer runs %s … %s", c.gpu, lt.Fwd[0].Name, lt.Fwd[len(lt.Fwd)-1].Name)
		}
	}
	l := single
	l.PP, l.NumGPUs, l.GBS = 2, 2, 8
	w, _ := BuildWorkload(dsv4, l, WorkloadOptions{})
	plain := dsv4
	plain.Arch.HyperConnections = nil
	w0, _ := BuildWorkload(plain, l, WorkloadOptions{})
	if w.Pre[0].Bytes != 4*w0.Pre[0].Bytes || w.StaticBufferBytes() != 4*w0.StaticBufferBytes() {
		t.Errorf("four streams pass %.4g bytes between stages (one: %.4g), graphs' static buffers %.4g (%.4g)",
			w.Pre[0].Bytes, w0.Pre[0].Bytes, w.StaticBufferBytes(), w0.StaticBufferBytes())
	}
}

// The last stage runs the MTP blocks after its decoder layers
// (MultiTokenPredictionLayer): per block the prelude (embedding, enorm,
// hnorm, eh_proj 2h→h) outside any cuda-graph scope, the block's layers
// (Nemotron 3 Super's "*E"), and its own head with the stage's; a slice
// of the stage has none.
func TestMTPBlocksOnTheLastStage(t *testing.T) {
	l := single
	l.MTPLayers = 2
	w, err := BuildWorkload(nemotron3Super, l, WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mtp := w.Layers[88:]
	var kinds []presets.LayerKind
	for _, lt := range mtp {
		if !lt.MTP {
			t.Errorf("layer %d is not marked MTP", lt.Index)
		}
		kinds = append(kinds, lt.Kind)
	}
	if want := []presets.LayerKind{presets.LayerAttention, presets.LayerMoEOnly, presets.LayerAttention, presets.LayerMoEOnly}; !slices.Equal(kinds, want) {
		t.Fatalf("MTP layers %v, want %v", kinds, want)
	}
	for _, i := range []int{0, 2} {
		eh := oneOp(t, mtp[i].Fwd, "mtp_eh_proj")
		T, h := float64(l.MBS*l.Seq), 4096.0
		if eh.Scope != ScopeOther || math.Abs(eh.FLOPs-2*T*2*h*h) > 1 {
			t.Errorf("block %d: eh_proj scope %s, %.4g FLOPs", i/2, eh.Scope, eh.FLOPs)
		}
	}
	if len(opsNamed(mtp[1].Fwd, "mtp_eh_proj")) != 0 {
		t.Error("the second layer of a block has a prelude")
	}
	if n := len(opsNamed(w.Head, "mtp_output_layer")); n != 2 {
		t.Errorf("%d MTP output layers in the head, want 2", n)
	}
	sliced, _ := BuildWorkload(nemotron3Super, l, WorkloadOptions{RunLayers: 4})
	if len(sliced.Layers) != 4 {
		t.Errorf("a 4-layer slice builds %d layers", len(sliced.Layers))
	}
	// mtp_use_repeated_layer holds one block's parameters for both.
	l.MTPUseRepeatedLayer = true
	rep, _ := BuildWorkload(nemotron3Super, l, WorkloadOptions{})
	b := &builder{a: nemotron3Super.Arch, l: l, tp: 1, ep: 1, etp: 1}
	block := b.layerParams(presets.LayerAttention) + b.layerParams(presets.LayerMoEOnly)
	if d := w.ParamsLocal - rep.ParamsLocal; math.Abs(d-block) > 1 {
		t.Errorf("repeating the MTP layer saves %.4g parameters, want one block's %.4g", d, block)
	}
}

// Without o_groups and o_lora_rank the heads' outputs go straight to the
// hidden size (heads × v_head_dim → hidden); without MLA there is no
// DeepSeek-V4 attention to build, and the build says so.
func TestCompressedAttentionEdges(t *testing.T) {
	plain := dsv4
	mla := *dsv4.Arch.MLA
	mla.OGroups, mla.OLoraRank = 0, 0
	plain.Arch.MLA = &mla
	w, err := BuildWorkload(plain, single, WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	T := float64(single.MBS * single.Seq)
	if got, want := oneOp(t, w.Layers[0].Fwd, "out_proj").FLOPs, 2*T*64*512*4096.0; math.Abs(got-want) > 1 {
		t.Errorf("out_proj %.4g FLOPs, want %.4g", got, want)
	}
	if len(opsNamed(w.Layers[0].Fwd, "o_group_proj")) != 0 {
		t.Error("a grouped projection without o_groups")
	}
	none := dsv4
	none.Arch.MLA = nil
	if _, err := BuildWorkload(none, single, WorkloadOptions{}); err == nil || !strings.Contains(err.Error(), "needs mla") {
		t.Errorf("no MLA: %v", err)
	}
}
