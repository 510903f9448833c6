package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cgtune/presets"
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
	if err := b.WriteOverrides(path, []byte("model: {}\n"), false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "model: {}\n" {
		t.Errorf("file %q", got)
	}
	// A file that is there is not replaced unless asked.
	if err := b.WriteOverrides(path, []byte("x: 1\n"), false); !errors.Is(err, tui.ErrFileExists) {
		t.Errorf("second write: %v, want ErrFileExists", err)
	}
	if err := b.WriteOverrides(path, []byte("x: 1\n"), true); err != nil {
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
