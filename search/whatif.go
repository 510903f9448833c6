package search

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/stepmodel"
)

// What-if rows (Config.WhatIf): a candidate the recipe rejects, with the
// enabling changes of the rule table (recipe.Rule.Enabling) that let it
// run applied to the recipe, one or two of them. The engines run it on
// the step the changes make (drop-and-pad experts, EP overlap off); its
// speed-up is over the recipe's own eager step as the recipe runs today,
// so the changes' own cost is in the number, and its eager step with the
// changes applied is kept beside it (WhatIf). What-if rows rank in their
// own table (DoneEvent.WhatIf); those whose every change the user accepts
// (Config.Accept) compete in the main ranking too.

// MaxChanges is how many enabling changes away from the recipe a what-if
// row may be.
const MaxChanges = 2

// workloads are a search's workloads: the recipe's own, and one per set
// of enabling changes its what-if rows apply, built once each.
type workloads struct {
	cfg  Config
	base *stepmodel.Workload
	mu   sync.Mutex
	by   map[string]builtWorkload
}

type builtWorkload struct {
	w   *stepmodel.Workload
	err error
}

func newWorkloads(cfg Config, base *stepmodel.Workload) *workloads {
	return &workloads{cfg: cfg, base: base, by: map[string]builtWorkload{}}
}

// of is the workload candidate c runs on: the recipe's, or for a what-if
// row the one its changes make (the recipe's workload options with what
// the changed recipe decides of the step).
func (ws *workloads) of(c presets.Candidate) (*stepmodel.Workload, error) {
	if len(c.WhatIf) == 0 {
		return ws.base, nil
	}
	k := strings.Join(c.WhatIf, ",")
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if b, ok := ws.by[k]; ok {
		return b.w, b.err
	}
	var b builtWorkload
	opts, err := ws.cfg.Target().WithChanges(c.WhatIf).MoEWorkload(ws.base.Spec.Options)
	if err == nil {
		b.w, err = stepmodel.BuildWorkload(ws.cfg.Model, ws.cfg.Layout, opts)
	}
	if err != nil {
		b.err = fmt.Errorf("the step with %s: %w", strings.Join(c.WhatIf, ", "), err)
	}
	ws.by[k] = b
	return b.w, b.err
}

// addWhatIf adds a what-if row for every rejected spelling of the plan
// that MaxChanges enabling changes or fewer let run: each set of changes
// that does, none of whose subsets does, the rows merged by effective
// configuration as the plan merges the others.
func (b *planBuilder) addWhatIf(ctx context.Context) error {
	n := len(b.plan)
	for i := range n {
		p := b.plan[i]
		if p.Valid() || !p.Candidate.Graphed() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, set := range b.liftingSets(p.Candidate, p.Violations) {
			c := withChanges(p.Candidate, set)
			b.place(c, b.judgeWhatIf(c))
		}
	}
	return nil
}

// withChanges is c with the enabling changes names of its own.
func withChanges(c presets.Candidate, names []string) presets.Candidate {
	c.Scopes = slices.Clone(c.Scopes)
	c.WhatIf = slices.Clone(names)
	return c
}

// judgeWhatIf is judge, with a capture the plan says fails counted as a
// violation: a change that leaves the graph holding a host sync has not
// let it run.
func (b *planBuilder) judgeWhatIf(c presets.Candidate) judged {
	j := b.judge(c)
	if len(j.violations) == 0 && j.cp.Failure != nil {
		j.violations = []recipe.Violation{{ID: recipe.WillFailID, Message: recipe.WillFailMessage(j.cp)}}
	}
	return j
}

// liftingSets are the sets of enabling changes (names, in the table's
// order) that let c, rejected with violations vs, run: one change each
// violation's rule names, or that change and one the next violations'
// rules name; only sets none of whose subsets already does.
func (b *planBuilder) liftingSets(c presets.Candidate, vs []recipe.Violation) [][]string {
	var out [][]string
	tried := map[string]bool{}
	try := func(names []string) ([]recipe.Violation, bool) {
		cs, err := recipe.ParseChanges(names)
		if err != nil {
			return nil, false
		}
		names = changeNames(cs)
		k := strings.Join(names, ",")
		if tried[k] {
			return nil, false
		}
		tried[k] = true
		j := b.judgeWhatIf(withChanges(c, names))
		if len(j.violations) == 0 {
			out = append(out, names)
			return nil, true
		}
		return j.violations, false
	}
	for _, ch := range lifting(vs) {
		next, ok := try([]string{ch.Name})
		if ok || MaxChanges < 2 {
			continue
		}
		for _, ch2 := range lifting(next) {
			if ch2.Name != ch.Name {
				try([]string{ch.Name, ch2.Name})
			}
		}
	}
	return minimalSets(out)
}

// lifting are the changes that may lift violations vs: those the rules
// of vs name, each once; none when a violation's rule names none (no
// change lifts it, so none lets the candidate run).
func lifting(vs []recipe.Violation) []recipe.Change {
	var out []recipe.Change
	for _, v := range vs {
		cs := recipe.ChangesFor(v)
		if len(cs) == 0 {
			return nil
		}
		for _, c := range cs {
			if !slices.ContainsFunc(out, func(o recipe.Change) bool { return o.Name == c.Name }) {
				out = append(out, c)
			}
		}
	}
	return out
}

