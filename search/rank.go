package search

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// DefaultTrainIters is the job length job-level times are computed for:
// MB's perf harness runs 50 iterations (MB
// src/megatron/bridge/perf_recipes/_common.py, _benchmark_common).
const DefaultTrainIters = 50

// DefaultTie is the tie band when none is given: two candidates closer
// than this fraction of the faster one's step (or whose measured p10–p90
// ranges overlap) tie.
const DefaultTie = 0.01

// NoTie asks for no fractional tie band: only measured spreads tie.
const NoTie = -1.0

// RankOptions are what the ranking needs besides the results.
type RankOptions struct {
	TrainIters      int   // job length for JobMs (default 50)
	JobGPUMemoryMiB int64 // the real job's GPU memory; 0: unknown, everything fits
	// Tie is the tie band as a fraction of the step time: 0 means
	// DefaultTie, NoTie (or any negative value) none.
	Tie float64
	// Memory, when set, gives the memory model's breakdown of a candidate
	// in the job, for results that carry none (a none derived from the
	// eager baselines, say), so that every candidate is judged the same
	// way whatever the strategy.
	Memory func(presets.Candidate) *stepmodel.MemoryBreakdown
	// Emulation is the emulation's error measured in the search (nil: not
	// measured); an emulated result outranks framework-measured ones only
	// by more than it.
	Emulation *EmulationCheck
	// ReferenceKey is the candidate every result's VsReference is over
	// ("" for none).
	ReferenceKey string
	// KnownToFitMiB is the memory model's total for a reference the
	// recipe runs on the job's GPU, when the model puts it over the GPU:
	// a candidate that needs no more fits (runner.knownToFit). 0: none.
	KnownToFitMiB int64
}

// tieFrac is the fraction of the step time within which candidates tie.
func (o RankOptions) tieFrac() float64 {
	switch {
	case o.Tie == 0:
		return DefaultTie
	case o.Tie < 0:
		return 0
	}
	return o.Tie
}

// JobMs is the job-level time of TrainIters steps for result r: the
// warm-up steps eager, the capture, the remaining steps graphed; a
// candidate without graphs runs every step eagerly.
func JobMs(r engine.Result, trainIters int) float64 {
	if trainIters <= 0 {
		trainIters = DefaultTrainIters
	}
	if r.Failed() {
		return 0
	}
	if !r.Candidate.Graphed() {
		return float64(trainIters) * r.Step.Median
	}
	w := min(r.Candidate.Warmup, trainIters)
	return float64(w)*r.Eager.Median + r.CaptureMs + float64(trainIters-w)*r.Step.Median
}

// JobPeakMiB is the device memory the candidate would need in the real
// job: its measured peak, with its graph memory scaled to the job's
// captured micro-batches and layers when the run emulated fewer.
func JobPeakMiB(r engine.Result) int64 {
	m := r.Memory
	if m.GraphFullJobMiB > m.GraphMiB {
		return m.DevicePeakMiB - m.GraphMiB + m.GraphFullJobMiB
	}
	return m.DevicePeakMiB
}

// implOrder makes none < transformer_engine < local: the fewer moving
// parts a configuration has, the earlier it wins a tie.
func implOrder(impl string) int {
	switch impl {
	case presets.ImplNone, "":
		return 0
	case presets.ImplTE:
		return 1
	}
	return 2
}

// entry is a result as the ranking sees it: the round it comes from (later
// rounds measured longer and rank first) and whether it was derived from
// another warm-up's measurement or from the eager baselines.
type entry struct {
	res     engine.Result
	round   int
	derived bool
	from    int // the warm-up whose run a derived warm-up's figures come from
	note    string
	// whatIf is a what-if row's pricing; its result is on the recipe's
	// eager step already (onRecipeEager).
	whatIf *WhatIf
}

// Rank orders finished results: successes by steady-state step time, ties
// within noise going to less graph memory, then the simpler scope, then the
// shorter job; candidates that would not fit the job's GPU after those that
// do; failures last, unranked (Rank 0).
func Rank(results []engine.Result, opts RankOptions) []Ranked {
	es := make([]entry, len(results))
	for i, r := range results {
		es[i] = entry{res: r}
	}
	return rankEntries(es, opts)
}

