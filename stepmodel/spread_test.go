package stepmodel

import (
	"math"
	"strings"
	"testing"

	"cgtune/presets"
)

func TestSpreadOfIsRelativeToTheMedian(t *testing.T) {
	sp := SpreadOf(Stats{Median: 200, P10: 190, P90: 230})
	if math.Abs(sp.Below-0.05) > 1e-12 || math.Abs(sp.Above-0.15) > 1e-12 {
		t.Errorf("spread %+v, want below 0.05 and above 0.15", sp)
	}
	if sp := SpreadOf(Stats{}); sp != (StepSpread{}) {
		t.Errorf("no median: spread %+v, want none", sp)
	}
}

func spreadProfile() *FrameworkProfile {
	return &FrameworkProfile{Version: ProfileVersion, Spread: map[string]StepSpread{
		SpreadEager:         {Below: 0.10, Above: 0.15},
		SpreadLayer:         {Below: 0.02, Above: 0.03},
		SpreadFullIteration: {Below: 0.01, Above: 0.05},
	}}
}

// Each kind of capture takes the spread of the profile run that captured
// the same way; a plan graphing parts of layers the wider of eager and
// whole-layer on each side.
func TestFrameworkSpreadFollowsTheCapture(t *testing.T) {
	w := build(t, denseModel, oneGPU, false)
	cases := []struct {
		name         string
		c            presets.Candidate
		below, above float64
		from         string
	}{
		{"eager", cand(presets.ImplNone), 0.10, 0.15, "eager run"},
		{"local whole layer", cand(presets.ImplLocal), 0.02, 0.03, "layer run"},
		{"full iteration", cand(presets.ImplLocal, presets.ScopeFullIteration), 0.01, 0.05, "full_iteration run"},
		{"te attn", cand(presets.ImplTE, "attn"), 0.10, 0.15, "the wider of eager and layer run"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := PlanCapture(w, tc.c, presets.G2)
			s, note := WithFrameworkSpread(Stats{Median: 100, P10: 99.9, P90: 100.1, N: 15}, spreadProfile(), plan)
			if math.Abs(s.P10-100*(1-tc.below)) > 1e-9 || math.Abs(s.P90-100*(1+tc.above)) > 1e-9 || s.Median != 100 || s.N != 15 {
				t.Errorf("%s: %+v, want p10 %.1f and p90 %.1f around the same median", tc.name, s, 100*(1-tc.below), 100*(1+tc.above))
			}
			if !strings.Contains(note, tc.from) {
				t.Errorf("%s: note %q does not name the %s", tc.name, note, tc.from)
			}
		})
	}
}

// The framework's spread only widens: an emulated range already wider is
// kept; without a profile nothing changes; a profile measured before
// spreads were kept says the range is the emulation's own.
func TestFrameworkSpreadOnlyWidens(t *testing.T) {
	w := build(t, denseModel, oneGPU, false)
	plan := PlanCapture(w, cand(presets.ImplLocal), presets.G2)
	wide := Stats{Median: 100, P10: 90, P90: 120, N: 5}
	if s, _ := WithFrameworkSpread(wide, spreadProfile(), plan); s != wide {
		t.Errorf("a wider emulated range became %+v", s)
	}
	if s, note := WithFrameworkSpread(wide, nil, plan); s != wide || note != "" {
		t.Errorf("without a profile: %+v, %q", s, note)
	}
	old := spreadProfile()
	old.Spread = nil
	if s, note := WithFrameworkSpread(wide, old, plan); s != wide || !strings.Contains(note, "emulation's own") {
		t.Errorf("profile without spreads: %+v, %q", s, note)
	}
}
