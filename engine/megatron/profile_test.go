package megatron

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/stepmodel"
)

// testLayers are the layer counts the synthetic runs are measured at.
var testLayers = [2]int{1, 8}

// synthetic runs of a framework whose costs are known: per layer and
// micro-batch forward host 2 ms, backward host 3 ms, GPU 6 ms, graphed
// replay host 0.1 ms and 100 MiB of graph; outside the layers forward host
// 1 ms, backward 0.5 ms, GPU 3 ms; 4 micro-batches; optimizer 7 ms per
// step plus 0.5 ms per layer. Every step starts with 0.2 ms of host work
// plus 0.05 ms per layer (zeroing the gradient buffers), and 0.6 ms of the
// forward outside the layers comes before the first layer (the lead-in).
// A full-iteration replay's wall time is the step's start and its 0.8 ms
// launch, then the kernels. At 8 layers the decoder takes 0.1 ms eager
// and 0.25 ms graphed before its first layer, and the first graphed
// layer's call 0.45 ms against 0.2 ms for the later ones: the step's first
// replay costs the host 0.4 ms more.
func syntheticRuns(fullIteration bool) []profileRun {
	const m = 4.0
	var runs []profileRun
	for _, n := range testLayers {
		l := float64(n)
		zg := 0.2 + 0.05*l
		eager := &engine.RawTimes{LayersBuilt: n, MicroBatchesRun: 4,
			HostFwdMs: m * (1 + 2*l), HostMs: zg + m*(1.5+5*l), FwdBwdMs: zg + m*(1.5+5*l), OptMs: 7 + 0.5*l,
			ZeroGradMs: zg, LeadInMs: 0.6}
		graphed := &engine.RawTimes{LayersBuilt: n, MicroBatchesRun: 4,
			HostMs: zg + m*(1.5+0.1*l), FwdBwdMs: m * (3 + 6*l), GraphMiB: 30 + 100*l, OptMs: 7 + 0.5*l,
			ZeroGradMs: zg, LeadInMs: 0.6}
		if n >= 3 {
			eager.ToFirstLayerMs, eager.FirstLayerMs, eager.LayerCallMs = 0.1, 2, 2
			graphed.ToFirstLayerMs, graphed.FirstLayerMs, graphed.LayerCallMs = 0.25, 0.45, 0.2
		}
		runs = append(runs, profileRun{mode: "eager", layers: n, raw: eager}, profileRun{mode: "layer", layers: n, raw: graphed})
		if fullIteration {
			runs = append(runs, profileRun{mode: "full_iteration", layers: n, raw: &engine.RawTimes{LayersBuilt: n,
				MicroBatchesRun: 4, HostMs: zg + 0.8, FwdBwdMs: zg + 0.8 + m*(3+6*l), GraphMiB: 20 + 50*l, OptMs: 7 + 0.5*l,
				ZeroGradMs: zg}})
		} else {
			runs = append(runs, profileRun{mode: "full_iteration", layers: n, err: "capture failed: host sync"})
		}
	}
	return runs
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("%s = %.4f, want %.4f", what, got, want)
	}
}

// The far layer count is what the engine builds of the stage: all of a
// short stage's layers, at most maxLayers (default 8), never fewer than 2.
func TestProfileLayersFollowTheBuiltSlice(t *testing.T) {
	for _, c := range []struct{ stage, max, want int }{
		{8, 0, 8}, {12, 8, 8}, {12, 4, 4}, {3, 8, 3}, {1, 8, 2}, {48, 0, 8},
	} {
		t.Run(fmt.Sprintf("stage %d max %d", c.stage, c.max), func(t *testing.T) {
			w := &stepmodel.Workload{Layers: make([]stepmodel.LayerTrace, c.stage)}
			if got := profileLayers(w, c.max); got != [2]int{1, c.want} {
				t.Errorf("stage of %d layers, max %d: profile layers %v, want [1 %d]", c.stage, c.max, got, c.want)
			}
		})
	}
}