// tieTol is how far the median of b, the slower, may lie above a's and
// still tie: the band's share of a's step, or as far as makes their
// p10–p90 ranges overlap (b's p10 at or below a's p90). Overlap, not the
// wider of the two spreads: one slow step among eleven stretches a p90
// far from its median, and the wider spread tied an eager step with a
// graphed one that was faster at every point of its p10–p90 range
// (docs/emulation-accuracy-2026-12-01.md). For a with itself it is a's
// whole p10–p90 width, the band shown under a table.
func tieTol(frac float64, a, b engine.Result) float64 {
	return max(frac*a.Step.Median, (a.Step.P90-a.Step.Median)+(b.Step.Median-b.Step.P10))
}

// memTolMiB is how much more graph memory a tied candidate may take and
// still count as taking the same: a few MiB of allocator rounding must not
// decide between two configurations.
func memTolMiB(least int64) int64 { return max(64, least/20) }

// tieBreak orders two tied candidates of the same memory class and says
// what decided it.
func tieBreak(a, b Ranked) (int, string) {
	ra, rb := a.Result, b.Result
	ca, cb := ra.Candidate, rb.Candidate
	if c := cmp.Compare(len(ca.Scopes), len(cb.Scopes)); c != 0 {
		return c, "fewer scopes"
	}
	if c := cmp.Compare(implOrder(ca.Impl), implOrder(cb.Impl)); c != 0 {
		return c, "simpler impl (none < te < local)"
	}
	if c := cmp.Compare(a.JobMs, b.JobMs); c != 0 {
		return c, "shorter job time (warm-up)"
	}
	if c := cmp.Compare(ra.Step.Median, rb.Step.Median); c != 0 {
		return c, "faster"
	}
	return cmp.Compare(ca.Key(), cb.Key()), "name"
}

// orderTied orders a group of candidates tied on step time. The
// reference (what the recipe runs today) comes first, whatever the rest
// says: nothing in the group beats it beyond noise, a graphed setting the
// noise puts a hair slower than eager included. The others follow by
// graph memory, where candidates within memTolMiB of the least of them
// form one class (measured from that least one, as step-time groups are,
// so the order is well defined), and inside a class by tieBreak; a graphed
// candidate slower than eager goes after every one that is not. why[i]
// says what put group[i] after group[i-1].
func orderTied(group []Ranked, refKey string) (why []string) {
	rest := group
	ref := slices.IndexFunc(group, func(r Ranked) bool { return refKey != "" && r.Result.Candidate.Key() == refKey })
	if ref >= 0 {
		r := group[ref]
		copy(group[1:ref+1], group[:ref])
		group[0] = r
		rest = group[1:]
	}
	why = orderUnreferenced(rest)
	if ref >= 0 {
		why = append([]string{""}, why...)
		if len(group) > 1 {
			why[1] = "the reference (the recipe's own setting) ranks first among those tied with it"
		}
	}
	return why
}

