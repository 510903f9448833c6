package search

import (
	"fmt"
	"slices"
	"strings"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// Row is one measured configuration of a ranking, as a table shows it:
// its best-ranked warm-up (Ranked) and the other warm-ups whose figures
// were derived from the same run (the warm-up does not change the steady
// state), in rank order. A failure is a row of its own.
type Row struct {
	Ranked
	// Shared are the other warm-ups of the same run, in rank order.
	Shared []Ranked
}

// Warmups are the row's warm-ups, its own first, then the shared ones.
func (r Row) Warmups() []int {
	out := []int{r.Result.Candidate.Warmup}
	for _, s := range r.Shared {
		out = append(out, s.Result.Candidate.Warmup)
	}
	return out
}

// Rows folds a ranking into one row per measured configuration: each
// result derived from another warm-up's run (halving runs one warm-up of
// an impl×scope and derives the others, Ranked.Derived) joins the row of
// that run, placed where the best-ranked of them ranks. Results measured
// on their own (exhaustive, each warm-up run) stay rows of their own.
func Rows(rs []Ranked) []Row {
	// root names the run a result's figures come from.
	root := func(r Ranked) string {
		if r.Result.Failed() || !r.Result.Candidate.Graphed() {
			return ""
		}
		c := r.Result.Candidate
		if r.DerivedFrom > 0 {
			c.Warmup = r.DerivedFrom
		}
		return fmt.Sprintf("%d|%s", r.Round, c.Key())
	}
	measured := map[string]bool{}
	for _, r := range rs {
		if r.DerivedFrom == 0 && !r.Result.Failed() {
			measured[root(r)] = true
		}
	}
	var out []Row
	at := map[string]int{} // root → its row in out
	for _, r := range rs {
		k := root(r)
		if i, ok := at[k]; ok && k != "" && measured[k] {
			out[i].Shared = append(out[i].Shared, r)
			continue
		}
		if k != "" && measured[k] {
			at[k] = len(out)
		}
		out = append(out, Row{Ranked: r})
	}
	return out
}

// ShownAlso are the other spellings of plan row p worth naming to a person:
// those that name only layers model a has (a scope with no layer captures
// nothing, so "te attn,mamba" on a model without Mamba layers is te attn
// written longer, and naming Mamba there would suggest it has some).
func ShownAlso(p Planned, a presets.Arch) []presets.Candidate {
	var out []presets.Candidate
	for _, c := range p.Also {
		if !slices.ContainsFunc(c.Scopes, func(s string) bool { ok, _ := scopeCaptures(a, s); return !ok }) {
			out = append(out, c)
		}
	}
	return out
}

// Basis says in one line what a ranking's figures rest on when they are
// not measured on the framework or the job: an estimate (or an emulation
// on this GPU) with host costs from a framework profile, naming where it
// was measured, or from PyTorch's per-op costs, which makes every graph
// gain a lower bound; and what a run on the GPU would add. "" when every
// result was measured by the framework or a job.
func Basis(rs []Ranked) string {
	for _, r := range rs {
		if s := r.Result.Source; s == engine.SourceEstimated || s == engine.SourceMeasured {
			return resultBasis(r.Result, "")
		}
	}
	return ""
}

// resultBasis is Basis for one estimated or emulated result ("" for
// any other), with figures (its step time, say) after the GPU.
func resultBasis(r engine.Result, figures string) string {
	if figures != "" {
		figures = " (" + figures + ")"
	}
	var what string
	switch r.Source {
	case engine.SourceEstimated:
		what = "ESTIMATED for " + deviceName(r) + figures + ", not measured"
	case engine.SourceMeasured:
		what = "EMULATED on " + deviceName(r) + figures + " by cgtune's cuda engine, not run on Megatron-Core"
	default:
		return ""
	}
	if r.HostCosts == stepmodel.HostCostsProfile {
		from := r.ProfileFrom
		if from == "" {
			from = "a GPU node"
		}
		return fmt.Sprintf("%s: host costs from the framework profile measured on %s; a GPU run (--engine megatron) measures the step itself, with its noise", what, from)
	}
	return what + ": no framework profile, so host costs are PyTorch's per-op costs and every graph gain is a LOWER BOUND; " +
		"a GPU run measures Megatron-Core's own (cgtune probe --framework, or --engine megatron)"
}

// deviceName is the GPU a result was measured on or estimated for.
func deviceName(r engine.Result) string {
	if n := strings.TrimSuffix(r.Device.Name, " (estimated)"); n != "" {
		return n
	}
	return "the layout's GPU"
}

// OneTie is a line for a ranking whose successful candidates all lie
// within one tie band of each other (even where the ranking splits them
// into tie groups that chain), so that nothing among them is faster than
// another beyond noise, which an estimate cannot resolve; "" otherwise.
func OneTie(rs []Ranked) string {
	n := 0
	var lo, hi, band float64
	for _, r := range rs {
		if r.Result.Failed() {
			continue
		}
		if r.Tie == 0 {
			return ""
		}
		step := r.Result.Step.Median
		if n == 0 || step < lo {
			lo = step
		}
		hi, band = max(hi, step), max(band, r.TieBandMs)
		n++
	}
	if n < 2 || hi-lo > band {
		return ""
	}
	slow, fast := speedupRange(rs)
	if Basis(rs) != "" {
		return fmt.Sprintf("all %d candidates lie within one tie band (%.3f–%.3f× eager): the estimate cannot tell them apart; only a measurement on the GPU can", n, slow, fast)
	}
	return fmt.Sprintf("all %d candidates lie within one tie band (%.3f–%.3f× eager): none is faster than another beyond noise", n, slow, fast)
}

func speedupRange(rs []Ranked) (lo, hi float64) {
	for _, r := range rs {
		if s := r.Result.Speedup; !r.Result.Failed() && s > 0 {
			if lo == 0 || s < lo {
				lo = s
			}
			hi = max(hi, s)
		}
	}
	return lo, hi
}
