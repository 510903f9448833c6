package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cgtune/presets"
	"cgtune/report"
	"cgtune/search"
	"cgtune/tui"
)

// The TUI's backend, driven as the TUI drives it, on the estimate engine
// (no GPU needed).

func testBackend(t *testing.T) *tuiBackend {
	t.Helper()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("CGTUNE_PRESETS", "")
	b := newTUIBackend(&rootFlags{trainIters: search.DefaultTrainIters}, nil)
	t.Cleanup(func() { b.close(func() {}) })
	return b
}

func estimateRequest(t *testing.T) tui.Request {
	t.Helper()
	m, err := presets.LookupModel("llama3_8b")
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Layout("h100")
	if err != nil {
		t.Fatal(err)
	}
	return tui.Request{Model: m, Layout: l, MBridge: "0.6", Space: presets.DefaultSpace(),
		Strategy: search.StrategyExhaustive, Budget: tui.NoBudget, Estimate: true}
}

func TestTUIBackendPlanAndRunEstimate(t *testing.T) {
	b := testBackend(t)
	req := estimateRequest(t)
	plan, err := b.Plan(req)
	if err != nil {
		t.Fatal(err)
	}
	valid := 0
	for _, p := range plan {
		if p.Valid() {
			valid++
			if p.Estimate == nil {
				t.Errorf("%s: no estimate in the plan", p.Candidate.Key())
			}
		} else if p.Violations[0].ID == "" {
			t.Errorf("%s rejected without a rule id", p.Candidate.Key())
		}
	}
	if valid == 0 || valid == len(plan) {
		t.Fatalf("%d valid of %d", valid, len(plan))
	}

	ch, err := b.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var evs []search.Event
	timeout := time.After(time.Minute)
	for open := true; open; {
		select {
		case ev, ok := <-ch:
			if ok {
				evs = append(evs, ev)
			}
			open = ok
		case <-timeout:
			t.Fatal("the search did not end")
		}
	}
	if _, ok := evs[0].(search.PlanEvent); !ok {
		t.Errorf("first event %T, want PlanEvent", evs[0])
	}
	done, ok := evs[len(evs)-1].(search.DoneEvent)
	if !ok {
		t.Fatalf("last event %T, want DoneEvent", evs[len(evs)-1])
	}
	if done.Winner == nil || done.Winner.Result.Source != "estimated" || done.Interrupted || done.Err != "" {
		t.Errorf("done: winner %v interrupted %v err %q", done.Winner, done.Interrupted, done.Err)
	}
	if _, err := os.Stat(filepath.Join(done.RunDir, search.JournalFile)); err != nil {
		t.Errorf("no journal in the run folder: %v", err)
	}
}

