package search

import (
	"fmt"
	"slices"

	"cgtune/presets"
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
