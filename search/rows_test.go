package search

import (
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// OneTie speaks only when every successful candidate lies within one tie
// band of the others, and Basis says what estimated figures rest on.
func TestOneTieAndBasis(t *testing.T) {
	est := func(step float64, tie int, band float64) Ranked {
		r := Ranked{Tie: tie, TieBandMs: band}
		r.Result = engine.Result{Source: engine.SourceEstimated, Candidate: presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}, Warmup: 3},
			Step: stepmodel.Stats{Median: step}, Eager: stepmodel.Stats{Median: 100}, Speedup: 100 / step, Device: engine.DeviceInfo{Name: "H100 SXM (estimated)"}}
		return r
	}
	failed := est(0, 0, 0)
	failed.Result.Err = "oom"
	for _, tc := range []struct {
		name string
		rs   []Ranked
		want bool
	}{
		{"one group", []Ranked{est(99, 1, 1), est(100, 1, 1)}, true},
		{"two groups that chain within one band", []Ranked{est(99, 1, 1), est(99.8, 2, 1)}, true},
		{"two groups a band apart", []Ranked{est(95, 1, 1), est(99, 2, 1)}, false},
		{"one stands alone", []Ranked{est(95, 0, 0), est(99, 1, 1), est(99.5, 1, 1)}, false},
		{"a failure does not count", []Ranked{est(99, 1, 1), est(100, 1, 1), failed}, true},
		{"one candidate", []Ranked{est(99, 1, 1)}, false},
	} {
		got := OneTie(tc.rs)
		if (got != "") != tc.want || (tc.want && !strings.Contains(got, "the estimate cannot tell them apart")) {
			t.Errorf("%s: %q", tc.name, got)
		}
	}
	rs := []Ranked{est(99, 1, 1)}
	if b := Basis(rs); !strings.HasPrefix(b, "ESTIMATED for H100 SXM, not measured") || !strings.Contains(b, "LOWER BOUND") {
		t.Errorf("without a profile: %q", b)
	}
	rs[0].Result.HostCosts, rs[0].Result.ProfileFrom = stepmodel.HostCostsProfile, "NVIDIA H200, driver 580, 2026-12-01, host n1"
	if b := Basis(rs); !strings.Contains(b, "framework profile measured on NVIDIA H200, driver 580, 2026-12-01, host n1") || strings.Contains(b, "LOWER BOUND") || !strings.Contains(b, "a GPU run") {
		t.Errorf("with a profile: %q", b)
	}
	rs[0].Result.Source = engine.SourceFramework
	if b := Basis(rs); b != "" {
		t.Errorf("a framework measurement rests on nothing to say: %q", b)
	}
}
