package probes

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/stepmodel"
)

// fakeNCCLPython is an interpreter that runs testdata/fake_nccl.py in place
// of the embedded probe (it is called as python -B -c SCRIPT ARGS...) in
// mode, and records in a file what it was given: the script's first line
// and NCCL_NVLS_ENABLE.
func fakeNCCLPython(t *testing.T, mode string) (python, record string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH")
	}
	script, _ := filepath.Abs("testdata/fake_nccl.py")
	dir := t.TempDir()
	record = filepath.Join(dir, "record")
	wrapper := "#!/bin/sh\n" +
		`printf '%s\n%s\n%s\n' "$1 $2" "$(printf '%s' "$3" | grep -c "cgtune's NCCL probe")" "$NCCL_NVLS_ENABLE" > ` + record + "\n" +
		"shift 3\nFAKE_NCCL=" + mode + " exec " + py + " " + script + ` "$@"` + "\n"
	python = filepath.Join(dir, "python3")
	if err := os.WriteFile(python, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	return python, record
}

var h200 = engine.DeviceInfo{Name: "NVIDIA H200", Driver: "580.159.04"}

func TestRunNCCLParsesTheProbe(t *testing.T) {
	t.Setenv("NCCL_NVLS_ENABLE", "1") // the probe turns multicast off whatever the caller's environment says
	py, record := fakeNCCLPython(t, "ok")
	r, err := RunNCCL(context.Background(), py, []int{0, 1}, h200)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(record)
	if lines := strings.Split(strings.TrimSpace(string(got)), "\n"); len(lines) != 3 || lines[0] != "-B -c" || lines[1] != "1" || lines[2] != "0" {
		t.Errorf("the probe ran as %q; want -B -c with the embedded script and NCCL_NVLS_ENABLE=0", lines)
	}
	if r.WorldSize != 2 || r.NCCL != "2.27.3" || r.Torch != "2.11.0" || r.Device != h200 || len(r.Ops) != len(NCCLOps) {
		t.Fatalf("report %+v", r)
	}
	if r.MeasuredAt.IsZero() || time.Since(r.MeasuredAt) > time.Minute {
		t.Errorf("measured at %v", r.MeasuredAt)
	}
	// all-gather 256 MiB in 1 ms over 2 ranks: 268.4 GB/s algbw, busbw half;
	// reduce-scatter in 2 ms: a quarter. The link figure is their mean.
	ag := (256 << 20) / 1e-3 / 1e9 * 0.5
	rs := (256 << 20) / 2e-3 / 1e9 * 0.5
	if bw := r.LinkGBps(); math.Abs(bw-(ag+rs)/2) > 1e-9 {
		t.Errorf("link bandwidth %v, want %v", bw, (ag+rs)/2)
	}
	if lat := r.LatencyUs(); lat != 20 {
		t.Errorf("latency %v, want 20 (all-gather and reduce-scatter at 1 KiB)", lat)
	}
	if ar, _ := r.Op("all_reduce"); math.Abs(ar.BusGBps-(256<<20)/1e-3/1e9) > 1e-9 || ar.LatencyUs != 10 {
		t.Errorf("all-reduce %+v", ar)
	}
	if s := r.Source(); s != "measured: NCCL 2.27.3 over 2 GPUs, torch 2.11.0" {
		t.Errorf("source %q", s)
	}
}

func TestRunNCCLFailures(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{
		{"fail", "rank 1: NCCL error: unhandled system error"},
		{"garbage", "NCCL probe output"},
		{"nan", "ops.all_gather.busbw_gbps: 0"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			py, _ := fakeNCCLPython(t, tc.mode)
			_, err := RunNCCL(context.Background(), py, []int{0, 1}, h200)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: error %v; want one line with %q", tc.mode, err, tc.want)
			}
		})
	}
	if _, err := RunNCCL(context.Background(), "python3", []int{0}, h200); err == nil || !strings.Contains(err.Error(), "two or more GPUs") {
		t.Errorf("one GPU: %v", err)
	}
}

func TestNCCLRatesAndFallback(t *testing.T) {
	py, _ := fakeNCCLPython(t, "ok")
	r, err := RunNCCL(context.Background(), py, []int{0, 1}, h200)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := stepmodel.SpecFor("h200")
	got := WithNCCL(spec, r)
	if got.NVLinkGBps != r.LinkGBps() || got.CollLatUs != 20 || got.NVLinkGBps == spec.NVLinkGBps {
		t.Errorf("rates %v GB/s %v us; want the measured %v and 20", got.NVLinkGBps, got.CollLatUs, r.LinkGBps())
	}
	if !strings.HasPrefix(got.Source, "spec table: H200; ") || !strings.Contains(got.Source, "measured: NCCL 2.27.3 over 2 GPUs, torch 2.11.0") {
		t.Errorf("source %q", got.Source)
	}
	if got.MatrixTFLOPS != spec.MatrixTFLOPS || got.NetworkGBps != spec.NetworkGBps {
		t.Error("the NCCL measurement changed rates it does not measure")
	}
	// A report without the link collectives leaves the spec figures.
	if kept := WithNCCL(spec, NCCLReport{NCCL: "2.27.3"}); kept != spec {
		t.Errorf("empty report changed the rates: %+v", kept)
	}
}

func TestNCCLCache(t *testing.T) {
	dir := t.TempDir()
	py, _ := fakeNCCLPython(t, "ok")
	r2, err := RunNCCL(context.Background(), py, []int{0, 1}, h200)
	if err != nil {
		t.Fatal(err)
	}
	r4, err := RunNCCL(context.Background(), py, []int{0, 1, 2, 3}, h200)
	if err != nil {
		t.Fatal(err)
	}
	r4.MeasuredAt = r2.MeasuredAt.Add(-time.Hour) // older, but over more GPUs
	for _, r := range []NCCLReport{r2, r4} {
		if err := SaveNCCL(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	got, ok := LoadNCCL(dir, h200, []int{0, 1})
	if !ok || !got.Cached || got.WorldSize != 2 || got.LinkGBps() != r2.LinkGBps() || !got.MeasuredAt.Equal(r2.MeasuredAt) {
		t.Fatalf("loaded %+v %v", got, ok)
	}
	if _, ok := LoadNCCL(dir, engine.DeviceInfo{Name: h200.Name, Driver: "575.0"}, []int{0, 1}); ok {
		t.Error("a report of another driver was used")
	}
	if _, ok := LoadNCCL(dir, h200, []int{2, 3}); ok {
		t.Error("a report of other GPUs was used")
	}
	if f, ok := FindNCCL(dir, "h200"); !ok || f.WorldSize != 4 {
		t.Errorf("FindNCCL h200: %v %+v; want the 4-GPU report", ok, f.GPUs)
	}
	if _, ok := FindNCCL(dir, "h100"); ok {
		t.Error("FindNCCL matched another GPU")
	}
	// The per-GPU probe cache next to it does not mistake NCCL reports for its own.
	if _, ok := FindCached(dir, "h200"); ok {
		t.Error("FindCached read an NCCL report as a GPU probe report")
	}
	// A broken file is skipped, not used; nothing half-written stays.
	os.WriteFile(filepath.Join(dir, "nccl", "broken.json"), []byte(`{"world_size": 2`), 0o644)
	if f, ok := FindNCCL(dir, "h200"); !ok || f.WorldSize != 4 {
		t.Errorf("with a broken file: %v", ok)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "nccl"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	if err := SaveNCCL(dir, NCCLReport{WorldSize: 1}); err == nil {
		t.Error("an invalid report was cached")
	}
}
