package megatron

import (
	"context"
	"fmt"
	"sync"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// sliceFit remembers, per workload, the layers of the stage a run fits on
// this GPU when the engine's default slice does not: the slice runs at
// data-parallel size 1, without the distributed optimizer's sharding, so a
// stage that fits the job's GPU can overflow the same GPU here.
type sliceFit struct {
	mu     sync.Mutex
	layers map[string]int
}

func workloadKey(w *stepmodel.Workload) string {
	return stepmodel.ModelKey(w.Spec.Model) + "|" + stepmodel.LayoutKey(w.Layout)
}

// of is the layers the engine builds of w's stage, and whether a run
// found that few to fit (fitted); else the engine's slice (its layers, at
// most maxLayers).
func (s *sliceFit) of(w *stepmodel.Workload, maxLayers int) (n int, fitted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.layers[workloadKey(w)]; ok {
		return n, true
	}
	return min(max(1, w.StageLayers), orDefault(maxLayers, DefaultMaxLayers)), false
}

// keep records that n layers are what w's runs build from now on.
func (s *sliceFit) keep(w *stepmodel.Workload, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.layers == nil {
		s.layers = map[string]int{}
	}
	s.layers[workloadKey(w)] = n
}

// shrinking returns run's result at n layers or, while that is out of
// memory on this GPU and n is above least, at half as many (least at the
// fewest), keeping each smaller count for w; with the layers of the last
// run and the counts that did not fit.
func (e *Engine) shrinking(ctx context.Context, w *stepmodel.Workload, n, least int, run func(n int) engine.Result) (engine.Result, int, []int) {
	r := run(n)
	var tried []int
	for r.ErrKind == engine.FailureOOM && n > least && ctx.Err() == nil {
		tried = append(tried, n)
		n = max(least, n/2)
		e.slices.keep(w, n)
		r = run(n)
	}
	return r, n, tried
}

// runFitting runs c on the slice of w's stage that fits this GPU: where a
// run is out of memory it runs again on half as many layers, down to one,
// and w's later runs (and its profile's) build that many, each compared
// with an eager baseline of the same slice and scaled to the stage as any
// slice is. A run that asks for its layers (opts.Layers) runs as asked.
func (e *Engine) runFitting(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	if opts.Layers > 0 {
		return e.sup.Run(ctx, w, c, opts, emit)
	}
	// The first run builds what the worker builds by default, unless a
	// smaller slice was found to fit.
	first, fitted := e.slices.of(w, e.opts.MaxLayers)
	r, n, tried := e.shrinking(ctx, w, first, 1, func(k int) engine.Result {
		o := opts
		if fitted || k != first {
			o.Layers = k
		}
		return e.sup.Run(ctx, w, c, o, emit)
	})
	if len(tried) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("the slice of %s of the stage's %d layers ran out of memory on this GPU; %d built", layerCounts(tried), w.StageLayers, n))
	}
	return r
}

// layerCounts says the layer counts tried: "8", "8 and 4", "8, 4 and 2".
func layerCounts(ns []int) string {
	s := ""
	for i, n := range ns {
		switch {
		case i == 0:
		case i == len(ns)-1:
			s += " and "
		default:
			s += ", "
		}
		s += fmt.Sprint(n)
	}
	return s
}
