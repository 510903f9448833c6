package search

import (
	"testing"

	"cgtune/presets"
)

// A full-iteration winner on an MoE model carries the padded-expert flag
// MB's full-iteration MoE recipes set; other winners do not; and the
// overrides pass the rules, flag included, in both generations.
func TestWinnerOverrides(t *testing.T) {
	full := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 2}
	te := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{presets.ScopeAttn}, Warmup: 3}
	for _, tc := range []struct {
		m    presets.Model
		c    presets.Candidate
		mb   string
		want bool
	}{
		{moeModel, full, "0.4", true},
		{moeModel, full, "0.6", true},
		{moeModel, te, "0.4", false},
		{denseModel, full, "0.4", false},
		{denseModel, presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}, Warmup: 3}, "0.6", false},
	} {
		o := WinnerOverrides(tc.m, tc.c, tc.mb)
		v, ok := o.Get(KeyMoEPadForGraphs)
		if ok != tc.want || (ok && v != true) {
			t.Errorf("%s %s %s: %s = %v, %v; want set %v", tc.m.Name, tc.c.Key(), tc.mb, KeyMoEPadForGraphs, v, ok, tc.want)
		}
		base := presets.BuildOverrides(tc.c, o.Gen)
		if n := len(o.Entries) - len(base.Entries); (n == 1) != tc.want || n < 0 || n > 1 {
			t.Errorf("%s %s: %d entries beyond BuildOverrides", tc.m.Name, tc.c.Key(), n)
		}
		data, err := o.Render("yaml")
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewRecipe(tc.m, layoutFor(tc.m), tc.mb)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.ApplyYAML("winner.yaml", data); err != nil {
			t.Fatalf("%s %s %s: the rules do not read the overrides: %v", tc.m.Name, tc.c.Key(), tc.mb, err)
		}
		if rep := Check(r, tc.mb); !rep.OK() {
			t.Errorf("%s %s %s: %v", tc.m.Name, tc.c.Key(), tc.mb, rep.Violations)
		}
	}
}
