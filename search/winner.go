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

// EstimateNote is the line every file written from an estimated winner
// carries, so nobody mistakes it for a measurement.
func EstimateNote(r engine.Result) string {
	gpu := strings.TrimSuffix(r.Device.Name, " (estimated)")
	if gpu == "" {
		gpu = "the layout's GPU"
	}
	return fmt.Sprintf("ESTIMATED by cgtune's estimate engine for %s (%.2f ms/step, %.3fx eager): not measured on a GPU", gpu, r.Step.Median, r.Speedup)
}
