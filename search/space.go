package search

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"cgtune/engine"
	"cgtune/presets"
)

// SpaceID marks a candidate the rules accept but the search leaves out
// because it would measure the same thing as another candidate: a scope
// that captures nothing on this model, or one MCore rewrites into another
// candidate of the space.
const SpaceID = "SPACE"

// DefaultMBridge is the Megatron-Bridge release a search targets when the
// config names none (the last G2 release, as `cgtune check`).
const DefaultMBridge = "0.4"

// defaultWarmups are the warm-up values tried when the space names none:
// MB's perf recipes use 1, 2 and 3 (reference §3).
func defaultWarmups() []int { return []int{1, 2, 3} }

// withDefaults fills the unset parts of a space.
func withDefaults(s presets.Space) presets.Space {
	out := presets.Space{Impls: slices.Clone(s.Impls), Warmups: slices.Clone(s.Warmups)}
	if len(out.Impls) == 0 {
		out.Impls = slices.Clone(presets.Impls)
	}
	if len(out.Warmups) == 0 {
		out.Warmups = defaultWarmups()
	}
	for _, set := range s.Scopes {
		out.Scopes = append(out.Scopes, canonicalScopes(set))
	}
	return out
}

// canonicalScopes orders a scope set as the harness lists its scopes, so
// that {moe_router, attn} and {attn, moe_router} are one candidate. Names
// the harness does not know stay, at the end, for PERF-02 to reject.
func canonicalScopes(set []string) []string {
	out := slices.Clone(set)
	if out == nil {
		out = []string{}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		ia, ib := slices.Index(presets.Scopes, a), slices.Index(presets.Scopes, b)
		if ia < 0 {
			ia = len(presets.Scopes)
		}
		if ib < 0 {
			ib = len(presets.Scopes)
		}
		return ia - ib
	})
	return slices.Compact(out)
}

// allScopeSets is every subset of the six per-layer scopes (the empty one,
// the whole layer, first; then by size, each size in the harness's order),
// then full_iteration alone.
func allScopeSets() [][]string {
	n := len(presets.LayerScopes)
	var sets [][]string
	for size := 0; size <= n; size++ {
		for mask := 0; mask < 1<<n; mask++ {
			if bitCount(mask) != size {
				continue
			}
			set := []string{}
			for i, sc := range presets.LayerScopes {
				if mask&(1<<i) != 0 {
					set = append(set, sc)
				}
			}
			sets = append(sets, set)
		}
	}
	return append(sets, []string{presets.ScopeFullIteration})
}

func bitCount(m int) int {
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}

// enumerate lists the candidates of a (defaulted) space in plan order:
// impls in the space's order, each impl's scope sets, each set's warm-ups.
// `none` appears once, with MCore's default warm-up, since it captures
// nothing for a warm-up to matter.
func enumerate(s presets.Space) []presets.Candidate {
	sets := s.Scopes
	if len(sets) == 0 {
		sets = allScopeSets()
	}
	var out []presets.Candidate
	seen := map[string]bool{}
	add := func(c presets.Candidate) {
		if !seen[c.Key()] {
			seen[c.Key()] = true
			out = append(out, c)
		}
	}
	for _, impl := range s.Impls {
		if impl == presets.ImplNone {
			add(presets.Candidate{Impl: impl, Scopes: []string{}, Warmup: presets.DefaultWarmup})
			continue
		}
		for _, set := range sets {
			for _, w := range s.Warmups {
				add(presets.Candidate{Impl: impl, Scopes: slices.Clone(set), Warmup: w})
			}
		}
	}
	return out
}

// scopeCaptures reports whether a per-layer scope captures anything on the
// architecture, and names what it needs when it does not.
func scopeCaptures(a presets.Arch, scope string) (bool, string) {
	switch scope {
	case presets.ScopeAttn:
		return a.HasAttention(), "attention layer"
	case presets.ScopeMLP:
		return a.HasDenseMLP(), "dense MLP layer"
	case presets.ScopeMoE, presets.ScopeMoERouter, presets.ScopeMoEPreprocess:
		return a.MoE != nil, "MoE layer"
	case presets.ScopeMamba:
		return a.HasMamba(), "Mamba layer"
	}
	return true, ""
}

