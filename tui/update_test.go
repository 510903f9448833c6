package tui

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"go.yaml.in/yaml/v3"

	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
	"cgtune/stepmodel"
)

func isQuit(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	_, ok := cmd().(tea.QuitMsg)
	return ok
}

func view(m *App) string { return m.View().Content }

func TestNoColorIsPlainText(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	if strings.Contains(view(m), "\x1b[") {
		t.Errorf("NO_COLOR view has escape sequences:\n%q", view(m))
	}
	colour := New(f, Options{Model: "llama3_70b"})
	colour.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	if !strings.Contains(view(colour), "\x1b[") {
		t.Error("colour view has no escape sequences")
	}
}

func TestBackgroundColourRebuildsStyles(t *testing.T) {
	f := newFake(t)
	m := New(f, Options{Model: "llama3_70b"})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	dark := view(m)
	m.Update(tea.BackgroundColorMsg{Color: color.White})
	if m.isDark {
		t.Fatal("a white background should select the light palette")
	}
	if view(m) == dark {
		t.Error("light palette renders the same as dark")
	}
	// With NO_COLOR the background changes nothing.
	p, _ := newTestModel(t, f, 80, 24)
	before := view(p)
	p.Update(tea.BackgroundColorMsg{Color: color.White})
	if view(p) != before {
		t.Error("NO_COLOR view changed with the background colour")
	}
}

func TestResizeKeepsTheFrame(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	for _, sz := range [][2]int{{80, 24}, {100, 30}, {160, 48}, {200, 60}, {81, 25}} {
		m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		checkFrame(t, view(m), sz[0], sz[1])
	}
	m.Update(tea.WindowSizeMsg{Width: 40, Height: 10})
	if !strings.Contains(view(m), "needs a window of at least") {
		t.Errorf("a 40×10 window should say it is too small:\n%s", view(m))
	}
}

// "/" opens the filter: then letters are text (q does not quit), enter
// closes it; outside the filter, letters are commands.
func TestFilterTypesInsteadOfQuitting(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	press(m, "/")
	if cmd := press(m, "q"); isQuit(cmd) {
		t.Fatal("q in the model filter quit the program")
	}
	press(m, "w", "e", "n")
	if m.modelScr.filter != "qwen" {
		t.Fatalf("filter = %q, want qwen", m.modelScr.filter)
	}
	items := m.modelScr.listItems()
	if len(items) != 3 || items[0].name() != "qwen3_30b_a3b" { // the three Qwen3 built-ins
		t.Fatalf("filtered items: %v", names(items))
	}
	if m.sel.model.Name != "qwen3_30b_a3b" {
		t.Errorf("selection %s does not follow the filtered cursor", m.sel.model.Name)
	}
	press(m, "backspace")
	if m.modelScr.filter != "qwe" {
		t.Errorf("backspace: filter = %q", m.modelScr.filter)
	}
	press(m, "esc")
	if m.modelScr.filter != "" || m.modelScr.filtering || len(m.modelScr.listItems()) != len(m.modelScr.builtins)+len(f.presets) {
		t.Errorf("esc should clear the filter; %d items", len(m.modelScr.listItems()))
	}
	if isQuit(press(m, "ctrl+c")) == false {
		t.Error("ctrl+c does not quit on the model screen")
	}
	// Outside the filter, q quits.
	if !isQuit(press(m, "q")) {
		t.Error("q outside the filter does not quit")
	}
}

// Enter with a filter that matches nothing does not continue with a model
// the list no longer shows.
func TestEnterWithNoMatchStays(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	press(m, "/", "z", "z", "z", "enter")
	if m.screen != screenModel || !m.statusErr || !strings.Contains(m.status, `matches the filter "zzz"`) {
		t.Errorf("screen %d, status %q", m.screen, m.status)
	}
	// With a match, enter closes the filter, a second one continues.
	press(m, "esc", "/", "q", "w", "e", "n", "enter")
	if m.modelScr.filtering || m.screen != screenModel {
		t.Fatalf("first enter: filtering %v, screen %d", m.modelScr.filtering, m.screen)
	}
	press(m, "enter")
	if m.screen != screenGPU || m.sel.model.Name != "qwen3_30b_a3b" {
		t.Errorf("second enter: screen %d, model %s", m.screen, m.sel.model.Name)
	}
}

func names(items []listItem) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.name())
	}
	return out
}

// The GPU type moves through the model's GPU types both ways and wraps
// around at both ends, from the model list (right, left, g) and from the
// layout editor (g).
func TestGPUTypeCycles(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	gpus := m.sel.model.GPUs()
	if len(gpus) < 3 || m.sel.layout.GPU != gpus[0] {
		t.Fatalf("%s on %s, GPU types %v: the test needs three types and to start on the first", m.sel.model.Name, m.sel.layout.GPU, gpus)
	}
	press(m, "left")
	if last := gpus[len(gpus)-1]; m.sel.layout.GPU != last {
		t.Fatalf("left from the first GPU type: %s, want the last, %s", m.sel.layout.GPU, last)
	}
	press(m, "right", "right")
	if m.sel.layout.GPU != gpus[1] {
		t.Fatalf("GPU type %s, want %s", m.sel.layout.GPU, gpus[1])
	}
	want, _ := m.sel.model.Layout(gpus[1])
	if m.sel.layout.NumGPUs != want.NumGPUs || m.sel.layout.TP != want.TP {
		t.Errorf("layout %+v is not the model's default for %s", m.sel.layout, gpus[1])
	}
	press(m, "left")
	if m.sel.layout.GPU != gpus[0] {
		t.Errorf("left did not go back: %s", m.sel.layout.GPU)
	}
	press(m, "g")
	if m.sel.layout.GPU != gpus[1] {
		t.Errorf("g in the model list: %s", m.sel.layout.GPU)
	}
	press(m, "tab", "g")
	if m.sel.layout.GPU != gpus[2] {
		t.Errorf("g in the layout editor: %s", m.sel.layout.GPU)
	}
	for range gpus[3:] {
		press(m, "g")
	}
	press(m, "g")
	if m.sel.layout.GPU != gpus[0] {
		t.Errorf("g past the last GPU type: %s, want the first, %s", m.sel.layout.GPU, gpus[0])
	}
}

