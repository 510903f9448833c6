package megatron

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// profileLayers are the two layer counts a profile of w is fitted from:
// one, and as many as the megatron engine builds of w's stage (its layers,
// at most maxLayers, default DefaultMaxLayers), so that the fit reproduces the slice the framework
// runs and needs no extrapolation in the layer count. What changes between
// them is the cost of one layer, what stays is the rest. The far point is
// the built count, not a fixed one: Megatron-Core's eager host time per
// layer grows with the layers built, and a fit from one and four layers
// fell short of eight-layer steps by the largest errors of the three-way
// tables (docs/emulation-accuracy-2026-12-01.md). A stage of one layer
// still needs two points: 1 and 2.
func profileLayers(w *stepmodel.Workload, maxLayers int) [2]int {
	built := min(len(w.Layers), orDefault(maxLayers, DefaultMaxLayers))
	return [2]int{1, max(2, built)}
}

// profileLayersFitting are profileLayers with the far point the slice
// that fits this GPU (sliceFit), which the search's runs build too.
func (e *Engine) profileLayersFitting(w *stepmodel.Workload) [2]int {
	n, _ := e.slices.of(w, e.opts.MaxLayers)
	return profileLayers(w, n)
}

// spreadSteps are the steps measured at the larger layer count, whose
// spread the profile keeps (stepmodel.StepSpread): the nearest-rank p10 and
// p90 of 9 steps are their least and greatest, whose expected quantiles
// are the 10th and 90th, as the p10–p90 of a search's 15 steps.
const spreadSteps = 9

// profileRun is one measured run of the profile: a mode at a layer count.
// The modes are named as the spreads they measure (stepmodel.SpreadEager, ...).
type profileRun struct {
	mode   string // "eager", "layer" (local whole-layer graphs), "full_iteration"
	layers int
	raw    *engine.RawTimes
	step   stepmodel.Stats // the framework's step statistics (its spread)
	// outside is the run's memory outside the caching allocator, measured
	// in the warm worker (engine.Memory.OutsideAllocatorMiB).
	outside int64
	err     string
}

var profileCandidates = map[string]presets.Candidate{
	stepmodel.SpreadEager:         {Impl: presets.ImplNone, Scopes: []string{}},
	stepmodel.SpreadLayer:         {Impl: presets.ImplLocal, Scopes: []string{}, Warmup: 1},
	stepmodel.SpreadFullIteration: {Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 1},
}

// MeasureProfile measures the framework profile of w's model and layout:
// eager, whole-layer-graphed and full-iteration runs at one layer and at
// the layers the engine builds of the stage (profileLayers), fitted per
// layer and micro-batch (see Fit).
func (e *Engine) MeasureProfile(ctx context.Context, w *stepmodel.Workload, emit func(string)) (*stepmodel.FrameworkProfile, error) {
	runs, _, err := e.profileRuns(ctx, w, stepmodel.ProfileModes(), "", emit)
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
	p.Key.Model, p.Key.Layout = stepmodel.ModelKey(w.Spec.Model), stepmodel.LayoutKey(w.Layout)
	p.Host, _ = os.Hostname()
	p.Date = time.Now().UTC().Format(time.RFC3339)
	return p, nil
}

