package megatron

import (
	"context"
	"fmt"

	"cgtune/engine"
	"cgtune/stepmodel"
)

// exposureModes are the runs the collective exposure is fitted from:
// eager and whole-layer graphs, at the profile's two layer counts.
var exposureModes = []string{"eager", "layer"}

// MeasureCollectives measures how the layers' collectives expose the
// ranks' host work at many's world size: the eager and whole-layer-graphed
// runs at the profile's two layer counts on one (world size 1) and on many (world size
// 2 or more, the layout's TP then EP run for real), fitted by
// FitExposure. rates time the collectives the ranks ran (a cached NCCL
// measurement where there is one).
func MeasureCollectives(ctx context.Context, one, many *Engine, w *stepmodel.Workload, rates stepmodel.Rates, emit func(string)) (stepmodel.CollectiveExposure, error) {
	if one.WorldSize() != 1 || many.WorldSize() < 2 {
		return stepmodel.CollectiveExposure{}, fmt.Errorf("collective exposure: want engines at world size 1 and 2 or more (have %d and %d)", one.WorldSize(), many.WorldSize())
	}
	measure := func(e *Engine) ([]profileRun, *engine.FrameworkInfo, error) {
		return e.profileRuns(ctx, w, exposureModes, fmt.Sprintf("world size %d, ", e.WorldSize()), emit)
	}
	runs1, _, err := measure(one)
	if err != nil {
		return stepmodel.CollectiveExposure{}, err
	}
	runsN, fw, err := measure(many)
	if err != nil {
		return stepmodel.CollectiveExposure{}, err
	}
	if fw == nil {
		return stepmodel.CollectiveExposure{}, fmt.Errorf("collective exposure: the world-size-%d runs failed: %s", many.WorldSize(), firstErr(runsN, "eager"))
	}
	coll := layerCollectiveMs(w, rates, executed(fw, w.Layout))
	return FitExposure(runs1, runsN, many.WorldSize(), coll)
}

// layerCollectiveMs is the modelled time, per layer and micro-batch, of
// the collectives of the families in ran (those the ranks executed), over
// the workload's first layer.
func layerCollectiveMs(w *stepmodel.Workload, rates stepmodel.Rates, ran map[string]bool) float64 {
	if len(w.Layers) == 0 {
		return 0
	}
	ranOnly := func(o stepmodel.Op) bool { return ran[prefix(o.Name)] }
	return (collectiveUs(w.Layers[0].Fwd, rates, ranOnly) + collectiveUs(w.Layers[0].Bwd, rates, ranOnly)) / 1e3
}

// FitExposure is the collective exposure at world size world from runs at
// world size 1 (one) and at world (many) of the same per-rank slice. With
// W(n) the forward-backward wall time per step at n layers and M
// micro-batches, a layer costs (W(b) − W(a))/((b − a)·M) per micro-batch
// (a < b the profile's layer counts); what a
// layer costs more at world size N than at 1, less the modelled time of
// the collectives the ranks ran (collMs per layer and micro-batch), is the
// host work the collectives exposed: eager from the eager runs, graphed
// from the whole-layer-graphed ones. Negative differences (the collectives
// hidden under other work, or noise) count as none.
func FitExposure(one, many []profileRun, world int, collMs float64) (stepmodel.CollectiveExposure, error) {
	perLayer := func(runs []profileRun, mode string) (float64, error) {
		f := newFitter(runs)
		ra, rb := f.get(mode, f.a), f.get(mode, f.b)
		if ra == nil || rb == nil {
			return 0, fmt.Errorf("the %s runs failed: %s", mode, firstErr(runs, mode))
		}
		m := float64(max(1, ra.MicroBatchesRun))
		// Not clamped at 0: a difference of two slopes may be negative.
		return (rb.FwdBwdMs - ra.FwdBwdMs) / (m * float64(f.b-f.a)), nil
	}
	f := newFitter(one)
	x := stepmodel.CollectiveExposure{WorldSize: world,
		Source: fmt.Sprintf("eager and whole-layer-graphed runs at %d and %d layers, world size %d against 1, less %.3f ms/layer of modelled collectives",
			f.a, f.b, world, collMs)}
	for _, mode := range exposureModes {
		a, err := perLayer(one, mode)
		if err != nil {
			return x, fmt.Errorf("collective exposure at world size 1: %w", err)
		}
		b, err := perLayer(many, mode)
		if err != nil {
			return x, fmt.Errorf("collective exposure at world size %d: %w", world, err)
		}
		v := max(0, b-a-collMs)
		if mode == "eager" {
			x.EagerExposedHostMsPerLayer = v
		} else {
			x.GraphedExposedHostMsPerLayer = v
		}
	}
	return x, nil
}

// AddExposure puts x into p's collective exposures, replacing one of the
// same world size.
func AddExposure(p *stepmodel.FrameworkProfile, x stepmodel.CollectiveExposure) {
	for i, c := range p.Collectives {
		if c.WorldSize == x.WorldSize {
			p.Collectives[i] = x
			return
		}
	}
	p.Collectives = append(p.Collectives, x)
}
