package search

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"cgtune/engine"
	"cgtune/presets"
)

// maxEmulationChecks is how many framework-measured candidates the
// search runs again on the engine that predicts what the framework
// cannot run here: enough to see the emulation's error on more than one
// mechanism, few enough to cost seconds.
const maxEmulationChecks = 3

// EmulationCheck is the emulation's own error, measured in the search:
// candidates the framework ran, run again on the engine that predicts the
// candidates the framework could not run on this node.
type EmulationCheck struct {
	Engine string         `json:"engine"`
	Rows   []EmulationRow `json:"rows"`
	// Error is the largest |emulated speed-up / framework speed-up − 1|
	// over the rows.
	Error float64 `json:"error"`
	// Failed are the candidates the emulation could not run, with why.
	Failed []string `json:"failed,omitempty"`
}

// EmulationRow is one candidate both engines ran.
type EmulationRow struct {
	Candidate presets.Candidate `json:"candidate"`
	Framework float64           `json:"framework_speedup"`
	Emulated  float64           `json:"emulated_speedup"`
}

// Describe says what was checked, in one line.
func (c *EmulationCheck) Describe() string {
	if c == nil {
		return "emulation not checked: no candidate ran on both the framework and the emulation"
	}
	var parts []string
	for _, r := range c.Rows {
		parts = append(parts, fmt.Sprintf("%s %.3f× framework, %.3f× %s", r.Candidate.Name(), r.Framework, r.Emulated, c.Engine))
	}
	return fmt.Sprintf("the %s engine's error, measured in this search on candidates the framework ran: ±%.1f%% (%s)",
		c.Engine, 100*c.Error, strings.Join(parts, "; "))
}

// fallbackOf is the engine a search's engines hand candidates to, if any.
func fallbackOf(engines []engine.Engine) engine.Engine {
	for _, e := range engines {
		if d, ok := e.(engine.Delegator); ok && d.Fallback() != nil {
			return d.Fallback()
		}
	}
	return nil
}

// emulationCheck runs the best framework-measured graphed candidates on
// the fallback engine when the search holds results it handed there; nil
// when there are none, or nothing to compare.
func (r *runner) emulationCheck(ctx context.Context, es []entry) *EmulationCheck {
	fb := fallbackOf(r.cfg.Engines)
	if fb == nil || !slices.ContainsFunc(es, func(e entry) bool { return e.res.Delegated != "" && !e.res.Failed() }) {
		return nil
	}
	var measured []engine.Result
	seen := map[string]bool{}
	for _, e := range es {
		res := e.res
		k := armKey(res.Candidate)
		if res.Failed() || res.Delegated != "" || !res.Candidate.Graphed() || res.Source != engine.SourceFramework || res.Speedup <= 0 || seen[k] {
			continue
		}
		seen[k] = true
		measured = append(measured, res)
	}
	slices.SortStableFunc(measured, func(a, b engine.Result) int { return cmp.Compare(b.Speedup, a.Speedup) })
	check := &EmulationCheck{Engine: fb.Name()}
	for _, res := range measured[:min(len(measured), maxEmulationChecks)] {
		if ctx.Err() != nil {
			break
		}
		w, err := r.ws.of(res.Candidate)
		if err != nil {
			continue
		}
		emu := fb.Run(ctx, w, res.Candidate, r.opts(0), func(engine.StepSample) {})
		if emu.Failed() || emu.Speedup <= 0 {
			check.Failed = append(check.Failed, fmt.Sprintf("%s: %s", res.Candidate.Name(), cmp.Or(emu.Err, "no speed-up")))
			continue
		}
		check.Rows = append(check.Rows, EmulationRow{Candidate: res.Candidate, Framework: res.Speedup, Emulated: emu.Speedup})
		check.Error = math.Max(check.Error, math.Abs(emu.Speedup/res.Speedup-1))
	}
	if len(check.Failed) > 0 {
		r.note("emulation check: the %s engine could not run %s", check.Engine, strings.Join(check.Failed, "; "))
	}
	if len(check.Rows) == 0 {
		return nil
	}
	r.note("%s", check.Describe())
	return check
}

// heldBack says whether an emulated result ranks below the
// framework-measured ones: unless its predicted speed-up beats the best
// framework-measured one by more than the emulation's error measured in
// the search, it is a prediction to confirm, not an answer.
func heldBack(r engine.Result, bestFramework float64, check *EmulationCheck) bool {
	if r.Delegated == "" || bestFramework <= 0 {
		return false
	}
	if check == nil {
		return true
	}
	return r.Speedup/bestFramework-1 <= check.Error
}

// bestFrameworkSpeedup is the best speed-up the truest engine measured
// among results that finished (0 when none did).
func bestFrameworkSpeedup(es []entry) float64 {
	best := 0.0
	for _, e := range es {
		if !e.res.Failed() && e.res.Delegated == "" && e.res.Source == engine.SourceFramework {
			best = math.Max(best, e.res.Speedup)
		}
	}
	return best
}

// emulatedNote says what an emulated result is and where it ranks.
func emulatedNote(r engine.Result, held bool, bestFramework float64, check *EmulationCheck) string {
	why := fmt.Sprintf("emulated by the %s engine (%s)", sourceEngine(r), r.Delegated)
	if held {
		return fmt.Sprintf("%s: predicted %.3f× over eager; measure it where the framework can run it", why, r.Speedup)
	}
	return fmt.Sprintf("%s: predicted %.1f%% faster than the best framework-measured candidate, beyond the emulation's error (±%.1f%%) measured in this search",
		why, 100*(r.Speedup/bestFramework-1), 100*check.Error)
}

func sourceEngine(r engine.Result) string {
	if r.Source == engine.SourceEstimated {
		return "estimate"
	}
	return "cuda"
}
