package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"cgtune/engine"
	"cgtune/engine/job"
)

// Golden files of every screen at 80×24 (comfortable), 160×48 and 60×16
// (the smallest window cgtune draws in), in plain (NO_COLOR) styles so
// they are readable text. Regenerate with go test ./tui -update.

var sizes = []struct{ w, h int }{{80, 24}, {160, 48}, {60, 16}}

// screenState is a screen in one interesting state: setup puts a model
// there; check (optional) asserts what the frame must show, so that a
// golden regenerated over a regression still fails.
type screenState struct {
	name  string
	setup func(t *testing.T, m *App, f *fakeBackend, clk *clock)
	check func(t *testing.T, m *App, out string, w, h int)
}

// screenStates puts a model into each screen's interesting state.
var screenStates = []screenState{
	{name: "model", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {}, check: func(t *testing.T, m *App, out string, w, h int) {
		// The way on is the first hint, at every size.
		wantHelp(t, out, "enter continue")
	}},
	{name: "model_filter_moe", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "/", "q", "w", "e", "n")
	}},
	{name: "model_layout_error", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "tab", "down", "down", "3", "enter")
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		noHelp(t, out, "enter continue") // the layout is invalid
	}},
	// TP set to 2 and back to 1 with drop-and-pad edited, then another
	// GPU type: the status and the "edited:" line name the same edits.
	{name: "model_tp_reset", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		toQwenTPReset(t, m)
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		wantText(t, out, "with your Capacity, Pad")
		if strings.Contains(out, "your TP") {
			t.Error("the status still calls TP an edit")
		}
	}},
	{name: "model_preset", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		cmd := press(m, "/", "t", "e", "a", "m")
		send(m, cmd())
	}},
	{name: "gpu", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "enter")
	}},
	{name: "gpu_no_driver", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		send(m, gpusMsg{err: fmt.Errorf("%w: libnvidia-ml.so.1 not found", ErrNoDriver)})
		press(m, "enter", "e")
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		wantHelp(t, out, "enter continue", "e undo estimate engine")
	}},
	// No driver and no engine chosen yet: enter would only say so, e is
	// the way on.
	{name: "gpu_no_driver_unchosen", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		send(m, gpusMsg{err: fmt.Errorf("%w: libnvidia-ml.so.1 not found", ErrNoDriver)})
		press(m, "enter")
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		noHelp(t, out, "enter")
		wantHelp(t, out, "e use estimate engine")
		wantText(t, out, "Press e to use the estimate engine", "libnvidia-ml.so.1 not found)")
	}},
	{name: "space", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "enter", "enter")
		planNow(t, m, f)
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		wantCandidateRows(t, out, minCandidateRows)
		wantHelp(t, out, "enter start search")
	}},
	// An MoE model: the whole-layer graphs will fail, the aliases of a
	// configuration are one row. Its b200 recipe (two → from h100) leaves
	// EP overlap off, which the h100 one turns on (TC-36 then rejects every
	// local graph).
	{name: "space_moe", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "/", "q", "w", "e", "n", "enter", "right", "right", "enter", "enter")
		planNow(t, m, f)
		press(m, "tab", "down")
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		wantCandidateRows(t, out, minCandidateRows)
	}},
	// The cursor on a candidate that will fail and on one the rules
	// reject: the rows a person opens to read why.
	{name: "space_will_fail_cursor", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		toQwenCandidates(t, m, f)
		cursorTo(m, firstOfKind(t, m, true))
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		wantCandidateRows(t, out, minCandidateRows)
	}},
	{name: "space_rejected_cursor", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		toQwenCandidates(t, m, f)
		cursorTo(m, firstOfKind(t, m, false))
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		wantCandidateRows(t, out, minCandidateRows)
	}},
	// The layout editor's MoE settings, edited to drop-and-pad.
	{name: "model_layout_moe_edited", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "/", "q", "w", "e", "n", "enter")
		moveTo(t, m, "Capacity")
		press(m, "1", ".", "0", "enter")
		moveTo(t, m, "Pad")
		press(m, "+")
	}},
	{name: "run", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "enter", "enter")
		planNow(t, m, f)
		press(m, "enter")
		clk.t = clk.t.Add(75 * time.Second)
		playEvents(m, f, len(f.events)-2) // the last candidate is measuring
	}},
	{name: "run_stop", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "enter", "enter")
		planNow(t, m, f)
		press(m, "enter")
		clk.t = clk.t.Add(40 * time.Second)
		playEvents(m, f, 6)
		press(m, "q")
	}},
	{name: "results", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "enter", "enter")
		planNow(t, m, f)
		press(m, "enter")
		clk.t = clk.t.Add(2 * time.Minute)
		playEvents(m, f, -1)
	}},
	// Eight rows ranked: at 80×24 five or more show, with the overrides
	// under them; no name is cut.
	{name: "results_ranked8", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		f.events = longRanking(f.events)
		toResults(t, m, f)
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		wantRankRows(t, m, out, 5)
		wantText(t, out, "Overrides")
		wantHelp(t, out, "w write file", "d details")
	}},
	// d: why the winner won and the candidate's details, whole, in the
	// pane; the ranking keeps its rows.
	{name: "results_details", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		f.events = longRanking(f.events)
		toResults(t, m, f)
		press(m, "d")
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		wantRankRows(t, m, out, 5)
		wantText(t, out, "Details", "Why: te attn,mlp w3 wins")
		wantPaneEnd(t, m, "measured by cgtune's emulation on this GPU")
	}},
	// The overrides scrolled down to a long comment: it goes on as
	// comments, whole.
	{name: "results_overrides_scrolled", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		f.events = longRanking(f.events)
		toResults(t, m, f)
		scrollPaneTo(t, m, "# without it and model.use_te_rng_tracker")
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		wantText(t, out, "# without it and model.use_te_rng_tracker: MB-01")
		for _, l := range strings.Split(ansi.Strip(out), "\n") {
			if strings.HasSuffix(strings.TrimSpace(l), "…") {
				t.Errorf("a line is cut: %q", l)
			}
		}
	}},
	// The JSON overrides scrolled to a _why text too long for a line: a
	// list of its pieces, valid JSON.
	{name: "results_json_scrolled", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		f.events = longRanking(f.events)
		toResults(t, m, f)
		press(m, "f", "f", "f", "f")
		scrollPaneTo(t, m, `"rng.te_rng_tracker": [`)
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		wantText(t, out, `"rng.te_rng_tracker": [`)
		if strings.Contains(out, "…") {
			t.Error("the JSON pane cuts a line")
		}
	}},
	// Every key of the results screen.
	{name: "results_help", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		toResults(t, m, f)
		press(m, "?")
	}},
	// The validation form, prefilled from --command; before anything
	// starts it says which jobs run and which top candidates it skips,
	// with why (the jobs' Python has no Transformer Engine).
	{name: "results_validate_form", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		m.opts.JobCommand = testJobCommand
		f.events, f.valPlan = longRanking(f.events), noTEPlan()
		toResults(t, m, f)
		send(m, press(m, "v")())
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		wantText(t, out, "Runs", "3 jobs: eager, local attn w3, local whole-layer w3", "Skips",
			"te attn,mlp w3, te attn w3: a transformer_engine graph needs Transformer Engine", "--job-te yes runs them anyway)")
		wantHelp(t, out, "enter review the command")
	}},
	// A path longer than the window: the prompt shows it whole.
	{name: "results_write_prompt_long", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		toResults(t, m, f)
		press(m, "w", "ctrl+u")
		for _, r := range longPath {
			press(m, string(r))
		}
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		wantText(t, out, "Write yaml overrides of te attn,mlp w3 to:")
		if !strings.Contains(strings.ReplaceAll(ansi.Strip(out), "\n", ""), longPath+"▏") {
			t.Errorf("the prompt does not show the whole path:\n%s", out)
		}
		wantHelp(t, out, "enter ok")
	}},
	{name: "results_write_prompt", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		press(m, "enter", "enter")
		planNow(t, m, f)
		press(m, "enter")
		playEvents(m, f, -1)
		press(m, "f", "w")
	}},
	// The estimate engine: the memory panels show the estimate's numbers.
	{name: "run_estimate", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		f.events = estimated(f.events)
		send(m, gpusMsg{err: fmt.Errorf("%w: libnvidia-ml.so.1 not found", ErrNoDriver)})
		press(m, "enter", "e", "enter")
		planNow(t, m, f)
		press(m, "enter")
		clk.t = clk.t.Add(20 * time.Second)
		playEvents(m, f, len(f.events)-2)
	}},
	{name: "results_estimate", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		f.events = estimated(f.events)
		send(m, gpusMsg{err: fmt.Errorf("%w: libnvidia-ml.so.1 not found", ErrNoDriver)})
		press(m, "enter", "e", "enter")
		planNow(t, m, f)
		press(m, "enter")
		playEvents(m, f, -1)
	}},
	{name: "results_overwrite", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
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
	{name: "results_validate", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		v := goldenValidation(t, m, f)
		v.feed(ValidationUpdate{Event: job.JobEvent{Update: job.Update{Candidate: cNone, JobID: "4101", State: job.StateRunning,
			Tail: []string{"building GPT model ...", " [2026-12-01 11:00:03] iteration        5/      30 | elapsed time per iteration (ms): 131.2 |"}}}})
		v.feed(ValidationUpdate{Event: job.JobEvent{Update: job.Update{Candidate: cTEAttnMLP, JobID: "4102", State: job.StatePending, Reason: "Priority"}}})
	}},
	// A validation that cannot start, with an error too long for the
	// status line: it opens whole in the error view.
	{name: "error_view", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		m.opts.JobCommand = testJobCommand
		toResults(t, m, f)
		press(m, "v", "enter", "y")
		send(m, validateStartedMsg{err: errNoBuildable})
	}, check: func(t *testing.T, m *App, out string, w, h int) {
		wantText(t, out, "✗ Error", "(--job-python; --job-te yes runs them anyway))")
		wantHelp(t, out, "esc/enter close")
	}},
	{name: "results_validated", setup: func(t *testing.T, m *App, f *fakeBackend, clk *clock) {
		v := goldenValidation(t, m, f)
		real := []engine.Result{jobResult(cNone, 130, "4101"), jobResult(cTEAttnMLP, 100, "4102"), jobResult(cTEAttn, 115, "4103")}
		for i, r := range real {
			v.feed(ValidationUpdate{Event: job.JobDone{Result: r, Done: i + 1, Total: 3}})
		}
		v.feed(ValidationUpdate{Outcome: outcome(real, false)})
		v.end()
	}},
}

