package tui

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
)

// newColourModel is newTestModel with the colour styles (dark palette)
// and the model's layout for gpu.
func newColourModel(t *testing.T, f *fakeBackend, model, gpu string, w, h int) *App {
	t.Helper()
	clk := &clock{t: t0}
	m := New(f, Options{Version: "0.1.0-test", Now: clk.now, Model: model, GPUType: gpu})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	g, d, _ := f.GPUs(context.Background())
	m.Update(gpusMsg{gpus: g, driver: d})
	l, _ := f.TeamPresets()
	m.Update(presetsMsg{list: l})
	return m
}

// toSpaceCandidates goes to the space screen, plans and puts the keyboard
// on the candidate list.
func toSpaceCandidates(t *testing.T, m *App, f *fakeBackend) {
	t.Helper()
	press(m, "enter", "enter")
	planNow(t, m, f)
	press(m, "tab")
}

// firstOfKind is the plan row of the first candidate that will fail
// (recipe.WillFailID) or that a rule rejects (any other id).
func firstOfKind(t *testing.T, m *App, willFail bool) int {
	t.Helper()
	for i, p := range m.spaceScr.plan {
		if !p.Valid() && (p.Violations[0].ID == recipe.WillFailID) == willFail {
			return i
		}
	}
	t.Fatalf("the plan has no row of that kind (will fail: %v)", willFail)
	return -1
}

// lineOf is the line of the view that shows candidate c's row.
func lineOf(t *testing.T, m *App, c presets.Candidate) string {
	t.Helper()
	for _, l := range strings.Split(view(m), "\n") {
		if strings.Contains(ansi.Strip(l), " "+c.Name()+" ") {
			return l
		}
	}
	t.Fatalf("no row of %s in:\n%s", c.Name(), view(m))
	return ""
}

// With colour on, the cursor shows on the rows a person opens to read
// why: a candidate that will fail (!) and one the rules reject (✗).
func TestCursorShowsOnWillFailAndRejectedRows(t *testing.T) {
	for _, tc := range []struct {
		name     string
		willFail bool
	}{{"will fail", true}, {"rejected", false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			m := newColourModel(t, f, "qwen3_30b_a3b", "b200", 80, 24)
			toSpaceCandidates(t, m, f)
			row := firstOfKind(t, m, tc.willFail)
			c := m.spaceScr.plan[row].Candidate
			for range row {
				press(m, "down")
			}
			if m.spaceScr.cursor != row {
				t.Fatalf("cursor %d, want %d", m.spaceScr.cursor, row)
			}
			at := lineOf(t, m, c)
			press(m, "tab") // the keyboard back on the toggles: no cursor in the list
			before := lineOf(t, m, c)
			if at == before {
				t.Errorf("the row looks the same with the cursor on it:\n%q", at)
			}
			r, g, b, _ := m.st.Selected.GetBackground().RGBA()
			if bg := fmt.Sprintf("48;2;%d;%d;%d", r>>8, g>>8, b>>8); !strings.Contains(at, bg) || strings.Contains(before, bg) {
				t.Errorf("only the cursor's row should have the selection highlight (%s):\n%q\n%q", bg, before, at)
			}
		})
	}
}

// The GPU screen's footer says what e does now: choose the estimate engine,
// or give it up once chosen.
func TestGPUFooterFollowsTheEstimateChoice(t *testing.T) {
	for _, tc := range []struct {
		name          string
		noDriver      bool
		before, after string
	}{
		{"no driver", true, "e use estimate engine", "e undo estimate engine"},
		{"with GPUs", false, "e estimate", "e measure instead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			m, _ := newTestModel(t, f, 120, 30)
			if tc.noDriver {
				send(m, gpusMsg{err: fmt.Errorf("%w: libnvidia-ml.so.1 not found", ErrNoDriver)})
			}
			press(m, "enter")
			footer := func() string { lines := strings.Split(view(m), "\n"); return lines[len(lines)-1] + " " }
			if !strings.Contains(footer(), tc.before+" ") {
				t.Errorf("before e, the footer lacks %q:\n%s", tc.before, footer())
			}
			press(m, "e")
			if f := footer(); !strings.Contains(f, tc.after+" ") || strings.Contains(f, tc.before+" ") {
				t.Errorf("after e, the footer should say %q, not %q:\n%s", tc.after, tc.before, f)
			}
		})
	}
}