// profileRuns runs each mode at each of w's profileLayers and returns the
// runs and the framework the last successful one reported; prefix starts
// every progress line.
func (e *Engine) profileRuns(ctx context.Context, w *stepmodel.Workload, modes []string, prefix string, emit func(string)) ([]profileRun, *engine.FrameworkInfo, error) {
	var runs []profileRun
	var fw *engine.FrameworkInfo
	for _, mode := range modes {
		layers := e.profileLayersFitting(w)
		for i, n := range layers {
			steps := 5
			if i == 1 {
				steps = spreadSteps
			}
			// The far point shrinks to what fits this GPU, down to two
			// layers (the fit needs two counts), as the search's slice.
			least := n
			if i == 1 {
				least = min(n, 2)
			}
			r, built, _ := e.shrinking(ctx, w, n, least, func(k int) engine.Result {
				return e.sup.Run(ctx, w, profileCandidates[mode], engine.RunOptions{Layers: k, MeasuredSteps: steps, EagerSteps: steps}, nil)
			})
			pr := profileRun{mode: mode, layers: built, raw: r.Raw, step: r.Step, outside: r.Memory.OutsideAllocatorMiB, err: r.Err}
			if emit != nil {
				emit(fmt.Sprintf("%s%s, %d layer(s): %s", prefix, mode, built, describeRaw(pr)))
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
	line := fmt.Sprintf("host %.2f ms (forward %.2f, zero-grad %.2f, lead-in %.2f), forward-backward %.2f ms, optimizer %.2f ms, graphs %.0f MiB",
		r.raw.HostMs, r.raw.HostFwdMs, r.raw.ZeroGradMs, r.raw.LeadInMs, r.raw.FwdBwdMs, r.raw.OptMs, r.raw.GraphMiB)
	if r.raw.FirstLayerMs > 0 {
		line += fmt.Sprintf(", layer calls %.3f/%.3f/%.3f ms (decoder to the first, first, later)", r.raw.ToFirstLayerMs, r.raw.FirstLayerMs, r.raw.LayerCallMs)
	}
	return line
}

// layerKind is the kind of the layers the slice builds (its first one).
func layerKind(w *stepmodel.Workload) string {
	if len(w.Layers) == 0 {
		return string(presets.LayerDense)
	}
	return string(w.Layers[0].Kind)
}

// Fit turns the profile runs into per-layer, per-micro-batch costs. With
// T(n) a per-step figure at n layers and M micro-batches per step,
// T(n) = M·(other + n·layer) (+ optimizer for whole steps), so from the
// two layer counts a < b: layer = (T(b) − T(a))/((b − a)·M) and
// other = T(a)/M − a·layer. The optimizer is fitted the same way per
// step: its work grows with the parameters, so with the layers.
//
// GPU time comes from the full-iteration replay, whose kernels run back to
// back (no host gaps); forward and backward GPU time are split 1:2, the
// ratio of their matrix work. Where the full iteration cannot be captured
// (a host sync inside), the eager wall time stands in, an upper bound.
// Where the eager runs are GPU-bound, their wall time gives the layers'
// eager GPU time (launch gaps included), which a graph's replay does not
// have.
func Fit(runs []profileRun, kind string) (*stepmodel.FrameworkProfile, error) {
	fit := newFitter(runs)
	e1, e2 := fit.get("eager", fit.a), fit.get("eager", fit.b)
	if e1 == nil || e2 == nil {
		return nil, fmt.Errorf("the eager runs failed: %s", firstErr(runs, "eager"))
	}
	fit.m = float64(max(1, e1.MicroBatchesRun))
	p := &stepmodel.FrameworkProfile{Version: stepmodel.ProfileVersion, Layers: map[string]stepmodel.LayerProfile{},
		MeasuredAt: fmt.Sprintf("eager, whole-layer and full-iteration runs at %d and %d layers, %d micro-batches per step", fit.a, fit.b, int(fit.m))}
	lp := stepmodel.LayerProfile{Graphed: map[string]stepmodel.GraphedRegion{}}
	fit.eagerHost(p, &lp, e1, e2)
	layerGPU := fit.gpu(p, &lp, e1, e2)
	optLayer, optFixed := fit.optimizer()
	// The optimizer's synchronised wall time is host-bound (Megatron-Core
	// launches a few kernels per parameter group and reads the gradient
	// norm back); as GPU time as well it was counted twice, and the
	// emulated eager step came out above the profile's own run
	// (docs/emulation-accuracy-2026-12-01.md). Its kernels' GPU time is
	// left to the per-op model (GPU 0).
	p.Optimizer = stepmodel.HostGPU{HostMs: optFixed}
	p.OptimizerPerLayer = stepmodel.HostGPU{HostMs: optLayer}
	if l1, l2 := fit.get("layer", fit.a), fit.get("layer", fit.b); l1 != nil && l2 != nil {
		replay, _ := fit.line(l1.HostMs-l1.ZeroGradMs, l2.HostMs-l2.ZeroGradMs)
		// One graph pair per layer serves every micro-batch when PP is 1.
		mib, fixed := fit.stepLine(l1.GraphMiB, l2.GraphMiB)
		lp.Graphed["layer"] = stepmodel.GraphedRegion{ReplayHostMs: replay, GPUMs: layerGPU, GraphMiB: mib, FirstReplayHostMs: firstReplay(l2, e2)}
		p.GraphPoolFixedMiB = fixed
	} else {
		lp.Graphed["layer"] = stepmodel.GraphedRegion{CaptureError: firstErr(runs, "layer")}
	}
	p.Layers[kind] = lp
	p.Spread = fit.spreads()
	// The memory outside the allocator grows with the graphs instantiated
	// (docs/data/memory-peaks-2026-12-02.jsonl.gz): the largest run's.
	for _, r := range runs {
		p.OutsideAllocatorMiB = max(p.OutsideAllocatorMiB, float64(r.outside))
	}
	p.Notes = append(p.Notes, "optimizer: its synchronised wall time (it syncs for the gradient norm), fixed plus per layer, as host time started on an idle GPU; its kernels' GPU time per op")
	return p, nil
}

// firstReplay is the host's extra work before a step's first replay of
// the whole-layer graphs (GraphedRegion.FirstReplayHostMs), from the
// graphed and the eager run at the larger layer count: the first layer's
// call beyond a later one's, and the decoder's work before its first
// layer beyond the eager decoder's (which the eager fit already holds).
// The later replays' host time is the fitted replay time.
func firstReplay(graphed, eager *engine.RawTimes) float64 {
	if graphed.FirstLayerMs <= 0 || graphed.LayerCallMs <= 0 {
		return 0
	}
	extra := max(0, graphed.FirstLayerMs-graphed.LayerCallMs)
	if graphed.ToFirstLayerMs > 0 && eager.ToFirstLayerMs > 0 {
		extra += max(0, graphed.ToFirstLayerMs-eager.ToFirstLayerMs)
	}
	return extra
}

// eagerHost fits the host times of the eager runs e1 and e2: the step's
// start, a layer's forward and backward, the part outside the layers and
// its lead-in.
//
// Totals come from the training steps. A forward-only pass runs a
// different schedule (no backward, no gradient buffers) whose fixed host
// cost does not carry over, so it only splits a layer's host time between
// forward and backward; the part outside the layers is split evenly
// (embedding and head have both directions), its forward at least the
// measured lead-in.
func (f fitter) eagerHost(p *stepmodel.FrameworkProfile, lp *stepmodel.LayerProfile, e1, e2 *engine.RawTimes) {
	// The step's start (zeroing the gradient buffers) happens once per
	// step, not per micro-batch: it is fitted on its own, per step, and
	// left out of the per-micro-batch line.
	startLayer, startFixed := f.stepLine(e1.ZeroGradMs, e2.ZeroGradMs)
	p.StepStart, p.StepStartPerLayer = stepmodel.HostGPU{HostMs: startFixed}, stepmodel.HostGPU{HostMs: startLayer}
	layerHost, other := f.line(e1.HostMs-e1.ZeroGradMs, e2.HostMs-e2.ZeroGradMs)
	fwdShare := 1.0 / 3
	switch {
	case layerHost > 0 && e2.LayerCallMs > 0:
		// A layer's forward call in the training step itself (the
		// first micro-batch's later layers), not a forward-only pass.
		fwdShare = min(1, e2.LayerCallMs/layerHost)
	case layerHost > 0 && e1.HostFwdMs > 0:
		d, _ := f.line(e1.HostFwdMs, e2.HostFwdMs)
		fwdShare = min(1, d/layerHost)
	}
	lp.EagerFwd.HostMs, lp.EagerBwd.HostMs = fwdShare*layerHost, (1-fwdShare)*layerHost
	p.OtherFwd.HostMs, p.OtherBwd.HostMs = other/2, other/2
	// The lead-in is measured for the first micro-batch of the larger
	// slice's eager steps: the host work before its first layer.
	if e2.LeadInMs > 0 {
		p.PreFwdHostMs = e2.LeadInMs
		p.OtherFwd.HostMs = max(p.OtherFwd.HostMs, e2.LeadInMs)
		p.OtherBwd.HostMs = max(0, other-p.OtherFwd.HostMs)
	}
}

// gpu fits the GPU times, and the full iteration's replay and graph
// memory where it was captured; it returns a layer's graphed GPU time per
// micro-batch.
func (f fitter) gpu(p *stepmodel.FrameworkProfile, lp *stepmodel.LayerProfile, e1, e2 *engine.RawTimes) (layerGPU float64) {
	g1, g2 := f.get("full_iteration", f.a), f.get("full_iteration", f.b)
	if g1 == nil || g2 == nil {
		g1, g2 = e1, e2
		p.Notes = append(p.Notes, "full iteration did not capture ("+firstErr(f.runs, "full_iteration")+"): GPU times are eager wall times, an upper bound")
		p.FullIteration.CaptureError = firstErr(f.runs, "full_iteration")
	} else {
		// Its replay's host time is what follows the step's start (an
		// item of its own in the emulated step).
		p.FullIteration.ReplayHostMs = max(0, g2.HostMs-g2.ZeroGradMs)
		p.FullIteration.GraphMiBPerMicroBatch = g2.GraphMiB / f.m
		perLayer, fixed := f.stepLine(g1.GraphMiB, g2.GraphMiB)
		p.FullIteration.GraphMiBPerLayer, p.FullIteration.GraphMiBFixed = perLayer, fixed
	}
	// A full-iteration replay's wall time is its launch, on the host with
	// the GPU idle, then the graph's kernels: the GPU time is what follows
	// the launch (the emulation adds the launch again as replay host time).
	// Eager wall times, where the full iteration failed, stay whole but
	// for the step's start.
	eagerWall := func(r *engine.RawTimes) float64 { return r.FwdBwdMs - r.ZeroGradMs }
	gpuOf := func(r *engine.RawTimes) float64 {
		if r == e1 || r == e2 {
			return eagerWall(r)
		}
		return max(0, r.FwdBwdMs-r.HostMs)
	}
	layerGPU, otherGPU := f.line(gpuOf(g1), gpuOf(g2))
	eagerGPU := layerGPU
	if gpuBound(e1) && gpuBound(e2) {
		// Eager kernels run with the launch gaps between them that a graph
		// removes: where the eager runs are GPU-bound, their wall time is
		// the layers' eager GPU time, above the graphed one
		// (docs/emulation-accuracy-2026-12-01.md).
		l, _ := f.line(eagerWall(e1), eagerWall(e2))
		if l = f.lessFirstForward(l, lp.EagerFwd.HostMs); l > eagerGPU {
			eagerGPU = l
			p.Notes = append(p.Notes, fmt.Sprintf("the eager runs are GPU-bound: a layer's eager GPU time is their wall time's, %.3f ms per layer and micro-batch against %.3f ms graphed", l, layerGPU))
		}
	}
	lp.EagerFwd.GPUMs, lp.EagerBwd.GPUMs = eagerGPU/3, 2*eagerGPU/3
	p.OtherFwd.GPUMs, p.OtherBwd.GPUMs = otherGPU/3, 2*otherGPU/3
	return layerGPU
}

// lessFirstForward is a GPU-bound eager layer's GPU time per micro-batch
// from its wall time's slope s when a layer's forward host time fwdHost
// exceeds its forward GPU time (a third of it): the GPU then waits for
// the host through the first micro-batch's forward, the later ones'
// forwards being covered by the backward's backlog, so
// s = g + (fwdHost − g/3)/M. Without taking that out the emulation, which
// runs the same host-bound forward, counts it twice, and its eager step
// comes out above the run it was fitted from
// (docs/emulation-accuracy-2026-12-01.md).
func (f fitter) lessFirstForward(s, fwdHost float64) float64 {
	g := (s - fwdHost/f.m) / (1 - 1/(3*f.m))
	if fwdHost <= g/3 {
		return s // the forward is GPU-bound too: no wait
	}
	return g
}

// gpuBound reports whether an eager run's wall time is well above its
// host time: the GPU, not the host, set its pace.
func gpuBound(r *engine.RawTimes) bool { return r.HostMs < 0.9*r.FwdBwdMs }

// fitter fits straight lines through the runs at layer counts a and b
// with m micro-batches per step.
type fitter struct {
	runs []profileRun
	a, b int
	m    float64
}

// newFitter fits from runs at the least and the most layers among them.
func newFitter(runs []profileRun) fitter {
	f := fitter{runs: runs}
	for i, r := range runs {
		if i == 0 || r.layers < f.a {
			f.a = r.layers
		}
		f.b = max(f.b, r.layers)
	}
	return f
}

// spreads are the step spreads of the runs at the larger layer count,
// the slice the engines emulate, by mode (stepmodel.StepSpread).
func (f fitter) spreads() map[string]stepmodel.StepSpread {
	out := map[string]stepmodel.StepSpread{}
	for _, r := range f.runs {
		if r.layers == f.b && r.raw != nil && r.step.Median > 0 {
			out[r.mode] = stepmodel.SpreadOf(r.step)
		}
	}
	return out
}

func (f fitter) get(mode string, n int) *engine.RawTimes {
	for _, r := range f.runs {
		if r.mode == mode && r.layers == n && r.raw != nil {
			return r.raw
		}
	}
	return nil
}

// stepLine is a per-step figure's slope per layer and its value at no
// layers (both at least 0), from its values at a and b layers.
func (f fitter) stepLine(ta, tb float64) (perLayer, fixed float64) {
	perLayer = max(0, (tb-ta)/float64(f.b-f.a))
	return perLayer, max(0, ta-float64(f.a)*perLayer)
}

// line is stepLine per micro-batch.
func (f fitter) line(ta, tb float64) (perLayer, fixed float64) {
	return f.stepLine(ta/f.m, tb/f.m)
}

// optimizer fits the optimizer's step time from every mode that ran at
// both layer counts (the optimizer runs eagerly in all of them; the mean
// of a few short, noisy readings).
func (f fitter) optimizer() (perLayer, fixed float64) {
	var ta, tb float64
	n := 0
	for _, mode := range stepmodel.ProfileModes() {
		if ra, rb := f.get(mode, f.a), f.get(mode, f.b); ra != nil && rb != nil {
			ta, tb, n = ta+ra.OptMs, tb+rb.OptMs, n+1
		}
	}
	return f.stepLine(ta/float64(n), tb/float64(n))
}

func firstErr(runs []profileRun, mode string) string {
	for _, r := range runs {
		if r.mode == mode && r.err != "" {
			return strings.TrimSpace(r.err)
		}
	}
	return "no result"
}
