package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/presets"
	"cgtune/search"
	"cgtune/stepmodel"
)

// Bad profile adjustments are usage errors: exit 2, one line naming the
// flag or file and field, and no run folder.
func TestProfileFlagsRejectBadValues(t *testing.T) {
	cache := isolate(t)
	bad := writeFile(t, "adjust.yaml", "host_scale: .inf\n")
	unknown := writeFile(t, "adjust2.yaml", "layers: {dense: {eager_fwd: {hots_ms: 1}}}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--profile-scale", "host=nan"}, "--profile-scale: field host_scale: NaN (allowed: a number from 0.01 to 100)"},
		{[]string{"--profile-scale", "host=500"}, "field host_scale: 500"},
		{[]string{"--profile-scale", "speed=2"}, `unknown key "speed" (allowed: host, gpu)`},
		{[]string{"--profile-file", bad}, "--profile-file " + bad + ":1: field host_scale: +Inf"},
		{[]string{"--profile-file", unknown}, `--profile-file ` + unknown + `:1: unknown field "hots_ms" in layers.dense.eager_fwd (allowed: host_ms, gpu_ms)`},
		{[]string{"--profile-file", filepath.Join(t.TempDir(), "missing.yaml")}, "no such file"},
	} {
		t.Run(argsName(tc.args), func(t *testing.T) {
			args := append([]string{"--headless", "--model", "llama3_8b", "--engine", "estimate"}, tc.args...)
			code, out, errb := cgtune(t, args...)
			if code != exitBadInput || !strings.Contains(errb, tc.want) || strings.Count(strings.TrimSpace(errb), "\n") != 0 || out != "" {
				t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errb, tc.want)
			}
		})
	}
	if runs, _ := filepath.Glob(filepath.Join(cache, "cgtune", "runs", "*")); len(runs) != 0 {
		t.Errorf("run folders left behind: %v", runs)
	}
	// The former environment variable is gone: it changes nothing.
	t.Setenv("CGTUNE_HOST_COST_SCALE", "garbage")
	if code, _, errb := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--strategy", "exhaustive"); code != exitOK {
		t.Errorf("CGTUNE_HOST_COST_SCALE still read: exit %d %s", code, errb)
	}
}

// A framework profile cached for the model, layout and GPU drives the
// estimate engine and every result says so; without one the per-op costs
// do, and say so; --profile-scale shows in the source.
func TestCachedProfileIsUsed(t *testing.T) {
	cache := isolate(t)
	results := func(args ...string) []search.Ranked {
		t.Helper()
		args = append([]string{"--headless", "--model", "llama3_8b", "--engine", "estimate", "--strategy", "exhaustive", "--json"}, args...)
		code, out, errb := cgtune(t, args...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errb)
		}
		var d struct{ Ranking []search.Ranked }
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatal(err)
		}
		return d.Ranking
	}
	for _, r := range results() {
		if r.Result.HostCosts != stepmodel.HostCostsPerOp || r.Result.Memory.Breakdown == nil {
			t.Fatalf("%s: host costs %q, breakdown %v", r.Result.Candidate.Label(), r.Result.HostCosts, r.Result.Memory.Breakdown)
		}
	}
	m, _ := presets.LookupModel("llama3_8b")
	l, _ := m.Layout("h100")
	p := &stepmodel.FrameworkProfile{Version: stepmodel.ProfileVersion, Source: "megatron-core 0.16.0, NVIDIA H100",
		Key: stepmodel.ProfileKey{GPU: "NVIDIA H100", MCore: "0.16.0", Torch: "2.11.0", LayerSpec: "local", Model: stepmodel.ModelKey(m), Layout: stepmodel.LayoutKey(l)},
		Layers: map[string]stepmodel.LayerProfile{"dense": {EagerFwd: stepmodel.HostGPU{HostMs: 1, GPUMs: 5}, EagerBwd: stepmodel.HostGPU{HostMs: 1, GPUMs: 10},
			Graphed: map[string]stepmodel.GraphedRegion{"layer": {ReplayHostMs: 0.1, GPUMs: 14}}}},
		OtherFwd: stepmodel.HostGPU{HostMs: 1, GPUMs: 3}, OtherBwd: stepmodel.HostGPU{HostMs: 1, GPUMs: 3}, Optimizer: stepmodel.HostGPU{HostMs: 5, GPUMs: 20}}
	if _, err := stepmodel.SaveProfile(filepath.Join(cache, "cgtune", "profiles"), p); err != nil {
		t.Fatal(err)
	}
	for _, r := range results("--profile-scale", "host=1.3") {
		notes := strings.Join(r.Result.Notes, "\n")
		if r.Result.HostCosts != stepmodel.HostCostsProfile || !strings.Contains(notes, "host costs: framework profile (megatron-core 0.16.0, NVIDIA H100; adjusted by --profile-scale host=1.3 (host ×1.3, GPU ×1))") {
			t.Errorf("%s: host costs %q, notes %s", r.Result.Candidate.Label(), r.Result.HostCosts, notes)
		}
	}
	if _, err := os.Stat(filepath.Join(cache, "cgtune", "profiles")); err != nil {
		t.Fatal(err)
	}
}
