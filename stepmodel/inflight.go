package stepmodel

// The micro-batches whose activations a pipeline rank holds at its peak,
// per model chunk, follow Megatron-Core's schedules
// (megatron/core/pipeline_parallel/schedules.py, Megatron-LM 2a75ac1):
//
//   - no pipeline: one micro-batch at a time; with EP communication
//     overlap the combined 1F1B schedule runs one micro-batch's forward
//     beside the previous one's backward layer by layer, the forward's
//     layers saving as the backward's free theirs: one micro-batch and a
//     layer (combined_1f1b.py combined_1f1b_schedule_for_no_pipelining;
//     the layer is largestLayer's);
//   - 1F1B: rank r runs PP − r − 1 warm-up forwards, then one forward
//     before each backward: PP − r micro-batches in flight;
//   - interleaved: (PP − r − 1)·2 + (VP − 1)·G warm-up forwards (one more
//     with EP overlap; G is microbatch_group_size_per_vp_stage, PP by
//     default), the forwards visiting the chunks in groups of G
//     micro-batches (get_schedule_table) and the backwards the same table
//     with the chunks reversed (get_model_chunk_id); get_pp_rank_microbatches.
//     With EP overlap each 1F1B step is combined as above: the backward's
//     chunk frees as the forward's saves.
//
// inFlightChunks plays the schedule and returns, at the moment the
// chunks' saved bytes (weight[v] per micro-batch of chunk v) peak, how many
// micro-batches of each chunk are in flight.
func inFlightChunks(pp, vp, rank, m int, epOverlap bool, weight []float64) []float64 {
	counts := make([]float64, vp)
	switch {
	case pp <= 1:
		counts[0] = 1
		return counts
	case vp <= 1:
		counts[0] = float64(min(pp-rank, m))
		return counts
	}
	g := pp // microbatch_group_size_per_vp_stage's default
	total := m * vp
	warmup := (pp-rank-1)*2 + (vp-1)*g
	if epOverlap {
		warmup++
	}
	warmup = min(warmup, total)
	// The peak lies in the warm-up or the first cycles of 1F1B: after one
	// round of every chunk's group the pattern repeats.
	steps := min(total-warmup, 2*g*vp+1)
	cur := make([]float64, vp)
	load := 0.0
	best, bestLoad := make([]float64, vp), -1.0
	add := func(k int) {
		c := chunkOf(k, m, vp, g)
		cur[c]++
		load += weight[c]
		if load > bestLoad {
			bestLoad = load
			copy(best, cur)
		}
	}
	for k := range warmup {
		add(k)
	}
	for j := range steps {
		if !epOverlap {
			add(warmup + j)
		}
		c := vp - 1 - chunkOf(j, m, vp, g)
		cur[c]--
		load -= weight[c]
		if epOverlap {
			add(warmup + j)
		}
	}
	return best
}

// chunkOf is the model chunk of the k-th forward of the interleaved
// schedule: the schedule table lists, for each group of g micro-batches,
// every chunk's pass over the group; the last group takes the micro-batches
// left (get_schedule_table).
func chunkOf(k, m, vp, g int) int {
	full := (m / g) * g
	if m%g == 0 {
		full = m - g // the last group is built by the last-group branch, with the same shape
	}
	if k < full*vp {
		return (k % (g * vp)) / g
	}
	left := m - full
	return (k - full*vp) / left
}

// inFlightMicroBatches is how many micro-batches stage rank holds at its
// peak, in units of the whole rank's layers (chunks weighted alike).
func inFlightMicroBatches(pp, vp, rank, m int, epOverlap bool) float64 {
	w := make([]float64, max(1, vp))
	for i := range w {
		w[i] = 1
	}
	sum := 0.0
	for _, c := range inFlightChunks(pp, max(1, vp), rank, m, epOverlap, w) {
		sum += c
	}
	return sum / float64(max(1, vp))
}
