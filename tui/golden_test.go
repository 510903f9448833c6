package tui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"cgtune/engine"
	"cgtune/engine/job"
)

// Golden files of every screen at 80×24 and 160×48, in plain (NO_COLOR)
// styles so they are readable text. Regenerate with go test ./tui -update.

var sizes = []struct{ w, h int }{{80, 24}, {160, 48}}

// screenStates puts a model into each screen's interesting state.
var screenStates = []struct {
	name  string
	setup func(t *testing.T, m *App, f *fakeBackend, clk *clock)
}{
	{"model", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {}},
	{"model_filter_moe", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "/", "q", "w", "e", "n")
	}},
	{"model_layout_error", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "tab", "down", "down", "3", "enter")
	}},
	{"model_preset", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		cmd := press(m, "/", "t", "e", "a", "m")
		send(m, cmd())
	}},
	{"gpu", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "enter")
	}},
	{"gpu_no_driver", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		send(m, gpusMsg{err: fmt.Errorf("%w: libnvidia-ml.so.1 not found", ErrNoDriver)})
		press(m, "enter", "e")
	}},
	{"space", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "enter", "enter")
		planNow(t, m, f)
	}},
	// An MoE model: the whole-layer graphs will fail, the aliases of a
	// configuration are one row. Its b200 recipe (two → from h100) leaves
	// EP overlap off, which the h100 one turns on (TC-36 then rejects every
	// local graph).
	{"space_moe", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "/", "q", "w", "e", "n", "enter", "right", "right", "enter", "enter")
		planNow(t, m, f)
		press(m, "tab", "down")
	}},
	// The cursor on a candidate that will fail and on one the rules
	// reject: the rows a person opens to read why.
	{"space_will_fail_cursor", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		toQwenCandidates(t, m, f)
		cursorTo(m, firstOfKind(t, m, true))
	}},
	{"space_rejected_cursor", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		toQwenCandidates(t, m, f)
		cursorTo(m, firstOfKind(t, m, false))
	}},
	// The layout editor's MoE settings, edited to drop-and-pad.
	{"model_layout_moe_edited", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "/", "q", "w", "e", "n", "enter")
		moveTo(t, m, "Capacity")
		press(m, "1", ".", "0", "enter")
		moveTo(t, m, "Pad")
		press(m, "+")
	}},
	{"run", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "enter", "enter")
		planNow(t, m, f)
		press(m, "enter")
		clk.t = clk.t.Add(75 * time.Second)
		playEvents(m, f, len(f.events)-2) // the last candidate is measuring
	}},
	{"run_stop", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "enter", "enter")
		planNow(t, m, f)
		press(m, "enter")
		clk.t = clk.t.Add(40 * time.Second)
		playEvents(m, f, 6)
		press(m, "q")
	}},
	{"results", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "enter", "enter")
		planNow(t, m, f)
		press(m, "enter")
		clk.t = clk.t.Add(2 * time.Minute)
		playEvents(m, f, -1)
	}},
	// Every key of the results screen.
	{"results_help", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		toResults(t, m, f)
		press(m, "?")
	}},
	// The validation form, prefilled from --command.
	{"results_validate_form", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		m.opts.JobCommand = testJobCommand
		toResults(t, m, f)
		press(m, "v")
	}},
	{"results_write_prompt", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "enter", "enter")
		planNow(t, m, f)
		press(m, "enter")
		playEvents(m, f, -1)
		press(m, "f", "w")
	}},
	// The estimate engine: the memory panels show the estimate's numbers.
	{"run_estimate", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		f.events = estimated(f.events)
		send(m, gpusMsg{err: fmt.Errorf("%w: libnvidia-ml.so.1 not found", ErrNoDriver)})
		press(m, "enter", "e", "enter")
		planNow(t, m, f)
		press(m, "enter")
		clk.t = clk.t.Add(20 * time.Second)
		playEvents(m, f, len(f.events)-2)
	}},
	{"results_estimate", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		f.events = estimated(f.events)
		send(m, gpusMsg{err: fmt.Errorf("%w: libnvidia-ml.so.1 not found", ErrNoDriver)})
		press(m, "enter", "e", "enter")
		planNow(t, m, f)
		press(m, "enter")
		playEvents(m, f, -1)
	}},
	{"results_overwrite", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "enter", "enter")
		planNow(t, m, f)
		press(m, "enter")
		playEvents(m, f, -1)
		if err := os.WriteFile(filepath.Join(f.dir, "taken.yaml"), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		press(m, "w", "ctrl+u")
		for _, r := range "taken.yaml" {
			press(m, string(r))
		}
		send(m, press(m, "enter")())
	}},
	// Validation on real jobs: the jobs running (state, id, log tail), and
	// the comparison with the predictions.
	{"results_validate", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		v := goldenValidation(t, m, f)
		v.feed(ValidationUpdate{Event: job.JobEvent{Update: job.Update{Candidate: cNone, JobID: "4101", State: job.StateRunning,
			Tail: []string{"building GPT model ...", " [2026-12-01 11:00:03] iteration        5/      30 | elapsed time per iteration (ms): 131.2 |"}}}})
		v.feed(ValidationUpdate{Event: job.JobEvent{Update: job.Update{Candidate: cTEAttnMLP, JobID: "4102", State: job.StatePending, Reason: "Priority"}}})
	}},
	{"results_validated", func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		v := goldenValidation(t, m, f)
		real := []engine.Result{jobResult(cNone, 130, "4101"), jobResult(cTEAttnMLP, 100, "4102"), jobResult(cTEAttn, 115, "4103")}
		for i, r := range real {
			v.feed(ValidationUpdate{Event: job.JobDone{Result: r, Done: i + 1, Total: 3}})
		}
		v.feed(ValidationUpdate{Outcome: outcome(real, false)})
		v.end()
	}},
}