// A change of GPU type keeps the fields the person edited.
func TestGPUTypeKeepsEdits(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	press(m, "tab", "down", "down", "8", "enter") // TP 8
	if m.sel.layout.TP != 8 {
		t.Fatalf("TP %d", m.sel.layout.TP)
	}
	press(m, "g")
	def, _ := m.sel.model.Layout(m.sel.layout.GPU)
	if m.sel.layout.GPU == "h100" || m.sel.layout.TP != 8 || m.sel.layout.GBS != def.GBS || !strings.Contains(m.status, "with your TP") {
		t.Errorf("layout %+v (status %q)", m.sel.layout, m.status)
	}
}

func TestLayoutEditValidatesInline(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	press(m, "tab", "down", "down") // TP
	if m.modelScr.field().label != "TP" {
		t.Fatalf("cursor on %s", m.modelScr.field().label)
	}
	tp := m.sel.layout.TP
	press(m, "+")
	if m.sel.layout.TP != tp*2 {
		t.Errorf("+ on TP: %d, want %d", m.sel.layout.TP, tp*2)
	}
	press(m, "-")
	press(m, "3", "enter")
	if m.sel.layout.TP != 3 {
		t.Fatalf("typed TP = %d", m.sel.layout.TP)
	}
	if m.sel.err == nil {
		t.Fatal("TP 3 on 64 heads with 64 GPUs should not validate")
	}
	if !strings.Contains(view(m), "✗ layout for h100") {
		t.Errorf("the error is not shown inline:\n%s", view(m))
	}
	press(m, "enter")
	if m.screen != screenModel || !m.statusErr {
		t.Error("enter with an invalid layout left the model screen")
	}
	press(m, "4", "enter")
	if m.sel.err != nil {
		t.Fatalf("TP 4 is the default and should validate: %v", m.sel.err)
	}
	if m.screen != screenModel {
		t.Fatal("enter after typing a number should set it, not continue")
	}
	// esc while typing cancels the edit.
	press(m, "8", "esc")
	if m.sel.layout.TP != 4 || m.modelScr.editing {
		t.Errorf("esc kept the edit: TP %d", m.sel.layout.TP)
	}
}

// v cycles through every MB version the command line takes (0.4, the
// default, first), in the list and in the editor.
func TestMBridgeToggle(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	if m.sel.mbridge != "0.4" {
		t.Fatalf("default MB %s", m.sel.mbridge)
	}
	if !strings.Contains(view(m), "G2") {
		t.Error("the view does not say what 0.4 changes")
	}
	var seen []string
	for range presets.MBridgeVersions {
		press(m, "v")
		seen = append(seen, m.sel.mbridge)
	}
	if strings.Join(seen, " ") != "0.5 0.6 0.7 0.3 0.4" {
		t.Errorf("v cycles %v", seen)
	}
	press(m, "tab", "v")
	if m.sel.mbridge != "0.5" || !strings.Contains(view(m), "G3") {
		t.Errorf("v in the editor: MB %s", m.sel.mbridge)
	}
}

func TestTeamPresetLoadsThroughBackend(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	cmd := press(m, "/", "t", "e", "a", "m")
	if cmd == nil {
		t.Fatal("moving onto a preset should load it through the backend")
	}
	msg, ok := cmd().(presetLoadedMsg)
	if !ok || msg.err != nil {
		t.Fatalf("load: %#v", msg)
	}
	send(m, msg)
	if m.sel.preset != "team-llama70" || m.sel.mbridge != "0.4" || m.sel.layout.GPU != "h100" {
		t.Errorf("preset not applied: %+v", m.sel)
	}
	sp := m.space.Space()
	if !slices.Equal(sp.Impls, []string{"transformer_engine"}) || len(sp.Scopes) != 2 {
		t.Errorf("preset space not applied: %+v", sp)
	}
	// Loaded once: coming back to it needs no second load.
	press(m, "backspace", "backspace", "backspace", "backspace")
	if cmd := press(m, "t"); cmd != nil {
		t.Error("the preset was loaded a second time")
	}
	// A broken preset is listed but not loaded.
	m.modelScr.filter, m.modelScr.cursor = "broken", 0
	if cmd := m.modelScr.onCursor(); cmd != nil {
		t.Error("a broken preset was sent to the backend")
	}
}

func TestGPUScreenSelection(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	press(m, "enter")
	if m.screen != screenGPU {
		t.Fatalf("screen %d", m.screen)
	}
	// The idle GPU is preselected, the busy one is not.
	if !m.gpuSel[0] || m.gpuSel[1] {
		t.Fatalf("preselection %v", m.gpuSel)
	}
	press(m, "space")
	if m.gpuSel[0] {
		t.Fatal("space did not deselect GPU 0")
	}
	press(m, "enter")
	if m.screen != screenGPU || !m.statusErr {
		t.Fatal("enter with no GPU selected should stay and say why")
	}
	press(m, "down", "space")
	if !m.gpuSel[1] {
		t.Fatal("GPU 1 not selected")
	}
	if !strings.Contains(view(m), "other processes") {
		t.Error("no warning about the busy GPU")
	}
	if got := m.request().GPUs; !slices.Equal(got, []int{1}) {
		t.Errorf("request GPUs %v", got)
	}
	press(m, "a")
	if got := m.request().GPUs; !slices.Equal(got, []int{0, 1}) {
		t.Errorf("a: request GPUs %v", got)
	}
	if isQuit(press(m, "q")) == false {
		t.Error("q does not quit on the GPU screen")
	}
	press(m, "esc")
	if m.screen != screenModel {
		t.Error("esc does not go back")
	}
}

