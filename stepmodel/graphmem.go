package stepmodel

import (
	"math"
	"slices"

	"cgtune/presets"
)

// regionInfo is what a plan graphs in one layer of each kind: the forward
// segments of its graphed regions.
type regionInfo map[presets.LayerKind][]Segment

// graphedRegionsOf lists the plan's graphed forward segments by layer
// kind. The plan covers the emulated stage; every layer of a kind is
// planned alike, and kinds the emulated stage lacks (leading dense layers
// on the first stage) are planned on the whole model: a layer's ops do not
// depend on the pipeline split.
func graphedRegionsOf(w *Workload, p *CapturePlan) regionInfo {
	info := regionInfo{}
	if p == nil || !p.Graphed() || p.FullIteration != nil {
		return info
	}
	add := func(layers []LayerPlan) {
		for _, lp := range layers {
			if _, ok := info[lp.Kind]; ok {
				continue
			}
			var segs []Segment
			for _, s := range lp.Fwd {
				if s.Graphed() {
					segs = append(segs, s)
				}
			}
			info[lp.Kind] = segs
		}
	}
	add(p.Layers)
	// The model's first layers up to the last kind the plan lacks.
	need := 0
	for i, k := range w.Spec.Model.Arch.LayerKinds() {
		if _, ok := info[k]; !ok {
			need = i + 1
		}
	}
	if need > 0 {
		l := w.Layout
		l.PP, l.VP, l.PipelineLayout, l.AccountForEmbedding, l.AccountForLoss = 1, 0, "", false, false
		opts := w.Spec.Options
		opts.RunLayers = need
		if first, err := BuildWorkload(w.Spec.Model, l, opts); err == nil {
			add(PlanCapture(first, p.Candidate, p.Generation).Layers)
		}
	}
	return info
}

// pooled is what the graph pool keeps of one micro-batch's activations
// in the layers kinds: the blocks its regions cover (offloaded layers'
// activations leave the pool as they leave eager memory).
func (r regionInfo) pooled(kinds []presets.LayerKind, act activations) float64 {
	v := 0.0
	for _, k := range kinds {
		for _, s := range r[k] {
			v += act.region(k, s.Ops)
		}
	}
	return act.kept(v, len(kinds))
}

// regions counts the graphed regions in the layers kinds, and whether one
// holds attention.
func (r regionInfo) regions(kinds []presets.LayerKind) (n int, attn bool) {
	for _, k := range kinds {
		for _, s := range r[k] {
			n++
			attn = attn || slices.ContainsFunc(s.Ops, func(o Op) bool { return o.Scope == presets.ScopeAttn })
		}
	}
	return n, attn
}

// graphedPeak is the graphed step's peak on a rank whose chunks hold
// counts micro-batches in flight.
//
// A graph pool holds the activations its regions save, in place of
// eager's, but the pool's memory cannot be lent to the optimizer step's
// temporaries as freed activations are: with per-layer graphs (local, or
// Transformer Engine's make_graphed_callables, captured in schedule order
// into one pool) the step needs persistent + pooled activations + static
// buffers + the larger of the rest of the activations and the step's
// temporaries; a full-iteration graph's pool holds all of the step's
// activations beside the temporaries, plus its static input copies of
// every micro-batch (full_cuda_graph.py StaticBufferLoader).
func graphedPeak(w *Workload, p *CapturePlan, r regionInfo, kinds []presets.LayerKind, act activations, f stageFigures, pooled float64, counts []float64) float64 {
	if p.FullIteration != nil {
		return f.persistent() + f.act + f.step() + float64(w.MicroBatches)*w.StaticInputBytes()
	}
	n, attn := r.regions(kinds)
	if attn {
		pooled += act.backwardTemporaries(kinds) // the graphed attention's backward runs in the pool
	}
	return f.persistent() + pooled + staticBuffers(w, p, n, counts) + math.Max(f.act-pooled, f.step())
}

// staticBuffers is what per-layer graphs keep outside the pool's
// activations, for n graphed regions on the rank.
//
// Transformer Engine's make_graphed_callables, called by Megatron-Core
// with _reuse_graph_input_output_buffers (TE 2.7 and later, which every
// Megatron-Bridge release pins; cuda_graphs.py
// get_make_graphed_callables_kwargs), reuses the static inputs of
// micro-batches whose backward ran, turns each graph's static outputs and
// the previous backward's gradient inputs into weak references once
// captured, and shares one set of static gradient outputs (TE graph.py).
// A graph's static input is the tensor its first norm saves, which the
// pool's activations count already; what stays besides is the shared
// gradient outputs and the last gradient inputs: two hidden-state
// buffers.
//
// Megatron-Core's local CudaGraphManager keeps each graphed region's
// forward input and output and backward gradient input and output, one
// runner per layer with PP = 1 and one per micro-batch otherwise
// (transformer/cuda_graphs.py _CudagraphGlobalRecord.create_cudagraphs;
// measured: docs/memory-and-verdict-2026-12-02.md); with Transformer
// Engine installed its buffers are weak references and only the
// micro-batches in flight keep theirs.
func staticBuffers(w *Workload, p *CapturePlan, n int, counts []float64) float64 {
	if p.Candidate.Impl == presets.ImplTE {
		return 2 * w.StaticBufferBytes()
	}
	runners := float64(max(1, p.RealCaptured))
	if w.Spec.Options.LayerSpec != "local" {
		inflight := 0.0
		for _, c := range counts {
			inflight = math.Max(inflight, c)
		}
		runners = math.Min(runners, math.Max(1, math.Ceil(inflight)))
	}
	return float64(n) * runners * 4 * w.StaticBufferBytes()
}
