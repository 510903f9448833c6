package search

import (
	"fmt"
	"slices"

	"cgtune/engine"
	"cgtune/recipe"
)

// Target is the recipe the search's overrides are written for.
func (c Config) Target() recipe.Target {
	return recipe.Target{Model: c.Model, Layout: c.Layout, MBridge: c.mbridge(), Sets: c.Sets}
}

// Target is the recipe the journaled search's overrides are written for.
func (f Fingerprint) Target() recipe.Target {
	return recipe.Target{Model: f.Model, Layout: f.Layout, MBridge: f.MBridge, Sets: f.Sets}
}

// Recommendation is the overrides of ranked result r of search d, whose
// overrides are written for target t (recipe.WinnerOverrides), with the
// lines every written copy of them carries (Annotated). Every writer of a
// recommendation (headless --emit and stdout, the TUI's w and overrides
// pane, the report) renders these.
func Recommendation(t recipe.Target, d *DoneEvent, r Ranked) recipe.Overrides {
	return Annotated(recipe.WinnerOverrides(t, r.Result.Candidate), d, r)
}

// Annotated is o, the overrides of ranked result r of search d, with the
// lines every written copy of them carries, first among its notes: for
// the winner, that the recipe's setting stands (Reference.Keep) or how it
// compares with it; for an estimate, that it is not a measurement.
func Annotated(o recipe.Overrides, d *DoneEvent, r Ranked) recipe.Overrides {
	var head []string
	if d != nil && d.Winner != nil && d.Winner.Result.Candidate.Key() == r.Result.Candidate.Key() {
		if line := d.Reference.Describe(d.Winner); line != "" {
			head = append(head, line)
		}
	}
	if o.DropsTokens != "" {
		// First after the comparison: what the recipe gives up for the
		// speed-up, next to it.
		o.Notes = slices.DeleteFunc(o.Notes, func(n string) bool { return n == o.DropsTokens })
		o.DropsTokens = DropsTokensLine(o.DropsTokens, r)
		head = append(head, o.DropsTokens)
	}
	if r.Result.Source == engine.SourceEstimated {
		head = append(head, EstimateNote(r.Result))
	}
	if line := whatIfNote(r); line != "" {
		head = append(head, line)
	}
	o.Notes = append(head, o.Notes...)
	return o
}

// EstimateNote is the line every file written from an estimated result
// carries, so nobody mistakes it for a measurement: where its host costs
// come from (a framework profile, or a lower bound without one) and what
// a GPU run would add (resultBasis).
func EstimateNote(r engine.Result) string {
	return resultBasis(r, fmt.Sprintf("%.2f ms/step, %.3fx eager", r.Step.Median, r.Speedup))
}

// DropsTokensLine is the drop-and-pad condition (recipe.Overrides's
// DropsTokens) with the speed-up over the recipe's setting that ranked
// result r was ranked with under it.
func DropsTokensLine(drop string, r Ranked) string {
	if r.VsReference <= 0 || r.Result.Failed() {
		return drop
	}
	return fmt.Sprintf("%s; %s was ranked with it at %.3f× the recipe's setting", drop, r.Result.Candidate.Name(), r.VsReference)
}
