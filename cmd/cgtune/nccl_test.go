package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/engine/cuda"
	"cgtune/probes"
	"cgtune/search"
	"cgtune/stepmodel"
)

func TestProbeNCCLUsage(t *testing.T) {
	isolate(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"probe", "--nccl", "--gpu", "0"}, "--nccl --gpu 0: give two or more GPUs"},
		{[]string{"probe", "--nccl", "--gpu", "0,x"}, `--gpu "0,x": want GPU indices`},
		{[]string{"probe", "--nccl", "--gpu", "1,1"}, "GPU 1 listed twice"},
	} {
		t.Run(argsName(tc.args), func(t *testing.T) {
			code, out, errb := cgtune(t, tc.args...)
			if code != exitBadInput || !strings.Contains(errb, tc.want) || strings.Count(strings.TrimSpace(errb), "\n") != 0 || out != "" {
				t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errb, tc.want)
			}
		})
	}
}

// Without a driver (CI), the NCCL probe exits 3 naming what is missing.
func TestProbeNCCLWithoutGPU(t *testing.T) {
	if n, err := cuda.DeviceCount(); err == nil && n > 0 {
		t.Skip("this machine has a GPU")
	}
	isolate(t)
	code, _, errb := cgtune(t, "probe", "--nccl")
	if code != exitNoGPU || errb == "" {
		t.Errorf("exit %d, stderr %q; want 3", code, errb)
	}
}

// fakeNCCLReport is an NCCL probe result over 2 GPUs: every collective at
// 100 GB/s bus bandwidth and 30 µs latency.
func fakeNCCLReport(gpu string) probes.NCCLReport {
	r := probes.NCCLReport{Device: engine.DeviceInfo{Name: gpu, Driver: "580.0"}, GPUs: []int{0, 1}, WorldSize: 2,
		NCCL: "2.27.3", Torch: "2.11.0", DType: "float32", MeasuredAt: time.Now().UTC()}
	for _, op := range probes.NCCLOps {
		r.Ops = append(r.Ops, probes.NCCLOp{Op: op, BusGBps: 100, LatencyUs: 30,
			Points: []probes.NCCLPoint{{Bytes: 1024, TimeUs: 30}, {Bytes: 256 << 20, TimeUs: 1342}}})
	}
	return r
}

// A cached NCCL measurement of the estimated GPU replaces the spec table's
// NVLink bandwidth and collective latency, and every result's rates say
// so; one of another GPU is not used.
func TestCachedNCCLDrivesTheRates(t *testing.T) {
	run := func() (string, float64) {
		t.Helper()
		code, out, errb := cgtune(t, "--headless", "--model", "llama3_70b", "--gpu-type", "h100", "--engine", "estimate",
			"--strategy", "exhaustive", "--json")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errb)
		}
		var d struct{ Ranking []search.Ranked }
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatal(err)
		}
		for _, r := range d.Ranking {
			if !r.Result.Candidate.Graphed() {
				return strings.Join(r.Result.Notes, "\n"), r.Result.Eager.Median
			}
		}
		t.Fatal("no eager result")
		return "", 0
	}
	cache := isolate(t)
	specNotes, specMs := run()
	if strings.Contains(specNotes, "NCCL") {
		t.Fatalf("NCCL named without a measurement:\n%s", specNotes)
	}
	dir := filepath.Join(cache, "cgtune", "probes")
	if err := probes.SaveNCCL(dir, fakeNCCLReport("NVIDIA H200")); err != nil {
		t.Fatal(err)
	}
	if notes, ms := run(); strings.Contains(notes, "NCCL") || ms != specMs {
		t.Errorf("an H200 measurement was used for an H100 estimate: %.3f vs %.3f ms\n%s", ms, specMs, notes)
	}
	if err := probes.SaveNCCL(dir, fakeNCCLReport("NVIDIA H100 80GB HBM3")); err != nil {
		t.Fatal(err)
	}
	notes, ms := run()
	if !strings.Contains(notes, "spec table: H100 SXM; NVLink bandwidth and collective latency measured: NCCL 2.27.3 over 2 GPUs, torch 2.11.0") {
		t.Errorf("the rates do not name the measurement:\n%s", notes)
	}
	// 100 GB/s and 30 µs instead of 450 GB/s and 10 µs: TP 4 collectives take longer.
	if ms <= specMs {
		t.Errorf("eager step %.3f ms with the slower measured link, %.3f ms with the spec table", ms, specMs)
	}
}

func TestPrintNCCL(t *testing.T) {
	var b strings.Builder
	r := fakeNCCLReport("NVIDIA H200")
	r.Cached = true
	printNCCL(&b, r)
	out := b.String()
	for _, want := range []string{
		"NCCL over GPUs 0,1 (NVIDIA H200, driver 580.0)", "(cached; --refresh to measure again)",
		"source: measured: NCCL 2.27.3 over 2 GPUs, torch 2.11.0 (nccl-tests bus bandwidth, float32, slowest rank)",
		"BUS GB/s @1K", "BUS GB/s @256M", "all_to_all", "send_recv", "30.0 us",
		"engines take: NVLink bandwidth 100.0 GB/s, collective latency 30.0 us",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The printed framework profile lists its collective exposures.
func TestPrintProfileShowsCollectives(t *testing.T) {
	p := &stepmodel.FrameworkProfile{Version: stepmodel.ProfileVersion, Source: "test",
		Collectives: []stepmodel.CollectiveExposure{{WorldSize: 2, EagerExposedHostMsPerLayer: 1.25, GraphedExposedHostMsPerLayer: 0.05, Source: "fit"}}}
	var b strings.Builder
	printProfile(&b, p)
	if want := "collective exposure at world size 2, per layer and micro-batch: eager 1.250 ms, graphed 0.050 ms (fit)"; !strings.Contains(b.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, b.String())
	}
}

// The printed profile gives the framework's step spreads in a fixed
// order, and no spread line for a profile without them.
func TestPrintProfileShowsStepSpreads(t *testing.T) {
	p := &stepmodel.FrameworkProfile{Version: stepmodel.ProfileVersion, Source: "test", Spread: map[string]stepmodel.StepSpread{
		stepmodel.SpreadFullIteration: {Below: 0.017, Above: 0.069}, stepmodel.SpreadEager: {Below: 0.12, Above: 0.14}}}
	var b strings.Builder
	printProfile(&b, p)
	if want := "eager −12.0%/+14.0%, full_iteration −1.7%/+6.9%"; !strings.Contains(b.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, b.String())
	}
	b.Reset()
	p.Spread = nil
	if printProfile(&b, p); strings.Contains(b.String(), "step spread") || strings.Contains(b.String(), "lead-in") {
		t.Errorf("a profile without spreads or lead-in prints them:\n%s", b.String())
	}
	b.Reset()
	p.PreFwdHostMs, p.StepStart = 0.912, stepmodel.HostGPU{HostMs: 0.25}
	if printProfile(&b, p); !strings.Contains(b.String(), "(lead-in): 0.912 ms; step start (zeroing gradients): 0.250 ms") {
		t.Errorf("the lead-in and step start are not shown:\n%s", b.String())
	}
}