// orderUnreferenced orders tied candidates none of which is the
// reference: by graph memory class and tie-breaks, a graphed candidate
// slower than eager after every one that is not (whatever it saves in
// memory or scopes, eager does better).
func orderUnreferenced(group []Ranked) (why []string) {
	slices.SortStableFunc(group, func(a, b Ranked) int {
		return cmp.Compare(a.Result.Memory.JobGraphMiB(), b.Result.Memory.JobGraphMiB())
	})
	slices.SortStableFunc(group, func(a, b Ranked) int { return cmp.Compare(b2i(slowerThanEager(a)), b2i(slowerThanEager(b))) })
	var slow []Ranked
	for _, r := range group {
		if slowerThanEager(r) {
			slow = append(slow, r)
		}
	}
	fast := group[:len(group)-len(slow)]
	slices.SortStableFunc(slow, func(a, b Ranked) int { return cmp.Compare(a.Result.Step.Median, b.Result.Step.Median) })
	copy(group[len(fast):], slow)
	why = append(orderByMemoryClass(fast), make([]string, len(slow))...)
	for i := len(fast); i < len(group); i++ {
		if i > 0 {
			why[i] = fmt.Sprintf("slower than eager (%.3f×): after every candidate that is not", group[i].Result.Speedup)
		}
	}
	return why
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// slowerThanEager reports whether a graphed candidate measured slower than
// its eager baseline.
func slowerThanEager(r Ranked) bool {
	return r.Result.Candidate.Graphed() && r.Result.Speedup > 0 && r.Result.Speedup < 1
}

// orderByMemoryClass orders tied candidates by graph memory classes and
// the tie-breaks inside each; why[i] says what put group[i] after
// group[i-1].
func orderByMemoryClass(group []Ranked) (why []string) {
	why = make([]string, len(group))
	for i := 0; i < len(group); {
		least := group[i].Result.Memory.JobGraphMiB()
		j := i + 1
		for j < len(group) && group[j].Result.Memory.JobGraphMiB()-least <= memTolMiB(least) {
			j++
		}
		class := group[i:j]
		slices.SortStableFunc(class, func(a, b Ranked) int { c, _ := tieBreak(a, b); return c })
		if i > 0 {
			why[i] = fmt.Sprintf("less graph memory (%d vs %d MiB)", group[i-1].Result.Memory.JobGraphMiB(), group[i].Result.Memory.JobGraphMiB())
		}
		for k := i + 1; k < j; k++ {
			_, why[k] = tieBreak(group[k-1], group[k])
		}
		i = j
	}
	return why
}

// rankEntries ranks the entries' results: the successes by class (fitting
// first; framework-measured before emulated ones held back; later rounds
// first), then step time, tied groups ordered by the tie-breaks; then the
// failures.
func rankEntries(es []entry, opts RankOptions) []Ranked {
	ok, failed, held := judgeResults(es, opts)
	// Classes rank in order: fitting first, then framework-measured (and
	// emulated results that beat them beyond the emulation's error) before
	// emulated predictions, then later rounds (longer measurements of the
	// survivors) before earlier ones.
	class := func(r Ranked) [3]int {
		f, h := 1, 0
		if r.Fits {
			f = 0
		}
		if held[r.Result.Candidate.Key()] {
			h = 1
		}
		return [3]int{f, h, -r.Round}
	}
	slices.SortStableFunc(ok, func(a, b Ranked) int {
		ka, kb := class(a), class(b)
		if c := slices.Compare(ka[:], kb[:]); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Result.Step.Median, b.Result.Step.Median); c != 0 {
			return c
		}
		return cmp.Compare(a.Result.Candidate.Key(), b.Result.Candidate.Key())
	})
	markTies(ok, class, opts)
	// Failures by impl and scopes, then warm-up as a number (w2 before w10).
	slices.SortStableFunc(failed, func(a, b Ranked) int {
		ca, cb := a.Result.Candidate, b.Result.Candidate
		return cmp.Or(cmp.Compare(ca.Impl, cb.Impl), cmp.Compare(ca.ScopeString(), cb.ScopeString()), cmp.Compare(ca.Warmup, cb.Warmup))
	})
	for i := range ok {
		ok[i].Rank = i + 1
	}
	out := append(ok, failed...)
	referenceOf(out, opts.ReferenceKey)
	return out
}