func TestNoDriverOffersEstimate(t *testing.T) {
	f := newFake(t)
	f.gpus, f.gpuErr = nil, fmt.Errorf("%w (libnvidia-ml.so.1 not found)", ErrNoDriver)
	m, _ := newTestModel(t, f, 80, 24)
	press(m, "enter")
	v := view(m)
	if !strings.Contains(v, "No NVIDIA driver") || !strings.Contains(v, "Press e") {
		t.Fatalf("no-driver screen does not say so plainly:\n%s", v)
	}
	press(m, "enter")
	if m.screen != screenGPU {
		t.Fatal("enter without a driver and without the estimate engine moved on")
	}
	press(m, "e")
	if !m.estimate || !strings.Contains(view(m), "ESTIMATE") {
		t.Fatal("e did not choose the estimate engine")
	}
	press(m, "enter")
	if m.screen != screenSpace {
		t.Fatalf("screen %d after choosing the estimate engine", m.screen)
	}
	req := m.request()
	if !req.Estimate || len(req.GPUs) != 0 {
		t.Errorf("request %+v", req)
	}
	// Labelled everywhere afterwards.
	planNow(t, m, f)
	if !strings.Contains(view(m), "ESTIMATE") {
		t.Error("space screen is not labelled ESTIMATE")
	}
}

func TestSpaceToggles(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	press(m, "enter", "enter")
	if m.screen != screenSpace || !m.spaceScr.planning {
		t.Fatalf("screen %d planning %v", m.screen, m.spaceScr.planning)
	}
	// The same default warm-ups as the headless search.
	if sp := m.space.Space(); sp.Scopes != nil || !slices.Equal(sp.Warmups, presets.DefaultWarmups()) {
		t.Fatalf("default space %+v", sp)
	}
	seq := m.spaceScr.planSeq
	planNow(t, m, f)
	if m.spaceScr.validCount() == 0 || m.spaceScr.validCount() == len(m.spaceScr.plan) {
		t.Fatalf("plan should have valid and rejected rows: %d of %d", m.spaceScr.validCount(), len(m.spaceScr.plan))
	}
	// Rejected rows come after the valid ones, with their rule id shown.
	for i := 1; i < len(m.spaceScr.plan); i++ {
		if m.spaceScr.plan[i].Valid() && !m.spaceScr.plan[i-1].Valid() {
			t.Fatal("a valid candidate is listed after a rejected one")
		}
	}
	if !strings.Contains(view(m), m.spaceScr.plan[len(m.spaceScr.plan)-1].Violations[0].ID) {
		t.Error("rule id of a rejected candidate not shown")
	}
	// Turn the whole layer off: explicit sets, every non-empty subset.
	press(m, "down", "space")
	sp := m.space.Space()
	if len(sp.Scopes) != 1<<len(presets.Scopes)-1 {
		t.Errorf("%d scope sets, want %d", len(sp.Scopes), 1<<len(presets.Scopes)-1)
	}
	if slices.ContainsFunc(sp.Scopes, func(s []string) bool { return len(s) == 0 }) {
		t.Error("whole layer still in the space")
	}
	if m.spaceScr.planSeq == seq {
		t.Error("toggling did not re-plan")
	}
	// A stale plan answer is dropped.
	send(m, planMsg{seq: seq, plan: nil})
	if !m.spaceScr.planning {
		t.Error("a stale plan answer was taken")
	}
	// Impls row: none off.
	press(m, "up", "space")
	if slices.Contains(m.space.Space().Impls, "none") {
		t.Error("none still in the impls")
	}
	// Warm-ups: everything off is an error, not a plan.
	press(m, "down", "down", "a", "a")
	if m.space.problem() == "" || m.spaceScr.planErr == nil {
		t.Errorf("no warm-up should be a problem: %q %v", m.space.problem(), m.spaceScr.planErr)
	}
	press(m, "a")
	if !slices.Equal(m.space.Space().Warmups, []int{1, 2, 3, 5, 10}) {
		t.Errorf("a: warm-ups %v", m.space.Space().Warmups)
	}
	// The cursor stays on the row's items: far right on the scopes, then
	// down to the shorter warm-up row and one left is its next-to-last.
	press(m, "up", "right", "right", "right", "right", "right", "right", "right", "right", "right", "down", "left", "space")
	if !slices.Equal(m.space.Space().Warmups, []int{1, 2, 3, 10}) {
		t.Errorf("left from the clamped column toggled the wrong warm-up: %v", m.space.Space().Warmups)
	}
	press(m, "s")
	if m.strategy != "exhaustive" {
		t.Errorf("s: strategy %s", m.strategy)
	}
	press(m, "+")
	if m.budget != Budgets[slices.Index(Budgets, m.budget)] || m.budget <= 10*60e9 {
		t.Errorf("+: budget %v", m.budget)
	}
	if got := m.request(); got.Strategy != "exhaustive" || got.Budget != m.budget {
		t.Errorf("request %+v", got)
	}
}

func TestStartNeedsValidCandidates(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	press(m, "enter", "enter")
	send(m, planMsg{seq: m.spaceScr.planSeq, plan: []search.Planned{{Candidate: cNone, Violations: []recipe.Violation{{ID: "X", Message: "no"}}}}})
	press(m, "enter")
	if m.screen != screenSpace || m.run != nil {
		t.Error("a search started with no valid candidate")
	}
}

// startRun gets a model to the run screen with a context it can observe.
func startRun(t *testing.T, f *fakeBackend) (*App, *clock, context.Context) {
	t.Helper()
	m, clk := newTestModel(t, f, 80, 24)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	m.opts.Context = ctx
	press(m, "enter", "enter")
	planNow(t, m, f)
	press(m, "enter")
	if m.screen != screenRun || m.run == nil {
		t.Fatalf("screen %d run %v", m.screen, m.run)
	}
	return m, clk, ctx
}

