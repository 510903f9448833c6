package engine

import (
	"context"
	"fmt"

	"cgtune/presets"
	"cgtune/stepmodel"
)

// DefaultSliceLayers is the first slice SliceWhenTooBig tries: the layers
// the megatron engine builds of a stage by default (its --max-layers), so
// that both measure the same slice.
const DefaultSliceLayers = 8

// SliceWhenTooBig wraps an emulating engine: a candidate whose run does
// not fit the engine's GPU (its result is an out-of-memory failure: the
// whole stage's graphs, say, on one GPU) runs again on the stage's first
// layers, DefaultSliceLayers and then half as many until it fits, and its
// times are scaled to the whole stage, as the megatron engine scales the
// slice it builds. Whether the candidate fits the real job's GPU stays
// the memory model's answer for the whole stage.
func SliceWhenTooBig(e Engine) Engine { return slicing{e} }

type slicing struct{ Engine }

func (s slicing) Run(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, opts RunOptions, emit func(StepSample)) Result {
	whole := s.Engine.Run(ctx, w, c, opts, emit)
	if whole.ErrKind != FailureOOM || len(w.Layers) < 2 || len(w.Layers) < w.StageLayers {
		return whole
	}
	last := whole
	for n := min(DefaultSliceLayers, len(w.Layers)-1); n >= 1; n /= 2 {
		spec := w.Spec
		spec.Options.RunLayers = n
		sw, err := spec.BuildContext(ctx)
		if err != nil {
			return whole
		}
		r := s.Engine.Run(ctx, sw, c, opts, emit)
		if r.ErrKind != FailureOOM {
			if r.Failed() {
				return r
			}
			return scaledToStage(r, whole, len(w.Layers), n)
		}
		last = r
	}
	last.Notes = append(last.Notes, fmt.Sprintf("a slice of one layer does not fit this GPU either; the whole stage: %s", whole.Err))
	return last
}

// scaledToStage is the result r of a run of n of the stage's layers as the
// whole stage's: its times multiplied by layers/n (every part of the step
// alike; the megatron engine, which times its decoder, scales only the
// layers' share of its slice), its speed-up unchanged; the memory model's breakdown and the
// job's graph memory are those of the whole stage (whole's), the run's
// own memory what the slice took.
func scaledToStage(r, whole Result, layers, n int) Result {
	f := float64(layers) / float64(n)
	r.scaleTimes(f)
	r.SliceLayers = n
	if b := whole.Memory.Breakdown; b != nil {
		r.Memory.Breakdown = b
		if r.Memory.GraphFullJobMiB > 0 {
			r.Memory.GraphFullJobMiB = b.Graphs
		}
	}
	text := fmt.Sprintf("built %d of the stage's %d layers (the whole stage does not fit this GPU: %s); times scaled ×%.3g", n, layers, whole.Err, f)
	if r.Scaling != "" {
		text = r.Scaling + "; " + text
	}
	r.Scaling = text
	r.Notes = append(r.Notes, text)
	return r
}
