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

// of is the layers the engine builds of w's stage: what fits, once a run
// found out, else the engine's slice (its layers, at most maxLayers).
func (s *sliceFit) of(w *stepmodel.Workload, maxLayers int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.layers[workloadKey(w)]; ok {
		return n
	}
	return min(max(1, w.StageLayers), orDefault(maxLayers, DefaultMaxLayers))
}

// shrunk reports whether w's slice was found not to fit.
func (s *sliceFit) shrunk(w *stepmodel.Workload) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.layers[workloadKey(w)]
	return ok
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
	n, pinned := e.slices.of(w, e.opts.MaxLayers), e.slices.shrunk(w)
	var tried []int
	for {
		o := opts
		if pinned {
			o.Layers = n
		}
		r := e.sup.Run(ctx, w, c, o, emit)
		if r.ErrKind != engine.FailureOOM || n <= 1 || ctx.Err() != nil {
			if len(tried) > 0 {
				r.Notes = append(r.Notes, fmt.Sprintf("the slice of %s of the stage's %d layers ran out of memory on this GPU; %d built", layerCounts(tried), w.StageLayers, n))
			}
			return r
		}
		tried = append(tried, n)
		n, pinned = n/2, true
		e.slices.keep(w, n)
	}
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
