package megatron

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/engine/worker"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// exposureRuns are eager and whole-layer runs of a slice whose layer
// costs eager and graphed ms per micro-batch (forward-backward wall), with
// 4 micro-batches and 3 ms per micro-batch outside the layers.
func exposureRuns(eager, graphed float64) []profileRun {
	var runs []profileRun
	for _, n := range testLayers {
		l := float64(n)
		runs = append(runs,
			profileRun{mode: "eager", layers: n, raw: &engine.RawTimes{LayersBuilt: n, MicroBatchesRun: 4, FwdBwdMs: 4 * (3 + eager*l)}},
			profileRun{mode: "layer", layers: n, raw: &engine.RawTimes{LayersBuilt: n, MicroBatchesRun: 4, FwdBwdMs: 4 * (3 + graphed*l)}})
	}
	return runs
}

func TestFitExposure(t *testing.T) {
	// At world size 2 a layer costs 3.5 ms more eager and 0.4 ms more
	// graphed; 0.25 ms of that is the modelled collectives.
	x, err := FitExposure(exposureRuns(10, 2), exposureRuns(13.5, 2.4), 2, 0.25)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "eager exposure", x.EagerExposedHostMsPerLayer, 3.25)
	near(t, "graphed exposure", x.GraphedExposedHostMsPerLayer, 0.15)
	if x.WorldSize != 2 || !strings.Contains(x.Source, "world size 2 against 1") {
		t.Errorf("exposure %+v", x)
	}
	// Collectives hidden under other work expose nothing (never negative).
	x, err = FitExposure(exposureRuns(10, 2), exposureRuns(10.1, 2), 2, 0.25)
	if err != nil || x.EagerExposedHostMsPerLayer != 0 || x.GraphedExposedHostMsPerLayer != 0 {
		t.Errorf("hidden collectives: %+v (%v)", x, err)
	}
	// A failed mode is an error naming it.
	broken := exposureRuns(13, 2)
	broken[1] = profileRun{mode: "layer", layers: 1, err: "capture failed: boom"}
	if _, err := FitExposure(exposureRuns(10, 2), broken, 2, 0); err == nil || !strings.Contains(err.Error(), "world size 2: the layer runs failed: capture failed: boom") {
		t.Errorf("failed runs: %v", err)
	}
}

func TestAddExposureReplacesTheSameWorldSize(t *testing.T) {
	p := &stepmodel.FrameworkProfile{}
	AddExposure(p, stepmodel.CollectiveExposure{WorldSize: 2, EagerExposedHostMsPerLayer: 1})
	AddExposure(p, stepmodel.CollectiveExposure{WorldSize: 4, EagerExposedHostMsPerLayer: 2})
	AddExposure(p, stepmodel.CollectiveExposure{WorldSize: 2, EagerExposedHostMsPerLayer: 3})
	if len(p.Collectives) != 2 || p.Collectives[0].EagerExposedHostMsPerLayer != 3 || p.Collectives[1].WorldSize != 4 {
		t.Errorf("collectives %+v", p.Collectives)
	}
}

// fakeRanksEngine runs the stand-in worker as an engine over gpus whose
// slice costs layerMs ("eager,graphed" ms per layer and micro-batch) and
// reports modelled as the degrees it did not run.
func fakeRanksEngine(t *testing.T, gpus []int, layerMs, modelled string) *Engine {
	t.Helper()
	script, _ := filepath.Abs("testdata/fake_worker.py")
	cmd := worker.Command{Path: python(t), Args: []string{"-B", script},
		Env: []string{"FAKE_MODE=ok", "FAKE_LAYER_MS=" + layerMs, "FAKE_MODELLED=" + modelled}}
	rates, _ := stepmodel.SpecFor("h100")
	e, err := newWithCommand(context.Background(), Options{GPUs: gpus, Rates: rates, StartTimeout: 20 * time.Second,
		Deadline: func(*stepmodel.Workload, presets.Candidate) time.Duration { return time.Minute }}, cmd)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// MeasureCollectives runs the same eager and whole-layer runs at world
// size 1 and 2 and takes off the modelled time of the collectives the two
// ranks ran (TP here), from the rates given.
func TestMeasureCollectives(t *testing.T) {
	w := workload(t, 2)
	rates, _ := stepmodel.SpecFor("h100")
	coll := layerCollectiveMs(w, rates, map[string]bool{"sp_": true})
	if coll <= 0 || coll > 0.3 {
		t.Fatalf("TP 2 collectives of a layer: %.3f ms", coll)
	}
	one := fakeRanksEngine(t, []int{0}, "10,2", "TP 2")
	many := fakeRanksEngine(t, []int{0, 1}, "13,2.5", "")
	var lines []string
	x, err := MeasureCollectives(context.Background(), one, many, w, rates, func(s string) { lines = append(lines, s) })
	if err != nil {
		t.Fatal(err)
	}
	near(t, "eager exposure", x.EagerExposedHostMsPerLayer, 3-coll)
	near(t, "graphed exposure", x.GraphedExposedHostMsPerLayer, 0.5-coll)
	if x.WorldSize != 2 || len(lines) != 8 || !strings.HasPrefix(lines[4], "world size 2, eager, 1 layer(s): host") {
		t.Errorf("exposure %+v, progress %q", x, lines)
	}
	if _, err := MeasureCollectives(context.Background(), one, one, w, rates, nil); err == nil || !strings.Contains(err.Error(), "world size 1 and 2 or more") {
		t.Errorf("two world-size-1 engines: %v", err)
	}
}
