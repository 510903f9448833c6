package presets

import "slices"

// LayerKind is what one decoder layer contains: its token mixer
// (softmax attention, a gated delta-net, DeepSeek-V4's compressed
// attention at one compression ratio, a Mamba mixer, or none) and its
// feed-forward block (dense MLP, MoE, or none).
type LayerKind string

const (
	LayerDense     LayerKind = "dense"     // attention + dense MLP
	LayerMoE       LayerKind = "moe"       // attention + MoE
	LayerMamba     LayerKind = "mamba"     // hybrid M
	LayerAttention LayerKind = "attention" // hybrid *
	LayerMLP       LayerKind = "mlp"       // hybrid -
	LayerMoEOnly   LayerKind = "moe_only"  // hybrid E

	// Gated delta-net (linear attention) layers of an
	// experimental_attention_variant gdn model (Qwen3-Next): MCore builds a
	// TransformerLayer whose self_attention is the GatedDeltaNet (MLM
	// megatron/core/models/gpt/experimental_attention_variant_module_specs.py,
	// get_transformer_layer_with_experimental_attention_variant_spec).
	LayerGDN    LayerKind = "gdn"     // gated delta-net + dense MLP
	LayerGDNMoE LayerKind = "gdn_moe" // gated delta-net + MoE

	// DeepSeek-V4's hybrid attention layers (experimental_attention_variant
	// dsv4_hybrid), one kind per compression ratio (csa_compress_ratios):
	// sliding window only (0), compressed sparse attention with the DSA
	// indexer (4), heavily compressed attention (128).
	LayerSWA    LayerKind = "swa"
	LayerSWAMoE LayerKind = "swa_moe"
	LayerCSA    LayerKind = "csa"
	LayerCSAMoE LayerKind = "csa_moe"
	LayerHCA    LayerKind = "hca"
	LayerHCAMoE LayerKind = "hca_moe"
)

// Mixers of a layer kind.
const (
	MixerNone      = ""
	MixerAttention = "attention" // softmax attention (GQA or MLA)
	MixerGDN       = "gdn"       // gated delta-net
	MixerDSv4      = "dsv4"      // DeepSeek-V4 hybrid attention
	MixerMamba     = "mamba"
)

// FFNs of a layer kind.
const (
	FFNNone = ""
	FFNMLP  = "mlp"
	FFNMoE  = "moe"
)

type kindParts struct {
	mixer, ffn string
	ratio      int // DeepSeek-V4 compression ratio
}

var kindTable = map[LayerKind]kindParts{
	LayerDense: {MixerAttention, FFNMLP, 0}, LayerMoE: {MixerAttention, FFNMoE, 0},
	LayerMamba: {MixerMamba, FFNNone, 0}, LayerAttention: {MixerAttention, FFNNone, 0},
	LayerMLP: {MixerNone, FFNMLP, 0}, LayerMoEOnly: {MixerNone, FFNMoE, 0},
	LayerGDN: {MixerGDN, FFNMLP, 0}, LayerGDNMoE: {MixerGDN, FFNMoE, 0},
	LayerSWA: {MixerDSv4, FFNMLP, 0}, LayerSWAMoE: {MixerDSv4, FFNMoE, 0},
	LayerCSA: {MixerDSv4, FFNMLP, 4}, LayerCSAMoE: {MixerDSv4, FFNMoE, 4},
	LayerHCA: {MixerDSv4, FFNMLP, 128}, LayerHCAMoE: {MixerDSv4, FFNMoE, 128},
}

// Mixer is the kind's token mixer (MixerAttention, ...; MixerNone for an
// MLP-only or MoE-only hybrid layer).
func (k LayerKind) Mixer() string { return kindTable[k].mixer }

// FFN is the kind's feed-forward block (FFNMLP, FFNMoE or FFNNone).
func (k LayerKind) FFN() string { return kindTable[k].ffn }

// CompressRatio is a DeepSeek-V4 kind's compression ratio (0 for the
// sliding window only, and for every other kind).
func (k LayerKind) CompressRatio() int { return kindTable[k].ratio }

// HasSelfAttention reports whether the layer's self_attention is a real
// module: softmax attention, a gated delta-net or DeepSeek-V4's attention
// all sit there, so the attn cuda-graph module covers each (MLM
// megatron/core/transformer/cuda_graphs.py _layer_is_graphable; MB
// docs/training/cuda-graphs.md puts the gated delta-net under attn).
func (k LayerKind) HasSelfAttention() bool {
	m := k.Mixer()
	return m == MixerAttention || m == MixerGDN || m == MixerDSv4
}

