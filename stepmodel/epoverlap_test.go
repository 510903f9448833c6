package stepmodel

import (
	"math"
	"testing"

	"cgtune/presets"
)

// qwenEP16 is qwen3_30b_a3b's h100 layout: EP 16 over two nodes, 64
// micro-batches, where the all-to-alls are a large share of the step.
var qwenEP16 = presets.Layout{GPU: "h100", NumGPUs: 16, TP: 1, PP: 1, CP: 1, EP: 16, GBS: 1024, MBS: 1, Seq: 4096, Precision: "bf16"}

func h100Rates(t *testing.T) Rates {
	t.Helper()
	spec, ok := SpecFor("h100")
	if !ok {
		t.Fatal("no h100 spec")
	}
	return spec
}

// opsNamed sums f over the ops of every layer, forward and backward, whose
// name starts with prefix.
func sumOfOpsPrefixed(w *Workload, prefix string, f func(Op) float64) float64 {
	var s float64
	for _, lt := range w.Layers {
		for _, o := range append(append([]Op{}, lt.Fwd...), lt.Bwd...) {
			if len(o.Name) >= len(prefix) && o.Name[:len(prefix)] == prefix {
				s += f(o)
			}
		}
	}
	return s
}

// Drop-and-pad experts compute and move capacity factor × the routed
// tokens; dropless ones the routed tokens, with no capacity.
func TestPaddedExpertsScaleWithTheCapacityFactor(t *testing.T) {
	build := func(dropless bool, factor float64) *Workload {
		w, err := BuildWorkload(qwen30b, qwenEP16, WorkloadOptions{Dropless: &dropless, MoECapacityFactor: factor})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	flops := func(o Op) float64 { return o.FLOPs }
	bytes := func(o Op) float64 { return o.Bytes }
	dropless := build(true, 0)
	for _, factor := range []float64{1, 1.5, 2} {
		pad := build(false, factor)
		for _, c := range []struct {
			prefix string
			f      func(Op) float64
		}{{"experts_", flops}, {"ep_alltoall_", bytes}} {
			got, base := sumOfOpsPrefixed(pad, c.prefix, c.f), sumOfOpsPrefixed(dropless, c.prefix, c.f)
			if math.Abs(got/base-factor) > 1e-9 {
				t.Errorf("capacity factor %g: %s ops carry %.4g, dropless %.4g: want ×%g", factor, c.prefix, got, base, factor)
			}
		}
	}
	// A dropless workload ignores a capacity factor: MCore pads only
	// drop-and-pad experts.
	if got, base := sumOfOpsPrefixed(build(true, 2), "experts_", flops), sumOfOpsPrefixed(dropless, "experts_", flops); got != base {
		t.Errorf("dropless with a capacity factor: %.4g expert FLOPs, want the dropless %.4g", got, base)
	}
}

// EP communication overlap hides, in all but the first and last
// micro-batch of a step, each direction's all-to-all under the other
// direction's computation: never more than the all-to-all, never more
// than that computation, and nothing without the overlap.
func TestEPOverlapHidesTheAllToAllUnderTheOtherMicroBatch(t *testing.T) {
	r := h100Rates(t)
	build := func(overlap bool, l presets.Layout) *Workload {
		w, err := BuildWorkload(qwen30b, l, WorkloadOptions{EPOverlap: overlap})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	on, off := build(true, qwenEP16), build(false, qwenEP16)
	if h := EPOverlapHiddenMs(off, r); h != 0 {
		t.Errorf("without EP overlap %.3f ms hidden, want 0", h)
	}
	hidden := EPOverlapHiddenMs(on, r)
	gpu := r.OpGPUUs
	a2a := sumOfOpsPrefixed(on, "ep_alltoall_", gpu) * float64(on.MicroBatches) / 1e3
	var comp float64
	for _, lt := range on.Layers {
		for _, o := range append(append([]Op{}, lt.Fwd...), lt.Bwd...) {
			if o.Kind != KindCollective && !o.HostSync {
				comp += gpu(o)
			}
		}
	}
	comp *= float64(on.MicroBatches) / 1e3
	frac := float64(on.MicroBatches-1) / float64(on.MicroBatches)
	if hidden <= 0 || hidden > frac*a2a+1e-9 || hidden > frac*comp+1e-9 {
		t.Errorf("hidden %.3f ms/step: want more than 0 and at most %.3f ms (that share of the %.3f ms of all-to-all) and of the %.3f ms of computation",
			hidden, frac*a2a, a2a, frac*comp)
	}
	// The estimate's costs leave exposed what the function says is not hidden.
	c := Costs{Rates: r, Host: DefaultHostCosts()}
	exposed := func(w *Workload) float64 {
		sc := c.costsOf(w)
		var us float64
		for i, lt := range w.Layers {
			us += sumUs(lt.Fwd, sc.fwd[i].gpu, epOverlapped) + sumUs(lt.Bwd, sc.bwd[i].gpu, epOverlapped)
		}
		return us * float64(w.MicroBatches) / 1e3
	}
	if got, want := exposed(off)-exposed(on), hidden; math.Abs(got-want) > 1e-6*want {
		t.Errorf("the costs hide %.3f ms/step of all-to-all, EPOverlapHiddenMs says %.3f", got, want)
	}
	// One micro-batch per step: nothing to pair it with.
	one := qwenEP16
	one.GBS = one.NumGPUs / one.EP * one.MBS
	if h := EPOverlapHiddenMs(build(true, one), r); h != 0 {
		t.Errorf("one micro-batch per step: %.3f ms hidden, want 0", h)
	}
}
