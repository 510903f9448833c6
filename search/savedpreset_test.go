package search

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/engine/job"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/stepmodel"
)

// A preset cgtune validate saves (--save-preset) from a search that had
// --set values holds them in its layout: written, parsed back and
// searched again, it gives the winner the overrides the search gave it,
// entry for entry.
func TestSavedPresetRanksUnderTheSearchsConditions(t *testing.T) {
	m, l := builtin(t, "qwen3_30b_a3b", "h100")
	sets := map[string]string{"model.moe_expert_capacity_factor": "1.0", "model.moe_pad_expert_input_to_capacity": "true",
		"comm_overlap.overlap_moe_expert_parallel_comm": "false", "te_version": "2.14"}
	full := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 3}
	v := JobValidation{Source: "run r", Model: m, Layout: l, MBridge: "0.4", Sets: sets, Space: presets.DefaultSpace(), Launcher: &job.Local{}}
	ok := engine.Result{Candidate: full, Step: stepmodel.Stats{Median: 100, N: 10}}
	out := job.Validation{Rows: []job.Row{{Rank: 1, Candidate: full, Real: ok, RealSpeedup: 1.1}}}
	p, err := ValidatedPreset("lf-validated", nil, v, out, presets.JobSetup{Launcher: "local", Command: "run {dotlist}"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	data, err := presets.MarshalPreset(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := presets.ParsePreset("lf-validated.yaml", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	bm, err := back.ResolveModel()
	if err != nil {
		t.Fatal(err)
	}
	want := recipe.WinnerOverrides(recipe.Target{Model: m, Layout: l, MBridge: "0.4", Sets: sets}, full)
	got := recipe.WinnerOverrides(recipe.Target{Model: bm, Layout: back.Layout, MBridge: back.MBridge}, full)
	if len(got.Entries) != len(want.Entries) {
		t.Fatalf("entries %v, want %v", got.Entries, want.Entries)
	}
	for i, e := range want.Entries {
		if g := got.Entries[i]; g.Key != e.Key || !slices.Equal(asStrings(g.Value), asStrings(e.Value)) {
			t.Errorf("entry %d: %s=%v, want %s=%v", i, g.Key, g.Value, e.Key, e.Value)
		}
	}
	if !slices.ContainsFunc(want.Entries, func(e recipe.Entry) bool { return e.Key == "comm_overlap.overlap_moe_expert_parallel_comm" }) {
		t.Errorf("the search's own overrides lack EP overlap off: %v", want.Entries)
	}
	if p.Description == "" || !containsAll(p.Description, "te_version=2.14", "which a preset cannot hold") {
		t.Errorf("description %q does not say what the preset could not hold", p.Description)
	}
}

func asStrings(v any) []string {
	if l, ok := v.([]string); ok {
		return l
	}
	return []string{fmt.Sprint(v)}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