func TestRunScreenFollowsEvents(t *testing.T) {
	f := newFake(t)
	m, _, _ := startRun(t, f)
	playEvents(m, f, len(f.events)-2)
	r := m.run
	if r.done != 3 || r.total != 4 {
		t.Errorf("progress %d/%d", r.done, r.total)
	}
	states := map[string]string{}
	for _, row := range r.rows {
		states[row.cand.Key()] = row.state
	}
	if states[cTEAttn.Key()] != stDone || states[cLocalFull.Key()] != stFailed || states[cTEAttnMLP.Key()] != stRunning {
		t.Errorf("row states %v", states)
	}
	if got := r.mem[0].UsedMiB; got != 61_234 {
		t.Errorf("memory gauge reads %d MiB", got)
	}
	v := view(m)
	for _, want := range []string{"59.8/140.4 GiB", "oom", "te attn,mlp w3 on GPU 0", "ETA"} {
		if !strings.Contains(v, want) {
			t.Errorf("run view lacks %q:\n%s", want, v)
		}
	}
	// A new candidate without steps yet: the chart keeps the last one's.
	send(m, eventMsg{ev: f.events[len(f.events)-2]})
	send(m, eventMsg{ev: search.StartEvent{Candidate: cNone, GPU: 0, Round: 2, Steps: 16}})
	if v := view(m); !strings.Contains(v, "te attn,mlp w3 on GPU 0 · previous candidate") {
		t.Errorf("the chart dropped the finished candidate's steps:\n%s", v)
	}
	// The DoneEvent moves to the results.
	send(m, eventMsg{ev: f.events[len(f.events)-1]})
	if m.screen != screenResults || m.done == nil {
		t.Fatalf("screen %d after DoneEvent", m.screen)
	}
}

func TestStopAsksAndKeepsPartialResults(t *testing.T) {
	f := newFake(t)
	m, _, _ := startRun(t, f)
	cmd := press(m, "ctrl+c")
	if isQuit(cmd) || !m.runScr.confirm {
		t.Fatal("ctrl+c on the run screen should ask, not quit")
	}
	press(m, "n")
	if m.runScr.confirm || m.run.stopping {
		t.Fatal("n should keep the search running")
	}
	press(m, "q")
	var cancelled bool
	r := m.run
	inner := r.cancel
	r.cancel = func() { cancelled = true; inner() }
	press(m, "y")
	if !cancelled || !r.stopping {
		t.Fatal("y did not cancel the search's context")
	}
	if !strings.Contains(view(m), "stopping") {
		t.Error("the run screen does not say it is stopping")
	}
	partial := search.DoneEvent{Interrupted: true, Ranking: []search.Ranked{{Rank: 1, Result: result(cTEAttn, 112, 900), Fits: true}}}
	w := partial.Ranking[0]
	partial.Winner = &w
	send(m, eventMsg{ev: partial})
	if m.screen != screenResults || !strings.Contains(view(m), "stopped early") {
		t.Errorf("partial results not shown:\n%s", view(m))
	}
	if !isQuit(press(m, "q")) {
		t.Error("q should quit on the results screen")
	}
}

func TestSecondCtrlCWhileStoppingQuits(t *testing.T) {
	f := newFake(t)
	m, _, _ := startRun(t, f)
	press(m, "q", "y")
	if !isQuit(press(m, "ctrl+c")) {
		t.Error("ctrl+c while stopping should quit")
	}
}

func TestStartFailureIsShown(t *testing.T) {
	f := newFake(t)
	m, _, _ := startRun(t, f)
	send(m, startedMsg{err: errors.New("GPU 0: worker: exit status 3")})
	if !m.run.finished || !strings.Contains(view(m), "search did not start") {
		t.Errorf("start failure not shown:\n%s", view(m))
	}
}

func finishRun(t *testing.T, f *fakeBackend) *App {
	t.Helper()
	m, _, _ := startRun(t, f)
	playEvents(m, f, -1)
	if m.screen != screenResults {
		t.Fatalf("screen %d", m.screen)
	}
	return m
}

func TestResultsFormatsAndWrite(t *testing.T) {
	f := newFake(t)
	m := finishRun(t, f)
	if !strings.Contains(view(m), "cuda_graph_scope: [attn, mlp]") {
		t.Fatalf("winner's YAML overrides not shown:\n%s", view(m))
	}
	for _, want := range recipe.Formats[1:] {
		press(m, "f")
		if m.resScr.format() != want {
			t.Fatalf("f: format %s, want %s", m.resScr.format(), want)
		}
	}
	press(m, "f") // back to yaml
	press(m, "w")
	if m.resScr.prompt != promptPath || m.resScr.input != "./cgtune-overrides.yaml" {
		t.Fatalf("prompt %d %q", m.resScr.prompt, m.resScr.input)
	}
	// Keys are text in the prompt: q does not quit.
	if isQuit(press(m, "q")) {
		t.Fatal("q quit from the path prompt")
	}
	press(m, "ctrl+u")
	for _, c := range "out.yaml" {
		press(m, string(c))
	}
	cmd := press(m, "enter")
	if cmd == nil {
		t.Fatal("enter did not write")
	}
	send(m, cmd())
	want := winnerFile(t, m.request(), m.done)
	if got := mustRead(t, f.dir+"/out.yaml"); got != want {
		t.Errorf("file:\n%s\nwant:\n%s", got, want)
	}
	// The status names the file by the absolute path the backend wrote.
	if !strings.HasPrefix(m.status, "wrote "+filepath.Join(f.dir, "out.yaml")+" (yaml") {
		t.Errorf("status %q", m.status)
	}
	// The cursor picks whose overrides are shown.
	press(m, "down")
	if !strings.Contains(view(m), "cuda_graph_scope: [attn]") {
		t.Error("moving the cursor did not show the second candidate's overrides")
	}
	press(m, "down", "down")
	press(m, "w")
	if m.resScr.prompt != promptNone || !m.statusErr {
		t.Error("writing a failed candidate's overrides should be refused")
	}
}

