package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/engine/estimate"
	"cgtune/presets"
	"cgtune/search"
	"cgtune/stepmodel"
)

// The table runs without a GPU (--no-cuda): megatron results that agree
// with the estimate pass, ones whose speed-up differs by more than 15% (or
// whose winner differs) fail, and a candidate megatron could not capture
// must fail in the emulation too.
func TestThreeWayTable(t *testing.T) {
	dir := t.TempDir()
	m, _ := presets.LookupModel("llama3_8b")
	l, _ := m.Layout("h100")
	prof := &stepmodel.FrameworkProfile{Version: stepmodel.ProfileVersion, Source: "megatron-core test, NVIDIA H200",
		Key: stepmodel.ProfileKey{GPU: "NVIDIA H200", Model: "llama3_8b", Layout: stepmodel.LayoutKey(l)},
		Layers: map[string]stepmodel.LayerProfile{"dense": {EagerFwd: stepmodel.HostGPU{HostMs: 3, GPUMs: 2}, EagerBwd: stepmodel.HostGPU{HostMs: 2, GPUMs: 4},
			Graphed: map[string]stepmodel.GraphedRegion{"layer": {ReplayHostMs: 0.2, GPUMs: 5.5, GraphMiB: 300}, "attn": {ReplayHostMs: 0.1, GPUMs: 1.8, GraphMiB: 80}}}},
		OtherFwd: stepmodel.HostGPU{HostMs: 1, GPUMs: 3}, OtherBwd: stepmodel.HostGPU{HostMs: 1, GPUMs: 3}, Optimizer: stepmodel.HostGPU{HostMs: 5, GPUMs: 20}}
	profPath := filepath.Join(dir, "profile.json")
	data, _ := json.Marshal(prof)
	os.WriteFile(profPath, data, 0o644)

	// "Megatron" results: here the estimate engine's own, so the table must hold.
	w, err := stepmodel.BuildWorkload(m, l, stepmodel.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rates, _ := stepmodel.SpecFor("h200")
	est := estimate.New(rates, stepmodel.DefaultHostCosts(), engine.DeviceInfo{}).WithCosts(fixedCosts{prof})
	var res []engine.Result
	for _, c := range []presets.Candidate{{Impl: "none", Warmup: 3}, {Impl: "transformer_engine", Warmup: 3},
		{Impl: "transformer_engine", Scopes: []string{"attn"}, Warmup: 3}, {Impl: "local", Scopes: []string{"full_iteration"}, Warmup: 3}} {
		r := est.Run(context.Background(), w, c, engine.RunOptions{}, nil)
		r.Source = engine.SourceFramework
		res = append(res, r)
	}
	write := func(v any) string {
		p := filepath.Join(dir, "megatron.json")
		data, _ := json.Marshal(v)
		os.WriteFile(p, data, 0o644)
		return p
	}
	o := options{profile: profPath, model: "llama3_8b", gpuType: "h100", mbridge: "0.4", noCUDA: true}
	o.megatron = write(res)
	var out bytes.Buffer
	code, err := run(context.Background(), o, &out)
	if code != 0 || err != nil || !strings.Contains(out.String(), "HOLDS") || !strings.Contains(out.String(), "te whole-layer w3") {
		t.Fatalf("agreeing results: exit %d %v\n%s", code, err, out.String())
	}
	t.Logf("\n%s", out.String())

	// The search's --json shape works too.
	o.megatron = write(map[string]any{"ranking": []map[string]any{{"result": res[0]}, {"result": res[2]}}})
	out.Reset()
	if code, err := run(context.Background(), o, &out); code != 0 || err != nil {
		t.Errorf("ranking shape: exit %d %v\n%s", code, err, out.String())
	}

	// A candidate the megatron engine handed to its fallback (source
	// measured) is an emulation: left out and listed, even when it is off.
	handed := append([]engine.Result(nil), res...)
	handed[2].Source, handed[2].Speedup = engine.SourceMeasured, handed[2].Speedup*2
	o.megatron = write(handed)
	out.Reset()
	if code, _ := run(context.Background(), o, &out); code != 0 || !strings.Contains(out.String(), "left out (the megatron engine did not measure them on the framework): te attn w3") {
		t.Errorf("a handed-on candidate: exit %d\n%s", code, out.String())
	}

	// Megatron gains 30% more from attn graphs than the emulation predicts.
	off := append([]engine.Result(nil), res...)
	off[2].Speedup *= 1.3
	o.megatron = write(off)
	out.Reset()
	if code, _ := run(context.Background(), o, &out); code != 1 || !strings.Contains(out.String(), "FAILS") || !strings.Contains(out.String(), "!") {
		t.Errorf("disagreeing speed-up: exit %d\n%s", code, out.String())
	}

	// A candidate the framework fails on (a framework bug, a port race) has
	// no speed-up to compare: it is listed, not counted against the table;
	// but when it is the emulation's winner, the winners differ.
	failedOne := append([]engine.Result(nil), res...)
	loser := 0 // eager: never the emulation's winner
	failedOne[loser].Err, failedOne[loser].ErrKind = "AttributeError: framework bug", engine.FailureCrash
	o.megatron = write(failedOne)
	out.Reset()
	if code, _ := run(context.Background(), o, &out); code != 0 || !strings.Contains(out.String(), "not compared (failed on the framework") {
		t.Errorf("a failed non-winner: exit %d\n%s", code, out.String())
	}
	failedWinner := append([]engine.Result(nil), res...)
	best := 0
	rec := search.Winner(search.Rank(res, search.RankOptions{}))
	for i, r := range res {
		if r.Candidate.Key() == rec.Result.Candidate.Key() {
			best = i
		}
	}
	failedWinner[best].Err, failedWinner[best].ErrKind = "capture failed", engine.FailureCapture
	o.megatron = write(failedWinner)
	out.Reset()
	if code, _ := run(context.Background(), o, &out); code != 1 || !strings.Contains(out.String(), "FAILS") {
		t.Errorf("the emulation's winner failed on the framework: exit %d\n%s", code, out.String())
	}

	// Bad input exits 2.
	o.megatron = write(map[string]any{"nothing": 1})
	if code, err := run(context.Background(), o, &out); code != 2 || err == nil {
		t.Errorf("empty results: exit %d %v", code, err)
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
	if !strings.Contains(out.String(), "within megatron's noise: estimate's local/layer/w1 is tied with megatron's winner") {
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
