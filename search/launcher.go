package search

import (
	"fmt"

	"cgtune/engine/job"
	"cgtune/recipe"
)

// SkipRefusedBy passes over the graphed targets whose jobs launcher l
// refuses at start-up: the search judged each candidate as
// Megatron-Bridge starts it, and Megatron-LM's pretrain_gpt.py checks
// more (its validate_args). Each one passed over is in v.Skipped with the
// rule it breaks. It fails when no graphed target is left.
func (v *JobValidation) SkipRefusedBy(l recipe.Launcher) error {
	if l == recipe.LauncherMB {
		return nil
	}
	var kept []job.Target
	graphed := 0
	for _, t := range v.Targets {
		if t.Candidate.Graphed() {
			r := recipe.ValidateCandidate(v.Model, v.Layout, t.Candidate, v.MBridge, v.Sets, recipe.WithLauncher(l))
			if !r.OK() {
				why := fmt.Sprintf("%s refuses it: %s", l, r.Violations[0])
				v.Skipped = append(v.Skipped, Skipped{Candidate: t.Candidate, Why: why})
				continue
			}
			graphed++
		}
		kept = append(kept, t)
	}
	if graphed == 0 && len(v.Skipped) > 0 {
		s := v.Skipped[len(v.Skipped)-1]
		return fmt.Errorf("%s: no graphed candidate is left to validate (%s: %s)", v.Source, s.Candidate.Name(), s.Why)
	}
	v.Targets = kept
	return nil
}