// judgeResults splits the entries' results (each on its truest baseline) into
// successes and failures, and judges each success: its job time, whether
// it fits, and for an emulated one whether it is held back behind the
// framework-measured ones (held, by candidate key).
func judgeResults(es []entry, opts RankOptions) (ok, failed []Ranked, held map[string]bool) {
	es = onFullestEagerPool(es)
	best := bestFrameworkSpeedup(es)
	held = map[string]bool{}
	for _, e := range onTruestBaseline(es) {
		r := Ranked{Result: e.res, Name: e.res.Candidate.Name(), Round: e.round, Derived: e.derived, DerivedFrom: e.from, Note: e.note, Origin: e.note, Emulated: e.res.Delegated != "", WhatIf: e.whatIf}
		if e.res.Failed() {
			failed = append(failed, r)
			continue
		}
		r.JobMs = JobMs(e.res, opts.TrainIters)
		if r.Result.Memory.Breakdown == nil && r.Result.Source != engine.SourceJob && opts.Memory != nil {
			r.Result.Memory.Breakdown = opts.Memory(r.Result.Candidate)
		}
		r.Fits = fits(&r, opts)
		if r.Emulated && best > 0 {
			h := heldBack(r.Result, best, opts.Emulation)
			held[r.Result.Candidate.Key()] = h
			r.Note = joinNote(r.Note, emulatedNote(r.Result, h, best, opts.Emulation))
		}
		ok = append(ok, r)
	}
	return ok, failed, held
}

// markTies groups the sorted successes: within a class, a group is every
// candidate within noise of the fastest one not yet placed, ordered by the
// tie-breaks, each noted with why it stands where it does. Measuring
// against the group's leader (not pairwise) keeps the grouping
// deterministic where noise bands overlap in a chain.
func markTies(ok []Ranked, class func(Ranked) [3]int, opts RankOptions) {
	frac, ties := opts.tieFrac(), 0
	for i := 0; i < len(ok); {
		j := i + 1
		for j < len(ok) && class(ok[j]) == class(ok[i]) &&
			ok[j].Result.Step.Median-ok[i].Result.Step.Median <= tieTol(frac, ok[i].Result, ok[j].Result) {
			j++
		}
		group := ok[i:j]
		i = j
		if len(group) < 2 {
			continue
		}
		fastest := group[0]
		why := orderTied(group, opts.ReferenceKey)
		n, tol := len(group), tieTol(frac, fastest.Result, fastest.Result)
		ties++
		for k := range group {
			group[k].Tie, group[k].TieBandMs = ties, tol
			var note string
			switch {
			case k == 0 && group[0].Result.Candidate.Key() == fastest.Result.Candidate.Key():
				note = fmt.Sprintf("fastest of %d candidates tied within noise (±%.2f ms)", n, tol)
			case k == 0:
				note = fmt.Sprintf("first of %d candidates tied within noise (±%.2f ms of the fastest, %s) on %s",
					n, tol, fastest.Result.Candidate.Name(), firstReason(group[0], fastest, opts.ReferenceKey))
			default:
				note = fmt.Sprintf("tied with %s within noise; after it on %s", group[k-1].Result.Candidate.Name(), why[k])
			}
			group[k].Note = joinNote(group[k].Note, note)
		}
	}
}

// fits decides whether a ranked result fits the real job's GPU, and notes
// why not: the memory model's breakdown when the engine made one, else the
// run's peak scaled to the job.
func fits(r *Ranked, opts RankOptions) bool {
	if b := r.Result.Memory.Breakdown; b != nil {
		if !b.Fits && opts.KnownToFitMiB > 0 && b.Total <= opts.KnownToFitMiB {
			r.Note = joinNote(r.Note, fmt.Sprintf("the memory model puts it at %d MiB per GPU, over the GPU's %d MiB, but no higher than the recipe's own setting (%d MiB), which Megatron-Bridge runs on this GPU: judged to fit",
				b.Total, b.GPUMiB, opts.KnownToFitMiB))
			return true
		}
		if !b.Fits {
			stash := ""
			if b.ExpertStash > 0 {
				stash = fmt.Sprintf(", paged expert stash %d", b.ExpertStash)
			}
			r.Note = joinNote(r.Note, fmt.Sprintf("needs %d MiB per GPU in the job (weights %d, gradients %d, optimizer %d%s, the larger of activations %d and the optimizer step's fp32 gradients %d, graphs %d, allocator slack %d, context %d), more than the GPU's %d MiB",
				b.Total, b.Weights, b.Gradients, b.Optimizer, stash, b.Activations, b.MainGrads, b.Graphs, b.Slack, b.Context, b.GPUMiB))
		}
		return b.Fits
	}
	need := JobPeakMiB(r.Result)
	if opts.JobGPUMemoryMiB <= 0 || need <= opts.JobGPUMemoryMiB {
		return true
	}
	r.Note = joinNote(r.Note, fmt.Sprintf("needs %d MiB in the job, more than the GPU's %d MiB", need, opts.JobGPUMemoryMiB))
	return false
}

