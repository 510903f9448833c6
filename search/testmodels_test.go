package search

import "cgtune/presets"

// denseModel is a small synthetic model: the search's tests need one
// that builds a workload fast, not a real one.
var denseModel = presets.Model{Name: "dense", Arch: presets.Arch{
	Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 8, HeadDim: 128, Vocab: 32000}}

// layoutFor is a dense model's layout on eight GPUs.
func layoutFor(presets.Model) presets.Layout {
	return presets.Layout{GPU: "h100", NumGPUs: 8, Precision: "bf16", TP: 1, PP: 1, CP: 1, GBS: 64, MBS: 1, Seq: 4096}
}