func TestTUIBackendStopKeepsResults(t *testing.T) {
	b := testBackend(t)
	b.flags.estimateDelay = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := b.Start(ctx, estimateRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	var last search.Event
	results := 0
	for ev := range ch {
		if _, ok := ev.(search.ResultEvent); ok {
			results++
			if results == 2 {
				cancel() // what the TUI's "stop the search" does
			}
		}
		last = ev
	}
	done, ok := last.(search.DoneEvent)
	if !ok || !done.Interrupted {
		t.Fatalf("last event %#v, want an interrupted DoneEvent", last)
	}
	if len(done.Ranking) < 2 {
		t.Errorf("%d ranked after a stop, want the finished ones", len(done.Ranking))
	}
}

func TestTUIBackendFiles(t *testing.T) {
	b := testBackend(t)
	path := filepath.Join(t.TempDir(), "o.yaml")
	if _, err := b.WriteOverrides(path, []byte("model: {}\n"), false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "model: {}\n" {
		t.Errorf("file %q", got)
	}
	// A file that is there is not replaced unless asked.
	if _, err := b.WriteOverrides(path, []byte("x: 1\n"), false); !errors.Is(err, tui.ErrFileExists) {
		t.Errorf("second write: %v, want ErrFileExists", err)
	}
	if _, err := b.WriteOverrides(path, []byte("x: 1\n"), true); err != nil {
		t.Errorf("overwrite: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "x: 1\n" {
		t.Errorf("after overwrite %q", got)
	}
	p := presets.TeamPreset{Version: presets.FileVersion, Name: "t1", Model: "llama3_8b", GPU: "h100",
		Space: presets.DefaultSpace(), MBridge: "0.6"}
	if _, err := b.SavePreset(p, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SavePreset(p, false); !errors.Is(err, tui.ErrPresetExists) {
		t.Errorf("second save: %v, want ErrPresetExists", err)
	}
	if _, err := b.SavePreset(p, true); err != nil {
		t.Errorf("overwrite: %v", err)
	}
	list, err := b.TeamPresets()
	if err != nil || len(list) != 1 || list[0].Name != "t1" {
		t.Errorf("presets %v %v", list, err)
	}
	if got, err := b.LoadPreset("t1"); err != nil || got.Model != "llama3_8b" {
		t.Errorf("load: %+v %v", got, err)
	}
}

// Pause holds the next candidates back until it is lifted; a stop (the
// context) gets through a pause.
func TestTUIBackendPause(t *testing.T) {
	b := testBackend(t)
	b.flags.estimateDelay = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := b.Start(ctx, estimateRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	results := 0
	for ev := range ch {
		if _, ok := ev.(search.ResultEvent); !ok {
			continue
		}
		results++
		if results == 1 {
			b.Pause(true)
			paused := results
			time.Sleep(400 * time.Millisecond)
			// At most the candidate already running finished meanwhile.
			drained := 0
		drain:
			for {
				select {
				case ev := <-ch:
					if _, ok := ev.(search.ResultEvent); ok {
						drained++
					}
				default:
					break drain
				}
			}
			if drained > 1 {
				t.Errorf("%d candidates finished while paused (after %d)", drained, paused)
			}
			results += drained
			cancel()
		}
	}
	if results == 0 {
		t.Fatal("no result")
	}
}

func TestTUIBackendGPUsWithoutDriver(t *testing.T) {
	b := testBackend(t)
	gpus, _, err := b.GPUs(context.Background())
	if err == nil {
		if len(gpus) == 0 {
			t.Error("NVML loaded but listed no GPU and no error")
		}
		t.Skip("this machine has an NVIDIA driver")
	}
	if !errors.Is(err, tui.ErrNoDriver) {
		t.Errorf("no driver should wrap tui.ErrNoDriver: %v", err)
	}
}

// The TUI's w and r write a relative path where cgtune runs and say the
// absolute path they wrote.
func TestTUIBackendWritesWhereCgtuneRuns(t *testing.T) {
	b := testBackend(t)
	t.Chdir(t.TempDir())
	here, _ := os.Getwd()
	written, err := b.WriteOverrides("o.yaml", []byte("model: {}\n"), false)
	if err != nil || written != filepath.Join(here, "o.yaml") {
		t.Fatalf("wrote %q, %v; want %s", written, err, filepath.Join(here, "o.yaml"))
	}
	if _, err := os.Stat(filepath.Join(here, "o.yaml")); err != nil {
		t.Error(err)
	}
	req := estimateRequest(t)
	ch, err := b.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var done search.DoneEvent
	for ev := range ch {
		if d, ok := ev.(search.DoneEvent); ok {
			done = d
		}
	}
	md, plot, err := b.WriteReport("r.md", report.Input{Model: req.Model, Layout: req.Layout, MBridge: req.MBridge, Done: done}, false)
	if err != nil || md != filepath.Join(here, "r.md") || plot != filepath.Join(here, "r.svg") {
		t.Errorf("report %q, plot %q, %v; want both in %s", md, plot, err, here)
	}
}

// The layout editor's MoE and recompute settings reach the search as a
// layout does, and a search with them is the headless search with the
// same values as --set: the same workload (drop-and-pad, its capacity)
// and the same verdict on every candidate.
func TestTUILayoutSettingsSearchAsHeadlessSets(t *testing.T) {
	b := testBackend(t)
	m, err := presets.LookupModel("qwen3_30b_a3b")
	if err != nil {
		t.Fatal(err)
	}
	// The b200 recipe leaves EP overlap off, which full recompute would
	// conflict with (TC-39).
	l, err := m.Layout("b200")
	if err != nil {
		t.Fatal(err)
	}
	// What the editor writes for Capacity 1.5, Pad on, Dispatcher
	// alltoall, Recompute full with 2 layers: the recipe's settings and
	// these.
	edited := l.Clone()
	if edited.Settings == nil {
		edited.Settings = map[string]string{}
	}
	edited.Settings["model.moe_expert_capacity_factor"] = "1.5"
	edited.Settings["model.moe_pad_expert_input_to_capacity"] = "true"
	edited.Dispatcher, edited.RecomputeGranularity, edited.RecomputeModules, edited.RecomputeLayers = "alltoall", "full", nil, 2
	space := presets.Space{Impls: []string{"none", "local", "transformer_engine"}, Scopes: [][]string{{"attn"}, {"moe"}, {"full_iteration"}, {}}, Warmups: []int{3}}
	req := tui.Request{Model: m, Layout: edited, MBridge: "0.4", Space: space, Strategy: search.StrategyExhaustive, Budget: tui.NoBudget, Estimate: true}
	tuiCfg := b.config(req)
	tuiPlan, err := b.Plan(req)
	if err != nil {
		t.Fatal(err)
	}

	f := &rootFlags{cmd: newRootCmd(), model: "qwen3_30b_a3b", gpuType: "b200", mbridge: "0.4", sets: []string{
		"model.moe_expert_capacity_factor=1.5", "model.moe_pad_expert_input_to_capacity=true",
		"model.moe_token_dispatcher_type=alltoall", "model.recompute_granularity=full",
		"model.recompute_method=uniform", "model.recompute_num_layers=2", "model.recompute_modules=null"}}
	var headless search.Config
	if err := f.what(context.Background(), &headless); err != nil {
		t.Fatal(err)
	}
	headless.Space = space
	headlessPlan, err := search.Plan(headless)
	if err != nil {
		t.Fatal(err)
	}
	if tuiCfg.Workload.Dropless == nil || *tuiCfg.Workload.Dropless || tuiCfg.Workload.MoECapacityFactor != 1.5 {
		t.Errorf("TUI workload: dropless %v, capacity %v; want drop-and-pad at 1.5", tuiCfg.Workload.Dropless, tuiCfg.Workload.MoECapacityFactor)
	}
	if *tuiCfg.Workload.Dropless != *headless.Workload.Dropless || tuiCfg.Workload.MoECapacityFactor != headless.Workload.MoECapacityFactor {
		t.Errorf("workloads differ: TUI %+v, headless %+v", tuiCfg.Workload, headless.Workload)
	}
	verdict := func(plan []search.Planned) map[string]string {
		out := map[string]string{}
		for _, p := range plan {
			v := "valid"
			if !p.Valid() {
				v = p.Violations[0].ID
			}
			out[p.Candidate.Key()] = v
		}
		return out
	}
	got, want := verdict(tuiPlan), verdict(headlessPlan)
	if len(got) != len(want) {
		t.Fatalf("TUI plan %v, headless %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: TUI %s, headless %s", k, got[k], v)
		}
	}
	// Full recompute leaves only the full-iteration graph (TC-24), and
	// drop-and-pad lets it capture (no will-fail).
	if got["local/full_iteration/w3"] != "valid" || got["transformer_engine/attn/w3"] != "TC-24" {
		t.Errorf("verdicts %v", got)
	}
}

// --set values of the fields the layout editor shows go into the layout
// (where the person sees and changes them); the others stay --set.
func TestSplitLayoutSets(t *testing.T) {
	layout, rest := splitLayoutSets(map[string]string{"model.moe_expert_capacity_factor": "1.0", "env.NCCL_GRAPH_REGISTER": "1"})
	if len(layout) != 1 || layout["model.moe_expert_capacity_factor"] != "1.0" || len(rest) != 1 || rest["env.NCCL_GRAPH_REGISTER"] != "1" {
		t.Errorf("layout %v, rest %v", layout, rest)
	}
}
