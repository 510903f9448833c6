package stepmodel

import (
	"fmt"
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
		t.Run(fmt.Sprint(want), func(t *testing.T) {
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
		})
	}
	// Graphed runs alone: step times are fitted, and the note says so.
	g, _ := toy(10, 20)(3, full)
	scale, _, notes, err := FitHostScale([]CalibrationPoint{{Candidate: full, RealMs: g}}, toy(10, 20))
	if err != nil || math.Abs(scale-3) > 0.03 || !strings.Contains(strings.Join(notes, " "), "step times alone") {
		t.Errorf("graphed only: scale %v notes %q err %v", scale, notes, err)
	}
}

// A fit is refused, not bent to the bounds: eager runs alone (which cannot
// tell host cost from GPU time) and a fit that ends at a bound of the
// scale (a speed-up no host cost explains, as a log of another model
// gives).
func TestFitHostScaleRefuses(t *testing.T) {
	none := presets.Candidate{Impl: presets.ImplNone}
	full := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 3}
	e, _ := toy(10, 20)(3, none)
	for _, tc := range []struct {
		name string
		pts  []CalibrationPoint
		want string
	}{
		{"eager alone", []CalibrationPoint{{Candidate: none, RealMs: e}}, "at least one graphed run"},
		{"graphed slower than eager", []CalibrationPoint{{Candidate: none, RealMs: 10}, {Candidate: full, RealMs: 100}}, "reached the bound 0.05"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scale, pts, _, err := FitHostScale(tc.pts, toy(30, 20))
			if err == nil || !strings.Contains(err.Error(), tc.want) || scale != 0 || pts != nil {
				t.Errorf("scale %v, err %v; want an error with %q", scale, err, tc.want)
			}
		})
	}
}

func TestFitHostScaleBadInput(t *testing.T) {
	none := presets.Candidate{Impl: presets.ImplNone}
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

// Saved calibrations are listed by ID and removed by it; an unreadable
// file is listed as such; an ID that is not a calibration's is an error.
func TestCalibrationListAndRemove(t *testing.T) {
	dir := t.TempDir()
	a := Calibration{Model: "llama3_8b", Layout: "tp1", HostScale: 1.5, Source: "calibrate a.log b.log"}
	b := Calibration{Model: "qwen3_30b_a3b", Layout: "tp2", HostScale: 0.8, Source: "validate run"}
	for _, c := range []Calibration{a, b} {
		if _, err := c.SaveTo(dir); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "broken.json"), []byte("{"), 0o644)
	list, err := ListCalibrations(dir)
	if err != nil || len(list) != 3 {
		t.Fatalf("list %+v %v", list, err)
	}
	byID := map[string]SavedCalibration{}
	for _, c := range list {
		byID[c.ID] = c
	}
	if c := byID[CalibrationID(a.Model, a.Layout)]; c.Err != nil || c.HostScale != 1.5 || c.Source != a.Source {
		t.Errorf("a: %+v", c)
	}
	if c := byID["broken"]; c.Err == nil {
		t.Error("a broken file is listed as readable")
	}
	path, err := RemoveCalibration(dir, CalibrationID(a.Model, a.Layout))
	if err != nil || !strings.HasPrefix(filepath.Base(path), "llama3_8b-") {
		t.Fatalf("remove: %s %v", path, err)
	}
	if _, ok, _ := LoadCalibrationFrom(dir, a.Model, a.Layout); ok {
		t.Error("removed calibration still loads")
	}
	for _, bad := range []string{CalibrationID(a.Model, a.Layout), "", "../x", ".hidden"} {
		t.Run(bad, func(t *testing.T) {
			if _, err := RemoveCalibration(dir, bad); err == nil {
				t.Errorf("remove %q: no error", bad)
			}
		})
	}
	if list, err := ListCalibrations(filepath.Join(dir, "none")); err != nil || len(list) != 0 {
		t.Errorf("a missing folder: %v %v", list, err)
	}
}

// The costs a calibration scaled say so, for every result's notes.
func TestCostsNameTheirCalibration(t *testing.T) {
	m, _ := presets.LookupModel("llama3_8b")
	l, _ := m.Layout("h100")
	w, err := BuildWorkload(m, l, WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set := &ProfileSet{Calibration: func(string, string) (float64, string, bool) { return 2, "calibrate a.log", true }}
	c := set.CostsFor(w, Rates{}, DefaultHostCosts())
	if n := c.CalibrationNotes(); len(n) != 1 || !strings.Contains(n[0], "×2 from calibrate a.log") {
		t.Errorf("notes %q", n)
	}
	if n := (&ProfileSet{}).CostsFor(w, Rates{}, DefaultHostCosts()).CalibrationNotes(); n != nil {
		t.Errorf("uncalibrated costs: notes %q", n)
	}
}
