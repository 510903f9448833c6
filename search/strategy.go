package search

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// Measured steps of the halving rounds: a short first look at every
// impl×scope, a longer one at the best third, a long one at the finalists.
const (
	round1Steps = 3
	round2Steps = 8
	finalSteps  = 15
)

// strategy decides which candidates run, in which rounds.
type strategy interface {
	// planned is the number of runs and their predicted GPU time (ms)
	// the strategy plans before anything ran.
	planned() (runs int, ms float64)
	run(ctx context.Context)
	// entries are the results for the final ranking.
	entries() []entry
	notes() []string
}

// fmtMs prints a GPU time in ms as a duration.
func fmtMs(ms float64) string {
	if math.IsInf(ms, 1) {
		return "unlimited"
	}
	return stepmodel.MsDuration(ms).Round(time.Second).String()
}

// estimateOrder orders candidates by their estimates with the ranking's
// own rules (failures the estimate predicts last), or keeps the plan order
// when some candidate has no estimate.
func estimateOrder[T any](items []T, est func(T) *engine.Result) []T {
	out := slices.Clone(items)
	var es []entry
	for _, it := range items {
		e := est(it)
		if e == nil {
			return out
		}
		es = append(es, entry{res: *e})
	}
	pos := map[string]int{}
	for i, rk := range rankEntries(es, RankOptions{}) {
		pos[rk.Result.Candidate.Key()] = i
	}
	slices.SortStableFunc(out, func(a, b T) int {
		return pos[est(a).Candidate.Key()] - pos[est(b).Candidate.Key()]
	})
	return out
}

// handedOn says which candidates the engines hand to another engine
// (engine.Delegator); none where they are not delegators.
func handedOn(engines []engine.Engine) func(presets.Candidate) bool {
	if len(engines) > 0 {
		if d, ok := engines[0].(engine.Delegator); ok {
			return d.Delegates
		}
	}
	return func(presets.Candidate) bool { return false }
}

// ownFirst moves the items whose candidate the engines hand to another
// engine after the others, keeping each part's order; all reports whether
// every item is handed on (false for no items).
func ownFirst[T any](engines []engine.Engine, items []T, cand func(T) presets.Candidate) (out []T, all bool) {
	handed := handedOn(engines)
	var own, others []T
	for _, it := range items {
		if handed(cand(it)) {
			others = append(others, it)
		} else {
			own = append(own, it)
		}
	}
	return append(own, others...), len(items) > 0 && len(own) == 0
}

// ---- exhaustive ----

// exhaustive runs every valid candidate, every warm-up included, in one
// round, best estimate first (so an interrupted search has measured the
// likeliest winners).
type exhaustive struct {
	r    *runner
	jobs []trial
}

func newExhaustive(r *runner) *exhaustive {
	steps := r.cfg.Measured.WithDefaults().MeasuredSteps
	var valid []Planned
	for _, p := range r.plan {
		if p.Valid() {
			valid = append(valid, p)
		}
	}
	valid, _ = ownFirst(r.cfg.Engines, estimateOrder(valid, func(p Planned) *engine.Result { return p.Estimate }), func(p Planned) presets.Candidate { return p.Candidate })
	e := &exhaustive{r: r}
	for _, p := range valid {
		var pred float64
		if p.Estimate != nil {
			pred = runCostMs(*p.Estimate, r.w.ScaleFactor(), r.opts(steps))
		}
		e.jobs = append(e.jobs, trial{cand: p.Candidate, round: 1, steps: steps, pred: pred})
	}
	return e
}

func (e *exhaustive) planned() (int, float64) {
	var ms float64
	for _, j := range e.jobs {
		ms += j.pred
	}
	return len(e.jobs), ms
}

func (e *exhaustive) run(ctx context.Context) {
	r := e.r
	r.mu.Lock()
	r.setPendingLocked(e.jobs, 0, 0)
	r.mu.Unlock()
	r.runRound(ctx, e.jobs, len(e.jobs), math.Inf(1), func() float64 { return 0 })
}

