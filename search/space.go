package search

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/stepmodel"
)

// SpaceID marks a candidate the rules accept but the search leaves out
// because it captures nothing: every scope it lists is absent from the
// model.
const SpaceID = "SPACE"

// DefaultMBridge is the Megatron-Bridge release a search targets when the
// config names none (the same default as everywhere in cgtune).
const DefaultMBridge = presets.DefaultMBridge

// withDefaults fills the unset parts of a space.
func withDefaults(s presets.Space) presets.Space {
	out := presets.Space{Impls: slices.Clone(s.Impls), Warmups: slices.Clone(s.Warmups)}
	if len(out.Impls) == 0 {
		out.Impls = slices.Clone(presets.Impls)
	}
	if len(out.Warmups) == 0 {
		out.Warmups = presets.DefaultWarmups()
	}
	for _, set := range s.Scopes {
		out.Scopes = append(out.Scopes, presets.CanonicalScopes(set))
	}
	return out
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

// Effective is what Megatron-Core runs for a candidate the rules accept,
// written as the candidate that says it most simply: spellings with the
// same Effective are one configuration (aliases), measured once.
type Effective struct {
	Candidate presets.Candidate
	// Why lists what made the spelling differ from Candidate, one note
	// per rewrite ("attn captures nothing ...").
	Why []string
	// Nothing is set when no scope the candidate lists exists in the
	// model: it would capture nothing.
	Nothing string
}

// Canonical is the effective configuration of candidate c on model m for
// Megatron-Bridge generation gen (c must be one the rules accept there):
//
//   - a full-iteration graph is one graph of the whole forward-backward: the
//     overrides carry only full_iteration (G2 scope of impl local, G3 impl
//     full_iteration), whatever else the scope list held;
//   - a scope the model has no layer for captures nothing and is dropped;
//   - impl local captures moe_router and moe_preprocess together (TC-17);
//   - impl local on a plain GPT model gives each TransformerLayer one graph
//     manager, on the whole layer, as soon as attn (every layer has
//     attention) or, on a dense layer, mlp is listed (MLM
//     megatron/core/transformer/transformer_layer.py,
//     TransformerLayer.create_mcore_cudagraph_manager, core_v0.16.0 to
//     core_v0.19.0), so such lists are the whole-layer graph.
func Canonical(m presets.Model, gen presets.Generation, c presets.Candidate) Effective {
	_ = gen // both generations rewrite the same way; the overrides' spelling differs (recipe.BuildOverrides)
	e := Effective{Candidate: presets.Candidate{Impl: c.Impl, Scopes: presets.CanonicalScopes(c.Scopes), Warmup: c.Warmup, WhatIf: c.WhatIf}}
	if !c.Graphed() {
		e.Candidate = presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}, Warmup: presets.DefaultWarmup}
		return e
	}
	if c.FullIteration() {
		if len(c.Scopes) > 1 || c.Impl != presets.ImplLocal {
			e.Why = append(e.Why, "a full-iteration graph holds the whole forward-backward: the recipe carries only full_iteration")
		}
		e.Candidate = presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: c.Warmup, WhatIf: c.WhatIf}
		return e
	}
	var live, dead, need []string
	for _, sc := range e.Candidate.Scopes {
		if ok, what := scopeCaptures(m.Arch, sc); ok {
			live = append(live, sc)
		} else {
			dead = append(dead, sc)
			need = append(need, what)
		}
	}
	if len(dead) > 0 {
		msg := fmt.Sprintf("%s captures nothing on %s: the model has no %s", strings.Join(dead, ","), m.Name, strings.Join(slices.Compact(need), " or "))
		if len(live) == 0 {
			e.Nothing = msg
			return e
		}
		e.Why = append(e.Why, msg)
		e.Candidate.Scopes = live
	}
	if c.Impl != presets.ImplLocal {
		return e
	}
	sc := e.Candidate.Scopes
	r, p := slices.Contains(sc, presets.ScopeMoERouter), slices.Contains(sc, presets.ScopeMoEPreprocess)
	if r != p {
		e.Why = append(e.Why, "impl local captures moe_router and moe_preprocess together (TC-17)")
		e.Candidate.Scopes = presets.CanonicalScopes(append(slices.Clone(sc), presets.ScopeMoERouter, presets.ScopeMoEPreprocess))
		sc = e.Candidate.Scopes
	}
	// mlp without attn is not the whole layer: Megatron-Core fails to
	// build it (stepmodel.PlanCapture says so).
	if m.Arch.HybridPattern == "" && slices.Contains(sc, presets.ScopeAttn) {
		e.Why = append(e.Why, "impl local graphs each TransformerLayer whole once attn is listed")
		e.Candidate.Scopes = []string{}
	}
	return e
}

