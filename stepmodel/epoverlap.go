package stepmodel

import "strings"

// With EP communication overlap (WorkloadOptions.EPOverlap), Megatron-Core
// runs the step as its combined 1F1B schedule: after the first
// micro-batch's forward, each phase runs one micro-batch's forward beside
// the previous one's backward, layer by layer, the EP all-to-all on a
// communication stream, so that "EP A2A in forward step is hidden by the
// attention/mlp computation in the backward step, and vice versa"; the
// first forward and the last backward run alone (MLM
// megatron/core/pipeline_parallel/combined_1f1b.py,
// combined_1f1b_schedule_for_no_pipelining, at 2a75ac1). The step model
// prices that as hiding, in m − 1 of a step's m micro-batches, each
// layer's forward dispatch and combine under its backward computation and
// the backward's under the forward's, as far as that computation lasts.
// Without the overlap every all-to-all is exposed on the stream.

// epOverlapped reports whether the combined schedule moves op to its
// communication stream: the token dispatch and combine all-to-alls.
func epOverlapped(o Op) bool { return strings.HasPrefix(o.Name, "ep_alltoall_") }

// computed reports whether op is computation another micro-batch's
// all-to-all can hide under.
func computed(o Op) bool { return o.Kind != KindCollective && !o.HostSync }

// epHiddenFrac is the share of micro-batches whose all-to-all the
// combined schedule pairs with another micro-batch's computation.
func (w *Workload) epHiddenFrac() float64 {
	if !w.Spec.Options.EPOverlap || w.MicroBatches < 2 {
		return 0
	}
	return float64(w.MicroBatches-1) / float64(w.MicroBatches)
}

// epExposed is, for one direction of a layer, the share of its all-to-all
// time the combined schedule leaves on the stream: all-to-all a hidden
// under up to comp of the other direction's computation, in a share frac
// of the micro-batches.
func epExposed(a, comp, frac float64) float64 {
	if a <= 0 || frac <= 0 {
		return 1
	}
	return (a - frac*min(a, comp)) / a
}

// sumUs adds gpu[i] over the ops sel picks.
func sumUs(ops []Op, gpu []float64, sel func(Op) bool) float64 {
	var s float64
	for i, o := range ops {
		if sel(o) {
			s += gpu[i]
		}
	}
	return s
}

// hideEPAllToAll scales the stream time of each layer's EP all-to-alls to
// what the combined 1F1B schedule leaves exposed (no change without EP
// overlap), as a node of a graph too.
func (s *stepCosts) hideEPAllToAll(w *Workload) {
	frac := w.epHiddenFrac()
	if frac == 0 {
		return
	}
	for i, lt := range w.Layers {
		f, b := s.fwd[i], s.bwd[i]
		fwdKeep := epExposed(sumUs(lt.Fwd, f.gpu, epOverlapped), sumUs(lt.Bwd, b.gpu, computed), frac)
		bwdKeep := epExposed(sumUs(lt.Bwd, b.gpu, epOverlapped), sumUs(lt.Fwd, f.gpu, computed), frac)
		for _, d := range []struct {
			ops  []Op
			c    opCosts
			keep float64
		}{{lt.Fwd, f, fwdKeep}, {lt.Bwd, b, bwdKeep}} {
			for j, o := range d.ops {
				if epOverlapped(o) {
					d.c.gpu[j] *= d.keep
					d.c.node[j] *= d.keep
				}
			}
		}
	}
	s.notes = append(s.notes, "EP communication overlap: modelled, the dispatch and combine all-to-alls hidden under the other micro-batch's computation as Megatron-Core's combined 1F1B schedule runs them")
}

// EPOverlapHiddenMs is the all-to-all time per step (every micro-batch)
// that EP communication overlap hides in workload w, priced per op with
// rates r (0 without the overlap): what the megatron engine takes off a
// step whose all-to-alls its ranks ran, or modelled, without the combined
// schedule.
func EPOverlapHiddenMs(w *Workload, r Rates) float64 {
	frac := w.epHiddenFrac()
	if frac == 0 {
		return 0
	}
	gpu := func(ops []Op) []float64 {
		out := make([]float64, len(ops))
		for i, o := range ops {
			out[i] = r.OpGPUUs(o)
		}
		return out
	}
	var us float64
	for _, lt := range w.Layers {
		f, b := gpu(lt.Fwd), gpu(lt.Bwd)
		af, ab := sumUs(lt.Fwd, f, epOverlapped), sumUs(lt.Bwd, b, epOverlapped)
		us += af*(1-epExposed(af, sumUs(lt.Bwd, b, computed), frac)) + ab*(1-epExposed(ab, sumUs(lt.Fwd, f, computed), frac))
	}
	return us * float64(w.MicroBatches) / 1e3
}

// EPAllToAll reports whether op is an EP all-to-all EP communication
// overlap hides (for the engines that add modelled collectives).
func EPAllToAll(o Op) bool { return epOverlapped(o) }
