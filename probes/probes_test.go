package probes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/stepmodel"
)

// fakePython writes an executable that prints out whatever it is asked.
func fakePython(t *testing.T, out string, code int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "python3")
	script := "#!/bin/sh\ncat <<'EOF'\n" + out + "\nEOF\nexit " + string(rune('0'+code)) + "\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTorchHostCosts(t *testing.T) {
	py := fakePython(t, `{"torch": "2.11.0", "add_us": 8.5, "mm_us": 19, "linear_us": 30, "rms_norm_us": 11, "sdpa_us": 25, "item_us": 20, "graph_replay_us": 6}`, 0)
	h, err := TorchHostCosts(context.Background(), py)
	if err != nil {
		t.Fatal(err)
	}
	if h.ElementwiseUs != 8.5 || h.GEMMUs != 30 || h.NormUs != 11 || h.AttentionUs != 25 || h.SyncUs != 20 {
		t.Errorf("%+v", h)
	}
	// A graphed callable's replay: CUDAGraph.replay plus a module call's Python cost.
	if h.GraphReplayUs != 6+30-19 {
		t.Errorf("graph replay %v", h.GraphReplayUs)
	}
	if h.Source != "measured: PyTorch 2.11.0 probe" {
		t.Errorf("source %q", h.Source)
	}
	if h.BackwardScale != stepmodel.DefaultHostCosts().BackwardScale {
		t.Errorf("backward scale %v", h.BackwardScale)
	}
}

func TestTorchProbeFailureIsAnError(t *testing.T) {
	py := fakePython(t, "ModuleNotFoundError: No module named 'torch'", 1)
	_, err := TorchHostCosts(context.Background(), py)
	if err == nil || !strings.Contains(err.Error(), "exit status 1") {
		t.Fatalf("%v", err)
	}
}

func TestCacheRoundTrip(t *testing.T) {
	dir := t.TempDir()
	dev := engine.DeviceInfo{Name: "NVIDIA H200", Driver: "580.159.04"}
	rep := Report{Device: dev, Rates: stepmodel.Rates{Source: "probe of NVIDIA H200", MatrixTFLOPS: 798}, Host: stepmodel.DefaultHostCosts(),
		Items: []Item{{Name: "bf16 matrix rate", Value: 798, Unit: "TFLOP/s", Source: "measured"}}, MeasuredAt: time.Now().UTC().Truncate(time.Second)}
	if err := SaveCached(dir, rep); err != nil {
		t.Fatal(err)
	}
	got, ok := LoadCached(dir, dev)
	if !ok || !got.Cached || got.Rates.MatrixTFLOPS != 798 || len(got.Items) != 1 || !got.MeasuredAt.Equal(rep.MeasuredAt) {
		t.Fatalf("loaded %+v %v", got, ok)
	}
	if _, ok := LoadCached(dir, engine.DeviceInfo{Name: "NVIDIA H200", Driver: "575.0"}); ok {
		t.Error("a cache entry of another driver was used")
	}
	if r, ok := FindCached(dir, "h200"); !ok || r.Device.Name != "NVIDIA H200" {
		t.Errorf("FindCached h200: %v", ok)
	}
	if _, ok := FindCached(dir, "b200"); ok {
		t.Error("FindCached matched another GPU")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || strings.HasPrefix(entries[0].Name(), ".") {
		t.Errorf("cache folder holds %v", entries)
	}
}

func TestFindCuBLASExplicit(t *testing.T) {
	if lib, where := findCuBLAS("/opt/x/libcublas.so.13", "-"); lib != "/opt/x/libcublas.so.13" || where != "--cublas" {
		t.Errorf("%s %s", lib, where)
	}
}
