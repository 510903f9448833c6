package megatron

import (
	"context"
	"fmt"
	"strings"

	"cgtune/engine"
	"cgtune/presets"
)

// profileLayers are the two layer counts a profile is fitted from: what
// changes between them is the cost of one layer, what stays is the rest.
var profileLayers = [2]int{1, 2}

// profileRun is one measured run of the profile: a mode at a layer count.
type profileRun struct {
	mode   string // "eager", "layer" (local whole-layer graphs), "full_iteration"
	layers int
	raw    *engine.RawTimes
	err    string
}

var profileCandidates = map[string]presets.Candidate{
	"eager":          {Impl: presets.ImplNone, Scopes: []string{}},
	"layer":          {Impl: presets.ImplLocal, Scopes: []string{}, Warmup: 1},
	"full_iteration": {Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 1},
}

// MeasureProfile measures the framework profile of w's model and layout:
// eager, whole-layer-graphed and full-iteration runs at one and two
// layers, fitted per layer and micro-batch (see Fit).
func (e *Engine) MeasureProfile(ctx context.Context, w *engine.Workload, emit func(string)) (*engine.FrameworkProfile, error) {
	runs, _, err := e.profileRuns(ctx, w, []string{"eager", "layer", "full_iteration"}, "", emit)
	if err != nil {
		return nil, err
	}
	p, err := Fit(runs, layerKind(w))
	if err != nil {
		return nil, err
	}
	fw := e.Framework()
	if fw != nil {
		p.Key.Torch, p.Key.MCore, p.Key.TE, p.Key.LayerSpec, p.Key.WorldSize = fw.Torch, fw.MCore, fw.TE, fw.LayerSpec, fw.WorldSize
		p.Source = fmt.Sprintf("megatron-core %s, torch %s, %s layer spec, %s (measured by cgtune probe --framework)",
			fw.MCore, fw.Torch, fw.LayerSpec, e.Device().Name)
	}
	p.Key.GPU, p.Key.Driver = e.Device().Name, e.Device().Driver
	p.Key.Model, p.Key.Layout = engine.ModelKey(w.Spec.Model), engine.LayoutKey(w.Layout)
	return p, nil
}

// profileRuns runs each mode at each of profileLayers and returns the
// runs and the framework the last successful one reported; prefix starts
// every progress line.
func (e *Engine) profileRuns(ctx context.Context, w *engine.Workload, modes []string, prefix string, emit func(string)) ([]profileRun, *engine.FrameworkInfo, error) {
	var runs []profileRun
	var fw *engine.FrameworkInfo
	for _, mode := range modes {
		for _, n := range profileLayers {
			r := e.sup.Run(ctx, w, profileCandidates[mode], engine.RunOptions{Layers: n, MeasuredSteps: 5, EagerSteps: 5}, nil)
			pr := profileRun{mode: mode, layers: n, raw: r.Raw, err: r.Err}
			if emit != nil {
				emit(fmt.Sprintf("%s%s, %d layer(s): %s", prefix, mode, n, describeRaw(pr)))
			}
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			if r.Framework != nil {
				fw = r.Framework
			}
			runs = append(runs, pr)
		}
	}
	return runs, fw, nil
}

func describeRaw(r profileRun) string {
	if r.raw == nil {
		return "failed: " + r.err
	}
	return fmt.Sprintf("host %.2f ms (forward %.2f), forward-backward %.2f ms, optimizer %.2f ms, graphs %.0f MiB",
		r.raw.HostMs, r.raw.HostFwdMs, r.raw.FwdBwdMs, r.raw.OptMs, r.raw.GraphMiB)
}

// layerKind is the kind of the layers the slice builds (its first one).
func layerKind(w *engine.Workload) string {
	if len(w.Layers) == 0 {
		return string(presets.LayerDense)
	}
	return string(w.Layers[0].Kind)
}