func TestSaveRunAsPreset(t *testing.T) {
	f := newFake(t)
	m := finishRun(t, f)
	press(m, "p")
	if m.resScr.prompt != promptName || m.resScr.input != "llama3_70b-h100" {
		t.Fatalf("prompt %d %q", m.resScr.prompt, m.resScr.input)
	}
	press(m, "ctrl+u", "B", "a", "d", "enter")
	if m.resScr.prompt != promptName || !m.statusErr {
		t.Fatal("an invalid name was accepted")
	}
	press(m, "ctrl+u")
	for _, c := range "tuned-70b" {
		press(m, string(c))
	}
	f.existing["tuned-70b"] = true
	cmd := press(m, "enter")
	send(m, cmd())
	if m.resScr.prompt != promptOverwrite {
		t.Fatalf("an existing preset should ask; prompt %d, status %q", m.resScr.prompt, m.status)
	}
	cmd = press(m, "y")
	msg := cmd()
	refresh := send(m, msg)
	if refresh == nil {
		t.Error("the preset list is not refreshed after a save")
	}
	if len(f.saved) != 1 {
		t.Fatalf("saved %d presets", len(f.saved))
	}
	p := f.saved[0]
	if err := p.Validate(); err != nil {
		t.Fatalf("saved preset does not validate: %v", err)
	}
	r := p.Result
	if p.Model != "llama3_70b" || p.GPU != "h100" || p.MBridge != "0.4" || r == nil {
		t.Fatalf("preset %+v", p)
	}
	if r.Winner.Key() != cTEAttnMLP.Key() || r.StepMS != 104 || r.EagerStepMS != 130 || r.Engine != "measured" ||
		r.GPUName != "NVIDIA H200" || r.DriverVersion != "580.65.06" || r.CgtuneVersion != "0.1.0-test" || r.MemoryMiB != 2800 || !r.MeasuredAt.Equal(t0) {
		t.Errorf("result %+v", r)
	}
	if len(p.Space.Impls) != 3 || !slices.Equal(p.Space.Warmups, presets.DefaultWarmups()) {
		t.Errorf("space %+v", p.Space)
	}
}

func TestEstimateRunIsLabelled(t *testing.T) {
	f := newFake(t)
	f.gpus, f.gpuErr = nil, ErrNoDriver
	m, _ := newTestModel(t, f, 80, 24)
	press(m, "enter", "e", "enter")
	planNow(t, m, f)
	press(m, "enter")
	if len(f.started) != 0 {
		t.Fatal("Start is a Cmd; it must not run inside Update")
	}
	for _, s := range []screen{screenRun, screenResults} {
		if s == screenResults {
			playEvents(m, f, -1)
		}
		if m.screen != s || !strings.Contains(view(m), "ESTIMATE") {
			t.Errorf("screen %d is not labelled ESTIMATE:\n%s", s, view(m))
		}
	}
	press(m, "p", "enter")
	if !m.run.req.Estimate {
		t.Error("the run request lost the estimate flag")
	}
}

func TestFailedRunsRankLast(t *testing.T) {
	f := newFake(t)
	m, _, _ := startRun(t, f)
	failed := search.Ranked{Rank: 0, Result: result(cLocalFull, 0, 0)}
	failed.Result.Err, failed.Result.ErrKind = "capture failed", "capture"
	win := search.Ranked{Rank: 1, Result: result(cTEAttn, 112, 900), Fits: true}
	send(m, eventMsg{ev: search.DoneEvent{Ranking: []search.Ranked{failed, win}, Winner: &win}})
	r := m.resScr.ranking()
	if r[0].Rank != 1 || r[1].Rank != 0 {
		t.Fatalf("ranking order %d, %d", r[0].Rank, r[1].Rank)
	}
	if rk, _ := m.resScr.shownCandidate(); rk.Result.Candidate.Key() != cTEAttn.Key() {
		t.Errorf("the cursor starts on %s, not the winner", rk.Result.Candidate.Key())
	}
}

// With several GPUs, every GPU's gauge shows its memory and the candidate
// it runs now.
func TestRunScreenGaugesPerGPU(t *testing.T) {
	f := newFake(t)
	m, _, _ := startRun(t, f)
	for _, ev := range []search.Event{
		search.PlanEvent{Space: []search.Planned{{Candidate: cNone}, {Candidate: cTEAttn}, {Candidate: cTEAttnMLP}}, Total: 3},
		search.StartEvent{Candidate: cNone, GPU: 0, Round: 1, Steps: 8},
		search.StartEvent{Candidate: cTEAttn, GPU: 1, Round: 1, Steps: 8},
		search.MemoryEvent{GPU: 0, UsedMiB: 10_240, TotalMiB: 143771, UtilGPU: 50},
		search.MemoryEvent{GPU: 1, UsedMiB: 30_720, TotalMiB: 143771, UtilGPU: 90},
	} {
		send(m, eventMsg{ev: ev})
	}
	gauge := func(gpu string) string {
		for _, l := range strings.Split(view(m), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), gpu+" ") && strings.Contains(l, "GiB") {
				return l
			}
		}
		return ""
	}
	if g0, g1 := gauge("GPU 0"), gauge("GPU 1"); !strings.Contains(g0, "10.0/140.4 GiB") || !strings.Contains(g0, "▶ none") ||
		!strings.Contains(g1, "30.0/140.4 GiB") || !strings.Contains(g1, "▶ te attn") {
		t.Errorf("gauges:\n%s\n%s\nview:\n%s", g0, g1, view(m))
	}
	// A finished candidate leaves its GPU's gauge; the other still runs.
	send(m, eventMsg{ev: search.ResultEvent{GPU: 0, Round: 1, Result: result(cNone, 130, 0), Done: 1, Total: 3}})
	if g0, g1 := gauge("GPU 0"), gauge("GPU 1"); strings.Contains(g0, "▶") || !strings.Contains(g1, "▶ te attn") {
		t.Errorf("after GPU 0's result:\n%s\n%s", g0, g1)
	}
}

// Inside the full help, ? says it closes it.
func TestHelpInsideHelp(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 120, 30)
	if !strings.Contains(view(m), "? more keys") && !strings.Contains(view(m), "…") {
		t.Fatalf("short help:\n%s", view(m))
	}
	press(m, "?")
	if v := view(m); !strings.Contains(v, "fewer keys") || strings.Contains(v, "more keys") {
		t.Errorf("full help:\n%s", v)
	}
}

// Below the minimum size nothing is drawn, so keys do nothing (but quit).
func TestTooSmallKeysDoNothing(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	m.Update(tea.WindowSizeMsg{Width: 50, Height: 12})
	before := m.sel.model.Name
	press(m, "down", "down", "enter", "tab", "g", "v")
	if m.screen != screenModel || m.sel.model.Name != before || m.modelScr.focus != focusList || m.sel.mbridge != "0.4" {
		t.Errorf("keys acted blind: screen %d, model %s, focus %d, MB %s", m.screen, m.sel.model.Name, m.modelScr.focus, m.sel.mbridge)
	}
	if !isQuit(press(m, "q")) {
		t.Error("q does not quit a window that is too small")
	}
}