func changeNames(cs []recipe.Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// minimalSets drops every set that holds another set of sets.
func minimalSets(sets [][]string) [][]string {
	var out [][]string
	for i, s := range sets {
		covered := false
		for j, o := range sets {
			if i != j && len(o) < len(s) && isSubset(o, s) {
				covered = true
			}
		}
		if !covered {
			out = append(out, s)
		}
	}
	return out
}

func isSubset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// WhatIf is how a what-if row's changes were priced: its speed-up
// (Result.Speedup) is over RecipeEager, the recipe's eager step as it runs
// today; GraphSpeedup × ChangeSpeedup is that speed-up, what the graph
// gains over the eager step with the changes applied and what the changes
// alone do to the eager step.
type WhatIf struct {
	Changes []PricedChange `json:"changes"`
	// RecipeEager is the recipe's own eager step, measured by the engine
	// that ran the row (its runs of the recipe's candidates); zero when
	// it ran none (Baseline says so).
	RecipeEager stepmodel.Stats `json:"recipe_eager"`
	// ChangedEager is the eager step with the changes applied.
	ChangedEager stepmodel.Stats `json:"changed_eager"`
	// GraphSpeedup is ChangedEager over the row's step.
	GraphSpeedup float64 `json:"graph_speedup"`
	// ChangeSpeedup is RecipeEager over ChangedEager: below 1 the changes
	// slow the eager step down (0 without RecipeEager).
	ChangeSpeedup float64 `json:"change_speedup"`
	// Baseline says what the speed-up is over.
	Baseline string `json:"baseline"`
	// Accepted: the user accepts every change of the row (Config.Accept),
	// so it competes in the main ranking as well.
	Accepted bool `json:"accepted,omitempty"`
}

// PricedChange is one enabling change of a what-if row and how the engine
// that ran the row took it.
type PricedChange struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
	// Sets are its keys and values as the recipe spells them.
	Sets string `json:"sets"`
	Cost string `json:"cost"`
	// Priced says whether the engine ran the change, modelled it, or
	// priced the step without it.
	Priced string `json:"priced"`
}

// whatIfNote is the line the overrides of a what-if row carry: the recipe
// rejects the candidate today, and the changes these overrides carry let
// it run ("" for a candidate the recipe allows).
func whatIfNote(r Ranked) string {
	c := r.Result.Candidate
	if len(c.WhatIf) == 0 {
		return ""
	}
	line := fmt.Sprintf("what-if: the recipe rejects %s today; these overrides carry the enabling changes that let it run (%s), each with its cost",
		presets.Candidate{Impl: c.Impl, Scopes: c.Scopes, Warmup: c.Warmup}.Name(), strings.Join(c.WhatIf, ", "))
	if wi := r.WhatIf; wi != nil && wi.ChangeSpeedup > 0 {
		line += fmt.Sprintf("; its eager step with them is %.3f× the recipe's, its graph %.3f× that", wi.ChangeSpeedup, wi.GraphSpeedup)
	}
	return line
}

// Accepts reports whether every enabling change of c is among accepted.
func Accepts(accepted []string, c presets.Candidate) bool {
	return len(c.WhatIf) > 0 && isSubset(c.WhatIf, accepted)
}

// splitWhatIf puts the what-if results of es on the recipe's own eager
// step (onRecipeEager) and returns them apart from the recipe's
// candidates; t is the search's target, accepted the changes the user
// accepts.
func splitWhatIf(es []entry, t recipe.Target, accepted []string) (base, whatIf []entry) {
	es = onFullestEagerPool(es)
	for _, e := range es {
		if len(e.res.Candidate.WhatIf) == 0 {
			base = append(base, e)
		}
	}
	cond, _ := t.Conditions()
	for _, e := range es {
		if len(e.res.Candidate.WhatIf) > 0 {
			whatIf = append(whatIf, onRecipeEager(e, base, cond, accepted))
		}
	}
	return base, whatIf
}

