package stepmodel

import (
	"testing"

	"cgtune/internal/testmodel"
	"cgtune/presets"
)

// stashLayout is a built-in layout that turns the paged expert stash on,
// and its model.
func stashLayout(t *testing.T, model, gpu string) (presets.Model, presets.Layout) {
	t.Helper()
	m, l := testmodel.Builtin(t, model, gpu)
	if l.PagedStash == nil || l.RankCapacityFactor <= 0 || l.Precision != "fp8mx" {
		t.Fatalf("%s/%s: want an MXFP8 layout with the paged stash and a rank budget, got %+v", model, gpu, l)
	}
	return m, l
}

// stashedPerLayer is what one MoE layer's routed experts save per
// micro-batch at the average tokens (tokens·top-k rows), as Transformer
// Engine's fused grouped MLP tags it for the stash (TE 2.18
// ops/fused/grouped_mlp.py mark_grouped_tensor): fc1's input, column-wise
// MXFP8 with one e8m0 scale per 32 values (h·(1+1/32)); fc1's SwiGLU
// output in bf16 (2·2F); the fp32 routing probability (4); fc2's input,
// MXFP8 (F·(1+1/32)).
func stashedPerLayer(m presets.Model, l presets.Layout) float64 {
	h, f := float64(m.Arch.Hidden), float64(m.Arch.MoE.FFNHidden)
	perRow := h*(1+1.0/32) + 2*2*f + 4 + f*(1+1.0/32)
	return float64(l.MBS*l.Seq*m.Arch.MoE.TopK) * perRow
}

func nearMiB(got int64, want float64, tol int64) bool {
	return absMiB(got-mibOf(want)) <= tol
}

// DeepSeek-V4-Pro on GB300 (PP 4, VP 4, four MoE layers per chunk): the
// stash is 1.2 × the MoE layers in flight on pipeline rank 0 × a layer's
// average tokens. Interleaved 1F1B runs (PP − 1)·2 + (VP − 1)·PP warm-up
// forwards on rank 0 and one more before the first backward
// (get_pp_rank_microbatches): 19 chunk-forwards, 76 layers.
func TestPagedStashIsTheFactorTimesTheLayersInFlight(t *testing.T) {
	m, l := stashLayout(t, "deepseek_v4_pro", "gb300")
	b := breakdown(t, m, l, l.ShippedGraph())
	pp, vp := l.PPSize(), l.VPSize()
	chunkForwards := (pp-1)*2 + (vp-1)*pp + 1
	want := l.PagedStash.CUDAFactor * float64(chunkForwards*4) * stashedPerLayer(m, l)
	if b.Stage != 0 || !nearMiB(b.ExpertStash, want, 1) {
		t.Errorf("rank %d, stash %d MiB; want rank 0, %d MiB (%s)", b.Stage, b.ExpertStash, mibOf(want), b.Describe())
	}
}

// The stash replaces the experts' saved tensors in the activations: the
// activations lose the 76 layers in flight and keep two padded layers
// (1.5 × the average: the forward's, freed when the next MoE layer starts,
// and the next backward's, reloaded), and the full-iteration graph adds
// the same over eager with and without it (the buffer is allocated before
// capture, outside the pool). Without the stash the experts save the
// budget's rows, factor × the average: the budget alone pads them.
func TestPagedStashReplacesTheExpertsActivations(t *testing.T) {
	m, l := stashLayout(t, "deepseek_v4_pro", "gb300")
	on := breakdown(t, m, l, l.ShippedGraph())
	off := l.Clone()
	off.PagedStash = nil
	without := breakdown(t, m, off, off.ShippedGraph())
	layer := stashedPerLayer(m, l)
	freed := l.RankCapacityFactor * (76*layer - 2*layer)
	if without.ExpertStash != 0 || !nearMiB(without.Activations-on.Activations, freed, 2) {
		t.Errorf("activations %d MiB without the stash, %d with; want %d MiB less with it", without.Activations, on.Activations, mibOf(freed))
	}
	if on.Graphs != without.Graphs {
		t.Errorf("graphs %d MiB with the stash, %d without; want the same", on.Graphs, without.Graphs)
	}
	bare := off.Clone()
	bare.RankCapacityFactor = 0
	plain := breakdown(t, m, bare, bare.ShippedGraph())
	if pad := (l.RankCapacityFactor - 1) * 76 * layer; !nearMiB(without.Activations-plain.Activations, pad, 2) {
		t.Errorf("the budget adds %d MiB of activations without the stash; want %d (76 layers padded to %.1f× the average)",
			without.Activations-plain.Activations, mibOf(pad), l.RankCapacityFactor)
	}
}

// Without pipelining (DeepSeek-V4-Flash on GB200, PP 1) one micro-batch's
// MoE layers are in flight, the decoder's and the MTP block's, and one
// padded layer stays beside them: the last layer's, whose backward follows
// its forward at once.
func TestPagedStashWithoutPipelining(t *testing.T) {
	m, l := stashLayout(t, "deepseek_v4_flash", "gb200")
	if l.PPSize() != 1 {
		t.Fatalf("want PP 1, got %d", l.PPSize())
	}
	moe := 0
	for _, k := range append(m.Arch.LayerKinds(), m.Arch.MTPLayerKinds(l.MTPLayers)...) {
		if k.FFN() == presets.FFNMoE {
			moe++
		}
	}
	on := breakdown(t, m, l, l.ShippedGraph())
	off := l.Clone()
	off.PagedStash = nil
	without := breakdown(t, m, off, off.ShippedGraph())
	layer := stashedPerLayer(m, l)
	if want := l.PagedStash.CUDAFactor * float64(moe) * layer; !nearMiB(on.ExpertStash, want, 1) {
		t.Errorf("stash %d MiB for %d MoE layers; want %d", on.ExpertStash, moe, mibOf(want))
	}
	if freed := l.RankCapacityFactor * (float64(moe)*layer - layer); !nearMiB(without.Activations-on.Activations, freed, 2) {
		t.Errorf("activations %d MiB less with the stash; want %d", without.Activations-on.Activations, mibOf(freed))
	}
}