func (e *exhaustive) entries() []entry {
	var out []entry
	for _, f := range e.r.known() {
		out = append(out, entry{res: f.res, round: 1})
	}
	return out
}

func (e *exhaustive) notes() []string {
	steps := e.r.cfg.Measured.WithDefaults().MeasuredSteps
	return []string{fmt.Sprintf("exhaustive: every valid candidate, each warm-up measured on its own (%d runs of %d measured steps); the budget does not apply", len(e.jobs), steps)}
}

// setPendingLocked sets the planned-runs count from this round's jobs and
// the later rounds' sizes and predicted time, leaving out what the journal
// already holds.
func (r *runner) setPendingLocked(jobs []trial, laterRuns int, laterMs float64) {
	r.pending, r.pendMs = laterRuns, laterMs
	if len(jobs) > 0 {
		for k := range r.prior {
			if k.round > jobs[0].round {
				r.pending--
			}
		}
		r.pending = max(0, r.pending)
	}
	for _, j := range jobs {
		if _, ok := r.prior[resKey{j.round, j.cand.Key()}]; !ok {
			r.pending++
			r.pendMs += j.pred
		}
	}
}

// known is every finished result: the runs of this search and the
// journal's results the strategy did not ask for again.
func (r *runner) known() []finished {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.all)
	rest := make([]finished, 0, len(r.prior))
	for _, f := range r.prior {
		rest = append(rest, f)
	}
	slices.SortFunc(rest, func(a, b finished) int {
		if a.round != b.round {
			return a.round - b.round
		}
		return strings.Compare(a.res.Candidate.Key(), b.res.Candidate.Key())
	})
	return append(out, rest...)
}

// ---- successive halving ----

// arm is one impl×scope: the unit halving measures once per round. Its
// warm-ups share the steady state, so one of them (rep) is run and the
// others' job times are derived.
type arm struct {
	key     string
	rep     presets.Candidate
	warmups []int
	est     *engine.Result // the estimate of rep
}

// roundPlan is one round: how many arms, how many measured steps.
type roundPlan struct{ n, steps int }

// nominalRounds is successive halving for n1 arms: all of them short, the
// best third (at least 3) longer, the best 3 long. A round the next one
// would measure again arm for arm is left out (the longer one stays).
func nominalRounds(n1 int) []roundPlan {
	if n1 <= 0 {
		return nil
	}
	n2 := min(n1, max(3, (n1+2)/3))
	n3 := min(n2, 3)
	all := []roundPlan{{n1, round1Steps}, {n2, round2Steps}, {n3, finalSteps}}
	var out []roundPlan
	for i, rp := range all {
		if i+1 < len(all) && all[i+1].n == rp.n {
			continue
		}
		out = append(out, rp)
	}
	return out
}

// plansCost is the predicted GPU time of rounds when the k-th best arm
// costs cost(k, steps).
func plansCost(rounds []roundPlan, cost func(k, steps int) float64) float64 {
	var ms float64
	for _, rp := range rounds {
		for k := range rp.n {
			ms += cost(k, rp.steps)
		}
	}
	return ms
}

// fitRounds shrinks the halving plan for n arms until its predicted cost
// fits budgetMs: fewer arms in the first round (the estimate's best are
// kept), then a smaller final round, then no final round. fits is false
// when even the smallest plan (the first round of min(3, n) arms) does not
// fit; it runs anyway, since a search that measures nothing is no answer.
func fitRounds(n int, cost func(k, steps int) float64, budgetMs float64) (rounds []roundPlan, fits bool) {
	floor := min(3, n)
	var options [][]roundPlan
	for n1 := n; n1 >= floor; n1-- {
		options = append(options, nominalRounds(n1))
	}
	if floor > 0 {
		options = append(options, []roundPlan{{floor, round1Steps}, {min(2, floor), finalSteps}}, []roundPlan{{floor, round1Steps}})
	}
	for _, o := range options {
		if plansCost(o, cost) <= budgetMs {
			return o, true
		}
	}
	if floor == 0 {
		return nil, true
	}
	return []roundPlan{{floor, round1Steps}}, false
}