// Rerank ranks a ranking again under other options (another tie band, say):
// the same results, rounds and derivations, as the search would have
// ranked them.
func Rerank(rs []Ranked, opts RankOptions) []Ranked {
	es := make([]entry, len(rs))
	for i, r := range rs {
		es[i] = entry{res: r.Result, round: r.Round, derived: r.Derived, from: r.DerivedFrom, note: r.Origin, whatIf: r.WhatIf}
	}
	return rankEntries(es, opts)
}

// firstReason says why the head of a tied group ranks before the fastest
// candidate of the group.
func firstReason(head, fastest Ranked, refKey string) string {
	if refKey != "" && head.Result.Candidate.Key() == refKey {
		return "being the reference, the recipe's own setting, which nothing beats beyond noise"
	}
	hm, fm := head.Result.Memory.JobGraphMiB(), fastest.Result.Memory.JobGraphMiB()
	if fm-hm > memTolMiB(hm) {
		return fmt.Sprintf("less graph memory (%d vs %d MiB)", hm, fm)
	}
	_, why := tieBreak(head, fastest)
	return why
}

func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// Winner is the best fitting successful candidate of a ranking that was
// not emulated in place of the framework, or nil: the overrides are for
// what the node measured.
func Winner(rs []Ranked) *Ranked {
	for i := range rs {
		if !rs[i].Result.Failed() && rs[i].Fits && !rs[i].Emulated {
			w := rs[i]
			return &w
		}
	}
	return nil
}

// BestEmulated is the best fitting emulated candidate that ranks above
// the winner (it beat the framework-measured ones beyond the emulation's
// error), or nil.
func BestEmulated(rs []Ranked) *Ranked {
	for i := range rs {
		switch {
		case rs[i].Result.Failed() || !rs[i].Fits:
		case !rs[i].Emulated:
			return nil
		default:
			w := rs[i]
			return &w
		}
	}
	return nil
}

// onTruestBaseline puts results from a less trusted source than the
// truest one among them (a transformer_engine candidate the megatron
// engine handed to the cuda engine, next to the framework's own runs) on
// the truest source's eager baseline: their step times become their own
// speed-up over the truest source's eager step. Two sources' step times
// are not comparable (the emulation's eager step was a quarter of
// Megatron-Core's for qwen3_30b_a3b on the H200), their speed-ups are.
func onTruestBaseline(es []entry) []entry {
	var rs []engine.Result
	for _, e := range es {
		if !e.res.Failed() {
			rs = append(rs, e.res)
		}
	}
	source, baselines := truestBaselines(rs)
	if len(baselines) == 0 {
		return es
	}
	base := stepmodel.Summarise(eagerMedians(baselines))
	out := slices.Clone(es)
	for i, e := range out {
		r := e.res
		if r.Failed() || r.Source == source || r.Eager.Median <= 0 || r.Step.Median <= 0 {
			continue
		}
		k := base.Median / r.Eager.Median
		r.Notes = append(slices.Clone(r.Notes), fmt.Sprintf("step time on the %s eager baseline (%.2f ms): its own speed-up %.3f× over its %s eager step of %.2f ms",
			source, base.Median, r.Eager.Median/r.Step.Median, r.Source, r.Eager.Median))
		r.Step = r.Step.Scaled(k)
		r.Eager.Median, r.Eager.P10, r.Eager.P90 = base.Median, base.P10, base.P90
		out[i].res = r
	}
	return out
}