// Fit turns the profile runs into per-layer, per-micro-batch costs. With
// T(n) a per-step figure at n layers and M micro-batches per step,
// T(n) = M·(other + n·layer) (+ optimizer for whole steps), so
// layer = (T(2) − T(1))/M and other = T(1)/M − layer.
//
// GPU time comes from the full-iteration replay, whose kernels run back to
// back (no host gaps); forward and backward GPU time are split 1:2, the
// ratio of their matrix work. Where the full iteration cannot be captured
// (a host sync inside), the eager wall time stands in, an upper bound.
func Fit(runs []profileRun, kind string) (*engine.FrameworkProfile, error) {
	get := func(mode string, n int) *engine.RawTimes {
		for _, r := range runs {
			if r.mode == mode && r.layers == n && r.raw != nil {
				return r.raw
			}
		}
		return nil
	}
	e1, e2 := get("eager", 1), get("eager", 2)
	if e1 == nil || e2 == nil {
		return nil, fmt.Errorf("the eager runs failed: %s", firstErr(runs, "eager"))
	}
	m := float64(max(1, e1.MicroBatchesRun))
	p := &engine.FrameworkProfile{Version: engine.ProfileVersion, Layers: map[string]engine.LayerProfile{},
		MeasuredAt: fmt.Sprintf("eager, whole-layer and full-iteration runs at 1 and 2 layers, %d micro-batches per step", int(m))}
	perLayer := func(a, b float64) float64 { return max(0, (b-a)/m) }
	lp := engine.LayerProfile{Graphed: map[string]engine.GraphedRegion{}}
	// Totals come from the training steps. A forward-only pass runs a
	// different schedule (no backward, no gradient buffers) whose fixed
	// host cost does not carry over, so it only splits a layer's host time
	// between forward and backward; the part outside the layers is split
	// evenly (embedding and head have both directions).
	layerHost := perLayer(e1.HostMs, e2.HostMs)
	fwdShare := 1.0 / 3
	if d := perLayer(e1.HostFwdMs, e2.HostFwdMs); layerHost > 0 && e1.HostFwdMs > 0 {
		fwdShare = min(1, d/layerHost)
	}
	lp.EagerFwd.HostMs, lp.EagerBwd.HostMs = fwdShare*layerHost, (1-fwdShare)*layerHost
	other := max(0, e1.HostMs/m-layerHost)
	p.OtherFwd.HostMs, p.OtherBwd.HostMs = other/2, other/2
	g1, g2 := get("full_iteration", 1), get("full_iteration", 2)
	if g1 == nil || g2 == nil {
		g1, g2 = e1, e2
		p.Notes = append(p.Notes, "full iteration did not capture ("+firstErr(runs, "full_iteration")+"): GPU times are eager wall times, an upper bound")
		p.FullIteration.CaptureError = firstErr(runs, "full_iteration")
	} else {
		p.FullIteration.ReplayHostMs = g2.HostMs
		p.FullIteration.GraphMiBPerMicroBatch = g2.GraphMiB / m
		perLayer := max(0, g2.GraphMiB-g1.GraphMiB)
		p.FullIteration.GraphMiBPerLayer, p.FullIteration.GraphMiBFixed = perLayer, max(0, g1.GraphMiB-perLayer)
	}
	layerGPU := perLayer(g1.FwdBwdMs, g2.FwdBwdMs)
	otherGPU := max(0, g1.FwdBwdMs/m-layerGPU)
	lp.EagerFwd.GPUMs, lp.EagerBwd.GPUMs = layerGPU/3, 2*layerGPU/3
	p.OtherFwd.GPUMs, p.OtherBwd.GPUMs = otherGPU/3, 2*otherGPU/3
	p.Optimizer = engine.HostGPU{HostMs: e2.OptMs, GPUMs: e2.OptMs}
	if l1, l2 := get("layer", 1), get("layer", 2); l1 != nil && l2 != nil {
		lp.Graphed["layer"] = engine.GraphedRegion{
			ReplayHostMs: perLayer(l1.HostMs, l2.HostMs),
			GPUMs:        layerGPU,
			// One graph pair per layer serves every micro-batch when PP is 1.
			GraphMiB: max(0, l2.GraphMiB-l1.GraphMiB),
		}
		p.GraphPoolFixedMiB = max(0, l1.GraphMiB-lp.Graphed["layer"].GraphMiB)
	} else {
		lp.Graphed["layer"] = engine.GraphedRegion{CaptureError: firstErr(runs, "layer")}
	}
	p.Layers[kind] = lp
	p.Notes = append(p.Notes, "optimizer host and GPU time: its synchronised wall time (it syncs for the gradient norm)")
	return p, nil
}

func firstErr(runs []profileRun, mode string) string {
	for _, r := range runs {
		if r.mode == mode && r.err != "" {
			return strings.TrimSpace(r.err)
		}
	}
	return "no result"
}
