package engine

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/presets"
)

// A toy step-time model: GPU time plus host time that graphs remove
// (graphed steps keep a tenth of it). Real jobs generated from it at a
// known scale must be fitted back to that scale.
func toy(gpuMs, hostMs float64) Predictor {
	return func(s float64, c presets.Candidate) (float64, error) {
		h := hostMs * s
		if c.Graphed() {
			h /= 10
		}
		return max(gpuMs, h) + 0.1*h, nil
	}
}

func TestFitHostScaleRecoversTheScale(t *testing.T) {
	none := presets.Candidate{Impl: presets.ImplNone}
	full := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 3}
	for _, want := range []float64{0.4, 1, 2.5, 7} {
		truth := toy(30, 20)
		e, _ := truth(want, none)
		g, _ := truth(want, full)
		// The jobs run on a GPU 1.3x slower than the model thinks: the
		// speed-up fit must not care.
		pts := []CalibrationPoint{{Candidate: none, RealMs: e * 1.3}, {Candidate: full, RealMs: g * 1.3}}
		scale, out, notes, err := FitHostScale(pts, toy(30, 20))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(scale-want)/want > 0.01 {
			t.Errorf("scale %v, want %v (notes %q)", scale, want, notes)
		}
		if out[0].PredictedMs <= 0 || out[1].FittedMs <= 0 {
			t.Errorf("points %+v", out)
		}
	}
	// Eager alone: step times are fitted, and the note says so.
	e, _ := toy(10, 20)(3, none)
	scale, _, notes, err := FitHostScale([]CalibrationPoint{{Candidate: none, RealMs: e}}, toy(10, 20))
	if err != nil || math.Abs(scale-3) > 0.03 || !strings.Contains(strings.Join(notes, " "), "step times alone") {
		t.Errorf("eager only: scale %v notes %q err %v", scale, notes, err)
	}
	// A speed-up no host cost can explain hits the bound and says so.
	_, _, notes, err = FitHostScale([]CalibrationPoint{{Candidate: none, RealMs: 10}, {Candidate: full, RealMs: 100}}, toy(30, 20))
	if err != nil || !strings.Contains(strings.Join(notes, " "), "bound") {
		t.Errorf("impossible speed-up: notes %q err %v", notes, err)
	}
	if _, _, _, err := FitHostScale(nil, toy(1, 1)); err == nil {
		t.Error("no points: no error")
	}
	if _, _, _, err := FitHostScale([]CalibrationPoint{{Candidate: none, RealMs: 0}}, toy(1, 1)); err == nil {
		t.Error("zero step time: no error")
	}
}

func TestCalibrationSaveLoad(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	l := presets.Layout{GPU: "h100", NumGPUs: 8, TP: 2, MBS: 1, GBS: 64, Seq: 4096, Precision: "bf16"}
	key := LayoutKey(l)
	if _, ok, err := LoadCalibration("llama3_8b", key); ok || err != nil {
		t.Fatalf("empty cache: ok %v err %v", ok, err)
	}
	c := Calibration{Model: "llama3_8b", Layout: key, HostScale: 2.25, Source: "validate run1", Jobs: []string{"12", "13"}}
	path, err := SaveCalibration(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(path, filepath.Join(dir, "cgtune", "calibration")) {
		t.Errorf("saved to %s", path)
	}
	got, ok, err := LoadCalibration("llama3_8b", key)
	if err != nil || !ok || got.HostScale != 2.25 || got.Source != "validate run1" || len(got.Jobs) != 2 {
		t.Errorf("loaded %+v ok %v err %v", got, ok, err)
	}
	// Another layout is another calibration.
	l.TP = 4
	if _, ok, _ := LoadCalibration("llama3_8b", LayoutKey(l)); ok {
		t.Error("a TP4 layout found the TP2 calibration")
	}
	// A damaged file is an error naming it, not a silent default.
	os.WriteFile(path, []byte(`{"version":1,"model":"llama3_8b","layout":"`+key+`","host_scale":-1}`), 0o644)
	if _, _, err := LoadCalibration("llama3_8b", key); err == nil || !strings.Contains(err.Error(), "host_scale") {
		t.Errorf("bad scale: %v", err)
	}
	if _, err := (Calibration{Model: "m", Layout: "l", HostScale: math.Inf(1)}).SaveTo(dir); err == nil {
		t.Error("saved an infinite scale")
	}
}
