package setup

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/internal/fileio/fileiotest"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// fakeProfiler measures a fixed profile (or fails) and counts its calls.
type fakeProfiler struct {
	calls int
	err   error
}

func (f *fakeProfiler) Device() engine.DeviceInfo { return engine.DeviceInfo{Name: "NVIDIA H200"} }

func (f *fakeProfiler) MeasureProfile(_ context.Context, w *stepmodel.Workload, emit func(string)) (*stepmodel.FrameworkProfile, error) {
	f.calls++
	emit("eager, 8 layer(s): host 1.00 ms")
	if f.err != nil {
		return nil, f.err
	}
	return &stepmodel.FrameworkProfile{Version: stepmodel.ProfileVersion, Source: "fake",
		Key: stepmodel.ProfileKey{GPU: "NVIDIA H200", MCore: "0.20.0", Model: stepmodel.ModelKey(w.Spec.Model), Layout: stepmodel.LayoutKey(w.Layout), WorldSize: 1},
		Layers: map[string]stepmodel.LayerProfile{"dense": {EagerFwd: stepmodel.HostGPU{HostMs: 2, GPUMs: 1}, EagerBwd: stepmodel.HostGPU{HostMs: 1, GPUMs: 2},
			Graphed: map[string]stepmodel.GraphedRegion{"layer": {ReplayHostMs: 0.1, GPUMs: 2.5, GraphMiB: 50}}}},
		OtherFwd: stepmodel.HostGPU{HostMs: 1, GPUMs: 1}, Optimizer: stepmodel.HostGPU{HostMs: 3, GPUMs: 1}}, nil
}

func smallWorkload(t *testing.T) *stepmodel.Workload {
	t.Helper()
	m, err := presets.LookupModel("llama3_8b")
	if err != nil {
		t.Fatal(err)
	}
	w, err := stepmodel.BuildWorkload(m, presets.Layout{GPU: "h100", NumGPUs: 8, TP: 1, PP: 1, CP: 1, EP: 1, GBS: 16, MBS: 1, Seq: 1024, Precision: "bf16"}, stepmodel.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A megatron search measures the framework profile first when none is
// cached, saves it where the emulating engines look, and measures it only
// once: the next search finds it.
func TestProfileFirstMeasuresOnceAndSaves(t *testing.T) {
	cache := fileiotest.IsolateCache(t)
	w := smallWorkload(t)
	fp := &fakeProfiler{}
	var said []string
	say := func(s string) { said = append(said, s) }
	if err := ProfileFirst(fp)(context.Background(), w, say); err != nil {
		t.Fatal(err)
	}
	dir, _ := stepmodel.DefaultProfileDir()
	if !strings.HasPrefix(dir, cache) {
		t.Fatalf("profile folder %s is outside the test's cache %s", dir, cache)
	}
	p, path, err := stepmodel.FindProfile(dir, stepmodel.ModelKey(w.Spec.Model), stepmodel.LayoutKey(w.Layout), "NVIDIA H200")
	if err != nil || p == nil || p.Source != "fake" {
		t.Fatalf("saved profile not found: %v %v", p, err)
	}
	text := strings.Join(said, "\n")
	for _, want := range []string{"measuring it first", "framework profile: eager, 8 layer(s)", "saved " + path} {
		if !strings.Contains(text, want) {
			t.Errorf("said %q, want %q in it", text, want)
		}
	}
	said = nil
	if err := ProfileFirst(fp)(context.Background(), w, say); err != nil || fp.calls != 1 {
		t.Fatalf("second search: err %v, measured %d times; want the cached one", err, fp.calls)
	}
	if len(said) != 1 || !strings.Contains(said[0], "cached, "+path) {
		t.Errorf("second search said %q", said)
	}
}

// A profile that cannot be measured is an error of the preparation (the
// search notes it and goes on) and leaves nothing in the cache.
func TestProfileFirstFailureSavesNothing(t *testing.T) {
	cache := fileiotest.IsolateCache(t)
	fp := &fakeProfiler{err: errors.New("the eager runs failed: CUDA out of memory")}
	err := ProfileFirst(fp)(context.Background(), smallWorkload(t), func(string) {})
	if err == nil || !strings.Contains(err.Error(), "framework profile not measured: the eager runs failed") {
		t.Fatalf("err = %v", err)
	}
	if files, _ := filepath.Glob(filepath.Join(cache, "cgtune", "profiles", "*", "*", "*", "*")); len(files) != 0 {
		t.Errorf("left in the cache: %v", files)
	}
}
