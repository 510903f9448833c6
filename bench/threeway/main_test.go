package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/search"
	"cgtune/stepmodel"
)

// writeJSON writes v as JSON to dir/name and returns the path.
func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	p := filepath.Join(dir, name)
	data, err := json.Marshal(v)
	if err == nil {
		err = os.WriteFile(p, data, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// onFramework is a result as the megatron engine would report it for the
// candidate the estimate e ran: its speed-up speedup× e's and its graph
// memory graph× e's, on an eager step of its own (a third slower than
// the estimate's), so that only the speed-up and the graph memory can
// agree.
func onFramework(e engine.Result, speedup, graph float64) engine.Result {
	eager := 1.3 * e.Eager.Median
	x := e.Speedup * speedup
	mib := int64(float64(e.Memory.JobGraphMiB()) * graph)
	spread := func(ms float64) stepmodel.Stats {
		return stepmodel.Stats{Median: ms, P10: 0.995 * ms, P90: 1.005 * ms, N: 8}
	}
	return engine.Result{Candidate: e.Candidate, Source: engine.SourceFramework, Step: spread(eager / x), Eager: spread(eager),
		Speedup: x, Memory: engine.Memory{GraphMiB: mib, GraphFullJobMiB: mib}}
}

// The table runs without a GPU (--no-cuda) on megatron results of its
// own: speed-ups within 15% of the estimate's and graph memory within 25%
// hold, with the differences printed; a speed-up or a graph memory
// further off fails, as does a different winner; a candidate the megatron
// engine handed on is left out and one it failed on is listed, not
// compared; bad input exits 2.
func TestThreeWayTable(t *testing.T) {
	dir := t.TempDir()
	o := options{model: "llama3_8b", gpuType: "h100", mbridge: "0.4", noCUDA: true, jsonOut: filepath.Join(dir, "rows.json")}
	w, err := workload(o)
	if err != nil {
		t.Fatal(err)
	}
	prof := &stepmodel.FrameworkProfile{Version: stepmodel.ProfileVersion, Source: "megatron-core test, NVIDIA H200",
		Key: stepmodel.ProfileKey{GPU: "NVIDIA H200", Model: "llama3_8b", Layout: stepmodel.LayoutKey(w.Layout)},
		Layers: map[string]stepmodel.LayerProfile{"dense": {EagerFwd: stepmodel.HostGPU{HostMs: 3, GPUMs: 2}, EagerBwd: stepmodel.HostGPU{HostMs: 2, GPUMs: 4},
			Graphed: map[string]stepmodel.GraphedRegion{"layer": {ReplayHostMs: 0.2, GPUMs: 5.5, GraphMiB: 300}, "attn": {ReplayHostMs: 0.1, GPUMs: 1.8, GraphMiB: 80}}}},
		OtherFwd: stepmodel.HostGPU{HostMs: 1, GPUMs: 3}, OtherBwd: stepmodel.HostGPU{HostMs: 1, GPUMs: 3}, Optimizer: stepmodel.HostGPU{HostMs: 5, GPUMs: 20}}
	o.profile = writeJSON(t, dir, "profile.json", prof)
	cands := []presets.Candidate{{Impl: "none", Warmup: 3}, {Impl: "transformer_engine", Warmup: 3},
		{Impl: "transformer_engine", Scopes: []string{"attn"}, Warmup: 3}, {Impl: "local", Scopes: []string{"full_iteration"}, Warmup: 3}}
	var out bytes.Buffer
	runWith := func(name string, res []engine.Result) (int, error) {
		t.Helper()
		o.megatron = writeJSON(t, dir, name+".json", res)
		out.Reset()
		return run(context.Background(), o, &out)
	}

	// The estimate as the table computes it, from a first run's rows.
	var placeholders []engine.Result
	for _, c := range cands {
		placeholders = append(placeholders, engine.Result{Candidate: c, Source: engine.SourceFramework, Speedup: 1,
			Step: stepmodel.Stats{Median: 100, N: 1}, Eager: stepmodel.Stats{Median: 100, N: 1}})
	}
	if _, err := runWith("placeholders", placeholders); err != nil {
		t.Fatalf("first run: %v\n%s", err, out.String())
	}
	var rows []Row
	data, err := os.ReadFile(o.jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rows); err != nil || len(rows) != len(cands) {
		t.Fatalf("rows: %v, %d of %d", err, len(rows), len(cands))
	}
	var est []engine.Result
	for _, r := range rows {
		est = append(est, r.Estimate)
	}
	best := -1
	rec := search.Winner(search.Rank(est, search.RankOptions{}))
	for i, r := range est {
		if rec != nil && r.Candidate.Key() == rec.Result.Candidate.Key() {
			best = i
		}
	}
	if best <= 0 {
		t.Fatalf("the estimate's winner %v is not a graphed candidate", rec)
	}
	// agreeing: the estimate's winner gains 10% more on megatron, the other
	// graphed candidates 12% less (ΔX −9.1% and +13.6%); graph memory 10% more.
	agreeing := func() []engine.Result {
		var res []engine.Result
		for i, e := range est {
			f := 0.88
			switch {
			case i == best:
				f = 1.1
			case !e.Candidate.Graphed():
				f = 1
			}
			res = append(res, onFramework(e, f, 1.1))
		}
		return res
	}
	res := agreeing()
	if code, err := runWith("agreeing", res); code != 0 || err != nil || !strings.Contains(out.String(), "HOLDS") ||
		!strings.Contains(out.String(), "-9.1%") || !strings.Contains(out.String(), "+13.6%") || strings.Contains(out.String(), "!") {
		t.Fatalf("speed-ups within 15%%: exit %d %v\n%s", code, err, out.String())
	}
	t.Logf("\n%s", out.String())
	wantWinner := fmt.Sprintf("winner: megatron %s, estimate %s", est[best].Candidate.Name(), est[best].Candidate.Name())
	if !strings.Contains(out.String(), wantWinner) {
		t.Errorf("want %q in\n%s", wantWinner, out.String())
	}

	// A graphed non-winner 14% slower on megatron: ΔX +16.3%, past 15%.
	other := 1
	if other == best {
		other = 2
	}
	off := agreeing()
	off[other] = onFramework(est[other], 0.86, 1.1)
	if code, err := runWith("speedup-off", off); code != 1 || err != nil || !strings.Contains(out.String(), "FAILS") || !strings.Contains(out.String(), "+16.3%!") {
		t.Errorf("a speed-up 16%% off: exit %d %v\n%s", code, err, out.String())
	}
	// The winner's graph memory 30% less on megatron: ΔMEM +43%, past 25%.
	memOff := agreeing()
	memOff[best] = onFramework(est[best], 1.1, 0.7)
	if code, err := runWith("memory-off", memOff); code != 1 || err != nil || !strings.Contains(out.String(), "FAILS") || !strings.Contains(out.String(), "+43%!") {
		t.Errorf("graph memory 43%% off: exit %d %v\n%s", code, err, out.String())
	}

	// The search's --json shape works too.
	o.megatron = writeJSON(t, dir, "ranking.json", map[string]any{"ranking": []map[string]any{{"result": res[0]}, {"result": res[best]}}})
	out.Reset()
	if code, err := run(context.Background(), o, &out); code != 0 || err != nil || strings.Count(out.String(), " w3 ") != 1 || !regexp.MustCompile(`(?m)^\s+none\s+[0-9]`).MatchString(out.String()) {
		t.Errorf("ranking shape: exit %d %v\n%s", code, err, out.String())
	}

	// A candidate the megatron engine handed to its fallback (source
	// measured) is an emulation: left out and listed, even when it is off.
	handed := agreeing()
	handed[other].Source, handed[other].Speedup = engine.SourceMeasured, handed[other].Speedup*2
	if code, err := runWith("handed", handed); code != 0 || err != nil ||
		!strings.Contains(out.String(), "left out (the megatron engine did not measure them on the framework): "+cands[other].Label()+" w3") {
		t.Errorf("a handed-on candidate: exit %d %v\n%s", code, err, out.String())
	}

	// A candidate the framework fails on (a framework bug, a port race) has
	// no speed-up to compare: it is listed, not counted against the table;
	// but when it is the emulation's winner, the winners differ.
	failedOne := agreeing()
	failedOne[0].Err, failedOne[0].ErrKind = "AttributeError: framework bug", engine.FailureCrash
	if code, err := runWith("failed-eager", failedOne); code != 0 || err != nil || !strings.Contains(out.String(), "not compared (failed on the framework") {
		t.Errorf("a failed non-winner: exit %d %v\n%s", code, err, out.String())
	}
	failedWinner := agreeing()
	failedWinner[best].Err, failedWinner[best].ErrKind = "capture failed", engine.FailureCapture
	if code, err := runWith("failed-winner", failedWinner); code != 1 || err != nil || !strings.Contains(out.String(), "FAILS") {
		t.Errorf("the emulation's winner failed on the framework: exit %d %v\n%s", code, err, out.String())
	}

	// Bad input exits 2.
	o.megatron = writeJSON(t, dir, "nothing.json", map[string]any{"nothing": 1})
	if code, err := run(context.Background(), o, &out); code != 2 || err == nil {
		t.Errorf("empty results: exit %d %v", code, err)
	}
}

// A candidate the emulation fails on where megatron ran it fails the table.
func TestEmulationFailureFailsTheTable(t *testing.T) {
	c := presets.Candidate{Impl: "local", Scopes: []string{"full_iteration"}, Warmup: 1}
	ran := engine.Result{Candidate: c, Source: engine.SourceFramework, Step: stepmodel.Stats{Median: 80, P10: 79, P90: 81, N: 8},
		Eager: stepmodel.Stats{Median: 200, P10: 198, P90: 202, N: 8}, Speedup: 2.5}
	failed := engine.Result{Candidate: c, Err: "out of memory", ErrKind: engine.FailureOOM}
	var out bytes.Buffer
	if table(&out, []Row{{Candidate: c, Megatron: ran, Estimate: failed}}) {
		t.Errorf("an emulation failure on a candidate megatron ran must fail the table:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "FAILED") {
		t.Errorf("the row does not show the emulation's failure:\n%s", out.String())
	}
}

// An emulated winner that megatron's own results tie with megatron's
// winner is named as such; the acceptance still fails on it.
func TestTableNamesAWinnerTiedOnMegatron(t *testing.T) {
	res := func(c presets.Candidate, med, p10, p90 float64, graph int64) engine.Result {
		return engine.Result{Candidate: c, Source: engine.SourceFramework, Step: stepmodel.Stats{Median: med, P10: p10, P90: p90, N: 8},
			Eager: stepmodel.Stats{Median: 960, P10: 950, P90: 970, N: 8}, Speedup: 960 / med,
			Memory: engine.Memory{GraphMiB: graph, GraphFullJobMiB: graph}}
	}
	full := presets.Candidate{Impl: "local", Scopes: []string{"full_iteration"}, Warmup: 1}
	layer := presets.Candidate{Impl: "local", Scopes: []string{}, Warmup: 1}
	none := presets.Candidate{Impl: "none", Scopes: []string{}}
	// Measured on an H200 (moe-small mbs 4, drop-and-pad;
	// docs/emulation-accuracy-2026-12-01.md): full iteration 229.4 ms
	// (224.5–239.5) ties whole layer 238.1 (227.8–252.6) and wins on less
	// graph memory; the emulation has whole layer 1.3% ahead.
	rows := []Row{
		{Candidate: full, Megatron: res(full, 229.37, 224.54, 239.46, 11424), Estimate: res(full, 262.94, 262.94, 262.94, 11425)},
		{Candidate: layer, Megatron: res(layer, 238.11, 227.79, 252.64, 12994), Estimate: res(layer, 259.44, 259.44, 259.44, 12994)},
		{Candidate: none, Megatron: res(none, 963.72, 950, 970, 0), Estimate: res(none, 1145.7, 1145.7, 1145.7, 0)},
	}
	var out bytes.Buffer
	if table(&out, rows) {
		t.Errorf("a different winner must fail the strict check:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "within megatron's noise: estimate's local whole-layer w1 is tied with megatron's winner") {
		t.Errorf("no tie note:\n%s", out.String())
	}
	// Apart on megatron (ranges do not overlap): no such note.
	rows[1].Megatron = res(layer, 260, 258, 262, 12994)
	out.Reset()
	table(&out, rows)
	if strings.Contains(out.String(), "within megatron's noise") {
		t.Errorf("a tie note for candidates megatron tells apart:\n%s", out.String())
	}
}

// Where both the megatron engine and an emulation ran the same slice of a
// stage that does not fit one GPU, their graph memory is compared as
// measured on that slice; otherwise as the job's.
func TestComparedGraphMiBUsesTheSharedSlice(t *testing.T) {
	m := engine.Result{Raw: &engine.RawTimes{LayersBuilt: 8}, Memory: engine.Memory{GraphMiB: 48000, GraphFullJobMiB: 290000}}
	r := engine.Result{SliceLayers: 8, Memory: engine.Memory{GraphMiB: 47000, GraphFullJobMiB: 196000}}
	if mg, rg, slice := comparedGraphMiB(m, r); mg != 48000 || rg != 47000 || !slice {
		t.Errorf("same slice: %d vs %d (slice %v)", mg, rg, slice)
	}
	r.SliceLayers = 4
	if mg, rg, slice := comparedGraphMiB(m, r); mg != 290000 || rg != 196000 || slice {
		t.Errorf("other slice: %d vs %d (slice %v)", mg, rg, slice)
	}
}