// dsv4Kind is the DeepSeek-V4 kind of compression ratio r (0 and 1 mean
// the sliding window only), with MoE or a dense MLP.
func dsv4Kind(r int, moe bool) LayerKind {
	kinds := map[int][2]LayerKind{0: {LayerSWA, LayerSWAMoE}, 1: {LayerSWA, LayerSWAMoE}, 4: {LayerCSA, LayerCSAMoE}, 128: {LayerHCA, LayerHCAMoE}}
	k, ok := kinds[r]
	if !ok {
		k = kinds[0]
	}
	if moe {
		return k[1]
	}
	return k[0]
}

// LayerKinds lists the kind of every decoder layer of the model in order.
func (a Arch) LayerKinds() []LayerKind {
	if a.HybridPattern != "" {
		return hybridKinds(a.HybridPattern)
	}
	linear := a.linearAttentionPattern()
	kinds := make([]LayerKind, a.Layers)
	for i := range kinds {
		moe := a.MoE != nil && i >= a.MoE.FirstDenseLayers
		switch {
		case a.CompressedAttention != nil && a.ExperimentalAttentionVariant == "dsv4_hybrid":
			r := 0
			if i < len(a.CompressedAttention.CSACompressRatios) {
				r = a.CompressedAttention.CSACompressRatios[i]
			}
			kinds[i] = dsv4Kind(r, moe)
		case i < len(linear) && linear[i] == 1 && moe:
			kinds[i] = LayerGDNMoE
		case i < len(linear) && linear[i] == 1:
			kinds[i] = LayerGDN
		case moe:
			kinds[i] = LayerMoE
		default:
			kinds[i] = LayerDense
		}
	}
	return kinds
}

func hybridKinds(pattern string) []LayerKind {
	kinds := make([]LayerKind, 0, len(pattern))
	for _, r := range pattern {
		switch r {
		case 'M':
			kinds = append(kinds, LayerMamba)
		case '*':
			kinds = append(kinds, LayerAttention)
		case '-':
			kinds = append(kinds, LayerMLP)
		case 'E':
			kinds = append(kinds, LayerMoEOnly)
		}
	}
	return kinds
}

// linearAttentionPattern is MCore's get_linear_attention_pattern (MLM
// megatron/core/models/gpt/experimental_attention_variant_module_specs.py):
// per layer 1 for a gated delta-net, 0 for softmax attention; an integer
// N makes every N-th layer softmax attention. nil without a gated
// delta-net variant.
func (a Arch) linearAttentionPattern() []int {
	la := a.LinearAttention
	switch a.ExperimentalAttentionVariant {
	case "gated_delta_net", "gdn", "gdn2":
	default:
		return nil
	}
	if la == nil {
		return nil
	}
	if len(la.LinearAttentionPattern) > 0 {
		return la.LinearAttentionPattern
	}
	if la.LinearAttentionFreq <= 0 {
		return nil
	}
	p := make([]int, a.Layers)
	for i := range p {
		if (i+1)%la.LinearAttentionFreq != 0 {
			p[i] = 1
		}
	}
	return p
}

// MTPLayerKinds lists the layers of n multi-token-prediction blocks, in
// order: a hybrid model's mtp_hybrid_override_pattern per block (MCore
// builds it as a HybridStack, MLM megatron/core/transformer/
// multi_token_prediction.py), DeepSeek-V4's block at the compression
// ratio csa_compress_ratios gives it after the decoder layers (MB
// src/megatron/bridge/models/deepseek/deepseek_v4_bridge.py), otherwise
// one layer per block built from the decoder's last layer spec.
func (a Arch) MTPLayerKinds(n int) []LayerKind {
	kinds := a.LayerKinds()
	if n <= 0 || len(kinds) == 0 {
		return nil
	}
	var out []LayerKind
	for i := range n {
		switch {
		case a.HybridPattern != "" && a.MTPHybridOverridePattern != "":
			out = append(out, hybridKinds(a.MTPHybridOverridePattern)...)
		case a.CompressedAttention != nil && a.ExperimentalAttentionVariant == "dsv4_hybrid":
			r, j := 0, a.Layers+i
			if j < len(a.CompressedAttention.CSACompressRatios) {
				r = a.CompressedAttention.CSACompressRatios[j]
			}
			out = append(out, dsv4Kind(r, a.MoE != nil))
		default:
			out = append(out, kinds[len(kinds)-1])
		}
	}
	return out
}

// HasDenseMLP reports whether any layer has a dense MLP (the `mlp` scope needs one).
func (a Arch) HasDenseMLP() bool {
	return slices.ContainsFunc(a.LayerKinds(), func(k LayerKind) bool { return k.FFN() == FFNMLP })
}

// HasMamba reports whether any layer is a Mamba layer.
func (a Arch) HasMamba() bool { return slices.Contains(a.LayerKinds(), LayerMamba) }

// HasAttention reports whether any layer has a self_attention module
// (softmax attention, a gated delta-net or DeepSeek-V4's attention).
func (a Arch) HasAttention() bool {
	return slices.ContainsFunc(a.LayerKinds(), LayerKind.HasSelfAttention)
}