// Before the runner has planned its runs, the run screen says it is
// planning them, not "0/0 runs".
func TestRunScreenBeforeThePlan(t *testing.T) {
	f := newFake(t)
	m, _, _ := startRun(t, f)
	out := view(m)
	if strings.Contains(out, "0/0 runs") || !strings.Contains(out, "planning the runs") {
		t.Errorf("before the plan:\n%s", out)
	}
	playEvents(m, f, 1)
	if out := view(m); !strings.Contains(out, "0/4 runs") {
		t.Errorf("after the plan:\n%s", out)
	}
}

// Stopping a search says what happened: stopped after N of M runs, or,
// when the search had finished every run before the stop took effect (an
// estimate is that fast), that nothing was cut short; never a plain
// "search finished" to a person who asked to stop.
func TestStopSaysWhatHappened(t *testing.T) {
	done := func(f *fakeBackend) search.DoneEvent { return f.events[len(f.events)-1].(search.DoneEvent) }
	t.Run("finished before the stop", func(t *testing.T) {
		f := newFake(t)
		m, _, _ := startRun(t, f)
		playEvents(m, f, len(f.events)-1)
		press(m, "ctrl+c", "y")
		send(m, eventMsg{ev: done(f)})
		if !strings.Contains(m.status, "had finished all 4 runs before the stop took effect") {
			t.Errorf("status %q", m.status)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		f := newFake(t)
		m, _, _ := startRun(t, f)
		playEvents(m, f, 6) // two of four runs
		press(m, "ctrl+c", "y")
		d := done(f)
		d.Interrupted = true
		send(m, eventMsg{ev: d})
		if !strings.Contains(m.status, "search stopped early after 2 of 4 runs") {
			t.Errorf("status %q", m.status)
		}
		press(m, "esc")
		if out := view(m); !strings.Contains(out, "· stopped") || strings.Contains(out, "· done") {
			t.Errorf("the run screen does not say it stopped:\n%s", out)
		}
	})
}

// A layout the person edited says so: the status after each change, the
// model screen, and the layout the search, the report and a saved preset
// take (its source), instead of the recipe's "from MB ..." alone.
func TestEditedLayoutSaysItIsEdited(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	recipe := m.sel.layout.Source
	press(m, "tab", "down", "down", "+") // TP 4 → 8
	if !strings.Contains(m.status, "layout edited: TP 8 (the recipe's default: 4)") {
		t.Errorf("status %q", m.status)
	}
	if out := view(m); !strings.Contains(out, "edited: TP 8 (was 4)") {
		t.Errorf("the model screen does not say the layout is edited:\n%s", out)
	}
	src := m.request().Layout.Source
	if !strings.HasPrefix(src, "edited in cgtune: TP 8 (was 4); from ") || !strings.HasSuffix(src, recipe) {
		t.Errorf("the search's layout source %q; want the edit, then %q", src, recipe)
	}
	p, err := m.resScr.teamPreset("edited")
	if err != nil || p.Layout.Source != src {
		t.Errorf("saved preset's source %q (%v), want %q", p.Layout.Source, err, src)
	}
	press(m, "-") // back to the recipe's
	if m.request().Layout.Source != recipe || !strings.Contains(m.status, "TP 4, as the recipe's default") {
		t.Errorf("back to the default: source %q, status %q", m.request().Layout.Source, m.status)
	}
}

// A field set back to the layout's default is no longer an edit: after a
// change of GPU type the status names the edits the "edited:" line lists,
// no more (issue: TP set back to 1 was still "your TP").
func TestTPResetIsNotAnEdit(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	toQwenTPReset(t, m)
	status := m.status
	_, kept, ok := strings.Cut(status, "with your ")
	if !ok {
		t.Fatalf("status %q names no kept edit", status)
	}
	var edited []string
	for _, e := range m.sel.layoutEdits() {
		edited = append(edited, strings.Fields(e)[0])
	}
	if kept != strings.Join(edited, ", ") || strings.Contains(kept, "TP") {
		t.Errorf("status keeps %q, the edited line lists %q", kept, edited)
	}
	out := view(m)
	if !strings.Contains(out, "edited: Capacity 1.0 (was —), Pad on (was off)") || strings.Contains(out, "TP 1 (was") {
		t.Errorf("the edited line:\n%s", out)
	}
}

// toQwenTPReset edits the MoE model's capacity and padding, sets TP to 2
// and back to 1 (its default), then changes the GPU type.
func toQwenTPReset(t *testing.T, m *App) {
	t.Helper()
	press(m, "/", "q", "w", "e", "n", "enter")
	moveTo(t, m, "Capacity")
	press(m, "1", ".", "0", "enter")
	moveTo(t, m, "Pad")
	press(m, "+")
	moveTo(t, m, "TP")
	if m.sel.layout.TP > 1 {
		t.Fatalf("the test wants a layout with TP 1, got %d", m.sel.layout.TP)
	}
	press(m, "+", "-", "g")
}

// moveTo puts the layout editor's cursor on the field of that label.
func moveTo(t *testing.T, m *App, label string) {
	t.Helper()
	m.modelScr.focus = focusLayout
	for r, row := range layoutGrid() {
		for c, f := range row {
			if f.label == label {
				m.modelScr.row, m.modelScr.col = r, c
				return
			}
		}
	}
	t.Fatalf("no field %q", label)
}

// The layout editor sets what a "will fail" note recommends (drop-and-pad:
// a capacity factor and padding), the dispatcher and the recompute, checks
// them inline, and the search's layout carries them.
func TestLayoutEditorMoEAndRecompute(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	m.opts.Model = "qwen3_30b_a3b"
	m.modelScr.selectInitial()

	moveTo(t, m, "Pad")
	press(m, "+")
	if m.sel.err == nil || !strings.Contains(m.sel.err.Error(), "moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity") {
		t.Errorf("Pad on without a capacity factor: err %v", m.sel.err)
	}
	if out := view(m); !strings.Contains(out, "✗ Pad: moe_expert_capacity_factor must be set") {
		t.Errorf("the error is not shown inline:\n%s", out)
	}
	moveTo(t, m, "Capacity")
	press(m, "1", ".", "5", "enter")
	if m.sel.err != nil {
		t.Errorf("drop-and-pad at 1.5: %v", m.sel.err)
	}
	moveTo(t, m, "Dispatcher")
	was := m.sel.layout.Dispatcher
	press(m, "+")
	moveTo(t, m, "Recompute")
	for recomputeOf(m.sel.layout) != "full" {
		press(m, "+")
	}
	l := m.request().Layout
	if l.Settings[keyCapacity] != "1.5" || l.Settings[keyPad] != "true" || l.Dispatcher == was || !l.FullRecompute() || l.RecomputeLayers != 1 {
		t.Errorf("the search's layout: settings %v, dispatcher %q (was %q), recompute %q × %d", l.Settings, l.Dispatcher, was, l.RecomputeGranularity, l.RecomputeLayers)
	}
	// The search plans with them: drop-and-pad lets the whole-layer graphs
	// capture (no "will fail"), full recompute leaves the full iteration.
	press(m, "esc", "enter", "enter")
	planNow(t, m, f)
	if got := f.planned[len(f.planned)-1].Layout; got.Settings[keyCapacity] != "1.5" || !got.FullRecompute() {
		t.Errorf("planned with %+v", got)
	}
	m.screen = screenModel
	moveTo(t, m, "Rc layers")
	press(m, "9", "9", "9", "enter")
	if m.sel.err == nil || !strings.Contains(m.sel.err.Error(), "recompute_num_layers must be between 1 and num_layers_per_pipeline_rank: 48") {
		t.Errorf("999 recompute layers: err %v", m.sel.err)
	}
	moveTo(t, m, "Capacity")
	press(m, "0", "enter")
	if !m.statusErr || !strings.Contains(m.status, "Capacity: \"0\": want a factor above 0") {
		t.Errorf("capacity 0: status %q", m.status)
	}
}

// On a dense model the MoE fields show "—" and say why they do not apply.
func TestLayoutEditorDenseHasNoMoESettings(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	before := m.request().Layout
	for _, label := range []string{"Dispatcher", "Capacity", "Pad"} {
		moveTo(t, m, label)
		if got := m.modelScr.field().get(m.modelScr); got != none {
			t.Errorf("%s shows %q on a dense model", label, got)
		}
		press(m, "+")
		if !m.statusErr || !strings.Contains(m.status, "llama3_70b is dense: the MoE settings do not apply") {
			t.Errorf("%s: status %q", label, m.status)
		}
	}
	if l := m.request().Layout; l.Dispatcher != "" || !maps.Equal(l.Settings, before.Settings) {
		t.Errorf("the layout changed: %+v, was %+v", l, before)
	}
}

// --set values of the fields the editor shows start every layout the
// person selects, as edits they see.
func TestLayoutSetsFromFlagsAreEdits(t *testing.T) {
	f := newFake(t)
	m := New(f, Options{NoColor: true, Model: "qwen3_30b_a3b", GPUType: "h100",
		LayoutSets: map[string]string{keyCapacity: "1.0", keyPad: "true"}})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	if l := m.request().Layout; l.Settings[keyCapacity] != "1.0" || l.Settings[keyPad] != "true" || !strings.HasPrefix(l.Source, "edited in cgtune: Capacity 1.0 (was —), Pad on (was off)") {
		t.Errorf("layout %+v", l)
	}
	m.modelScr.cycleGPUType(1) // another GPU type keeps them
	if l := m.request().Layout; l.Settings[keyCapacity] != "1.0" || l.Settings[keyPad] != "true" {
		t.Errorf("after the GPU type: %+v", l.Settings)
	}
}

// The full help (?) shows every key of the screen uncut, at the size the
// README calls comfortable and at the smallest.
func TestFullHelpShowsEveryKey(t *testing.T) {
	for _, sz := range []struct{ w, h int }{{80, 24}, {60, 16}} {
		t.Run(fmt.Sprintf("%dx%d", sz.w, sz.h), func(t *testing.T) {
			f := newFake(t)
			m, _ := newTestModel(t, f, sz.w, sz.h)
			toResults(t, m, f)
			press(m, "?")
			out := view(m)
			checkFrame(t, out, sz.w, sz.h)
			for _, g := range m.screenHelp().FullHelp() {
				for _, b := range g {
					if want := b.Help().Desc; !strings.Contains(out, want) && !strings.Contains(want, "more keys") {
						t.Errorf("the help lacks %q:\n%s", want, out)
					}
				}
			}
			if strings.Contains(strings.Join(strings.Split(out, "\n")[sz.h-3:], "\n"), "…") {
				t.Errorf("the help is cut:\n%s", out)
			}
		})
	}
}

// Below the minimum size the message is wrapped, not cut.
func TestTooSmallMessageIsWhole(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 40, 10)
	out := view(m)
	checkFrame(t, out, 40, 10)
	joined := strings.Join(strings.Fields(out), " ")
	if want := "cgtune needs a window of at least 60×16 (80×24 is comfortable); this one is 40×10."; !strings.Contains(joined, want) {
		t.Errorf("message %q, want %q", joined, want)
	}
}

