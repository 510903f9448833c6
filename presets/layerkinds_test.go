package presets

import (
	"slices"
	"testing"
)

// Qwen3-Next 80B-A3B: 48 layers, full_attention_interval 4 (HF
// Qwen/Qwen3-Next-80B-A3B-Instruct config.json; MB HEAD
// tests/unit_tests/models/qwen/test_qwen3_next_bridge.py), which MB's
// bridge writes as linear_attention_freq; MCore makes layer i softmax
// attention when (i+1) % 4 == 0 (get_linear_attention_pattern).
func TestLayerKindsGatedDeltaNetPattern(t *testing.T) {
	a := Arch{Layers: 48, ExperimentalAttentionVariant: "gated_delta_net",
		LinearAttention: &LinearAttention{LinearAttentionFreq: 4},
		MoE:             &MoE{Experts: 512, TopK: 10, FFNHidden: 512}}
	kinds := a.LayerKinds()
	if len(kinds) != 48 {
		t.Fatalf("%d kinds", len(kinds))
	}
	for i, k := range kinds {
		want := LayerGDNMoE
		if i%4 == 3 {
			want = LayerMoE
		}
		if k != want {
			t.Errorf("layer %d is %s, want %s", i, k, want)
		}
	}
	// A list pattern is taken as given; without MoE the layers are dense.
	a = Arch{Layers: 3, ExperimentalAttentionVariant: "gdn", LinearAttention: &LinearAttention{LinearAttentionPattern: []int{0, 1, 1}}}
	if got := a.LayerKinds(); !slices.Equal(got, []LayerKind{LayerDense, LayerGDN, LayerGDN}) {
		t.Errorf("pattern [0 1 1]: %v", got)
	}
	if !a.HasAttention() || !a.HasDenseMLP() || a.HasMamba() {
		t.Errorf("gated delta-net layers sit under self_attention with a dense MLP: attention %t, mlp %t, mamba %t", a.HasAttention(), a.HasDenseMLP(), a.HasMamba())
	}
}

// DeepSeek-V4 Flash's first layers: csa_compress_ratios [0, 0, 4, 128,
// ...] then the MTP layer's 0 (MB HEAD src/megatron/bridge/models/deepseek/
// deepseek_v4_bridge.py _dsv4_compress_ratios; every layer MoE).
func TestLayerKindsCompressedAttentionByRatio(t *testing.T) {
	a := Arch{Layers: 4, ExperimentalAttentionVariant: "dsv4_hybrid", MoE: &MoE{Experts: 8, TopK: 2, FFNHidden: 64},
		CompressedAttention: &CompressedAttention{CSACompressRatios: []int{0, 1, 4, 128, 0}}}
	want := []LayerKind{LayerSWAMoE, LayerSWAMoE, LayerCSAMoE, LayerHCAMoE}
	if got := a.LayerKinds(); !slices.Equal(got, want) {
		t.Errorf("kinds %v, want %v", got, want)
	}
	if got := a.MTPLayerKinds(1); !slices.Equal(got, []LayerKind{LayerSWAMoE}) {
		t.Errorf("MTP kinds %v, want the MTP entry's ratio 0", got)
	}
	for _, k := range want {
		if !k.HasSelfAttention() || k.FFN() != FFNMoE || k.Mixer() != MixerDSv4 {
			t.Errorf("%s: self-attention %t, ffn %q, mixer %q", k, k.HasSelfAttention(), k.FFN(), k.Mixer())
		}
	}
	if a.HasDenseMLP() {
		t.Error("every DeepSeek-V4 layer is MoE: no dense MLP")
	}
	if LayerCSAMoE.CompressRatio() != 4 || LayerHCA.CompressRatio() != 128 || LayerSWA.CompressRatio() != 0 {
		t.Error("compression ratios of the kinds")
	}
}

// Nemotron 3 Super's MTP block is "*E" (attention, then MoE) per depth
// (HF nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16 config.json
// mtp_hybrid_override_pattern); a plain transformer's is its last layer.
func TestMTPLayerKinds(t *testing.T) {
	hybrid := Arch{Layers: 3, HybridPattern: "MEM", MTPHybridOverridePattern: "*E"}
	if got := hybrid.MTPLayerKinds(2); !slices.Equal(got, []LayerKind{LayerAttention, LayerMoEOnly, LayerAttention, LayerMoEOnly}) {
		t.Errorf("hybrid MTP kinds %v", got)
	}
	gpt := Arch{Layers: 3, MoE: &MoE{Experts: 4, TopK: 1, FFNHidden: 8, FirstDenseLayers: 1}}
	if got := gpt.MTPLayerKinds(1); !slices.Equal(got, []LayerKind{LayerMoE}) {
		t.Errorf("transformer MTP kinds %v", got)
	}
	if got := gpt.MTPLayerKinds(0); got != nil {
		t.Errorf("no MTP: %v", got)
	}
}