// Plan enumerates the configuration space of cfg (impls × scope sets ×
// warm-ups; `none` once) and checks every candidate: rejected ones carry
// the rule ids and messages MB would print and are never run. Valid
// candidates are merged by their effective configuration (Canonical): one
// row per configuration Megatron would run, written in its canonical form,
// with the space's other spellings in Also. A configuration whose capture
// is known to fail is rejected as recipe.WillFailID. With cfg.Estimator set, each
// valid row carries the estimate engine's result, which orders the search
// and sizes its rounds. The order is deterministic: a row sits where its
// first spelling was enumerated.
func Plan(cfg Config) ([]Planned, error) {
	return PlanContext(context.Background(), cfg)
}

// PlanContext is Plan that stops, with ctx's error, once ctx is done: a
// large space takes a while to plan and an interrupt must not wait for it.
// A space of more than presets.MaxSpaceCandidates candidates is refused.
func PlanContext(ctx context.Context, cfg Config) ([]Planned, error) {
	if err := presets.CheckSpaceSize(cfg.Space); err != nil {
		return nil, err
	}
	mb := cfg.mbridge()
	gen, err := presets.ParseMBridge(mb)
	if err != nil {
		return nil, err
	}
	if err := checkSets(cfg.Model, cfg.Layout, mb, cfg.Sets); err != nil {
		return nil, err
	}
	w, err := stepmodel.BuildWorkload(cfg.Model, cfg.Layout, planOptions(cfg, mb, gen))
	if err != nil {
		return nil, err
	}
	ref, _ := cfg.reference()
	b := &planBuilder{cfg: cfg, gen: gen, ws: newWorkloads(cfg, w), rows: map[string]int{},
		val: recipe.NewValidator(recipe.Target{Model: cfg.Model, Layout: cfg.Layout, MBridge: mb, Sets: cfg.Sets})}
	for _, c := range withReference(enumerate(withDefaults(cfg.Space)), ref) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b.add(c)
	}
	if cfg.WhatIf {
		if err := b.addWhatIf(ctx); err != nil {
			return nil, err
		}
	}
	plan := b.plan
	if cfg.Estimator != nil {
		for i := range plan {
			if plan[i].Valid() {
				pw, err := b.ws.of(plan[i].Candidate)
				if err != nil {
					return nil, err
				}
				r := cfg.Estimator.Run(ctx, pw, plan[i].Candidate, engine.RunOptions{EagerSteps: cfg.Measured.EagerSteps, MeasuredSteps: finalSteps}, nil)
				plan[i].Estimate = &r
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	return plan, nil
}

// planBuilder builds a plan: each spelling judged, and the valid ones
// merged into one row per configuration Megatron would run.
type planBuilder struct {
	cfg  Config
	gen  presets.Generation
	val  *recipe.Validator
	ws   *workloads
	plan []Planned
	rows map[string]int // effective configuration (with its enabling changes) → row in plan
}

// judged is the plan's verdict on one spelling: its violations (the
// rules', or SPACE), or its effective configuration and capture plan on
// the workload it runs on.
type judged struct {
	violations []recipe.Violation
	e          Effective
	cp         *stepmodel.CapturePlan
	w          *stepmodel.Workload
}

func (b *planBuilder) judge(c presets.Candidate) judged {
	r := b.val.Validate(c)
	if !r.OK() {
		return judged{violations: r.Violations}
	}
	e := Canonical(b.cfg.Model, b.gen, c)
	if e.Nothing != "" {
		return judged{violations: []recipe.Violation{{ID: SpaceID, Message: e.Nothing + " (nothing is captured)"}}}
	}
	w, err := b.ws.of(c)
	if err != nil {
		return judged{violations: []recipe.Violation{{ID: recipe.ConfigID, Message: err.Error()}}}
	}
	cp := stepmodel.PlanCapture(w, c, b.gen)
	if c.Graphed() && cp.Failure == nil && !cp.Graphed() {
		return judged{violations: []recipe.Violation{{ID: SpaceID, Message: fmt.Sprintf(
			"%s (%s) captures nothing on %s's layers: the step would run eagerly (nothing is captured)", c.Label(), cp.Config, b.cfg.Model.Name)}}}
	}
	return judged{e: e, cp: cp, w: w}
}

// add judges spelling c and puts it in the plan: a rejected row, or into
// the row of its effective configuration.
func (b *planBuilder) add(c presets.Candidate) {
	j := b.judge(c)
	if len(j.violations) > 0 {
		b.plan = append(b.plan, Planned{Candidate: c, Violations: j.violations})
		return
	}
	b.place(c, j)
}

// place puts valid spelling c into the row of its effective
// configuration, a new row where it is the first.
func (b *planBuilder) place(c presets.Candidate, j judged) {
	key := effectiveKey(j.cp, c)
	rowKey := strings.Join(c.WhatIf, "+") + "|" + key
	if i, ok := b.rows[rowKey]; ok {
		row := &b.plan[i]
		if c.Key() == row.Candidate.Key() {
			return
		}
		why := j.e.Why
		if len(why) == 0 {
			why = []string{fmt.Sprintf("%s graphs the same ops as %s on %s", c.Label(), row.Candidate.Label(), b.cfg.Model.Name)}
		}
		row.Why = appendNew(row.Why, why...)
		if len(c.Scopes) < len(row.Candidate.Scopes) {
			// The row is written in its simplest spelling.
			row.Also = append(row.Also, row.Candidate)
			row.Candidate = c
			return
		}
		row.Also = append(row.Also, c)
		return
	}
	// The row is written in the canonical spelling when Megatron
	// runs that spelling the same way and the rules take it.
	rep := c
	if e := j.e; e.Candidate.Key() != c.Key() && effectiveKey(stepmodel.PlanCapture(j.w, e.Candidate, b.gen), e.Candidate) == key &&
		b.val.Validate(e.Candidate).OK() {
		rep = e.Candidate
	}
	p := Planned{Candidate: rep}
	if rep.Key() != c.Key() {
		p.Also, p.Why = []presets.Candidate{c}, j.e.Why
	}
	switch {
	case j.cp.Failure != nil && b.cfg.RunPredictedFailures:
		p.PredictedFailure = recipe.WillFailMessage(j.cp)
	case j.cp.Failure != nil:
		p.Violations = []recipe.Violation{{ID: recipe.WillFailID, Message: recipe.WillFailMessage(j.cp)}}
	}
	b.rows[rowKey] = len(b.plan)
	b.plan = append(b.plan, p)
}

// planOptions are the workload options of the search: the config's, with
// the MoE mode the recipe asks for (drop-and-pad from --set, else
// Megatron's dropless default) and the generation, when the config leaves
// them to the search; the engines are given the same.
func planOptions(cfg Config, mbridge string, gen presets.Generation) stepmodel.WorkloadOptions {
	opts := cfg.Workload
	if opts.Dropless == nil {
		if o, err := recipe.MoEWorkload(opts, cfg.Model, cfg.Layout, mbridge, cfg.Sets); err == nil {
			opts = o
		}
	}
	if opts.Generation == 0 {
		opts.Generation = gen
	}
	return opts
}

// effectiveKey names what Megatron-Core runs for a candidate: the capture
// mechanism and, for each layer kind, the runs of forward and backward ops
// its graphs cover, as stepmodel.PlanCapture decides them, and the warm-up
// when something is graphed. Candidates with one key capture the same
// graphs: they are one configuration.
func effectiveKey(p *stepmodel.CapturePlan, c presets.Candidate) string {
	if !c.Graphed() {
		return "none"
	}
	var kinds []string
	seen := map[presets.LayerKind]bool{}
	for _, l := range p.Layers {
		if seen[l.Kind] {
			continue
		}
		seen[l.Kind] = true
		k := string(l.Kind) + ":"
		for _, segs := range [][]stepmodel.Segment{l.Fwd, l.Bwd} {
			for _, sg := range segs {
				if sg.Graphed() {
					k += fmt.Sprintf("%d-%d,", sg.From, sg.To)
				}
			}
			k += "/"
		}
		kinds = append(kinds, k)
	}
	return fmt.Sprintf("%s|%d graphs|%s|w%d", p.Mechanism, len(p.Graphs), strings.Join(kinds, " "), c.Warmup)
}

func appendNew(list []string, items ...string) []string {
	for _, it := range items {
		if !slices.Contains(list, it) {
			list = append(list, it)
		}
	}
	return list
}

// CanonicalSpace writes a space's explicit scope sets as the model runs
// them, for saving: the parts of Canonical that do not depend on the impl
// (scopes the model lacks dropped, full_iteration alone, the harness's
// order, duplicates merged). A set that would capture nothing is kept as
// written, for the rules to report. An empty Scopes (every subset) stays.
func CanonicalSpace(m presets.Model, s presets.Space) presets.Space {
	out := presets.Space{Impls: slices.Clone(s.Impls), Warmups: slices.Clone(s.Warmups)}
	seen := map[string]bool{}
	for _, set := range s.Scopes {
		set = presets.CanonicalScopes(set)
		if slices.Contains(set, presets.ScopeFullIteration) {
			set = []string{presets.ScopeFullIteration}
		} else if e := Canonical(m, presets.G2, presets.Candidate{Impl: presets.ImplTE, Scopes: set}); e.Nothing == "" {
			set = e.Candidate.Scopes
		}
		k := strings.Join(set, ",")
		if !seen[k] {
			seen[k] = true
			out.Scopes = append(out.Scopes, set)
		}
	}
	if len(out.Warmups) > 0 {
		slices.Sort(out.Warmups)
		out.Warmups = slices.Compact(out.Warmups)
	}
	return out
}

// checkSets reports a --set that cannot be applied once, instead of as a
// CONFIG violation on every candidate.
func checkSets(m presets.Model, l presets.Layout, mbridge string, sets map[string]string) error {
	r, err := recipe.New(m, l, mbridge)
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