// Fixing the layout clears "fix the layout first"; an invalid layout shows
// no data-parallel size.
func TestLayoutFixClearsMessage(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 80, 24)
	press(m, "tab", "down", "down", "3", "enter", "enter")
	if !m.statusErr || !strings.HasPrefix(m.status, fixLayoutFirst) {
		t.Fatalf("status %q", m.status)
	}
	if !strings.Contains(view(m), "DP — · micro-batches —") {
		t.Errorf("an invalid layout shows a data-parallel size:\n%s", view(m))
	}
	press(m, "4", "enter")
	if m.sel.err != nil || m.statusErr || strings.Contains(m.status, fixLayoutFirst) {
		t.Errorf("after the fix: err %v, status %q", m.sel.err, m.status)
	}
}

// The stop question pauses the search (no new candidate starts) and esc
// asks it too; after the search, the clock stops and esc goes back to the
// space.
func TestRunStopPausesAndEscGoesBack(t *testing.T) {
	f := newFake(t)
	m, clk, _ := startRun(t, f)
	playEvents(m, f, 6)
	press(m, "esc")
	if !m.runScr.confirm || len(f.paused) != 1 || !f.paused[0] || !strings.Contains(view(m), "Paused") {
		t.Fatalf("esc: confirm %v, paused %v", m.runScr.confirm, f.paused)
	}
	press(m, "n")
	if m.runScr.confirm || len(f.paused) != 2 || f.paused[1] {
		t.Fatalf("n: confirm %v, paused %v", m.runScr.confirm, f.paused)
	}
	clk.t = clk.t.Add(5 * time.Second)
	for _, e := range f.events[6:] {
		send(m, eventMsg{ev: e})
	}
	clk.t = clk.t.Add(time.Hour)
	press(m, "esc") // results → run
	if m.screen != screenRun || !strings.Contains(view(m), "5s elapsed · done") {
		t.Errorf("the clock did not stop with the search:\n%s", view(m))
	}
	press(m, "esc")
	if m.screen != screenSpace {
		t.Errorf("esc on a finished run: screen %d", m.screen)
	}
}

// t ranks the results again under the next tie band: at 10 % the two
// graphed candidates (104 and 112 ms) tie, and the one with less graph
// memory wins.
func TestResultsRetie(t *testing.T) {
	f := newFake(t)
	m := finishRun(t, f)
	if m.done.Winner.Result.Candidate.Key() != cTEAttnMLP.Key() || m.tie != search.DefaultTie {
		t.Fatalf("winner %s, tie %v", m.done.Winner.Result.Candidate.Key(), m.tie)
	}
	press(m, "t", "t")
	if m.tie != 0.05 || m.done.Winner.Result.Candidate.Key() != cTEAttnMLP.Key() {
		t.Fatalf("5%%: winner %s", m.done.Winner.Result.Candidate.Key())
	}
	press(m, "t")
	if m.tie != 0.1 || m.done.Winner.Result.Candidate.Key() != cTEAttn.Key() || !strings.Contains(m.status, "tie band of 10%: te attn w3 wins") {
		t.Errorf("10%%: tie %v, winner %s, status %q", m.tie, m.done.Winner.Result.Candidate.Key(), m.status)
	}
	press(m, "d") // why the winner won is in the details
	if !strings.Contains(view(m), "Why: te attn w3 wins a tie") || !strings.Contains(view(m), "=1") {
		t.Errorf("view after the re-rank:\n%s", view(m))
	}
}

// r writes the report (and its plot) through the backend, asking before
// it replaces one.
func TestResultsReport(t *testing.T) {
	f := newFake(t)
	m := finishRun(t, f)
	press(m, "r")
	if m.resScr.prompt != promptReport {
		t.Fatalf("prompt %d", m.resScr.prompt)
	}
	send(m, press(m, "enter")())
	md := filepath.Join(f.dir, "cgtune-report.md")
	if in, ok := f.reports[md]; !ok || in.Done.Winner == nil || len(in.Plan) == 0 || in.Model.Name != "llama3_70b" || !strings.Contains(m.status, "wrote the report") {
		t.Fatalf("report %v (status %q)", ok, m.status)
	}
	if !strings.Contains(mustRead(t, md), "# cgtune report: llama3_70b on h100 — te attn,mlp w3") {
		t.Error("report content")
	}
	press(m, "r")
	send(m, press(m, "enter")())
	if m.resScr.prompt != promptOverwriteReport {
		t.Fatalf("an existing report should ask; prompt %d", m.resScr.prompt)
	}
	press(m, "n")
	if m.resScr.prompt != promptNone || !strings.Contains(m.status, "nothing written") {
		t.Errorf("n: prompt %d, status %q", m.resScr.prompt, m.status)
	}
}

// An overrides file written from an estimate says so, and what its
// figures rest on: without a framework profile, graph gains are a lower
// bound that a GPU run would measure; nothing calls it measured.
func TestEstimateFileIsMarked(t *testing.T) {
	f := newFake(t)
	f.events = estimated(f.events)
	m := finishRun(t, f)
	press(m, "w")
	send(m, press(m, "enter")())
	got := mustRead(t, filepath.Join(f.dir, "cgtune-overrides.yaml"))
	if !strings.Contains(got, "\n# ESTIMATED for H100 SXM") || !strings.Contains(got, "LOWER BOUND; a GPU run measures") ||
		strings.Contains(got, "measured by cgtune's estimate") || !strings.Contains(m.status, "marked ESTIMATED") {
		t.Errorf("file:\n%s\nstatus %q", got, m.status)
	}
}