// truestBaselines are the results of the truest source among results that
// measured an eager baseline, and that source.
func truestBaselines(results []engine.Result) (engine.Source, []engine.Result) {
	source := truestSource(results)
	var out []engine.Result
	for _, r := range results {
		if r.Source == source && r.Eager.N > 0 && r.Eager.Median > 0 {
			out = append(out, r)
		}
	}
	return source, out
}

// widenToTypicalSpread widens st, the spread of the baselines' medians,
// to at least the typical (median) spread of one baseline's own steps
// around its median: a none derived from several runs' baselines is no
// surer than one run of it, and a none run on its own carries its steps'
// spread into the tie rule.
func widenToTypicalSpread(st stepmodel.Stats, baselines []engine.Result) stepmodel.Stats {
	below, above := make([]float64, 0, len(baselines)), make([]float64, 0, len(baselines))
	for _, r := range baselines {
		if r.Eager.P10 > 0 && r.Eager.P90 > 0 {
			sp := stepmodel.SpreadOf(r.Eager)
			below, above = append(below, sp.Below), append(above, sp.Above)
		}
	}
	if len(below) == 0 {
		return st
	}
	typical := stepmodel.StepSpread{Below: stepmodel.Summarise(below).Median, Above: stepmodel.Summarise(above).Median}
	return typical.Widen(st)
}

func eagerMedians(rs []engine.Result) []float64 {
	meds := make([]float64, len(rs))
	for i, r := range rs {
		meds[i] = r.Eager.Median
	}
	return meds
}

// truestSource is the most trusted source among results with an eager
// baseline: job, then framework, then measured, then estimated.
func truestSource(results []engine.Result) engine.Source {
	order := []engine.Source{engine.SourceJob, engine.SourceFramework, engine.SourceMeasured, engine.SourceEstimated}
	best := len(order)
	for _, r := range results {
		if i := slices.Index(order, r.Source); i >= 0 && i < best && r.Eager.N > 0 {
			best = i
		}
	}
	if best == len(order) {
		return ""
	}
	return order[best]
}

// eagerAsNone is the `none` candidate's result derived from the eager
// baselines of results (every run measures one on the same workload), so
// that a search need not spend a run on it.
func eagerAsNone(results []engine.Result) (engine.Result, bool) {
	// Only the truest source's baselines count: a candidate the framework
	// could not run and the cuda engine measured instead has an emulated
	// eager step, which must not be mixed with the framework's.
	source, baselines := truestBaselines(results)
	if len(baselines) == 0 {
		return engine.Result{}, false
	}
	src, meds := baselines[0], eagerMedians(baselines)
	st := widenToTypicalSpread(stepmodel.Summarise(meds), baselines)
	var steps int
	for _, r := range results {
		if r.Source == source {
			steps += r.Eager.N
		}
	}
	st.N = steps
	out := engine.Result{
		Candidate: presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}, Warmup: presets.DefaultWarmup},
		Source:    src.Source, Device: src.Device, Step: st, Eager: st, Speedup: 1,
		Scaling: src.Scaling,
		Notes:   []string{fmt.Sprintf("not run on its own: the eager baseline measured by %d runs (median of their medians)", len(meds))},
	}
	out.Memory.DeviceBaseMiB = src.Memory.DeviceBaseMiB
	out.Memory.DevicePeakMiB = src.Memory.DevicePeakMiB - src.Memory.GraphMiB
	out.Memory.DeviceAfterMiB = src.Memory.DeviceAfterMiB
	return out, true
}

