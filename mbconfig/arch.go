package mbconfig

import (
	"fmt"
	"slices"
	"strings"

	"cgtune/presets"
)

// ints reads integer fields into their targets; a null or absent field
// leaves its target alone.
func (c *Config) ints(fields map[string]*int) error {
	for _, k := range slices.Sorted(mapKeys(fields)) {
		v, ok, err := c.Int(k)
		if err != nil {
			return err
		}
		if ok {
			*fields[k] = v
		}
	}
	return nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// arch reads the model's architecture. Unset sizes take MCore's defaults
// (TransformerConfig.__post_init__: ffn_hidden_size 4×hidden,
// kv_channels hidden/heads, num_query_groups the head count).
func (c *Config) arch(vocab int) (presets.Arch, error) {
	var a presets.Arch
	if err := c.ints(map[string]*int{
		"model.num_layers": &a.Layers, "model.hidden_size": &a.Hidden, "model.ffn_hidden_size": &a.FFNHidden,
		"model.num_attention_heads": &a.Heads, "model.num_query_groups": &a.KVGroups, "model.kv_channels": &a.HeadDim,
		"model.vocab_size": &a.Vocab,
	}); err != nil {
		return a, err
	}
	for _, k := range []struct {
		key string
		v   int
	}{{"model.num_layers", a.Layers}, {"model.hidden_size", a.Hidden}, {"model.num_attention_heads", a.Heads}} {
		if k.v <= 0 {
			return a, c.fieldError(c.node(k.key), k.key, "missing or not positive; the model's size cannot be read")
		}
	}
	if a.FFNHidden == 0 {
		a.FFNHidden = 4 * a.Hidden
	}
	if a.HeadDim == 0 {
		a.HeadDim = a.Hidden / a.Heads
	}
	if a.KVGroups == 0 {
		a.KVGroups = a.Heads
	}
	if err := c.vocab(&a, vocab); err != nil {
		return a, err
	}
	var err error
	for _, step := range []func(*presets.Arch) error{c.activation, c.biases, c.mla, c.moe, c.hybrid, c.linearAttention, c.compressedAttention} {
		if err = step(&a); err != nil {
			return a, err
		}
	}
	return a, nil
}

// vocab is model.vocab_size, else the tokenizer's: MB takes the
// tokenizer's size when the model leaves it unset (MB
// src/megatron/bridge/training/setup.py, _validate_and_set_vocab_size).
// A HuggingFace tokenizer's size is not in the file; fallback gives it.
func (c *Config) vocab(a *presets.Arch, fallback int) error {
	if a.Vocab > 0 {
		return nil
	}
	v, ok, err := c.Int("tokenizer.vocab_size")
	if err != nil {
		return err
	}
	switch {
	case ok && v > 0:
		a.Vocab = v
	case fallback > 0:
		a.Vocab = fallback
	default:
		tok, _ := c.String("tokenizer.tokenizer_model")
		return fmt.Errorf("%s: model.vocab_size and tokenizer.vocab_size are null: the vocabulary is the size of tokenizer %q, which the file does not hold; give it (--vocab-size N)", c.file, tok)
	}
	return nil
}

// activation maps activation_func and gated_linear_unit to cgtune's names.
func (c *Config) activation(a *presets.Arch) error {
	f, err := c.String("model.activation_func")
	if err != nil {
		return err
	}
	glu, err := c.Bool("model.gated_linear_unit")
	if err != nil {
		return err
	}
	switch {
	case f == "silu" && glu:
		a.Activation = "swiglu"
	case f == "squared_relu" && !glu:
		a.Activation = "squared_relu"
	case f == "quick_gelu" && glu:
		a.Activation = "quick_geglu"
	case f == "gelu" && !glu:
		a.Activation = "gelu"
	default:
		return c.fieldError(c.node("model.activation_func"), "model.activation_func", "%q with gated_linear_unit %v is not an activation cgtune models (allowed: silu with a GLU, squared_relu, quick_gelu with a GLU, gelu)", f, glu)
	}
	return nil
}

func (c *Config) biases(a *presets.Arch) (err error) {
	if a.AddBiasLinear, err = c.Bool("model.add_bias_linear"); err != nil {
		return err
	}
	a.AddQKVBias, err = c.Bool("model.add_qkv_bias")
	return err
}

func (c *Config) mla(a *presets.Arch) error {
	on, err := c.Bool("model.multi_latent_attention")
	if err != nil || !on {
		return err
	}
	m := &presets.MLA{}
	if err := c.ints(map[string]*int{
		"model.q_lora_rank": &m.QLoraRank, "model.kv_lora_rank": &m.KVLoraRank, "model.qk_head_dim": &m.QKHeadDim,
		"model.qk_pos_emb_head_dim": &m.QKRopeDim, "model.v_head_dim": &m.VHeadDim, "model.o_groups": &m.OGroups,
		"model.o_lora_rank": &m.OLoraRank,
	}); err != nil {
		return err
	}
	a.MLA, a.KVGroups = m, 0 // MLA has no query groups
	return nil
}

func (c *Config) moe(a *presets.Arch) error {
	experts, ok, err := c.Int("model.num_moe_experts")
	if err != nil || !ok || experts == 0 {
		return err
	}
	m := &presets.MoE{Experts: experts}
	if err := c.ints(map[string]*int{
		"model.moe_router_topk": &m.TopK, "model.moe_ffn_hidden_size": &m.FFNHidden,
		"model.moe_shared_expert_intermediate_size": &m.SharedExpertFFN, "model.moe_latent_size": &m.MoELatentSize,
		"model.moe_n_hash_layers": &m.MoENHashLayers,
	}); err != nil {
		return err
	}
	if m.FFNHidden == 0 {
		m.FFNHidden = a.FFNHidden // MCore's default moe_ffn_hidden_size
	}
	if m.Router, err = c.String("model.moe_router_score_function"); err != nil {
		return err
	}
	if m.MoESharedExpertGate, err = c.Bool("model.moe_shared_expert_gate"); err != nil {
		return err
	}
	if m.FirstDenseLayers, err = c.firstDenseLayers(a.Layers); err != nil {
		return err
	}
	a.MoE = m
	return nil
}

// firstDenseLayers reads moe_layer_freq: 1 (every layer MoE) or a 0/1
// list whose dense layers all lead, as cgtune's MoE models them.
func (c *Config) firstDenseLayers(layers int) (int, error) {
	freq, isList, err := c.Ints("model.moe_layer_freq")
	if err != nil || len(freq) == 0 {
		return 0, err
	}
	key := "model.moe_layer_freq"
	if !isList {
		if freq[0] == 1 {
			return 0, nil
		}
		return 0, c.fieldError(c.node(key), key, "MoE every %d layers is not modelled (allowed: 1, or a list whose 0 entries lead)", freq[0])
	}
	if len(freq) != layers {
		return 0, c.fieldError(c.node(key), key, "has %d entries but num_layers is %d", len(freq), layers)
	}
	dense := slices.Index(freq, 1)
	if dense < 0 || slices.Contains(freq[dense:], 0) {
		return 0, c.fieldError(c.node(key), key, "dense layers after MoE ones are not modelled (allowed: the 0 entries first)")
	}
	return dense, nil
}

func (c *Config) hybrid(a *presets.Arch) error {
	p, err := c.String("model.hybrid_layer_pattern")
	if err != nil {
		return err
	}
	if p == "" {
		if p, err = c.String("model.hybrid_override_pattern"); err != nil {
			return err
		}
	}
	if a.MTPHybridOverridePattern, err = c.String("model.mtp_hybrid_override_pattern"); err != nil {
		return err
	}
	if p == "" {
		return nil
	}
	if strings.Contains(p, "/") {
		// MCore's newer patterns put the MTP block after a /.
		p, a.MTPHybridOverridePattern, _ = strings.Cut(p, "/")
	}
	a.HybridPattern = p
	if a.MoE != nil {
		a.MoE.FirstDenseLayers = 0 // the pattern says which layers are E
	}
	if !strings.Contains(p, "M") {
		return nil
	}
	m := &presets.Mamba{}
	if err := c.ints(map[string]*int{
		"model.mamba_state_dim": &m.StateDim, "model.mamba_num_heads": &m.Heads, "model.mamba_head_dim": &m.HeadDim,
		"model.mamba_num_groups": &m.Groups,
	}); err != nil {
		return err
	}
	if m.Heads == 0 && m.HeadDim > 0 {
		// MLM megatron/core/ssm/mamba_mixer.py: d_inner = expand (2) × hidden,
		// nheads = d_inner // headdim when mamba_num_heads is unset.
		m.Heads = 2 * a.Hidden / m.HeadDim
	}
	a.Mamba = m
	return nil
}

func (c *Config) linearAttention(a *presets.Arch) error {
	v, err := c.String("model.experimental_attention_variant")
	if err != nil {
		return err
	}
	a.ExperimentalAttentionVariant = v
	if a.AttentionOutputGate, err = c.Bool("model.attention_output_gate"); err != nil {
		return err
	}
	if v != "gated_delta_net" && v != "gdn" && v != "gdn2" {
		return nil
	}
	la := &presets.LinearAttention{}
	if err := c.ints(map[string]*int{
		"model.linear_conv_kernel_dim": &la.LinearConvKernelDim, "model.linear_key_head_dim": &la.LinearKeyHeadDim,
		"model.linear_value_head_dim": &la.LinearValueHeadDim, "model.linear_num_key_heads": &la.LinearNumKeyHeads,
		"model.linear_num_value_heads": &la.LinearNumValueHeads,
	}); err != nil {
		return err
	}
	freq, isList, err := c.Ints("model.linear_attention_freq")
	switch {
	case err != nil:
		return err
	case len(freq) == 0:
		return c.fieldError(c.node("model.linear_attention_freq"), "model.linear_attention_freq", "null with experimental_attention_variant %s; which layers are linear attention is unknown", v)
	case isList:
		la.LinearAttentionPattern = freq
	default:
		la.LinearAttentionFreq = freq[0]
	}
	a.LinearAttention = la
	return nil
}

func (c *Config) compressedAttention(a *presets.Arch) error {
	if a.ExperimentalAttentionVariant == "dsv4_hybrid" {
		ca := &presets.CompressedAttention{}
		if err := c.ints(map[string]*int{
			"model.csa_window_size": &ca.CSAWindowSize, "model.dsa_indexer_n_heads": &ca.DSAIndexerNHeads,
			"model.dsa_indexer_head_dim": &ca.DSAIndexerHeadDim, "model.dsa_indexer_topk": &ca.DSAIndexerTopK,
		}); err != nil {
			return err
		}
		r, _, err := c.Ints("model.csa_compress_ratios")
		if err != nil {
			return err
		}
		ca.CSACompressRatios = r
		a.CompressedAttention = ca
	}
	on, err := c.Bool("model.enable_hyper_connections")
	if err != nil || !on {
		return err
	}
	hc := &presets.HyperConnections{}
	if err := c.ints(map[string]*int{
		"model.num_residual_streams": &hc.NumResidualStreams, "model.mhc_sinkhorn_iterations": &hc.MHCSinkhornIterations,
	}); err != nil {
		return err
	}
	a.HyperConnections = hc
	return nil
}