// Lines copied from the overrides pane mean what the file means: long
// comments go on as comments, a dotlist breaks between tokens with a
// backslash.
func TestCopyableLines(t *testing.T) {
	long := "# Generated by cgtune: CUDA-graph recipe overrides for Megatron-Bridge v0.3-v0.4 (G2: cuda_graph_scope)"
	for _, l := range copyableLines(long, "yaml", 40) {
		if !strings.HasPrefix(l, "# ") || len([]rune(l)) > 40 {
			t.Errorf("comment line %q", l)
		}
	}
	dot := "model.cuda_graph_impl=transformer_engine 'model.cuda_graph_scope=[attn,mlp]' model.cuda_graph_warmup_steps=3 model.use_te_rng_tracker=true rng.te_rng_tracker=true"
	lines := copyableLines(dot, "dotlist", 50)
	var toks []string
	for i, l := range lines {
		if len([]rune(l)) > 50 {
			t.Errorf("line %q is too wide", l)
		}
		if i < len(lines)-1 && !strings.HasSuffix(l, " \\") {
			t.Errorf("line %q does not continue", l)
		}
		toks = append(toks, strings.Fields(strings.TrimSuffix(l, " \\"))...)
	}
	if strings.Join(toks, " ") != dot || len(lines) < 3 {
		t.Errorf("tokens %q from %d lines", toks, len(lines))
	}
	// A YAML value folds onto deeper lines, which YAML reads as the line.
	line := "  cuda_graph_scope: [attn, moe_router, moe_preprocess]"
	got := copyableLines(line, "yaml", 20)
	var whole, folded any
	if err := yaml.Unmarshal([]byte(line), &whole); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(strings.Join(got, "\n")), &folded); err != nil || !reflect.DeepEqual(whole, folded) || len(got) < 2 {
		t.Errorf("YAML %q folded to %q: %v (%v)", line, got, folded, err)
	}
	for _, l := range got {
		if ansi.StringWidth(l) > 20 {
			t.Errorf("YAML line %q is too wide", l)
		}
	}
}

// The chart's scale leaves the capture out, so step-to-step variation
// shows; the capture's time is in the title.
func TestChartCaptureOffScale(t *testing.T) {
	f := newFake(t)
	m, _, _ := startRun(t, f)
	playEvents(m, f, len(f.events)-2)
	lines := m.runScr.chartLines(100, 6)
	if !strings.Contains(lines[0], "capture 260.0 ms, off the scale") || !strings.HasPrefix(strings.TrimSpace(lines[1]), "132.0") {
		t.Errorf("chart:\n%s", strings.Join(lines, "\n"))
	}
}

// The selected candidate's memory in the job: the memory model's breakdown,
// and a warning when it will not fit, in both layouts.
func TestResultsMemoryWarning(t *testing.T) {
	for _, sz := range [][2]int{{80, 24}, {160, 48}} {
		f := newFake(t)
		f.events = estimated(f.events)
		done := f.events[len(f.events)-1].(search.DoneEvent)
		big := done.Ranking[1]
		b := *big.Result.Memory.Breakdown
		b.Activations, b.Total, b.Fits = 70000, b.Total+70000-b.Activations, false
		big.Result.Memory.Breakdown, big.Fits = &b, false
		done.Ranking[1] = big
		f.events[len(f.events)-1] = done
		m := finishRun(t, f)
		m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		press(m, "down")
		if sz[0] < 140 {
			press(m, "d") // a narrow window has the memory in the details
		}
		v := view(m)
		for _, want := range []string{"will not fit", "activations 68.4"} {
			if !strings.Contains(v, want) {
				t.Errorf("%dx%d: view lacks %q:\n%s", sz[0], sz[1], want, v)
			}
		}
		checkFrame(t, v, sz[0], sz[1])
	}
}

// The GPU screen says which engine will measure and why (issue: the
// megatron engine is the default where Megatron-Core imports).
func TestGPUScreenNamesTheEngine(t *testing.T) {
	f := newFake(t)
	f.driver.Engine, f.driver.EngineWhy = "megatron", "measuring on the real framework: megatron-core 0.20.0"
	m, _ := newTestModel(t, f, 120, 30)
	press(m, "enter")
	v := view(m)
	if !strings.Contains(v, "engine megatron") || !strings.Contains(v, "measuring on the real framework") {
		t.Fatalf("GPU screen does not name the engine:\n%s", v)
	}
	press(m, "e") // the estimate engine instead: the measuring engine's line goes
	if v := view(m); m.estimate && strings.Contains(v, "engine megatron") {
		t.Errorf("estimate mode still names the measuring engine:\n%s", v)
	}
}

// The search's preparation (the framework profile a megatron search
// measures first) shows on the run screen's status line as it goes.
func TestRunScreenShowsThePreparation(t *testing.T) {
	f := newFake(t)
	m, _, _ := startRun(t, f)
	send(m, eventMsg{ev: search.PrepareEvent{Message: "framework profile: eager, 8 layer(s): host 156.19 ms"}})
	if v := view(m); !strings.Contains(v, "framework profile: eager, 8 layer(s)") {
		t.Errorf("the run screen does not show the preparation:\n%s", v)
	}
}

// finishEstimate runs the scripted search on the estimate engine (no
// driver: e chooses it) to its results at 80×24.
func finishEstimate(t *testing.T, f *fakeBackend) *App {
	t.Helper()
	f.events = estimated(f.events)
	m, _ := newTestModel(t, f, 80, 24)
	send(m, gpusMsg{err: fmt.Errorf("%w: libnvidia-ml.so.1 not found", ErrNoDriver)})
	press(m, "enter", "e", "enter")
	planNow(t, m, f)
	press(m, "enter")
	playEvents(m, f, -1)
	if m.screen != screenResults {
		t.Fatalf("screen %d", m.screen)
	}
	return m
}

// flat is a view's text without styles, its words one space apart (what
// wrapped lines say, wherever they break).
func flat(v string) string { return strings.Join(strings.Fields(ansi.Strip(v)), " ") }

// The results of an estimate say at 80×24 that their graph gains are a
// lower bound, and the details say what a GPU run would add; with a
// framework profile, they name it and where it was measured instead.
func TestEstimateResultsSayWhatTheyRestOn(t *testing.T) {
	m := finishEstimate(t, newFake(t))
	if v := view(m); !strings.Contains(v, "ESTIMATE · LOWER BOUND") {
		t.Errorf("the results do not say they are a lower bound:\n%s", v)
	}
	press(m, "d")
	if v := view(m); !strings.Contains(flat(v), "a GPU run measures Megatron-Core's own") {
		t.Errorf("the details do not say what a GPU run adds:\n%s", v)
	}

	f := newFake(t)
	f.events = slices.Clone(f.events)
	for i, e := range f.events {
		if d, ok := e.(search.DoneEvent); ok {
			d.Ranking = slices.Clone(d.Ranking)
			for j := range d.Ranking {
				d.Ranking[j].Result.HostCosts, d.Ranking[j].Result.ProfileFrom = stepmodel.HostCostsProfile, "NVIDIA H100 80GB HBM3, host gpu-node-7"
			}
			f.events[i] = d
		}
	}
	m = finishEstimate(t, f)
	press(m, "d")
	if v := flat(view(m)); strings.Contains(v, "LOWER BOUND") || !strings.Contains(v, "framework profile measured on NVIDIA H100 80GB HBM3, host gpu-node-7") {
		t.Errorf("with a profile:\n%s", view(m))
	}
}

