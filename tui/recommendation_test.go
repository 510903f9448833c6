package tui

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/presets"
	"cgtune/search"
)

// oneCandidateSearch is the events of a search that ran c alone and
// ranked it first, against ref, the recipe's setting, ranked second.
func oneCandidateSearch(c, ref presets.Candidate) []search.Event {
	rc, rr := result(c, 100, 800), result(ref, 101, 600)
	ranking := []search.Ranked{{Rank: 1, Result: rc, JobMs: 5_000, Fits: true}, {Rank: 2, Result: rr, JobMs: 5_050, Fits: true}}
	w, r := ranking[0], ranking[1]
	return []search.Event{
		search.PlanEvent{Space: []search.Planned{{Candidate: c}, {Candidate: ref}}, Total: 2},
		search.ResultEvent{GPU: 0, Round: 1, Result: rc, Done: 1, Total: 2},
		search.ResultEvent{GPU: 0, Round: 1, Result: rr, Done: 2, Total: 2},
		search.DoneEvent{Ranking: ranking, Winner: &w, Strategy: "exhaustive", Runs: 2,
			Reference: &search.Reference{Candidate: ref, From: search.ReferenceFromRecipe, Ranked: &r}},
	}
}

// runEdited goes from the model screen, as edited, through the space to
// a finished search of the fake's events.
func runEdited(t *testing.T, m *App, f *fakeBackend) {
	t.Helper()
	press(m, "esc", "enter", "enter")
	planNow(t, m, f)
	press(m, "enter")
	if m.screen != screenRun {
		t.Fatalf("screen %d", m.screen)
	}
	playEvents(m, f, -1)
	if m.screen != screenResults {
		t.Fatalf("screen %d", m.screen)
	}
}

// writeShown writes the shown candidate's overrides with w to name in the
// fake's folder, in the format shown, and returns the file.
func writeShown(t *testing.T, m *App, f *fakeBackend, name string) string {
	t.Helper()
	press(m, "w", "ctrl+u")
	for _, c := range name {
		press(m, string(c))
	}
	if cmd := press(m, "enter"); cmd != nil {
		send(m, cmd())
	}
	return mustRead(t, filepath.Join(f.dir, name))
}

// The TUI case: qwen3_30b_a3b with capacity 1.0 and padding set
// in the layout editor, te attn,moe_router,moe_preprocess w1 selected:
// what w writes (YAML and JSON alike) carries both settings, each with
// its reason, as the search ranked the candidate with them.
func TestWriteCarriesTheLayoutEditorsDropAndPad(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 160, 48)
	m.opts.Model = "qwen3_30b_a3b"
	m.modelScr.selectInitial()
	moveTo(t, m, "Capacity")
	press(m, "1", ".", "0", "enter")
	moveTo(t, m, "Pad")
	press(m, "+")
	if m.sel.err != nil {
		t.Fatal(m.sel.err)
	}
	c := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn", "moe_router", "moe_preprocess"}, Warmup: 1}
	ref := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"moe_router", "moe_preprocess"}, Warmup: 3}
	f.events = oneCandidateSearch(c, ref)
	runEdited(t, m, f)
	if rk, _ := m.resScr.shownCandidate(); rk.Result.Candidate.Key() != c.Key() {
		t.Fatalf("shown %s", rk.Result.Candidate.Key())
	}
	y := writeShown(t, m, f, "o.yaml")
	if !strings.Contains(y, "moe_expert_capacity_factor: 1.0") || !strings.Contains(y, "moe_pad_expert_input_to_capacity: true") {
		t.Errorf("the YAML lacks drop-and-pad:\n%s", y)
	}
	press(m, "f", "f", "f", "f") // yaml → json
	if m.resScr.format() != "json" {
		t.Fatalf("format %s", m.resScr.format())
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(writeShown(t, m, f, "o.json")), &obj); err != nil {
		t.Fatal(err)
	}
	why, _ := obj["_why"].(map[string]any)
	if obj["model.moe_expert_capacity_factor"] != 1.0 || obj["model.moe_pad_expert_input_to_capacity"] != true ||
		why["model.moe_expert_capacity_factor"] == nil || why["model.moe_pad_expert_input_to_capacity"] == nil {
		t.Errorf("the JSON lacks drop-and-pad or its reasons: %v", obj)
	}
}

// When the recipe's own setting wins, the results screen and the file w
// writes say to keep it, and the file restates it.
func TestRecipeSettingThatWinsIsKept(t *testing.T) {
	f := newFake(t)
	m, _ := newTestModel(t, f, 160, 48)
	ref := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}, Warmup: 3}
	rr := result(ref, 100, 600)
	ranking := []search.Ranked{{Rank: 1, Result: rr, JobMs: 5_000, Fits: true, Tie: 1, TieBandMs: 1}, {Rank: 2, Result: result(cNone, 100.2, 0), JobMs: 5_010, Fits: true, Tie: 1}}
	w := ranking[0]
	f.events = []search.Event{search.PlanEvent{Space: []search.Planned{{Candidate: ref}}, Total: 1},
		search.ResultEvent{Result: rr, Done: 1, Total: 1},
		search.DoneEvent{Ranking: ranking, Winner: &w, Reference: &search.Reference{Candidate: ref, From: search.ReferenceFromRecipe, Ranked: &w}}}
	runEdited(t, m, f)
	if !strings.Contains(m.status, search.KeepRecipe) || !strings.Contains(view(m), search.KeepRecipe) {
		t.Errorf("status %q; view:\n%s", m.status, view(m))
	}
	y := writeShown(t, m, f, "keep.yaml")
	if !strings.Contains(y, "# the recipe ships te attn w3: "+search.KeepRecipe) || !strings.Contains(y, "cuda_graph_scope: [attn]") {
		t.Errorf("file:\n%s", y)
	}
}

// A preset saved from the results (p) holds the search's --set values in
// its layout: loaded again it ranks under the conditions the search had,
// and a key no layout can hold is named in its description.
func TestSavedPresetHoldsTheSearchsSets(t *testing.T) {
	f := newFake(t)
	m := finishRun(t, f)
	m.opts.Sets = map[string]string{"comm_overlap.overlap_moe_expert_parallel_comm": "false", "te_version": "2.14"}
	p, err := m.resScr.teamPreset("kept")
	if err != nil {
		t.Fatal(err)
	}
	if p.Layout.Settings["comm_overlap.overlap_moe_expert_parallel_comm"] != "false" || !strings.Contains(p.Description, "te_version=2.14, which a preset cannot hold") {
		t.Errorf("settings %v, description %q", p.Layout.Settings, p.Description)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("the preset does not validate: %v", err)
	}
}
