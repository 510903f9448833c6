package stepmodel

import (
	"math"
	"testing"

	"cgtune/presets"
)

func activationsOf(t *testing.T, m presets.Model, l presets.Layout) activations {
	t.Helper()
	w, err := BuildWorkload(m, l, WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return newActivations(w)
}

// What a gated delta-net mixer saves per token (GatedDeltaNet.forward,
// Qwen3-Next's sizes, bf16, TP 1): the norm input and in_proj's input (2h
// each), in_proj's output (q, k, v, z, beta, alpha: 2·(2·2048 + 2·4096 +
// 2·32)), the convolution's output (2·(2·2048 + 4096)), q and k
// normalised and repeated to the 32 value heads (2·2·128·32), v (2·4096),
// g and beta in fp32 (8·32), the rule's output (2·4096) and the gated
// norm's output (2·4096), which gdn_norm_out recomputes.
func TestGatedDeltaNetActivations(t *testing.T) {
	const h, qk, v, nv = 2048.0, 2048.0, 4096.0, 32.0
	want := 2*h + 2*h + 2*(2*qk+2*v+2*nv) + 2*(2*qk+v) + 2*2*128*nv + 2*v + 8*nv + 2*v + 2*v
	x := activationsOf(t, qwen3Next, single)
	if got := x.perToken(presets.LayerGDNMoE, presets.ScopeAttn); got != want {
		t.Errorf("gated delta-net saves %.0f bytes per token, want %.0f", got, want)
	}
	l := single
	l.RecomputeModules = []string{"gdn_norm_out"}
	if got := activationsOf(t, qwen3Next, l).perToken(presets.LayerGDNMoE, presets.ScopeAttn); got != want-2*v {
		t.Errorf("with gdn_norm_out recomputed: %.0f bytes per token, want %.0f", got, want-2*v)
	}
}

// A latent MoE's experts hold and save latent-wide tokens (Nemotron 3
// Super: 512 experts of 2688 over a latent of 1024, squared ReLU, top-22,
// a shared expert of 5376): per rank at EP 8, 64 experts of 2·1024·2688
// weights; the router (4096·512), the shared expert (2·4096·5376) and the
// two latent projections (2·4096·1024) are dense. Each routed copy saves
// its latent input (2·1024), fc1's output (2·2688) and the activation's
// (2·2688) and its probability (4); fc2_latent_proj its latent input.
func TestLatentMoEParamsAndActivations(t *testing.T) {
	l := single
	l.EP, l.NumGPUs = 8, 8
	b := &builder{a: nemotron3Super.Arch, l: l, tp: 1, ep: 8, etp: 1}
	dense, expert := b.layerParamsSplit(presets.LayerMoEOnly)
	if want := 64 * 2 * 1024 * 2688.0; expert != want {
		t.Errorf("expert parameters %.4g, want %.4g", expert, want)
	}
	if want := 4096*512 + 2*4096*5376 + 2*4096*1024.0; dense != want {
		t.Errorf("dense MoE parameters %.4g, want %.4g", dense, want)
	}
	x := activationsOf(t, nemotron3Super, l)
	if got, want := x.perToken(presets.LayerMoEOnly, presets.ScopeMoE), 22*(2*1024+2*2688+2*2688+4.0); got != want {
		t.Errorf("experts save %.0f bytes per token, want %.0f", got, want)
	}
	if got := x.perToken(presets.LayerMoEOnly, ScopeMoEPostprocess); got != 2*1024 {
		t.Errorf("postprocess saves %.0f bytes per token, want fc2_latent_proj's latent input", got)
	}
	l.OffloadModules = []string{"fused_group_mlp"}
	if got := activationsOf(t, nemotron3Super, l).perToken(presets.LayerMoEOnly, presets.ScopeMoE); got != 22*4 {
		t.Errorf("with the fused grouped MLP offloaded the experts keep %.0f bytes per token, want the probabilities", got)
	}
}

// DeepSeek-V4's attention: the compressor at ratio 4 (two projections of
// 2·512 and the pooled entries, 2·2·2·512 + 2·512/4) and the indexer (its
// 64 queries of 128 and head weights, 2·64·129, and the indices of the
// 512 entries kept, 8·512) on top of the sliding window's; mla_up_proj
// recomputes the query and key-value head (2·2·(64 + 1)·512); each block's
// hyper-connection keeps the 4 streams (2·4·4096), the block output
// (2·4096) and the mappings (8·24), the streams only with mhc recomputed.
func TestCompressedAttentionAndHyperConnectionActivations(t *testing.T) {
	x := activationsOf(t, dsv4, single)
	csa, swa := x.perToken(presets.LayerCSAMoE, presets.ScopeAttn), x.perToken(presets.LayerSWAMoE, presets.ScopeAttn)
	if want := 2*2*2*512 + 2*512/4.0 + 2*64*129 + 8*512; csa-swa != want {
		t.Errorf("ratio 4 saves %.0f bytes per token more than the window only, want %.0f", csa-swa, want)
	}
	l := single
	l.RecomputeModules = []string{"mla_up_proj", "mhc"}
	r := activationsOf(t, dsv4, l)
	hc := 2*4*4096 + 2*4096 + 8*24.0
	if d := swa - r.perToken(presets.LayerSWAMoE, presets.ScopeAttn); d != 2*2*65*512+hc-2*4*4096 {
		t.Errorf("mla_up_proj and mhc recompute drop %.0f bytes per token, want %.0f", d, 2*2*65*512+hc-2*4*4096)
	}
	plain := dsv4
	plain.Arch.HyperConnections = nil
	p := activationsOf(t, plain, single)
	for _, s := range []string{presets.ScopeAttn, presets.ScopeMoERouter} {
		if d := x.perToken(presets.LayerSWAMoE, s) - p.perToken(presets.LayerSWAMoE, s); d != hc {
			t.Errorf("%s: the hyper-connection saves %.0f bytes per token, want %.0f", s, d, hc)
		}
	}
}

// The MTP blocks on the last stage: their layers' activations, each
// block's logits beside the stage's, their parameters (one block's with
// mtp_use_repeated_layer); a hybrid block Transformer Engine leaves eager
// adds no graph memory.
func TestMTPMemory(t *testing.T) {
	l := presets.Layout{GPU: "gb200", NumGPUs: 64, EP: 64, GBS: 512, MBS: 1, Seq: 8192, Precision: "bf16"}
	with := l
	with.MTPLayers = 2
	x0, x2 := activationsOf(t, nemotron3Super, l), activationsOf(t, nemotron3Super, with)
	if x2.head() != 3*x0.head() {
		t.Errorf("the head with two MTP blocks keeps %.4g bytes, want three times %.4g", x2.head(), x0.head())
	}
	te := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{presets.ScopeAttn, presets.ScopeMamba}, Warmup: 3}
	b0, b2 := breakdown(t, nemotron3Super, l, te), breakdown(t, nemotron3Super, with, te)
	if b2.Activations <= b0.Activations || b2.Graphs != b0.Graphs {
		t.Errorf("two MTP blocks: activations %d → %d MiB, graphs %d → %d MiB; want more activations, the same graphs", b0.Activations, b2.Activations, b0.Graphs, b2.Graphs)
	}
	rep := with
	rep.MTPUseRepeatedLayer = true
	br := breakdown(t, nemotron3Super, rep, te)
	bl := &builder{a: nemotron3Super.Arch, l: rep, tp: 1, ep: 64, etp: 1}
	block := bl.layerParams(presets.LayerAttention) + bl.layerParams(presets.LayerMoEOnly)
	if d := b2.Weights - br.Weights; math.Abs(float64(d)-block*weightBytes/(1<<20)) > 1 {
		t.Errorf("a repeated MTP layer saves %d MiB of weights, want one block's %.0f", d, block*weightBytes/(1<<20))
	}
}
