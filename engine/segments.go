package engine

import "slices"

// Segment is a run of a layer's ops that the candidate's scopes either
// cover (captured into one graph per captured micro-batch) or not (eager).
type Segment struct {
	Ops     []Op
	Graphed bool
}

// SplitScopes cuts a layer's ops into maximal runs covered or not by the
// scopes. No scopes means the whole layer, as an empty cuda_graph_scope
// does.
func SplitScopes(ops []Op, scopes []string) []Segment {
	in := func(o Op) bool { return len(scopes) == 0 || slices.Contains(scopes, o.Scope) }
	var segs []Segment
	for _, o := range ops {
		if len(segs) == 0 || in(o) != segs[len(segs)-1].Graphed {
			segs = append(segs, Segment{Graphed: in(o)})
		}
		segs[len(segs)-1].Ops = append(segs[len(segs)-1].Ops, o)
	}
	return segs
}

// TEWarmupPasses is how many eager passes Transformer Engine runs of each
// graphed callable before capturing: max(1, ceil((10 − warmup·M) / captured))
// (MCore get_make_graphed_callables_kwargs).
func TEWarmupPasses(warmup, microBatches, captured int) int {
	n := 10 - warmup*microBatches
	if n <= 0 {
		return 1
	}
	return max(1, (n+captured-1)/captured)
}

// StaticInputBytes is the per-micro-batch input a full-iteration graph's
// StaticBufferLoader holds: tokens, labels, loss mask and position ids.
func (w *Workload) StaticInputBytes() float64 {
	return float64(w.Layout.MBS*w.Layout.Seq) * 16
}