// fitLater sizes the rounds after a finished one for the n survivors and
// the GPU time left: the planned rounds, else only the final round, else a
// final of 2, else nothing more.
func fitLater(n int, planned []roundPlan, cost func(k, steps int) float64, leftMs float64) []roundPlan {
	if n == 0 || len(planned) == 0 {
		return nil
	}
	var capped []roundPlan
	for _, rp := range planned {
		capped = append(capped, roundPlan{min(rp.n, n), rp.steps})
	}
	var first []roundPlan
	for i, rp := range capped {
		if i+1 < len(capped) && capped[i+1].n == rp.n {
			continue
		}
		first = append(first, rp)
	}
	last := capped[len(capped)-1]
	options := [][]roundPlan{first, {last}}
	if last.n > 2 {
		options = append(options, []roundPlan{{2, last.steps}})
	}
	for _, o := range options {
		if plansCost(o, cost) <= leftMs {
			return o
		}
	}
	return nil
}

type halving struct {
	r      *runner
	arms   []*arm // in the estimate's order (or the plan's)
	rounds []roundPlan
	fits   bool
	budget float64
	// latest is each arm's result from the latest round it ran in.
	latest map[string]finished
	ran    []int // runs per round
	cut    int   // arms never measured because of the budget
	none   *presets.Candidate
	noneAs bool // none is measured as an arm (no graph candidate is valid)
	// noneOwn: none is measured as the first arm because the engine hands
	// every graph candidate to another engine, whose eager baselines are
	// not the engine's own (the megatron engine without TE on a dropless
	// MoE, where every local candidate is ruled out).
	noneOwn bool
}

func newHalving(r *runner) *halving {
	h := &halving{r: r, latest: map[string]finished{}, budget: r.cfg.budgetMs()}
	byKey := map[string]*arm{}
	for i := range r.plan {
		p := &r.plan[i]
		if !p.Valid() {
			continue
		}
		c := p.Candidate
		if !c.Graphed() {
			h.none = &c
			continue
		}
		k := armKey(c)
		a := byKey[k]
		if a == nil {
			a = &arm{key: k}
			byKey[k] = a
			h.arms = append(h.arms, a)
		}
		a.warmups = append(a.warmups, c.Warmup)
	}
	for _, a := range h.arms {
		// MCore's default warm-up when the space has it (the common
		// case, and what the engines were validated with), else the
		// longest: more eager steps before capture is the safer run.
		w := slices.Max(a.warmups)
		if slices.Contains(a.warmups, presets.DefaultWarmup) {
			w = presets.DefaultWarmup
		}
		a.rep = r.byKey[a.key+fmt.Sprintf("/w%d", w)].Candidate
		a.est = r.byKey[a.rep.Key()].Estimate
	}
	if len(h.arms) == 0 && h.none != nil {
		// Nothing to graph: the only answer is none, measured.
		h.noneAs = true
		h.arms = []*arm{h.noneArm()}
	}
	var allHanded bool
	h.arms, allHanded = ownFirst(r.cfg.Engines, estimateOrder(h.arms, func(a *arm) *engine.Result { return a.est }), func(a *arm) presets.Candidate { return a.rep })
	h.arms = referenceFirst(h.arms, r.refKey)
	if h.none != nil && !h.noneAs && allHanded {
		h.noneOwn = true
		h.arms = append([]*arm{h.noneArm()}, h.arms...)
	}
	r.mu.Lock()
	h.rounds, h.fits = fitRounds(len(h.arms), h.costFor(h.arms), h.budget)
	r.mu.Unlock()
	h.cut = len(h.arms)
	if len(h.rounds) > 0 {
		h.cut -= h.rounds[0].n
	}
	return h
}

