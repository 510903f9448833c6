package estimate

import (
	"context"
	"math"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// fixedProfile is a cost source that uses one profile for every workload.
type fixedProfile struct{ p *stepmodel.FrameworkProfile }

func (f fixedProfile) CostsFor(w *stepmodel.Workload, r stepmodel.Rates, h stepmodel.HostCosts) stepmodel.Costs {
	return stepmodel.Costs{Rates: r, Host: h, Profile: f.p}
}

// A four-layer dense model on one GPU, two micro-batches per step, both run.
func profiled(t *testing.T, p *stepmodel.FrameworkProfile) (*Engine, *stepmodel.Workload) {
	t.Helper()
	e, err := ForGPU("h200")
	if err != nil {
		t.Fatal(err)
	}
	m := presets.Model{Name: "tiny", Arch: presets.Arch{Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 8, HeadDim: 128, Vocab: 32000}}
	w, err := stepmodel.BuildWorkload(m, presets.Layout{NumGPUs: 1, GBS: 2, MBS: 1, Seq: 1024}, stepmodel.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.MicroBatches != 2 || w.RunMicroBatches != 2 || len(w.Layers) != 4 {
		t.Fatalf("workload: %d micro-batches (run %d), %d layers", w.MicroBatches, w.RunMicroBatches, len(w.Layers))
	}
	return e.WithCosts(fixedProfile{p}), w
}

func hg(host, gpu float64) stepmodel.HostGPU { return stepmodel.HostGPU{HostMs: host, GPUMs: gpu} }

// profile has one dense layer kind, eager fwd/bwd, a whole-layer graph and
// the fixed costs of a step; hostBound picks which resource dominates.
func profile(hostBound bool) *stepmodel.FrameworkProfile {
	p := &stepmodel.FrameworkProfile{Version: stepmodel.ProfileVersion, Source: "megatron-core test, NVIDIA H200",
		Layers: map[string]stepmodel.LayerProfile{}}
	if hostBound {
		p.Layers["dense"] = stepmodel.LayerProfile{EagerFwd: hg(10, 0.1), EagerBwd: hg(5, 0.2),
			Graphed: map[string]stepmodel.GraphedRegion{"layer": {ReplayHostMs: 0.4, GPUMs: 0.25, GraphMiB: 100}}}
		p.OtherFwd, p.OtherBwd, p.Optimizer = hg(2, 0.1), hg(1, 0.1), hg(3, 0.5)
		p.FullIteration = stepmodel.FullIterationProfile{ReplayHostMs: 0.5, GraphMiBPerMicroBatch: 300}
	} else {
		p.Layers["dense"] = stepmodel.LayerProfile{EagerFwd: hg(0.1, 10), EagerBwd: hg(0.1, 20),
			Graphed: map[string]stepmodel.GraphedRegion{"layer": {ReplayHostMs: 0.05, GPUMs: 28}}}
		p.OtherFwd, p.OtherBwd, p.Optimizer = hg(0.1, 1), hg(0.1, 1), hg(0.1, 5)
	}
	return p
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*want {
		t.Errorf("%s: %.3f ms, want %.3f ms (±%.0f%%)", what, got, want, 100*tol)
	}
}

func run(t *testing.T, e *Engine, w *stepmodel.Workload, c presets.Candidate) engine.Result {
	t.Helper()
	r := e.Run(context.Background(), w, c, engine.RunOptions{}, nil)
	if r.Failed() {
		t.Fatalf("%s: %s", c.Label(), r.Err)
	}
	return r
}

// Eager, host-bound: the step is the host's sum (the GPU waits for every
// launch); GPU-bound: the GPU's sum (the host runs ahead).
func TestProfileEagerHostAndGPUBound(t *testing.T) {
	e, w := profiled(t, profile(true))
	r := run(t, e, w, cand("none", ""))
	hostSum := 2*(4*(10+5)+2+1) + 3.0 // two micro-batches, then the optimizer
	near(t, "host-bound eager step", r.Step.Median, hostSum, 0.01)
	if r.HostCosts != stepmodel.HostCostsProfile || !strings.Contains(r.Notes[0], "host costs: framework profile (megatron-core test, NVIDIA H200)") {
		t.Errorf("host costs %q, notes %q", r.HostCosts, r.Notes[0])
	}

	e, w = profiled(t, profile(false))
	r = run(t, e, w, cand("none", ""))
	gpuSum := 2*(4*(10+20)+1+1) + 5.0
	near(t, "GPU-bound eager step", r.Step.Median, gpuSum, 0.01)
}

// Graphs remove the replayed host time: host-bound, a whole-layer graph
// leaves the other forward and backward, one replay per layer and
// micro-batch (forward and backward together) and the optimizer; the
// full-iteration graph one replay per step, below the GPU's time.
func TestProfileGraphsRemoveHostTime(t *testing.T) {
	e, w := profiled(t, profile(true))
	eager := run(t, e, w, cand("none", ""))
	layer := run(t, e, w, cand("transformer_engine", ""))
	want := 2*(2+1+4*0.4) + 3.0
	near(t, "whole-layer graphs, host-bound", layer.Step.Median, want, 0.02)
	if layer.Speedup < 10 || math.Abs(layer.Speedup-eager.Step.Median/layer.Step.Median) > 1e-9 {
		t.Errorf("speed-up %.2f", layer.Speedup)
	}
	// Graph memory is the profile's, per layer and captured micro-batch.
	if layer.Memory.GraphMiB < 4*100 || layer.Memory.GraphMiB > 4*100+2 {
		t.Errorf("graph memory %d MiB, want the profile's 4 × 100", layer.Memory.GraphMiB)
	}

	full := run(t, e, w, cand("local", "full_iteration"))
	// One replay per step (0.5 ms of host), then the graph's GPU time,
	// 2 × (4 × 0.25 + 0.2): the forward-backward is their sum.
	near(t, "full iteration forward-backward, host-bound", full.FwdBwdMs, 0.5+2*(4*0.25+0.2), 0.02)
	if full.Step.Median >= layer.Step.Median {
		t.Errorf("full iteration %.3f ms not below whole-layer graphs %.3f ms", full.Step.Median, layer.Step.Median)
	}

	// GPU-bound, the graphed GPU time is what the step takes.
	e, w = profiled(t, profile(false))
	layer = run(t, e, w, cand("transformer_engine", ""))
	near(t, "whole-layer graphs, GPU-bound", layer.Step.Median, 2*(4*28+1+1)+5.0, 0.01)
}

// A region the profile did not measure falls back to the per-op replay
// model and the result says so; a region the framework could not capture
// fails with the framework's error.
func TestProfileRegionsMissingOrFailing(t *testing.T) {
	e, w := profiled(t, profile(true))
	attn := run(t, e, w, cand("transformer_engine", "attn"))
	if !strings.Contains(strings.Join(attn.Notes, "\n"), "did not measure the graphed region dense attn") {
		t.Errorf("notes %q", attn.Notes)
	}
	p := profile(true)
	l := p.Layers["dense"]
	l.Graphed["layer"] = stepmodel.GraphedRegion{CaptureError: "CUDA error: operation not permitted when stream is capturing"}
	e, w = profiled(t, p)
	r := e.Run(context.Background(), w, cand("transformer_engine", ""), engine.RunOptions{}, nil)
	if r.ErrKind != engine.FailureCapture || !strings.Contains(r.Err, "operation not permitted") {
		t.Errorf("kind %q err %q", r.ErrKind, r.Err)
	}
}

// The user's host scale multiplies the profile's host times: host-bound,
// the eager step scales with it.
func TestProfileHostScale(t *testing.T) {
	e, w := profiled(t, profile(true))
	base := run(t, e, w, cand("none", ""))
	adj, err := stepmodel.ParseProfileScale("host=1.5", nil)
	if err != nil {
		t.Fatal(err)
	}
	e2, w2 := profiled(t, adj.Apply(profile(true)))
	scaled := run(t, e2, w2, cand("none", ""))
	near(t, "eager step with host ×1.5", scaled.Step.Median, 1.5*base.Step.Median, 0.01)
	if !strings.Contains(scaled.Notes[0], "host ×1.5") {
		t.Errorf("notes %q", scaled.Notes[0])
	}
}

// The optimizer's per-layer part counts once per layer of the stage: the
// four-layer workload's step grows by 4 × the per-layer figure.
func TestProfileOptimizerGrowsWithTheLayers(t *testing.T) {
	e, w := profiled(t, profile(true))
	base := run(t, e, w, cand("none", ""))
	p := profile(true)
	p.OptimizerPerLayer = hg(2.5, 0.5)
	e, w = profiled(t, p)
	grown := run(t, e, w, cand("none", ""))
	near(t, "eager step with 2.5 ms of optimizer per layer", grown.Step.Median, base.Step.Median+4*2.5, 0.01)
}

// Running 2 of 8 micro-batches and extrapolating gives what running all 8
// gives. The eager step here is host-bound in the forward and GPU-bound in
// the backward, so the host's lead carries over from one micro-batch to
// the next; scaling the whole 2-micro-batch run by 4 would repeat its
// start and end 4 times (on the H200, dense-small at mbs 4: 241 ms
// estimated against 216 measured).
func TestExtrapolatedMicroBatchesMatchRunningThemAll(t *testing.T) {
	e, err := ForGPU("h200")
	if err != nil {
		t.Fatal(err)
	}
	p := profile(true)
	p.Layers["dense"] = stepmodel.LayerProfile{EagerFwd: hg(3, 1), EagerBwd: hg(1, 3)}
	e = e.WithCosts(fixedProfile{p})
	m := presets.Model{Name: "tiny", Arch: presets.Arch{Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 8, HeadDim: 128, Vocab: 32000}}
	step := func(runMBs int) (float64, *stepmodel.Workload) {
		w, err := stepmodel.BuildWorkload(m, presets.Layout{NumGPUs: 1, GBS: 8, MBS: 1, Seq: 1024}, stepmodel.WorkloadOptions{RunMicroBatches: runMBs})
		if err != nil {
			t.Fatal(err)
		}
		return run(t, e, w, cand("none", "")).Step.Median, w
	}
	all, _ := step(8)
	two, w := step(2)
	near(t, "eager step from 2 of 8 micro-batches", two, all, 0.01)
	if proportional := w.FwdBwdMs(1, -1); proportional != 4 {
		t.Fatalf("proportional scale %.2f", proportional)
	}
}

// With a profile that measured the framework's step spread, an estimate's
// p10–p90 is that spread around its median (the estimate alone has none),
// and the result says where it came from.
func TestProfileSpreadBecomesTheEstimatesRange(t *testing.T) {
	p := profile(true)
	e, w := profiled(t, p)
	layer := run(t, e, w, cand("transformer_engine", ""))
	if layer.Step.P10 != layer.Step.Median || layer.Step.P90 != layer.Step.Median {
		t.Fatalf("no measured spread: %+v, want a point", layer.Step)
	}
	p.Spread = map[string]stepmodel.StepSpread{stepmodel.SpreadLayer: {Below: 0.04, Above: 0.08}}
	e, w = profiled(t, p)
	layer = run(t, e, w, cand("transformer_engine", ""))
	near(t, "p10", layer.Step.P10, 0.96*layer.Step.Median, 1e-9)
	near(t, "p90", layer.Step.P90, 1.08*layer.Step.Median, 1e-9)
	if !strings.Contains(strings.Join(layer.Notes, " "), "framework's measured spread (−4.0%/+8.0%") {
		t.Errorf("notes %v do not give the spread", layer.Notes)
	}
	// The eager baseline every result carries (and a none derived from
	// them) takes the eager run's spread, as a none run on its own does.
	if layer.Eager.P10 != layer.Eager.Median {
		t.Fatalf("eager baseline widened without an eager spread: %+v", layer.Eager)
	}
	p.Spread[stepmodel.SpreadEager] = stepmodel.StepSpread{Below: 0.05, Above: 0.1}
	e, w = profiled(t, p)
	layer, none := run(t, e, w, cand("transformer_engine", "")), run(t, e, w, cand("none", ""))
	near(t, "eager baseline p10", layer.Eager.P10, 0.95*layer.Eager.Median, 1e-9)
	near(t, "eager baseline p90", layer.Eager.P90, 1.1*layer.Eager.Median, 1e-9)
	if none.Step.P10 != layer.Eager.P10 || none.Step.P90 != layer.Eager.P90 {
		t.Errorf("none's step %+v and the baseline %+v differ", none.Step, layer.Eager)
	}
}

// The profile's optimizer time is a wall time measured from an idle GPU;
// the emulated optimizer starts after the GPU drains, so a host-bound
// optimizer adds its whole time to a GPU-bound step instead of hiding
// behind the forward-backward's last kernels.
func TestProfileOptimizerStartsOnAnIdleGPU(t *testing.T) {
	p := profile(false)
	p.Optimizer = hg(6, 0)
	e, w := profiled(t, p)
	layer := run(t, e, w, cand("transformer_engine", ""))
	near(t, "GPU-bound step with a host-bound optimizer", layer.Step.Median, 2*(4*28+1+1)+6.0, 0.0025)
}

// With the lead-in measured, the host work before a micro-batch's first
// layer goes to the ops before it: per-layer graphs wait through it (and
// the step's start) once per step, where the full iteration waits only
// for the start and its launch (part of the 0.6–1.6 ms per step that
// Megatron-Core 0.20's per-layer graphs cost beyond the full iteration on
// dense-small on an H200, docs/emulation-accuracy-2026-12-01.md). The
// host's total is the same either way.
func TestPerLayerGraphsWaitThroughTheLeadIn(t *testing.T) {
	withLeadIn := func(lead float64) *stepmodel.FrameworkProfile {
		p := profile(false)
		p.OtherFwd = hg(3, 1)
		p.PreFwdHostMs = lead
		p.StepStart = hg(0.5, 0)
		p.FullIteration = stepmodel.FullIterationProfile{ReplayHostMs: 0.5}
		return p
	}
	gpu := 2 * (4*28 + 1 + 1.0) // GPU-bound: two micro-batches' kernels
	e, w := profiled(t, withLeadIn(2.5))
	layer := run(t, e, w, cand("local", ""))
	full := run(t, e, w, cand("local", "full_iteration"))
	near(t, "per-layer graphs: start, lead-in, then the GPU's work", layer.FwdBwdMs, 0.5+2.5+gpu, 0.003)
	near(t, "full iteration: start, launch, then the GPU's work", full.FwdBwdMs, 0.5+0.5+gpu, 0.003)
	if d := layer.FwdBwdMs - full.FwdBwdMs; math.Abs(d-2) > 0.1 {
		t.Errorf("per-layer graphs %.3f ms beyond the full iteration, want the lead-in less the launch, 2 ms", d)
	}
	noStart := withLeadIn(2.5)
	noStart.StepStart = stepmodel.HostGPU{}
	e, w = profiled(t, noStart)
	if d := full.FwdBwdMs - run(t, e, w, cand("local", "full_iteration")).FwdBwdMs; math.Abs(d-0.5) > 0.05 {
		t.Errorf("the step's start adds %.3f ms to the full iteration, want its 0.5 ms", d)
	}

	e, w = profiled(t, withLeadIn(0))
	split := run(t, e, w, cand("local", ""))
	if split.FwdBwdMs > layer.FwdBwdMs-1 {
		t.Errorf("lead-in split per op: %.3f ms, want well below the measured lead-in's %.3f ms", split.FwdBwdMs, layer.FwdBwdMs)
	}

	// Host-bound, the eager step is the host's sum with or without it.
	for _, lead := range []float64{0, 1.5} {
		p := profile(true)
		p.PreFwdHostMs, p.StepStart = lead, hg(0.5, 0)
		e, w = profiled(t, p)
		eager := run(t, e, w, cand("none", ""))
		near(t, "host-bound eager step with the step's start", eager.Step.Median, 0.5+2*(4*(10+5)+2+1)+3.0, 0.01)
	}
}

// The step's first replay of per-layer graphs costs the host more than
// the later ones (Megatron-Core 0.20 on an H200: 0.18–0.24 ms more,
// docs/emulation-accuracy-2026-12-01.md):
// on an idle GPU at the step's start, GPU-bound after it, the measured
// extra adds to the step once, not once per graph or micro-batch, and not
// to the full iteration, which has no per-layer replay.
func TestTheStepsFirstReplayCostsOnce(t *testing.T) {
	with := func(extra float64) *stepmodel.FrameworkProfile {
		p := profile(false)
		reg := p.Layers["dense"].Graphed["layer"]
		reg.FirstReplayHostMs = extra
		p.Layers["dense"].Graphed["layer"] = reg
		p.FullIteration = stepmodel.FullIterationProfile{ReplayHostMs: 0.5}
		return p
	}
	e0, w := profiled(t, with(0))
	e1, _ := profiled(t, with(1.5))
	for _, c := range []struct {
		cand presets.Candidate
		want float64
	}{{cand("local", ""), 1.5}, {cand("local", "full_iteration"), 0}} {
		t.Run(c.cand.Key(), func(t *testing.T) {
			d := run(t, e1, w, c.cand).FwdBwdMs - run(t, e0, w, c.cand).FwdBwdMs
			if math.Abs(d-c.want) > 0.05 {
				t.Errorf("%s: the first replay's 1.5 ms adds %.3f ms per step, want %.1f", c.cand.Label(), d, c.want)
			}
		})
	}
}