// In a wide window the candidate list shows the rules, "will fail" notes
// and other spellings in full, wrapped under their column.
func TestWideSpaceShowsNotesInFull(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 160, 48)
	m.opts.Model = "qwen3_30b_a3b"
	m.modelScr.selectInitial()
	press(m, "enter", "enter")
	planNow(t, m, f)
	out := view(m)
	checkFrame(t, out, 160, 48)
	// Compared without white space: a wrapped line may break after a
	// hyphen.
	joined := strings.Join(strings.Fields(out), "")
	p := m.spaceScr.plan[firstOfKind(t, m, true)]
	if want := strings.Join(strings.Fields("will fail: "+p.Violations[0].Message), ""); !strings.Contains(joined, want) {
		t.Errorf("the will-fail note is cut; want %q in:\n%s", want, out)
	}
}

// The written file's status names the absolute path the backend wrote.
func TestReportStatusNamesTheWrittenPath(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	toResults(t, m, f)
	press(m, "r", "ctrl+u")
	for _, r := range "r.md" {
		press(m, string(r))
	}
	send(m, press(m, "enter")())
	want := "wrote the report " + filepath.Join(f.dir, "r.md") + " and its plot " + filepath.Join(f.dir, "r.svg")
	if m.status != want {
		t.Errorf("status %q, want %q", m.status, want)
	}
}