// longPath is a path longer than the smaller windows are wide.
const longPath = "/lustre/fsw/portfolios/llm/projects/megatron-bridge/recipes/llama3_70b/h100/cgtune-overrides-te-attn-mlp-w3.yaml"

// wantCandidateRows asserts the space screen lists at least n candidate
// rows (✓ valid, ! will fail, ✗ rejected, › the cursor's).
func wantCandidateRows(t *testing.T, out string, n int) {
	t.Helper()
	rows := 0
	for _, l := range strings.Split(ansi.Strip(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 && slices.Contains([]string{"✓", "!", "✗", "›"}, f[0]) {
			rows++
		}
	}
	if rows < n {
		t.Errorf("the space screen lists %d candidate rows, want at least %d:\n%s", rows, n, out)
	}
}

// wantRankRows asserts the ranking shows at least n rows (ranks 1 to n,
// the winner ★), each name whole.
func wantRankRows(t *testing.T, m *App, out string, n int) {
	t.Helper()
	plain := ansi.Strip(out)
	for i, rk := range m.resScr.ranking()[:n] {
		name := rk.Result.Candidate.Name()
		found := false
		for _, l := range strings.Split(plain, "\n") {
			f := strings.Fields(l)
			if len(f) > 1 && (f[0] == fmt.Sprint(i+1) || f[0] == "★" || f[0] == "›★") && strings.Contains(l, name) {
				found = true
			}
		}
		if !found {
			t.Errorf("ranking row %d (%s) does not show whole:\n%s", i+1, name, plain)
		}
	}
}

// scrollPaneTo presses pgdn until the results pane shows a line starting
// holding prefix.
func scrollPaneTo(t *testing.T, m *App, prefix string) {
	t.Helper()
	for range 20 {
		for _, l := range strings.Split(ansi.Strip(view(m)), "\n") {
			if strings.Contains(l, prefix) {
				return
			}
		}
		press(m, "pgdown")
	}
	t.Fatalf("the pane never shows %q:\n%s", prefix, view(m))
}

// wantPaneEnd pages the results pane to its end and asserts the text
// there ends as want does (nothing of it cut), then pages back.
func wantPaneEnd(t *testing.T, m *App, want string) {
	t.Helper()
	p := m.resScr.pane
	for !p.vp.AtBottom() {
		p.vp.PageDown()
	}
	text := strings.Join(strings.Fields(ansi.Strip(p.vp.GetContent())), " ")
	if !strings.Contains(text, want) {
		t.Errorf("the pane lacks %q:\n%s", want, p.vp.GetContent())
	}
}

// errNoBuildable is a validation error as long as the ones the backend
// gives (search.ValidationTargets with the TE probe's why).
var errNoBuildable = errors.New("/home/user/.cache/cgtune/runs/2026-12-01T11-00-03-llama3_70b-h100: no successful graphed candidate of the search can be built by the jobs' framework (te attn,mlp w3: a transformer_engine graph needs Transformer Engine: the jobs' Python /usr/bin/python3 cannot import it: No module named 'transformer_engine' (--job-python; --job-te yes runs them anyway))")

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
				if s.check != nil {
					s.check(t, m, out, sz.w, sz.h)
				}
				golden.RequireEqual(t, out)
			})
		}
	}
}

