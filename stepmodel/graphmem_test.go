package stepmodel

import (
	"math"
	"testing"

	"cgtune/presets"
)

// A profile fitted from one and two layers prices a capture of n layers as
// fixed + n × per layer: the full-iteration graph, and the per-layer
// graphs with the capture's fixed part counted once.
func TestProfileGraphMemoryIsFixedPlusPerLayer(t *testing.T) {
	l := presets.Layout{GPU: "h100", NumGPUs: 1, TP: 1, PP: 1, CP: 1, EP: 1, GBS: 4, MBS: 1, Seq: 1024, Precision: "bf16"}
	w := build(t, denseModel, l, true)
	n := float64(len(w.Layers))
	prof := &FrameworkProfile{Version: ProfileVersion, GraphPoolFixedMiB: 1000,
		Layers:        map[string]LayerProfile{"dense": {Graphed: map[string]GraphedRegion{"layer": {ReplayHostMs: 0.1, GPUMs: 1, GraphMiB: 700}}}},
		FullIteration: FullIterationProfile{ReplayHostMs: 1, GraphMiBPerMicroBatch: 9999, GraphMiBFixed: 1100, GraphMiBPerLayer: 650}}
	costs := Costs{Profile: prof}
	full := NewSchedule(w, PlanCapture(w, cand("local", "full_iteration"), presets.G2), costs)
	if got, want := full.GraphMemoryBytes()/bytesPerMiB, 1100+650*n; math.Abs(got-want) > 1 {
		t.Errorf("full iteration: %.0f MiB, want %.0f", got, want)
	}
	layer := NewSchedule(w, PlanCapture(w, cand("local"), presets.G2), costs)
	if got, want := layer.GraphMemoryBytes()/bytesPerMiB, 1000+700*n; math.Abs(got-want) > 1 {
		t.Errorf("whole-layer graphs: %.0f MiB, want %.0f", got, want)
	}
}

// A full-iteration graph's run holds the run's micro-batches with no
// boundary between them: the run is scaled to the job's micro-batches,
// its launch (the replay's host time) is counted once.
func TestFullIterationLaunchIsNotScaled(t *testing.T) {
	l := presets.Layout{GPU: "h100", NumGPUs: 1, TP: 1, PP: 1, CP: 1, EP: 1, GBS: 8, MBS: 1, Seq: 1024, Precision: "bf16"}
	w := build(t, denseModel, l, false)
	if w.RunMicroBatches >= w.MicroBatches {
		t.Fatalf("the workload runs all %d micro-batches; the test needs fewer", w.MicroBatches)
	}
	scale := w.ScaleFactor()
	prof := &FrameworkProfile{Version: ProfileVersion,
		Layers:        map[string]LayerProfile{"dense": {Graphed: map[string]GraphedRegion{"layer": {ReplayHostMs: 0.1, GPUMs: 1}}}},
		FullIteration: FullIterationProfile{ReplayHostMs: 5}}
	costs := Costs{Profile: prof, Rates: Rates{LaunchUs: 5}}
	full := NewSchedule(w, PlanCapture(w, cand("local", "full_iteration"), presets.G2), costs)
	if got, want := full.FwdBwdMs(full.Graphed(), 25, -1), 5+20*scale; math.Abs(got-want) > 1e-9 {
		t.Errorf("full iteration: %.3f ms, want the 5 ms launch once and the rest ×%g: %.3f", got, scale, want)
	}
	layer := NewSchedule(w, PlanCapture(w, cand("local"), presets.G2), costs)
	if got, want := layer.FwdBwdMs(layer.Graphed(), 25, -1), 25*scale; math.Abs(got-want) > 1e-9 {
		t.Errorf("per-layer graphs without a boundary: %.3f ms, want the run ×%g: %.3f", got, scale, want)
	}
}
