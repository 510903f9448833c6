package search

import (
	"fmt"
	"strings"

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
	if r.Result.Source == engine.SourceEstimated {
		head = append(head, EstimateNote(r.Result))
	}
	if line := whatIfNote(r); line != "" {
		head = append(head, line)
	}
	o.Notes = append(head, o.Notes...)
	return o
}

// EstimateNote is the line every file written from an estimated winner
// carries, so nobody mistakes it for a measurement.
func EstimateNote(r engine.Result) string {
	gpu := strings.TrimSuffix(r.Device.Name, " (estimated)")
	if gpu == "" {
		gpu = "the layout's GPU"
	}
	return fmt.Sprintf("ESTIMATED by cgtune's estimate engine for %s (%.2f ms/step, %.3fx eager): not measured on a GPU", gpu, r.Step.Median, r.Speedup)
}