// Reason says why the winner of a ranking won, for the line under the
// table: its lead outside the tie band, or the tie it won and on what; the
// faster candidates passed over because they would not fit the job's GPU;
// or why there is no winner. opts are the ranking's options (for the band).
func Reason(rs []Ranked, opts RankOptions) string {
	w := Winner(rs)
	var ok, unfit []Ranked
	for _, r := range rs {
		switch {
		case r.Result.Failed():
		case r.Fits:
			ok = append(ok, r)
		default:
			unfit = append(unfit, r)
		}
	}
	if w == nil {
		if len(unfit) > 0 {
			return fmt.Sprintf("no winner: no candidate fits the job's GPU (the fastest, %s, %s)", unfit[0].Result.Candidate.Name(), fitNote(unfit[0].Note))
		}
		return "no winner: no candidate finished"
	}
	var parts []string
	name, step := w.Result.Candidate.Name(), w.Result.Step.Median
	band := bandText(opts)
	switch {
	case w.Tie > 0:
		var group []Ranked
		for _, r := range ok {
			if r.Tie == w.Tie {
				group = append(group, r)
			}
		}
		fastest, _ := TieLeader(rs, w.Tie)
		if fastest.Result.Candidate.Key() == w.Result.Candidate.Key() {
			parts = append(parts, fmt.Sprintf("%s wins: the fastest (%.2f ms/step) of %d candidates tied within ±%.2f ms (%s)",
				name, step, len(group), w.TieBandMs, band))
		} else {
			parts = append(parts, fmt.Sprintf("%s wins a tie: %d candidates are within ±%.2f ms (%s) of the fastest, %s (%.2f ms/step); it comes first on %s",
				name, len(group), w.TieBandMs, band, fastest.Result.Candidate.Name(), fastest.Result.Step.Median, firstReason(*w, fastest, opts.ReferenceKey)))
		}
	case len(ok) > 1:
		next := ok[1]
		lead := (next.Result.Step.Median - step) / next.Result.Step.Median * 100
		parts = append(parts, fmt.Sprintf("%s wins: %.2f ms/step, %.1f%% faster than the runner-up %s (%.2f ms/step), outside the tie band (±%.2f ms: %s)",
			name, step, lead, next.Result.Candidate.Name(), next.Result.Step.Median, tieTol(opts.tieFrac(), w.Result, next.Result), band))
	default:
		parts = append(parts, fmt.Sprintf("%s wins: the only candidate that finished and fits (%.2f ms/step)", name, step))
	}
	if f := fastestFitting(ok); f != nil && f.Result.Candidate.Key() != w.Result.Candidate.Key() && (f.Tie == 0 || f.Tie != w.Tie) {
		parts = append(parts, fmt.Sprintf("the fastest that fits, %s (rank %d, %.2f ms/step), ranks below it: %s",
			f.Result.Candidate.Name(), f.Rank, f.Result.Step.Median, whyBelow(*f, *w)))
	}
	var faster []string
	for _, r := range unfit {
		if r.Result.Step.Median < step {
			faster = append(faster, r.Result.Candidate.Name())
		}
	}
	if len(faster) > 0 {
		first := unfit[slices.IndexFunc(unfit, func(r Ranked) bool { return r.Result.Candidate.Name() == faster[0] })]
		parts = append(parts, fmt.Sprintf("%d faster candidate(s) would not fit the job's GPU and cannot win (%s %s)",
			len(faster), faster[0], fitNote(first.Note)))
	}
	return strings.Join(parts, "; ")
}

// fastestFitting is the fitting candidate with the least step time.
func fastestFitting(ok []Ranked) *Ranked {
	var best *Ranked
	for i := range ok {
		if best == nil || ok[i].Result.Step.Median < best.Result.Step.Median {
			best = &ok[i]
		}
	}
	return best
}

// whyBelow says why faster, a fitting candidate faster than the winner w,
// ranks below it.
func whyBelow(faster, w Ranked) string {
	switch {
	case faster.Emulated:
		return "it is an emulated prediction, not measured on the framework"
	case faster.Round < w.Round:
		return fmt.Sprintf("it was measured in round %d only; the survivors were measured longer", faster.Round)
	}
	return faster.Note
}

// TieLeader is the fastest candidate of tied group tie (the one the band
// is measured from: the least step time, then the first key), and the
// group's size; 0 when there is no such group.
func TieLeader(rs []Ranked, tie int) (Ranked, int) {
	var lead Ranked
	n := 0
	for _, r := range rs {
		if tie == 0 || r.Tie != tie || r.Result.Failed() {
			continue
		}
		n++
		m, lm := r.Result.Step.Median, lead.Result.Step.Median
		if n == 1 || m < lm || (m == lm && r.Result.Candidate.Key() < lead.Result.Candidate.Key()) {
			lead = r
		}
	}
	return lead, n
}