// spaceViolation is the SPACE rejection of a candidate the rules accept,
// or nil. keys are the candidates of the space, so that a rewrite into a
// candidate the space does not hold is kept.
func spaceViolation(m presets.Model, c presets.Candidate, notes []string, keys map[string]bool) *Violation {
	if !c.Graphed() || c.FullIteration() {
		return nil
	}
	var dead []string
	var what []string
	for _, sc := range c.Scopes {
		if ok, need := scopeCaptures(m.Arch, sc); !ok {
			dead = append(dead, sc)
			what = append(what, need)
		}
	}
	if len(dead) > 0 {
		rest := presets.Candidate{Impl: c.Impl, Warmup: c.Warmup}
		for _, sc := range c.Scopes {
			if !slices.Contains(dead, sc) {
				rest.Scopes = append(rest.Scopes, sc)
			}
		}
		same := "nothing is captured"
		if len(rest.Scopes) > 0 {
			same = "the same as " + rest.Label()
		}
		return &Violation{ID: SpaceID, Message: fmt.Sprintf("%s captures nothing on %s: the model has no %s (%s)",
			strings.Join(dead, ","), m.Name, strings.Join(slices.Compact(what), " or "), same)}
	}
	// TC-17: impl local graphs moe_router and moe_preprocess together, so
	// either one alone runs as both; measuring it would time something
	// the recipe never runs.
	for _, n := range notes {
		if !strings.HasPrefix(n, "TC-17:") {
			continue
		}
		both := presets.Candidate{Impl: c.Impl, Scopes: canonicalScopes(append(slices.Clone(c.Scopes), presets.ScopeMoERouter, presets.ScopeMoEPreprocess)), Warmup: c.Warmup}
		if keys[both.Key()] {
			return &Violation{ID: SpaceID, Message: fmt.Sprintf("impl local captures moe_router and moe_preprocess together (TC-17): the same as %s", both.Label())}
		}
	}
	return nil
}

// Plan enumerates the configuration space of cfg (impls × scope sets ×
// warm-ups; `none` once) and checks every candidate: rejected ones carry
// the rule ids and messages MB would print (or SPACE for duplicates) and
// are never run. With cfg.Estimator set, each valid candidate carries the
// estimate engine's result, which orders the search and sizes its rounds.
// The order is deterministic.
func Plan(cfg Config) ([]Planned, error) {
	mb := cfg.mbridge()
	if _, err := presets.ParseMBridge(mb); err != nil {
		return nil, err
	}
	if err := checkSets(cfg.Model, cfg.Layout, mb, cfg.Sets); err != nil {
		return nil, err
	}
	cands := enumerate(withDefaults(cfg.Space))
	keys := make(map[string]bool, len(cands))
	for _, c := range cands {
		keys[c.Key()] = true
	}
	plan := make([]Planned, len(cands))
	for i, c := range cands {
		plan[i].Candidate = c
		r := ValidateCandidate(cfg.Model, cfg.Layout, c, mb, cfg.Sets)
		if !r.OK() {
			plan[i].Violations = r.Violations
			continue
		}
		if v := spaceViolation(cfg.Model, c, r.Notes, keys); v != nil {
			plan[i].Violations = []Violation{*v}
		}
	}
	if cfg.Estimator != nil {
		w, err := engine.BuildWorkload(cfg.Model, cfg.Layout, cfg.Workload)
		if err != nil {
			return nil, err
		}
		for i := range plan {
			if plan[i].Valid() {
				r := cfg.Estimator.Run(context.Background(), w, plan[i].Candidate, engine.RunOptions{EagerSteps: cfg.Measured.EagerSteps, MeasuredSteps: finalSteps}, nil)
				plan[i].Estimate = &r
			}
		}
	}
	return plan, nil
}

// checkSets reports a --set that cannot be applied once, instead of as a
// CONFIG violation on every candidate.
func checkSets(m presets.Model, l presets.Layout, mbridge string, sets map[string]string) error {
	r, err := NewRecipe(m, l, mbridge)
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(sets)) {
		if err := r.ApplySet(k + "=" + sets[k]); err != nil {
			return err
		}
	}
	return nil
}

// armKey names a candidate without its warm-up: the unit the search
// measures once per round (the warm-up does not change the steady state).
func armKey(c presets.Candidate) string {
	k := c.Key()
	return k[:strings.LastIndex(k, "/")]
}