// onRecipeEager is what-if entry e with its speed-up over the recipe's
// own eager step, measured by the same source among base's results, and
// its pricing (WhatIf); cond is the recipe the changes' keys are spelled
// for.
func onRecipeEager(e entry, base []entry, cond *recipe.Recipe, accepted []string) entry {
	res := e.res
	wi := &WhatIf{Changes: pricedChanges(res, cond), Accepted: Accepts(accepted, res.Candidate)}
	e.whatIf = wi
	if res.Failed() {
		return e
	}
	wi.ChangedEager = res.Eager
	if res.Step.Median > 0 && res.Eager.Median > 0 {
		wi.GraphSpeedup = res.Eager.Median / res.Step.Median
	}
	var same []engine.Result
	for _, b := range base {
		if !b.derived && !b.res.Failed() && b.res.Source == res.Source {
			same = append(same, b.res)
		}
	}
	recipeEager, ok := eagerAsNone(same)
	if !ok || res.Eager.Median <= 0 {
		wi.Baseline = fmt.Sprintf("the %s engine ran none of the recipe's own candidates: the speed-up is over the eager step with the changes applied", res.Source)
		return e
	}
	wi.RecipeEager = recipeEager.Eager
	wi.ChangeSpeedup = recipeEager.Eager.Median / res.Eager.Median
	wi.Baseline = fmt.Sprintf("the recipe's eager step as it runs today (%.2f ms, the %s eager baselines of %d runs of its candidates)",
		recipeEager.Eager.Median, res.Source, len(same))
	res.Eager = recipeEager.Eager
	if res.Step.Median > 0 {
		res.Speedup = res.Eager.Median / res.Step.Median
	}
	res.Notes = append(slices.Clone(res.Notes), fmt.Sprintf("what-if: speed-up over %s; with %s its own eager step is %.2f ms (%.3f× the recipe's), its graph %.3f× that",
		wi.Baseline, strings.Join(res.Candidate.WhatIf, ", "), wi.ChangedEager.Median, wi.ChangeSpeedup, wi.GraphSpeedup))
	e.res = res
	return e
}

// pricedChanges are the enabling changes of result res, with their keys
// as recipe cond spells them (as written when it is nil) and how res's
// engine took each.
func pricedChanges(res engine.Result, cond *recipe.Recipe) []PricedChange {
	cs, err := recipe.ParseChanges(res.Candidate.WhatIf)
	if err != nil {
		return nil
	}
	out := make([]PricedChange, len(cs))
	for i, ch := range cs {
		out[i] = PricedChange{Name: ch.Name, Summary: ch.Summary, Sets: ch.SetsText(cond), Cost: ch.Cost, Priced: pricedBy(ch, res)}
	}
	return out
}

// pricedBy says how the engine that gave res took change ch: run for
// real, modelled by the step model, or not priced at all.
func pricedBy(ch recipe.Change, res engine.Result) string {
	switch {
	case res.Source == engine.SourceJob:
		return "run: the training job ran with it"
	case ch.Effect == recipe.EffectNone:
		return "not priced: the step is computed as without it"
	case res.Source == engine.SourceFramework && ch.Effect == recipe.EffectMoEShape:
		return "run: Megatron-Core ran the slice with drop-and-pad experts (padded expert GEMMs, no host sync in the dispatch)"
	case res.Source == engine.SourceFramework && ch.Effect == recipe.EffectEPOverlap:
		if epModelled(res.Framework) {
			return "modelled: the run's world size runs no EP all-to-all; the exposed dispatch and combine are added from the collectives model"
		}
		return "run: the ranks ran the EP all-to-all exposed, on Megatron-Core's plain schedule"
	case ch.Effect == recipe.EffectMoEShape:
		return "modelled: the step model's padded expert GEMMs and all-to-all (capacity factor × the routed tokens), no host sync in the dispatch"
	}
	return "modelled: the step model's dispatch and combine all-to-all exposed on the stream (collectives model)"
}

// epModelled reports whether a framework run added the EP all-to-all
// from the collectives model rather than running it.
func epModelled(f *engine.FrameworkInfo) bool {
	if f == nil {
		return true
	}
	return slices.ContainsFunc(f.Modelled, func(m string) bool { return strings.HasPrefix(m, "EP") })
}

// rankWhatIf ranks the what-if rows on their own, each with its speed-up
// over the search's reference (ref, the main ranking's row of it).
func rankWhatIf(whatIf []entry, opts RankOptions, ref *Ranked) []Ranked {
	if len(whatIf) == 0 {
		return nil
	}
	opts.ReferenceKey = ""
	rs := rankEntries(whatIf, opts)
	setVsReference(rs, ref)
	return rs
}

// acceptedEntries are the what-if entries whose every change the user
// accepts.
func acceptedEntries(whatIf []entry, accepted []string) []entry {
	var out []entry
	for _, e := range whatIf {
		if Accepts(accepted, e.res.Candidate) {
			out = append(out, e)
		}
	}
	return out
}

// ChangeUse is one enabling change of a search's what-if rows, with how
// each engine that ran a row with it priced it ("SOURCE: how", each once;
// source names the engine a result's source stands for).
type ChangeUse struct {
	PricedChange
	PricedBy []string
}

// ChangesOf lists each change of the what-if rows once, in the order the
// rows first name them.
func ChangesOf(rows []Ranked, source func(engine.Source) string) []ChangeUse {
	var out []ChangeUse
	at := map[string]int{}
	for _, r := range rows {
		if r.WhatIf == nil {
			continue
		}
		for _, c := range r.WhatIf.Changes {
			i, ok := at[c.Name]
			if !ok {
				i, at[c.Name] = len(out), len(out)
				out = append(out, ChangeUse{PricedChange: c})
			}
			line := source(r.Result.Source) + ": " + c.Priced
			if !slices.Contains(out[i].PricedBy, line) {
				out[i].PricedBy = append(out[i].PricedBy, line)
			}
		}
	}
	return out
}