func TestFitRecoversPerLayerCosts(t *testing.T) {
	p, err := Fit(syntheticRuns(true), "dense")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.MeasuredAt, "at 1 and 8 layers") {
		t.Errorf("measured at %q: want the runs' own layer counts, 1 and 8", p.MeasuredAt)
	}
	l := p.Layers["dense"]
	near(t, "layer forward host", l.EagerFwd.HostMs, 2)
	near(t, "layer backward host", l.EagerBwd.HostMs, 3)
	near(t, "the step's first replay, host beyond a later one", l.Graphed["layer"].FirstReplayHostMs, 0.4)
	near(t, "layer GPU", l.EagerFwd.GPUMs+l.EagerBwd.GPUMs, 6)
	near(t, "other host, forward and backward", p.OtherFwd.HostMs+p.OtherBwd.HostMs, 1.5)
	near(t, "other GPU", p.OtherFwd.GPUMs+p.OtherBwd.GPUMs, 3)
	g := l.Graphed["layer"]
	near(t, "graphed replay host", g.ReplayHostMs, 0.1)
	near(t, "graph MiB per layer", g.GraphMiB, 100)
	near(t, "optimizer outside the layers", p.Optimizer.HostMs, 7)
	near(t, "optimizer per layer", p.OptimizerPerLayer.HostMs, 0.5)
	// The optimizer's wall time is host time; its kernels are the per-op
	// model's (GPU 0), not the wall time a second time.
	near(t, "optimizer GPU", p.Optimizer.GPUMs+p.OptimizerPerLayer.GPUMs, 0)
	near(t, "full-iteration replay host, after the step's start", p.FullIteration.ReplayHostMs, 0.8)
	near(t, "step start", p.StepStart.HostMs, 0.2)
	near(t, "step start per layer", p.StepStartPerLayer.HostMs, 0.05)
	near(t, "lead-in before the first layer", p.PreFwdHostMs, 0.6)
	near(t, "capture's fixed pool", p.GraphPoolFixedMiB, 30)
	near(t, "full-iteration graph per layer", p.FullIteration.GraphMiBPerLayer, 50)
	near(t, "full-iteration graph fixed", p.FullIteration.GraphMiBFixed, 20)
	if err := p.Validate(); err != nil {
		t.Fatalf("fitted profile does not validate: %v", err)
	}
}

// A forward-only pass with its own large fixed host cost (seen on the H200
// for a MoE slice: 92 ms per step at one layer against 150 ms for the
// whole training step) must not move host time out of the training step:
// the totals stay those of the training steps.
func TestFitKeepsTrainingStepTotals(t *testing.T) {
	runs := syntheticRuns(true)
	for _, r := range runs {
		if r.mode == "eager" {
			r.raw.HostFwdMs += 60 // the same fixed cost at both layer counts
		}
	}
	p, err := Fit(runs, "dense")
	if err != nil {
		t.Fatal(err)
	}
	l := p.Layers["dense"]
	near(t, "layer forward host", l.EagerFwd.HostMs, 2)
	near(t, "layer backward host", l.EagerBwd.HostMs, 3)
	near(t, "other host", p.OtherFwd.HostMs+p.OtherBwd.HostMs, 1.5)
}

func TestFitWithoutFullIterationSaysGPUIsAnUpperBound(t *testing.T) {
	p, err := Fit(syntheticRuns(false), "moe")
	if err != nil {
		t.Fatal(err)
	}
	if p.FullIteration.CaptureError == "" || !strings.Contains(strings.Join(p.Notes, " "), "upper bound") {
		t.Fatalf("capture error %q, notes %v", p.FullIteration.CaptureError, p.Notes)
	}
	near(t, "layer GPU from eager wall", p.Layers["moe"].EagerFwd.GPUMs+p.Layers["moe"].EagerBwd.GPUMs, 5)
}

func TestFitNeedsTheEagerRuns(t *testing.T) {
	runs := syntheticRuns(true)
	runs[0].raw, runs[0].err = nil, "OutOfMemoryError"
	if _, err := Fit(runs, "dense"); err == nil || !strings.Contains(err.Error(), "OutOfMemoryError") {
		t.Fatalf("err = %v", err)
	}
}

// The profile keeps each mode's step spread from its run at the larger
// layer count (the slice the engines emulate), and none for a mode whose
// run failed there.
func TestFitKeepsTheFrameworkSpreadOfTheBuiltSlice(t *testing.T) {
	runs := syntheticRuns(false)
	for i := range runs {
		// 1 layer: a wide spread that must not be kept; 8 layers: eager
		// −10%/+20%, whole layer −1%/+2%.
		runs[i].step = stepmodel.Stats{Median: 100, P10: 50, P90: 150}
		if runs[i].layers == testLayers[1] {
			runs[i].step = map[string]stepmodel.Stats{"eager": {Median: 100, P10: 90, P90: 120},
				"layer": {Median: 50, P10: 49.5, P90: 51}}[runs[i].mode]
		}
	}
	p, err := Fit(runs, "dense")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]stepmodel.StepSpread{stepmodel.SpreadEager: {Below: 0.1, Above: 0.2}, stepmodel.SpreadLayer: {Below: 0.01, Above: 0.02}}
	if len(p.Spread) != len(want) {
		t.Fatalf("spreads %v, want %v (none for the full iteration that failed)", p.Spread, want)
	}
	for k, w := range want {
		near(t, k+" spread below", p.Spread[k].Below, w.Below)
		near(t, k+" spread above", p.Spread[k].Above, w.Above)
	}
}

