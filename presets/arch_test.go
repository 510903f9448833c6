package presets

import (
	"strings"
	"testing"
)

// A model with every new attention kind parses, validates and clones deeply.
const newKindsModel = `version: 1
models:
  - name: kinds
    arch:
      layers: 4
      hidden: 512
      ffn_hidden: 2048
      heads: 8
      kv_groups: 2
      head_dim: 64
      vocab: 1000
      experimental_attention_variant: gated_delta_net
      attention_output_gate: true
      linear_attention:
        linear_attention_freq: 4
        linear_conv_kernel_dim: 4
        linear_key_head_dim: 128
        linear_value_head_dim: 128
        linear_num_key_heads: 16
        linear_num_value_heads: 32
      moe:
        experts: 8
        top_k: 2
        ffn_hidden: 128
        moe_shared_expert_gate: true
        moe_latent_size: 64
    layouts:
      h100:
        num_gpus: 8
        precision: bf16
        ep: 8
        gbs: 32
        mbs: 1
        seq: 2048
`

func TestArchNewAttentionKinds(t *testing.T) {
	ms, err := ParseModelYAML("kinds.yaml", []byte(newKindsModel))
	if err != nil {
		t.Fatal(err)
	}
	a := ms[0].Arch
	if a.LinearAttention == nil || a.LinearAttention.LinearNumValueHeads != 32 || !a.AttentionOutputGate || a.MoE.MoELatentSize != 64 || !a.MoE.MoESharedExpertGate {
		t.Fatalf("parsed arch %+v", a)
	}
	c := ms[0].Clone()
	c.Arch.LinearAttention.LinearNumKeyHeads = 1
	if ms[0].Arch.LinearAttention.LinearNumKeyHeads != 16 {
		t.Fatal("Clone shares the linear-attention block")
	}
	for _, tc := range []struct{ old, new, want string }{
		{"gated_delta_net", "dsv4_hybrid", `needs experimental_attention_variant gated_delta_net`},
		{"gated_delta_net", "mamba2", `unknown value "mamba2"`},
		{"linear_num_value_heads: 32", "linear_num_value_heads: 24", "not a multiple of linear_num_key_heads (16)"},
		{"linear_attention_freq: 4", "linear_attention_pattern: [1, 1, 0]", "has 3 entries but layers is 4"},
		{"linear_attention_freq: 4", "linear_attention_pattern: [1, 2, 1, 0]", "entry 2 is 2"},
		{"        linear_conv_kernel_dim: 4\n", "        linear_conv_kernel_dim: 4\n        linear_attention_pattern: [1, 1, 1, 0]\n", "give one of linear_attention_freq"},
	} {
		src := strings.Replace(newKindsModel, tc.old, tc.new, 1)
		_, err := ParseModelYAML("bad.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s -> %s: error %v, want one line with %q", tc.old, tc.new, err, tc.want)
		}
	}
}

func TestArchCompressedAttention(t *testing.T) {
	a := Arch{Layers: 3, Hidden: 512, FFNHidden: 2048, Heads: 8, HeadDim: 64, Vocab: 1000,
		MLA:                          &MLA{QLoraRank: 64, KVLoraRank: 64, QKHeadDim: 64, QKRopeDim: 32, VHeadDim: 64, OGroups: 2, OLoraRank: 64},
		ExperimentalAttentionVariant: "dsv4_hybrid",
		CompressedAttention:          &CompressedAttention{CSACompressRatios: []int{0, 4, 128, 0}, CSAWindowSize: 128, DSAIndexerNHeads: 4, DSAIndexerHeadDim: 32, DSAIndexerTopK: 16},
		HyperConnections:             &HyperConnections{NumResidualStreams: 4, MHCSinkhornIterations: 20},
	}
	m := Model{Name: "v4", Arch: a, Layouts: map[string]Layout{"h100": {NumGPUs: 1, Precision: "bf16", GBS: 1, MBS: 1, Seq: 64}}}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	c := m.Clone()
	c.Arch.CompressedAttention.CSACompressRatios[0] = 4
	if m.Arch.CompressedAttention.CSACompressRatios[0] != 0 {
		t.Fatal("Clone shares the compress ratios")
	}
	m.Arch.CompressedAttention.CSACompressRatios = []int{0, 4, 64}
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "entry 3 is 64") {
		t.Errorf("bad ratio: %v", err)
	}
	m.Arch.CompressedAttention.CSACompressRatios = []int{0, 4}
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "has 2 entries") {
		t.Errorf("short ratios: %v", err)
	}
	m.Arch.CompressedAttention.CSACompressRatios = []int{0, 4, 128}
	m.Arch.MLA, m.Arch.KVGroups = nil, 1
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "needs mla") {
		t.Errorf("no MLA: %v", err)
	}
}