// At the smallest window the layout editor shows its fields one per line,
// each value whole, and the arrows walk them in that order.
func TestLayoutEditorFitsTheSmallestWindow(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, minWidth, minHeight)
	m.opts.Model = "qwen3_30b_a3b"
	m.modelScr.selectInitial()
	press(m, "tab")
	for i, cell := range gridCells() {
		if i > 0 {
			press(m, "down")
		}
		if got := [2]int{m.modelScr.row, m.modelScr.col}; got != cell {
			t.Fatalf("step %d: cursor on %v, want %v", i, got, cell)
		}
		fl := layoutGrid()[cell[0]][cell[1]]
		want := "› " + padRight(fl.label, gridLabelW) + "[" + fl.get(m.modelScr) + "]"
		if out := view(m); !strings.Contains(out, want) {
			t.Errorf("%s: %q not on screen:\n%s", fl.label, want, out)
		}
	}
}

// --format picks the overrides format the results show first, whatever
// resets the results screen for the search.
func TestResultsShowTheFormatAskedFor(t *testing.T) {
	f := newFake(t)
	clk := &clock{t: t0}
	m := New(f, Options{NoColor: true, Version: "0.1.0-test", Now: clk.now, Model: "llama3_70b", GPUType: "h100", Format: "dotlist"})
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 48})
	g, d, err := f.GPUs(context.Background())
	m.Update(gpusMsg{gpus: g, driver: d, err: err})
	l, _ := f.TeamPresets()
	m.Update(presetsMsg{list: l})
	toResults(t, m, f)
	if got := m.resScr.format(); got != "dotlist" {
		t.Errorf("the results show %s, want --format's dotlist", got)
	}
}

// At 60×16 the space screen keeps three candidate rows: the toggles stand
// one row a line, the row under the cursor scrolled to it, so that every
// toggle can still be reached and seen.
func TestSpaceCompactTogglesFollowTheCursor(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 60, 16)
	press(m, "enter", "enter")
	planNow(t, m, f)
	out := view(m)
	wantCandidateRows(t, out, minCandidateRows)
	if strings.Contains(out, "mamba") || !strings.Contains(out, "›") {
		t.Fatalf("the scopes should stand on one line, the last ones behind ›:\n%s", out)
	}
	press(m, "down") // the scopes
	for range len(m.space.toggleRows()[1].items) - 1 {
		press(m, "right")
	}
	out = view(m)
	if !strings.Contains(out, ">[x] mamba<") || !strings.Contains(out, "‹") {
		t.Errorf("the cursor's toggle (mamba) does not show:\n%s", out)
	}
	wantCandidateRows(t, out, minCandidateRows)
	press(m, "space")
	if !strings.Contains(view(m), ">[ ] mamba<") {
		t.Errorf("space did not toggle mamba:\n%s", view(m))
	}
}
