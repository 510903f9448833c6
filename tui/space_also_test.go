package tui

import (
	"strings"
	"testing"

	"cgtune/presets"
	"cgtune/search"
)

// A plan row's other spellings are listed only where they name layers the
// model has: "also: te attn,mamba" under a Qwen row says nothing the row's
// own name does not, and a hybrid model keeps it.
func TestAlsoNamesOnlyLayersTheModelHas(t *testing.T) {
	row := search.Planned{
		Candidate: presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}, Warmup: 3},
		Also:      []presets.Candidate{{Impl: presets.ImplTE, Scopes: []string{"attn", "mamba"}, Warmup: 3}},
	}
	for _, tc := range []struct {
		model     string
		wantMamba bool
	}{{"qwen3_30b_a3b", false}, {"nemotronh_56b", true}} {
		m, err := presets.LookupModel(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		note := planNote(row, m.Arch)
		if got := strings.Contains(note, "mamba"); got != tc.wantMamba {
			t.Errorf("%s: the row's note %q names mamba: %v, want %v", tc.model, note, got, tc.wantMamba)
		}
	}
}
