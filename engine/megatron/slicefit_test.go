package megatron

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/engine/worker"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// fakeOOMEngine runs the stand-in worker on a GPU where a slice of more
// than fits layers runs out of memory, logging each request's layers.
func fakeOOMEngine(t *testing.T, fits int) (*Engine, string) {
	t.Helper()
	script, _ := filepath.Abs("testdata/fake_worker.py")
	log := filepath.Join(t.TempDir(), "requests")
	cmd := worker.Command{Path: python(t), Args: []string{"-B", script},
		Env: []string{"FAKE_MODE=ok", "FAKE_OOM_ABOVE=" + strconv.Itoa(fits), "FAKE_LOG=" + log, "FAKE_LAYER_MS=10,2"}}
	rates, _ := stepmodel.SpecFor("h100")
	e, err := newWithCommand(context.Background(), Options{Rates: rates, StartTimeout: 20 * time.Second,
		Deadline: func(*stepmodel.Workload, presets.Candidate) time.Duration { return time.Minute }}, cmd)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e, log
}

func requests(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// A slice that does not fit this GPU (the framework's eager baseline out
// of memory: data-parallel size 1 holds the whole optimizer state) runs
// again on half as many layers until it fits, says so, and the workload's
// later runs build that slice at once.
func TestSliceOutOfMemoryRunsOnFewerLayers(t *testing.T) {
	e, log := fakeOOMEngine(t, 2)
	w := workload(t, 1)
	local := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{}, Warmup: 1}
	r := e.Run(context.Background(), w, local, engine.RunOptions{}, nil)
	if r.Failed() || r.Raw == nil || r.Raw.LayersBuilt != 2 {
		t.Fatalf("result: %s %s, raw %+v", r.ErrKind, r.Err, r.Raw)
	}
	if note := strings.Join(r.Notes, " "); !strings.Contains(note, "the slice of 8 and 4 of the stage's 32 layers ran out of memory on this GPU; 2 built") {
		t.Errorf("notes %v do not say the slice shrank", r.Notes)
	}
	if got := requests(t, log); strings.Join(got, ",") != "local 8,local 4,local 2" {
		t.Errorf("requests %q, want 8, 4 then 2 layers", got)
	}
	r = e.Run(context.Background(), w, presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}}, engine.RunOptions{}, nil)
	if got := requests(t, log); r.Failed() || got[len(got)-1] != "none 2" || len(got) != 4 {
		t.Errorf("the next run: %s, requests %q: want one run of 2 layers", r.Err, got)
	}
	// A profile's far point is the slice that fits.
	p, err := e.MeasureProfile(context.Background(), w, nil)
	if err != nil || p == nil {
		t.Fatalf("profile: %v", err)
	}
	for _, line := range requests(t, log)[4:] {
		if n := line[strings.LastIndex(line, " ")+1:]; n != "1" && n != "2" {
			t.Errorf("profile request %q: want 1 or 2 layers", line)
		}
	}
}

// Where not even one layer fits, the run is the out-of-memory result.
func TestSliceOfOneLayerOutOfMemoryIsTheResult(t *testing.T) {
	e, log := fakeOOMEngine(t, 0)
	r := e.Run(context.Background(), workload(t, 1), presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}}, engine.RunOptions{}, nil)
	if r.ErrKind != engine.FailureOOM || len(requests(t, log)) != 4 {
		t.Errorf("result %s %q after %q: want out of memory after 8, 4, 2 and 1 layers", r.ErrKind, r.Err, requests(t, log))
	}
}

// A profile on a GPU where the engine's slice never ran shrinks its far
// point itself, down to two layers, and the search's runs build the same.
func TestProfileFarPointShrinksToWhatFits(t *testing.T) {
	e, log := fakeOOMEngine(t, 4)
	w := workload(t, 1)
	if _, err := e.MeasureProfile(context.Background(), w, nil); err != nil {
		t.Fatalf("profile: %v", err)
	}
	e.Run(context.Background(), w, presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}}, engine.RunOptions{}, nil)
	got := requests(t, log)
	if len(got) < 2 || got[1] != "none 8" || got[2] != "none 4" || got[len(got)-1] != "none 4" {
		t.Errorf("requests %q: want the eager far point at 8 then 4 layers, and the search's run at 4", got)
	}
}