// A report written before a re-rank (t) is written again to match it:
// the winner on disk is the winner on screen.
func TestRetieRewritesTheReport(t *testing.T) {
	f := newFake(t)
	m := finishRun(t, f)
	press(m, "r")
	send(m, press(m, "enter")())
	md := filepath.Join(f.dir, "cgtune-report.md")
	if !strings.Contains(mustRead(t, md), "# cgtune report: llama3_70b on h100 — te attn,mlp w3") {
		t.Fatalf("report:\n%s", mustRead(t, md))
	}
	// At 10% the two graphed candidates tie and te attn w3 wins
	// (TestResultsRetie).
	for range 3 {
		deliver(m, press(m, "t"))
	}
	if got := mustRead(t, md); !strings.Contains(got, "# cgtune report: llama3_70b on h100 — te attn w3\n") || !strings.Contains(got, "tie band 10%") {
		t.Errorf("after the re-rank the report says:\n%.600s", got)
	}
	if !strings.Contains(m.status, "rewrote the report "+md) {
		t.Errorf("status %q", m.status)
	}
}

// deliver runs cmd and sends what it answers to m, each command of a batch in
// turn.
func deliver(m *App, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	switch msg := cmd().(type) {
	case tea.BatchMsg:
		for _, c := range msg {
			deliver(m, c)
		}
	case nil:
	default:
		send(m, msg)
	}
}

// A search of a recipe made drop-and-pad in the layout editor says in
// the details, next to the speed-up, that tokens over an expert's
// capacity are dropped; so does every overrides file written of it.
func TestDropAndPadInTheDetails(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 120, 40)
	m.opts.Model = "qwen3_30b_a3b"
	m.modelScr.selectInitial()
	moveTo(t, m, "Capacity")
	press(m, "1", ".", "0", "enter")
	moveTo(t, m, "Pad")
	press(m, "+")
	press(m, "esc", "enter", "enter")
	planNow(t, m, f)
	press(m, "enter")
	playEvents(m, f, -1)
	if m.screen != screenResults {
		t.Fatalf("screen %d", m.screen)
	}
	press(m, "d")
	if !regexp.MustCompile(`→ [0-9.]+× ⚠ drop-and-pad MoE \(capacity factor 1\): tokens over an expert's capacity are dropped`).MatchString(flat(view(m))) {
		t.Errorf("the details do not say, after the speed-up, that tokens are dropped:\n%s", view(m))
	}
	press(m, "w")
	send(m, press(m, "enter")())
	if got := mustRead(t, filepath.Join(f.dir, "cgtune-overrides.yaml")); !strings.Contains(got, "tokens over an expert's capacity are dropped") {
		t.Errorf("the file does not say tokens are dropped:\n%s", got)
	}
}

// "i" imports a Megatron-Bridge ConfigContainer YAML: the path is typed,
// the backend reads it, and the team preset it makes is listed and
// selected; a file that cannot be read is one error line and nothing
// changes.
func TestImportMBConfigFromTheModelList(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 120, 40)
	qwen, err := presets.LookupModel("qwen3_30b_a3b")
	if err != nil {
		t.Fatal(err)
	}
	l, _ := qwen.Layout("b200")
	qwen.Name = "mine"
	f.importable = map[string]presets.TeamPreset{"/tmp/ConfigContainer.yaml": {Version: presets.FileVersion, Name: "mine",
		ModelInline: &qwen, GPU: "b200", Layout: l, Space: presets.DefaultSpace()}}

	press(m, "i")
	if !m.modelScr.typing() || !strings.Contains(m.View().Content, "Import ›") {
		t.Fatal("i does not ask for a path")
	}
	press(m, strings.Split("/tmp/missing.yaml", "")...)
	cmd := press(m, "enter")
	send(m, cmd())
	if !m.statusErr || !strings.Contains(m.status, "import /tmp/missing.yaml") || m.sel.model.Name != "llama3_70b" {
		t.Errorf("bad path: status %q (error %v), selection %s", m.status, m.statusErr, m.sel.model.Name)
	}

	press(m, "i")
	press(m, strings.Split("/tmp/Config-Container.yaml", "")...)
	for range len("-Container.yaml") {
		press(m, "backspace")
	}
	press(m, strings.Split("Container.yaml", "")...)
	if m.modelScr.importPath != "/tmp/ConfigContainer.yaml" {
		t.Fatalf("typed path %q", m.modelScr.importPath)
	}
	cmd = press(m, "enter")
	msg := cmd()
	if _, ok := msg.(presetImportedMsg); !ok {
		t.Fatalf("enter gave %T", msg)
	}
	send(m, msg)
	if m.sel.preset != "mine" || m.sel.model.Name != "mine" || m.sel.layout.GPU != "b200" || m.sel.layout.MBS != l.MBS || !m.sel.inline {
		t.Errorf("selection after the import: %+v", m.sel)
	}
	items := m.modelScr.listItems()
	if it := items[m.modelScr.cursor]; it.preset == nil || it.preset.Name != "mine" {
		t.Errorf("the cursor is not on the imported preset: %v", names(items))
	}
	if !strings.Contains(m.status, "cgtune preset save mine --mbridge-config /tmp/ConfigContainer.yaml") {
		t.Errorf("status %q does not say how to keep it", m.status)
	}
	// Moving away and back selects it again without the backend.
	press(m, "up")
	press(m, "down")
	if m.sel.preset != "mine" {
		t.Errorf("back on the imported preset: selection %q", m.sel.preset)
	}
}