// toQwenCandidates selects the MoE model on its b200 layout (whose
// whole-layer and full-iteration graphs will fail, as space_moe), plans
// its space and puts the keyboard on the candidate list.
func toQwenCandidates(t *testing.T, m *App, f *fakeBackend) {
	t.Helper()
	press(m, "/", "q", "w", "e", "n", "enter", "right", "right")
	toSpaceCandidates(t, m, f)
}

// cursorTo moves the candidate list's cursor down to row i.
func cursorTo(m *App, i int) {
	for m.spaceScr.cursor < i {
		press(m, "down")
	}
}

// goldenValidation runs the scripted search and starts validating it.
func goldenValidation(t *testing.T, m *App, f *fakeBackend) *validator {
	m.opts.JobCommand, m.opts.JobLauncher = testJobCommand, "slurm"
	toResults(t, m, f)
	return startValidation(t, m, f)
}

func TestGolden(t *testing.T) {
	for _, s := range screenStates {
		for _, sz := range sizes {
			t.Run(fmt.Sprintf("%s/%dx%d", s.name, sz.w, sz.h), func(t *testing.T) {
				f := newFake(t)
				m, clk := newTestModel(t, f, sz.w, sz.h)
				s.setup(t, m, f, clk)
				out := m.View().Content
				checkFrame(t, out, sz.w, sz.h)
				golden.RequireEqual(t, out)
			})
		}
	}
}

// checkFrame asserts the view fills the window exactly: h lines, none
// wider than w, so nothing wraps or scrolls in a real terminal.
func checkFrame(t *testing.T, out string, w, h int) {
	t.Helper()
	lines := strings.Split(out, "\n")
	if len(lines) != h {
		t.Errorf("view has %d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if n := ansi.StringWidth(l); n > w {
			t.Errorf("line %d is %d cells wide (max %d): %q", i+1, n, w, l)
		}
	}
}

// TestGoldenColour keeps one screen in colour (dark palette), so a style
// that goes missing or changes colour shows up in review.
func TestGoldenColour(t *testing.T) {
	f := newFake(t)
	clk := &clock{t: t0}
	m := New(f, Options{Version: "0.1.0-test", Now: clk.now, Model: "llama3_70b"})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	g, d, _ := f.GPUs(context.Background())
	m.Update(gpusMsg{gpus: g, driver: d})
	press(m, "enter", "enter")
	planNow(t, m, f)
	press(m, "enter")
	playEvents(m, f, -1)
	out := m.View().Content
	checkFrame(t, out, 80, 24)
	golden.RequireEqual(t, out)
}

// TestGoldenColourCursor keeps, in colour, the cursor on a candidate that
// will fail and on one the rules reject, at both sizes: the rows a person
// opens to read why must show the cursor.
func TestGoldenColourCursor(t *testing.T) {
	for _, tc := range []struct {
		name     string
		willFail bool
	}{{"will_fail", true}, {"rejected", false}} {
		for _, sz := range sizes {
			t.Run(fmt.Sprintf("%s/%dx%d", tc.name, sz.w, sz.h), func(t *testing.T) {
				f := newFake(t)
				m := newColourModel(t, f, "qwen3_30b_a3b", "b200", sz.w, sz.h)
				toSpaceCandidates(t, m, f)
				cursorTo(m, firstOfKind(t, m, tc.willFail))
				out := m.View().Content
				checkFrame(t, out, sz.w, sz.h)
				golden.RequireEqual(t, out)
			})
		}
	}
}