// checkFrame asserts the view fills the window exactly: h lines, none
// wider than w, so nothing wraps or scrolls in a real terminal; and the
// key help at the bottom is whole (no key cut to "…").
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
	if help := ansi.Strip(lines[len(lines)-1]); strings.HasSuffix(strings.TrimSpace(help), "…") {
		t.Errorf("the key help is cut: %q", help)
	}
}

// helpLine is the frame's last line (the short key help), plain.
func helpLine(out string) string {
	lines := strings.Split(out, "\n")
	return ansi.Strip(lines[len(lines)-1])
}

// wantHelp asserts the short key help offers each of keys ("enter
// continue"), and noHelp that it offers none of them.
func wantHelp(t *testing.T, out string, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if !strings.Contains(helpLine(out), k) {
			t.Errorf("the key help lacks %q: %q", k, helpLine(out))
		}
	}
}

func noHelp(t *testing.T, out string, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if strings.Contains(helpLine(out), k) {
			t.Errorf("the key help offers %q, which cannot work here: %q", k, helpLine(out))
		}
	}
}

// wantText asserts the frame shows each of texts (plain), on one line or
// wrapped over several.
func wantText(t *testing.T, out string, texts ...string) {
	t.Helper()
	plain := ansi.Strip(out)
	flowed := strings.Join(strings.Fields(plain), " ")
	for _, s := range texts {
		if !strings.Contains(plain, s) && !strings.Contains(flowed, s) {
			t.Errorf("the frame lacks %q:\n%s", s, plain)
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
