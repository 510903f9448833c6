package stepmodel

import (
	"math"

	"cgtune/presets"
)

// Megatron-Core's paged expert stash (model.moe_paged_stash; MLM
// megatron/core/transformer/moe/paged_stash.py and experts.py
// TEGroupedMLP._fused_forward, Megatron-LM 2a75ac1, which MB 067f987 pins)
// takes the routed experts' saved tensors out of the micro-batches'
// activations and into one persistent device buffer:
//
//   - Transformer Engine's fused grouped MLP (transformer_engine/pytorch/
//     ops/fused/grouped_mlp.py, TE 2.18) tags what it saves for the
//     backward (mark_grouped_tensor): fc1's input and fc2's input
//     (column-wise MXFP8 with their scales), fc1's output and the routing
//     probabilities: the expertsPerToken terms. TE fuses the grouped MLP
//     only under an MXFP8 or NVFP4 recipe (fuse_grouped_mlp_ops); NVFP4
//     keeps row-wise data beside what it tags, which is not modelled, so
//     the stash is modelled for MXFP8.
//   - PagedStashManager.on_save_for_backward counts, in the first training
//     iteration, each layer's average tokens (the budget rows over
//     moe_expert_rank_capacity_factor: (tokens per rank)·top-k) in flight
//     per dtype and width, and the schedule's peak of that sum;
//     allocate_stash_buffers allocates |moe_paged_stash_buffer_size_factor_cuda|
//     times that peak at the start of the second iteration, eager, before
//     any graph capture, so the buffer lies outside every graph's pool and
//     lives through the optimizer step. The host factor sizes pinned host
//     memory only.
//   - The expert input HybridEP hands over has the budget's rows
//     (_HybridEPManager.setup_metadata: tokens·top-k·factor), so each
//     tagged tensor is padded to factor × the average. offload_to_stash
//     copies the real tokens into pages, and the padded original is freed
//     when the next MoE layer starts (wait_for_stash_to_complete); in 1F1B
//     the forward that ends the peak also allocates, padded, the tensors
//     of the backward that follows (reload_paged_tensors), so two padded
//     layers are alive there, one without pipelining.

// stashes reports whether the routed experts' saved tensors go to the
// paged stash: the stash on, with the per-rank budget Megatron-Core
// requires of it (transformer_config.py), under MXFP8.
func (x activations) stashes() bool {
	l := x.l
	return x.a.MoE != nil && l.PagedStash != nil && l.RankCapacityFactor > 0 && l.Precision == "fp8mx" && !x.re("moe")
}

// stashedLayer is what a layer of kind k puts in the stash per
// micro-batch: its routed experts' saved tensors at the average tokens.
func (x activations) stashedLayer(k presets.LayerKind) float64 {
	if !x.stashes() || k.FFN() != presets.FFNMoE {
		return 0
	}
	return x.tokens * x.expertsPerToken()
}

// expertStash is the stash's device buffer on a rank whose chunks stash
// perChunk bytes per micro-batch, and the padded tensors alive beside it
// at the activations' peak (largest is the rank's largest stashed layer).
func expertStash(x activations, l presets.Layout, rank, microBatches int, epOverlap bool, perChunk []float64, largest float64) (buffer, padded float64) {
	if !x.stashes() {
		return 0, 0
	}
	counts := inFlightChunks(l.PPSize(), l.VPSize(), rank, microBatches, epOverlap, perChunk)
	buffer = math.Abs(l.PagedStash.CUDAFactor) * dot(counts, perChunk)
	layers := 1.0
	if l.PPSize() > 1 {
		layers = 2
	}
	return buffer, layers * l.RankCapacityFactor * largest
}