// TieRule says how a tied group is ordered, for a line under a table.
const TieRule = "in a tie, less graph memory ranks first, then fewer scopes, the simpler impl (none < te < local), the shorter job"

// bandText describes the tie band of opts.
func bandText(opts RankOptions) string {
	if f := opts.tieFrac(); f > 0 {
		return fmt.Sprintf("%s of the step, or overlapping measured p10–p90 ranges", FormatTie(f))
	}
	return "overlapping measured p10–p90 ranges"
}

// fitNote is the part of a ranking note that says why a candidate does
// not fit.
func fitNote(note string) string {
	for _, p := range strings.Split(note, "; ") {
		if strings.HasPrefix(p, "needs ") {
			return p
		}
	}
	return "does not fit"
}

// FormatTie writes a tie fraction as a percentage ("1%", "0.5%").
func FormatTie(frac float64) string {
	return strconv.FormatFloat(frac*100, 'f', -1, 64) + "%"
}

// ParseTie reads a tie band as the --tie flag and the TUI write it: a
// percentage ("1%", "0.5%", "0%"), for RankOptions.Tie.
func ParseTie(s string) (float64, error) {
	t := strings.TrimSpace(s)
	num, pct := strings.CutSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !pct && err == nil && !math.IsNaN(v) && v >= 0 && v < 100 {
		// "--tie 1": a percentage without its sign (a fraction would be
		// a guess: 1 is no fraction, 0.01 could be either).
		return 0, fmt.Errorf("tie band %q: the %% sign is missing: write %s%% (allowed: a percentage from 0%% to under 100%%, such as 1%% or 0.5%%)", s, num)
	}
	if !pct || err != nil || math.IsNaN(v) || v < 0 || v >= 100 {
		return 0, fmt.Errorf("tie band %q: want a percentage from 0%% to under 100%%, such as 1%% or 0.5%%", s)
	}
	if v == 0 {
		return NoTie, nil
	}
	return v / 100, nil
}

// onFullestEagerPool compares every result of one eager pool (the
// megatron engine's baseline of a slice, which every eager step the search
// measures of it joins) with the pool's fullest state: the eager baseline
// of the result that saw most eager steps. An eager run's step is that
// baseline. Results of one pool measured before it filled were compared
// with fewer steps of a drifting host (engine.Result.EagerPool).
func onFullestEagerPool(es []entry) []entry {
	fullest := map[string]engine.Result{}
	for _, e := range es {
		if id := e.res.EagerPool; id != "" && e.whatIf == nil && e.res.Eager.N > fullest[id].Eager.N {
			fullest[id] = e.res
		}
	}
	if len(fullest) == 0 {
		return es
	}
	out := slices.Clone(es)
	for i, e := range out {
		from, ok := fullest[e.res.EagerPool]
		base := from.Eager
		if !ok || e.whatIf != nil || e.res.Eager == base { // ok: a pool's id, never empty; a what-if row is on the recipe's eager step
			continue
		}
		r := e.res
		r.Eager = base
		r.Notes = append(notesStarting(r.Notes, eagerBaselineNote, false), notesStarting(from.Notes, eagerBaselineNote, true)...)
		switch {
		case r.Failed():
		case r.Candidate.Impl == presets.ImplNone:
			r.Step, r.Speedup = base, 1
		case r.Step.Median > 0:
			r.Speedup = base.Median / r.Step.Median
		}
		out[i].res = r
	}
	return out
}

// eagerBaselineNote starts the megatron worker's notes on the eager
// baseline a result was compared with.
const eagerBaselineNote = "eager baseline: "

// notesStarting are the notes that start with prefix (want true) or
// those that do not.
func notesStarting(notes []string, prefix string, want bool) []string {
	var out []string
	for _, n := range notes {
		if strings.HasPrefix(n, prefix) == want {
			out = append(out, n)
		}
	}
	return out
}
