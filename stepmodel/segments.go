package stepmodel

// TEWarmupPasses is how many eager passes Transformer Engine runs of each
// graphed callable before capturing: max(1, ceil((10 − warmup·M) / captured))
// (MCore get_make_graphed_callables_kwargs).
func TEWarmupPasses(warmup, microBatches, captured int) int {
	n := 10 - warmup*microBatches
	if n <= 0 {
		return 1
	}
	return max(1, (n+max(1, captured)-1)/max(1, captured))
}

// StaticInputBytes is the per-micro-batch input a full-iteration graph's
// StaticBufferLoader holds: tokens, labels, loss mask and position ids.
func (w *Workload) StaticInputBytes() float64 {
	return float64(w.Layout.MBS) * float64(w.Layout.Seq) * 16
}
