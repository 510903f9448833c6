package stepmodel

import "fmt"

// StepSpread is how far the framework's steps strayed from their median in
// one profile run: its p10 below and its p90 above the median, each as a
// fraction of the median.
//
// The calibrated engines predict the framework's step. Their own runs vary
// far less than the framework's (an emulated step has no Python, no
// allocator, no gc), so their p10–p90 alone would separate candidates that
// the framework cannot tell apart: on the H200, moe-small drop-and-pad
// mbs 4's full-iteration and whole-layer steps overlapped on Megatron-Core
// while the emulation put whole layer ahead with far narrower ranges
// (docs/emulation-accuracy-2026-12-01.md). Carrying the framework's
// spread into the emulated p10–p90 makes the tie rule treat them as the
// framework's own ranking does.
type StepSpread struct {
	Below float64 `json:"below"`
	Above float64 `json:"above"`
}

// SpreadOf is the spread of measured step statistics; zero when there is
// no median.
func SpreadOf(s Stats) StepSpread {
	if s.Median <= 0 {
		return StepSpread{}
	}
	return StepSpread{Below: max(0, (s.Median-s.P10)/s.Median), Above: max(0, (s.P90-s.Median)/s.Median)}
}

// Widen widens s's p10–p90 to at least sp around s's median.
func (sp StepSpread) Widen(s Stats) Stats {
	s.P10 = min(s.P10, s.Median*(1-sp.Below))
	s.P90 = max(s.P90, s.Median*(1+sp.Above))
	return s
}

// Spread modes: which profile run a plan's steps vary like.
const (
	SpreadEager         = "eager"
	SpreadLayer         = "layer" // every layer graphed whole
	SpreadFullIteration = "full_iteration"
)

// ProfileModes are the profile's kinds of run, in the order they are
// measured and printed; its spreads are keyed by them.
func ProfileModes() []string {
	return []string{SpreadEager, SpreadLayer, SpreadFullIteration}
}

// spreadFor is the spread the framework's steps show for plan's kind of
// capture, and which profile runs it comes from. A plan that graphs only
// parts of layers leaves the rest eager, so it gets the wider of the eager
// and whole-layer spreads on each side.
func (p *FrameworkProfile) spreadFor(plan *CapturePlan) (StepSpread, string, bool) {
	switch {
	case plan.FullIteration != nil:
		s, ok := p.Spread[SpreadFullIteration]
		return s, SpreadFullIteration, ok
	case !plan.Graphed():
		s, ok := p.Spread[SpreadEager]
		return s, SpreadEager, ok
	case graphsWholeLayers(plan):
		s, ok := p.Spread[SpreadLayer]
		return s, SpreadLayer, ok
	}
	e, okE := p.Spread[SpreadEager]
	l, okL := p.Spread[SpreadLayer]
	if !okE || !okL {
		return StepSpread{}, "", false
	}
	return StepSpread{Below: max(e.Below, l.Below), Above: max(e.Above, l.Above)}, "the wider of eager and layer", true
}

// graphsWholeLayers reports whether every layer of plan is one whole-layer
// graph.
func graphsWholeLayers(plan *CapturePlan) bool {
	for _, l := range plan.Layers {
		if len(l.Regions) != 1 || l.Regions[0] != RegionLayer {
			return false
		}
	}
	return len(plan.Layers) > 0
}

// WithFrameworkSpread widens an emulated step's p10–p90 to at least the
// spread the framework's steps showed in prof's run of the same kind of
// capture, around the emulated median, and says so. Without a profile, or
// with one measured before profiles kept spreads, s is returned as it is
// with an empty note or one saying the spread is the emulation's own.
func WithFrameworkSpread(s Stats, prof *FrameworkProfile, plan *CapturePlan) (Stats, string) {
	if prof == nil || s.Median <= 0 {
		return s, ""
	}
	sp, from, ok := prof.spreadFor(plan)
	if !ok {
		return s, "p10–p90: the emulation's own (the framework profile has no measured step spread for this capture)"
	}
	return sp.Widen(s), fmt.Sprintf("p10–p90: at least the framework's measured spread (−%.1f%%/+%.1f%% of the median in the profile's %s run), so candidates the framework cannot tell apart tie",
		100*sp.Below, 100*sp.Above, from)
}

// EagerWithFrameworkSpread widens an emulated eager baseline's p10–p90 to
// at least the spread of the profile's eager run, as WithFrameworkSpread
// does for a `none` candidate's step: the baseline every candidate
// carries (and a `none` derived from them) is no surer than that run.
func EagerWithFrameworkSpread(s Stats, prof *FrameworkProfile) Stats {
	s, _ = WithFrameworkSpread(s, prof, &CapturePlan{})
	return s
}