// noneArm is the none candidate as an arm of its own.
func (h *halving) noneArm() *arm {
	return &arm{key: armKey(*h.none), rep: *h.none, warmups: []int{h.none.Warmup}, est: h.r.byKey[h.none.Key()].Estimate}
}

// predict is the GPU time (ms, before calibration) of running arm a for
// steps measured steps: from its latest result, else its estimate, else
// the average run so far. r.mu must be held.
func (h *halving) predict(a *arm, steps int) float64 {
	opts := h.r.opts(steps)
	scale := h.r.w.ScaleFactor()
	if f, ok := h.latest[a.key]; ok && !f.res.Failed() {
		return runCostMs(f.res, scale, opts)
	}
	if a.est != nil {
		return runCostMs(*a.est, scale, opts)
	}
	var sum float64
	var n int
	for _, f := range h.r.all {
		sum += runCostMs(f.res, scale, opts)
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// costFor is the cost function over an ordering: the k-th arm's run.
func (h *halving) costFor(order []*arm) func(k, steps int) float64 {
	return func(k, steps int) float64 {
		if k >= len(order) {
			return 0
		}
		return h.predict(order[k], steps)
	}
}

func (h *halving) planned() (int, float64) {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	var n int
	for _, rp := range h.rounds {
		n += rp.n
	}
	return n, plansCost(h.rounds, h.costFor(h.arms))
}

func (h *halving) run(ctx context.Context) {
	r := h.r
	order := h.arms
	for ri := 0; ri < len(h.rounds); ri++ {
		rp, round := h.rounds[ri], ri+1
		take := withReferenceArm(order[:min(rp.n, len(order))], order, h.r.refKey)
		var jobs []trial
		r.mu.Lock()
		for _, a := range take {
			jobs = append(jobs, trial{cand: a.rep, round: round, steps: rp.steps, pred: h.predict(a, rp.steps)})
		}
		later := h.rounds[ri+1:]
		laterRuns := 0
		for _, l := range later {
			laterRuns += l.n
		}
		cost := h.costFor(order)
		r.setPendingLocked(jobs, laterRuns, plansCost(later, cost))
		r.mu.Unlock()
		// The first round always measures a few (a search that measures
		// nothing is no answer); later rounds at least compare two.
		minIssue := min(2, len(jobs))
		if ri == 0 {
			minIssue = min(3, len(jobs))
		}
		out := r.runRound(ctx, jobs, minIssue, h.budget, func() float64 { return plansCost(later, cost) })
		h.ran = append(h.ran, len(out.results))
		var es []entry
		for _, a := range take {
			if f, ok := out.results[a.rep.Key()]; ok {
				h.latest[a.key] = f
				es = append(es, entry{res: f.res, round: round})
			}
		}
		if len(out.skipped) > 0 {
			r.note("round %d: %d of %d candidates not run: the budget (%s) ran out", round, len(out.skipped), len(jobs), h.budgetText())
		}
		if ctx.Err() != nil || ri+1 == len(h.rounds) {
			return
		}
		// The survivors, best first by the round's own ranking; a failed
		// candidate does not go on.
		byKey := map[string]*arm{}
		for _, a := range take {
			byKey[a.key] = a
		}
		order = nil
		for _, rk := range promotionOrder(rankEntries(es, r.rankOptions())) {
			// A none run for its baseline (noneOwn) is measured once: it
			// is the reference, not a contender for the longer rounds.
			if !(h.noneOwn && !rk.Result.Candidate.Graphed()) {
				order = append(order, byKey[armKey(rk.Result.Candidate)])
			}
		}
		r.mu.Lock()
		left := h.budget - r.spentMs
		next := fitLater(len(order), h.rounds[ri+1:], func(k, steps int) float64 {
			return h.costFor(order)(k, steps) * r.calibLocked()
		}, left)
		r.mu.Unlock()
		if !slices.Equal(next, h.rounds[ri+1:]) {
			if len(next) == 0 && len(order) > 0 {
				r.note("stopped after round %d: no later round fits the budget left (%s)", round, fmtMs(max(0, left)))
			}
			h.rounds = append(h.rounds[:ri+1:ri+1], next...)
		}
	}
}

// referenceFirst moves the arm of the search's reference (its plan row
// key refKey) to the front: the search always measures it.
func referenceFirst(arms []*arm, refKey string) []*arm {
	i := slices.IndexFunc(arms, func(a *arm) bool { return refKey != "" && slices.Contains(a.keys(), refKey) })
	if i <= 0 {
		return arms
	}
	out := append([]*arm{arms[i]}, arms[:i]...)
	return append(out, arms[i+1:]...)
}

// withReferenceArm is a round's take with the reference's arm in it: when
// the round's fastest leave it out, it takes the last place (a search
// always compares its winner with the reference measured as long).
func withReferenceArm(take, order []*arm, refKey string) []*arm {
	has := func(a *arm) bool { return refKey != "" && slices.Contains(a.keys(), refKey) }
	if len(take) == 0 || slices.ContainsFunc(take, has) {
		return take
	}
	i := slices.IndexFunc(order, has)
	if i < 0 {
		return take
	}
	out := slices.Clone(take)
	out[len(out)-1] = order[i]
	return out
}

// keys are the candidate keys of an arm's warm-ups.
func (a *arm) keys() []string {
	out := make([]string, 0, len(a.warmups))
	for _, w := range a.warmups {
		c := a.rep
		c.Warmup = w
		out = append(out, c.Key())
	}
	return out
}

// promotionOrder is a round's finished candidates fastest first: the
// next round measures the fastest longer, whatever the tie-breaks (less
// graph memory, fewer scopes) that order a final ranking would prefer;
// those decide between the finalists, not who becomes one. Step times are
// the ranking's, on the truest engine's eager baseline.
func promotionOrder(rs []Ranked) []Ranked {
	var out []Ranked
	for _, r := range rs {
		if !r.Result.Failed() {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b Ranked) int {
		return cmp.Or(cmp.Compare(a.Result.Step.Median, b.Result.Step.Median), cmp.Compare(a.Result.Candidate.Key(), b.Result.Candidate.Key()))
	})
	return out
}

// derive is the result of warm-up w derived from the measurement of
// another warm-up of the same impl×scope: the steady state is the same,
// the capture scales as the estimate says it does (TE's own warm-up passes
// shrink as the eager warm-up grows).
func (h *halving) derive(f finished, w int) entry {
	res := f.res
	res.Candidate.Scopes = slices.Clone(res.Candidate.Scopes)
	from := res.Candidate.Warmup
	res.Candidate.Warmup = w
	scaled := ""
	pe, pw := h.r.byKey[f.res.Candidate.Key()], h.r.byKey[res.Candidate.Key()]
	if pe != nil && pw != nil && pe.Estimate != nil && pw.Estimate != nil && pe.Estimate.CaptureMs > 0 && pw.Estimate.CaptureMs > 0 {
		res.CaptureMs *= pw.Estimate.CaptureMs / pe.Estimate.CaptureMs
		scaled = "; capture scaled as the estimate scales it"
	}
	res.WarmupMs *= float64(max(1, w)) / float64(max(1, from))
	note := fmt.Sprintf("warm-up %d not run: derived from the warm-up %d measurement (same steady state%s)", w, from, scaled)
	res.Notes = append(slices.Clone(res.Notes), note)
	return entry{res: res, round: f.round, derived: true, from: from, note: fmt.Sprintf("derived from w%d", from)}
}

func (h *halving) entries() []entry {
	latest := maps.Clone(h.latest)
	// Journal results the strategy did not ask for (a resume with another
	// budget) still count, when they are of a later round.
	for _, f := range h.r.known() {
		k := armKey(f.res.Candidate)
		if l, ok := latest[k]; !ok || f.round > l.round {
			latest[k] = f
		}
	}
	byKey := map[string]*arm{}
	for _, a := range h.arms {
		byKey[a.key] = a
	}
	var out []entry
	top := 0
	for _, a := range h.arms {
		f, ok := latest[a.key]
		if !ok {
			continue
		}
		top = max(top, f.round)
		if h.noneOwn && !a.rep.Graphed() {
			continue // placed below, with the finalists
		}
		if f.res.Failed() {
			out = append(out, entry{res: f.res, round: f.round})
			continue
		}
		for _, w := range a.warmups {
			if w == f.res.Candidate.Warmup {
				out = append(out, entry{res: f.res, round: f.round})
			} else {
				out = append(out, h.derive(f, w))
			}
		}
	}
	if h.noneOwn {
		if f, ok := latest[armKey(*h.none)]; ok {
			// Ranked with the latest round's runs, as a derived none is:
			// the baseline every finalist is compared with.
			out = append(out, entry{res: f.res, round: top, note: fmt.Sprintf("measured in round %d, the eager baseline", f.round)})
		}
	}
	if h.none != nil && !h.noneAs && !h.noneOwn {
		// none from the eager baselines of the latest round's runs,
		// which are the longest and newest measurements.
		var rs []engine.Result
		for _, a := range h.arms {
			if f, ok := latest[a.key]; ok && f.round == top && !f.res.Failed() && len(a.rep.WhatIf) == 0 {
				rs = append(rs, f.res)
			}
		}
		if n, ok := eagerAsNone(rs); ok {
			out = append(out, entry{res: n, round: top, derived: true, note: "eager baseline of the runs"})
		}
	}
	return out
}

// budgetText is the budget as the user gave it, with the engines it is
// spread over.
func (h *halving) budgetText() string {
	if math.IsInf(h.budget, 1) {
		return "unlimited"
	}
	b := h.r.cfg.Budget
	if b == 0 {
		b = DefaultBudget
	}
	return fmt.Sprintf("%s on %d GPU(s)", b, len(h.r.cfg.Engines))
}

func (h *halving) notes() []string {
	var parts []string
	for i, n := range h.ran {
		steps := round1Steps
		if i < len(h.rounds) {
			steps = h.rounds[i].steps
		}
		parts = append(parts, fmt.Sprintf("round %d: %d for %d steps", i+1, n, steps))
	}
	out := []string{fmt.Sprintf("halving over %d impl×scope combinations (%s)", len(h.arms), strings.Join(parts, ", "))}
	if !h.noneAs {
		out = append(out, fmt.Sprintf("each impl×scope is run once per round, at warm-up %d (MCore's default) where the space has it, else at its longest; the other warm-ups' job times are derived from that run (the warm-up does not change the steady state)", presets.DefaultWarmup))
		switch {
		case h.noneOwn:
			out = append(out, "none is run on its own, first: the engine hands every graph candidate to another engine, whose eager baselines are not its own")
		case h.none != nil:
			out = append(out, "none is not run on its own: its step time is the eager baseline every run measures")
		}
	}
	if h.cut > 0 {
		why := "the estimate ranked them lower"
		if h.arms[0].est == nil {
			why = "in plan order; no estimate to rank them"
		}
		out = append(out, fmt.Sprintf("budget %s: %d impl×scope combinations were not measured (%s)", h.budgetText(), h.cut, why))
	}
	if !h.fits {
		out = append(out, fmt.Sprintf("budget %s is below the smallest search (a first round of %d); it ran anyway", h.budgetText(), h.rounds[0].n))
	}
	return out
}
