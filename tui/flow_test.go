package tui

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"cgtune/presets"
)

// TestFlowToOverridesFile drives the whole program as a person would: the
// model screen, the GPU screen, the space, the run (a scripted search:
// plan, starts, samples, results, memory, done), the results, and writing
// the overrides file, which must hold the winner's overrides.
func TestFlowToOverridesFile(t *testing.T) {
	f := newFake(t)
	clk := &clock{t: t0}
	m := New(f, Options{NoColor: true, Version: "0.1.0-test", Now: clk.now, Model: "llama3_70b"})
	tm := teatest.NewTestModel(t, m,
		teatest.WithInitialTermSize(80, 24),
		teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.Ascii)),
	)
	out := tm.Output()
	waitFor := func(what string) {
		t.Helper()
		teatest.WaitFor(t, out, func(b []byte) bool { return bytes.Contains(b, []byte(what)) },
			teatest.WithDuration(5*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
	}

	waitFor("Llama 3 70B")
	tm.Send(keyMsg("enter"))
	waitFor("driver 580.65.06") // GPU screen, NVML listing from the backend
	tm.Send(keyMsg("enter"))
	waitFor("valid") // space screen, once Plan answered
	tm.Send(keyMsg("enter"))
	waitFor("Ranking") // the scripted search ran to its DoneEvent
	tm.Send(keyMsg("w"))
	waitFor("Write yaml overrides of te attn,mlp w3 to")
	tm.Send(keyMsg("enter"))
	waitFor("wrote ./cgtune-overrides.yaml")
	tm.Send(keyMsg("q"))

	final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model)
	if final.done == nil || final.done.Winner == nil {
		t.Fatal("the final model has no result")
	}
	if len(f.started) != 1 || f.started[0].Model.Name != "llama3_70b" || len(f.started[0].GPUs) != 1 {
		t.Fatalf("searches started: %+v", f.started)
	}
	want, err := presets.BuildOverrides(cTEAttnMLP, presets.G3).Render("yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := mustRead(t, filepath.Join(f.dir, "cgtune-overrides.yaml"))
	if got != string(want) {
		t.Errorf("overrides file:\n%s\nwant:\n%s", got, want)
	}
}