// Where the eager runs are GPU-bound, their wall time is the layers' eager
// GPU time (kernels with launch gaps between them), above the graphed
// one; where they are host-bound, the graphed GPU time stands for both.
func TestFitTakesEagerGPUTimeFromGPUBoundEagerRuns(t *testing.T) {
	runs := syntheticRuns(true)
	for _, r := range runs {
		if r.mode == "eager" {
			l := float64(r.layers)
			r.raw.FwdBwdMs = r.raw.ZeroGradMs + 4*(3.5+7*l)
		}
	}
	p, err := Fit(runs, "dense")
	if err != nil {
		t.Fatal(err)
	}
	l := p.Layers["dense"]
	near(t, "eager layer GPU, GPU-bound", l.EagerFwd.GPUMs+l.EagerBwd.GPUMs, 7)
	near(t, "graphed layer GPU", l.Graphed["layer"].GPUMs, 6)
	if !strings.Contains(strings.Join(p.Notes, "\n"), "eager runs are GPU-bound") {
		t.Errorf("notes do not say the eager GPU time came from the eager runs: %q", p.Notes)
	}
	host, err := Fit(syntheticRuns(true), "dense")
	if err != nil {
		t.Fatal(err)
	}
	hl := host.Layers["dense"]
	near(t, "eager layer GPU, host-bound", hl.EagerFwd.GPUMs+hl.EagerBwd.GPUMs, 6)
}

// GPU-bound eager runs whose layers' forward host time exceeds their
// forward GPU time: the GPU waits for the host through the first
// micro-batch's forward (the later ones are covered by the backward's
// backlog), so the wall time's slope is the GPU's plus that wait, which
// the fit takes out (the emulation runs the same host-bound forward and
// would count it twice). Per layer and micro-batch: GPU 6 ms eager, 5.5
// graphed; forward host 3 ms (the layer calls of the training step),
// backward 0.5.
func TestFitTakesTheFirstForwardOutOfGPUBoundEagerWalls(t *testing.T) {
	const m = 4.0
	var runs []profileRun
	for _, n := range testLayers {
		l := float64(n)
		eager := &engine.RawTimes{LayersBuilt: n, MicroBatchesRun: 4, HostMs: m * (1 + 3.5*l), HostFwdMs: m * (0.5 + 1*l),
			FwdBwdMs: m*(3+6*l) + l*(3-6.0/3), OptMs: 7}
		if n >= 3 {
			eager.LayerCallMs = 3
		}
		runs = append(runs,
			profileRun{mode: "eager", layers: n, raw: eager},
			profileRun{mode: "layer", layers: n, raw: &engine.RawTimes{LayersBuilt: n, MicroBatchesRun: 4, HostMs: m * (1 + 0.1*l),
				FwdBwdMs: m * (3 + 5.5*l), GraphMiB: 100 * l, OptMs: 7}},
			profileRun{mode: "full_iteration", layers: n, raw: &engine.RawTimes{LayersBuilt: n, MicroBatchesRun: 4, HostMs: 0.8,
				FwdBwdMs: 0.8 + m*(3+5.5*l), GraphMiB: 50 * l, OptMs: 7}})
	}
	p, err := Fit(runs, "dense")
	if err != nil {
		t.Fatal(err)
	}
	l := p.Layers["dense"]
	near(t, "forward host, from the training step's layer calls", l.EagerFwd.HostMs, 3)
	near(t, "backward host", l.EagerBwd.HostMs, 0.5)
	near(t, "eager GPU, the first forward's wait taken out", l.EagerFwd.GPUMs+l.EagerBwd.GPUMs, 6)
	near(t, "graphed GPU", l.Graphed["layer"].GPUMs, 5.5)
}

// The profile keeps the largest memory outside the allocator its runs
// measured (graphs' instantiations add to it), for the emulating engines'
// breakdowns on this node.
func TestFitKeepsTheMemoryOutsideTheAllocator(t *testing.T) {
	runs := syntheticRuns(true)
	for i := range runs {
		runs[i].outside = int64(9000 + 10*i)
	}
	runs[1].outside = 9500 // a graphed run, early in the list
	p, err := Fit(runs, "dense")
	if err != nil {
		t.Fatal(err)
	}
	if want := 9500.0; p.OutsideAllocatorMiB != want {
		t.Errorf("outside the allocator %.0f MiB, want the largest run's %.0f", p.OutsideAllocatorMiB, want)
	}
}
