package recipe

import "cgtune/presets"

// Small synthetic models: the rules only look at the shape (MoE or not,
// dense layers, shared experts, biases), not the size.
var (
	denseModel = presets.Model{Name: "dense", Arch: presets.Arch{
		Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 8, HeadDim: 128, Vocab: 32000}}
	biasModel = presets.Model{Name: "bias", Arch: presets.Arch{
		Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 8, HeadDim: 128, Vocab: 32000, AddBiasLinear: true}}
	moeModel = presets.Model{Name: "moe", Arch: presets.Arch{
		Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 8, HeadDim: 128, Vocab: 32000,
		MoE: &presets.MoE{Experts: 8, TopK: 2, FFNHidden: 512}}}
	// deepseekModel has leading dense layers and a shared expert.
	deepseekModel = presets.Model{Name: "ds", Arch: presets.Arch{
		Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, Vocab: 32000,
		MoE: &presets.MoE{Experts: 8, TopK: 2, FFNHidden: 512, SharedExpertFFN: 512, FirstDenseLayers: 1}}}
	hybridModel = presets.Model{Name: "hybrid", Arch: presets.Arch{
		Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 8, HeadDim: 128, Vocab: 32000,
		HybridPattern: "M*M-", Mamba: &presets.Mamba{StateDim: 128, Heads: 16, HeadDim: 64, Groups: 8}}}
)

func layoutFor(m presets.Model) presets.Layout {
	l := presets.Layout{GPU: "h100", NumGPUs: 8, Precision: "bf16", TP: 1, PP: 1, CP: 1, GBS: 64, MBS: 1, Seq: 4096}
	if m.Arch.MoE != nil {
		l.EP = 8
		l.Dispatcher = "alltoall"
	}
	return l
}
