package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// Strategies.
const (
	StrategyHalving    = "halving"
	StrategyExhaustive = "exhaustive"
)

// Strategies lists the strategy names Run accepts.
func Strategies() []string { return []string{StrategyHalving, StrategyExhaustive} }

// DefaultBudget is the halving strategy's GPU time budget when none is given.
const DefaultBudget = 2 * time.Minute

// Config is one search: what to tune, the space, how to search it and
// where to run it.
type Config struct {
	Model   presets.Model
	Layout  presets.Layout
	MBridge string            // Megatron-Bridge release (default 0.4)
	Sets    map[string]string // recipe overrides (key → Hydra value) the rules see
	Space   presets.Space     // empty parts take the defaults (every impl, every scope subset, warm-ups 1,2,3)
	// Reference is the setting every result is compared with; nil: the
	// one the layout's recipe ships (presets.Layout.ShippedGraph). The
	// search always measures it.
	Reference *presets.Candidate
	// Strategy is "halving" (default) or "exhaustive".
	Strategy string
	// Costs is what the engines compute with (setup.Open fills it); a
	// resume must match the journal's (Fingerprint.Costs).
	Costs CostModel
	// Budget is the wall-clock time the halving strategy may keep the
	// engines busy (each engine's GPU time counts Budget/len(Engines));
	// 0 means DefaultBudget, a negative value no limit. Exhaustive ignores it.
	Budget     time.Duration
	TrainIters int             // job length for job-level times (default 50)
	Engines    []engine.Engine // one per GPU; each runs one candidate at a time
	// Estimator is an estimate engine used to order candidates, size the
	// halving rounds and predict the ETA; nil to go by measurements alone.
	Estimator engine.Engine
	// RunDir holds the journal; "" keeps no journal (and cannot resume).
	RunDir string
	Resume bool
	// SkipBadLines lets a resume go on past unreadable lines in the middle
	// of the journal: they are moved to UnreadableFile and the readable
	// results are resumed. Without it such a journal is a *BadLinesError.
	SkipBadLines bool
	// Lock is the caller's lock on RunDir (LockRunDir), for a caller that
	// writes its own files there first; nil: Run takes the lock itself
	// and holds it until it returns.
	Lock *RunLock
	// JobGPUMemoryMiB is the real job's GPU memory; candidates whose peak
	// would not fit rank after those that do. 0: not checked.
	JobGPUMemoryMiB int64
	// Tie is the ranking's tie band (RankOptions.Tie).
	Tie float64
	// RunPredictedFailures runs the candidates whose capture cgtune
	// predicts will fail (WillFailID) instead of leaving them out, so that
	// the installed framework confirms or refutes the prediction (a newer
	// Megatron-Core may capture what an older one could not).
	RunPredictedFailures bool
	Workload             stepmodel.WorkloadOptions
	// Measured are the run options: EagerSteps for every run; MeasuredSteps
	// for exhaustive runs (halving sets its own per round).
	Measured engine.RunOptions
	// Prepare, when set, runs once before the space is planned, with the
	// search's workload: work the engines need first (the megatron engine
	// measures the framework profile when none is cached, so the estimator
	// and the emulating fallback are calibrated). Each line it says is a
	// PrepareEvent; an error is a note of the search, which goes on.
	Prepare func(ctx context.Context, w *stepmodel.Workload, say func(string)) error
	// WhatIf adds what-if rows: each candidate the recipe rejects that
	// MaxChanges enabling changes or fewer let run, with them applied,
	// priced over the recipe's own eager step (search/whatif.go).
	WhatIf bool
	// Accept are the enabling changes (recipe.Change names) the user
	// accepts: what-if rows of those only compete for the winner too.
	Accept []string
}

func (c Config) mbridge() string {
	if c.MBridge == "" {
		return DefaultMBridge
	}
	return c.MBridge
}

func (c Config) strategy() string {
	if c.Strategy == "" {
		return StrategyHalving
	}
	return c.Strategy
}

func (c Config) rankOptions() RankOptions {
	return RankOptions{TrainIters: c.trainIters(), JobGPUMemoryMiB: c.JobGPUMemoryMiB, Tie: c.Tie}
}

// rankOptions are the config's ranking options with the memory model of
// the search's workload, which judges the candidates whose engine made no
// breakdown.
func (r *runner) rankOptions() RankOptions {
	o := r.cfg.rankOptions()
	o.ReferenceKey, o.KnownToFitMiB = r.refKey, r.knownFitMiB
	gpuMiB := stepmodel.JobGPUMiB(r.w.Layout, r.cfg.JobGPUMemoryMiB)
	o.Memory = func(c presets.Candidate) *stepmodel.MemoryBreakdown {
		w, err := r.ws.of(c)
		if err != nil {
			return nil
		}
		return stepmodel.PredictMemory(w, stepmodel.PlanCapture(w, c, w.Spec.Options.Generation), nil, gpuMiB, stepmodel.MemoryOptions{})
	}
	return o
}

func (c Config) trainIters() int {
	if c.TrainIters <= 0 {
		return DefaultTrainIters
	}
	return c.TrainIters
}

// budgetMs is the GPU time (all engines together) the halving strategy
// may spend, in ms; +Inf without a limit.
func (c Config) budgetMs() float64 {
	b := c.Budget
	if b == 0 {
		b = DefaultBudget
	}
	if b < 0 {
		return math.Inf(1)
	}
	return float64(b.Milliseconds()) * float64(max(1, len(c.Engines)))
}

// finished is one finished run (or one read back from the journal).
type finished struct {
	round   int
	gpu     int
	res     engine.Result
	resumed bool
}

type resKey struct {
	round int
	key   string
}

// runner is one Run: the shared state of the engine goroutines.
type runner struct {
	cfg   Config
	w     *stepmodel.Workload
	ws    *workloads // w, and the workloads of what-if rows
	plan  []Planned
	byKey map[string]*Planned
	gpus  []int // GPU number of each engine, for events
	// refKey is the plan row of the search's reference ("" when it cannot
	// run); knownFitMiB the memory model's total for it when the recipe
	// is known to run it on the job's GPU (runner.knownToFit).
	refKey      string
	knownFitMiB int64

	emitMu sync.Mutex
	emitFn func(Event)

	mu       sync.Mutex
	journal  *journal
	prior    map[resKey]finished // journal results not yet used by the strategy
	all      []finished          // every finished run, in finishing order
	done     int
	pending  int     // runs still planned (this round's unfinished + later rounds)
	pendMs   float64 // their predicted GPU time
	inflight float64 // predicted GPU time of running candidates
	spentMs  float64 // GPU time of finished runs (resumed ones included)
	// calibration of predictions (formula) against what runs took
	predMs, actualMs, wallMs float64
	runs, resumedRuns        int
	jerr                     error
	notes                    []string
}

func (r *runner) emit(e Event) {
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	if r.emitFn != nil {
		r.emitFn(e)
	}
}

// Run searches cfg's space on cfg's engines and streams events to emit: a
// PlanEvent, then StartEvent/SampleEvent/ResultEvent per candidate run
// (WorkerEvent when a worker crashed or hung), then a DoneEvent, which it
// also returns. emit is called from one goroutine at a time, never after
// Run returns. A cancelled ctx stops the search: nothing new starts, the
// finished runs are kept (journalled) and the DoneEvent says Interrupted;
// that is not an error. Errors are for a search that cannot start (bad
// config, a run folder of another search) or a journal that cannot be
// written (the DoneEvent then carries it too).
func Run(ctx context.Context, cfg Config, emit func(Event)) (DoneEvent, error) {
	if len(cfg.Engines) == 0 {
		return DoneEvent{}, errors.New("no engine to run candidates on")
	}
	if s := cfg.strategy(); s != StrategyHalving && s != StrategyExhaustive {
		return DoneEvent{}, fmt.Errorf("unknown strategy %q (allowed: %s, %s)", s, StrategyHalving, StrategyExhaustive)
	}
	release, err := holdRunDir(cfg)
	if err != nil {
		return DoneEvent{}, err
	}
	defer release()
	cfg, w, err := cfg.withWorkload(ctx)
	if err != nil {
		return DoneEvent{}, err
	}
	// Before any preparation: a resume computed another way is refused at
	// once, not after a profile was measured for it.
	if err := checkResumable(cfg); err != nil {
		return DoneEvent{}, err
	}
	prepared := prepare(ctx, cfg, w, emit)
	plan, err := PlanContext(ctx, cfg)
	if err != nil {
		return DoneEvent{}, err
	}
	j, prior, err := openJournal(cfg.RunDir, cfg.fingerprint(), cfg.Resume, cfg.SkipBadLines, planCheck(plan, cfg.strategy()))
	if err != nil {
		return DoneEvent{}, err
	}
	defer j.close()
	r := &runner{cfg: cfg, w: w, ws: newWorkloads(cfg, w), plan: plan, byKey: map[string]*Planned{}, emitFn: emit, journal: j, prior: map[resKey]finished{}}
	ref := r.takeReference()
	for i := range plan {
		r.byKey[plan[i].Candidate.Key()] = &plan[i]
	}
	r.gpus = gpuNumbers(cfg.Engines)
	if prepared != "" {
		r.note("%s", prepared)
	}
	order := r.takePrior(prior)
	if !slices.ContainsFunc(plan, Planned.Valid) {
		r.note("the rules reject every candidate of the space: nothing to run")
	}

	var s strategy
	if cfg.strategy() == StrategyExhaustive {
		s = newExhaustive(r)
	} else {
		s = newHalving(r)
	}
	total, ms := s.planned()
	r.emit(PlanEvent{Space: plan, Total: total})
	// What the journal holds is done, not pending.
	r.pending, r.pendMs = max(0, total-len(order)), ms
	// Results read back from the journal are shown first, in the order
	// they finished; the strategy then takes them instead of running them.
	for _, k := range order {
		f := r.prior[k]
		r.done++
		r.emit(ResultEvent{GPU: f.gpu, Round: f.round, Result: f.res, Resumed: true, Done: r.done, Total: len(order) + r.pending, ETA: r.eta()})
	}
	s.run(ctx)
	return r.finish(ctx, cfg, s, ref)
}

// withWorkload is cfg with the workload options the search runs (the
// recipe's MoE mode and layer spec, the generation: the workload the rules
// judged, as Plan builds it), and that workload.
func (c Config) withWorkload(ctx context.Context) (Config, *stepmodel.Workload, error) {
	gen, err := presets.ParseMBridge(c.mbridge())
	if err != nil {
		return c, nil, err
	}
	c.Workload = planOptions(c, c.mbridge(), gen)
	w, err := stepmodel.BuildWorkloadContext(ctx, c.Model, c.Layout, c.Workload)
	return c, w, err
}

// takeReference sets the plan row the search's reference runs as and the
// anchor on it, and returns the Reference the search reports (its Ranked
// filled once the results are ranked).
func (r *runner) takeReference() Reference {
	ref, from := r.cfg.reference()
	key, why := referenceRow(r.plan, ref)
	r.refKey, r.knownFitMiB = key, r.knownToFit(key)
	return Reference{Candidate: ref, From: from, Why: why}
}

// rank is the search's ranking of es: the what-if rows the user accepts
// among the others, the reference first in its tie group (ref.Ranked
// filled), and the what-if rows in a table of their own.
func (r *runner) rank(es []entry, opts RankOptions, ref *Reference) (ranking, whatIf []Ranked) {
	base, wi := splitWhatIf(es, r.cfg.Target(), r.cfg.Accept)
	ranking = rankEntries(append(base, acceptedEntries(wi, r.cfg.Accept)...), opts)
	ref.Ranked = referenceOf(ranking, r.refKey)
	return ranking, rankWhatIf(wi, opts, ref.Ranked)
}

// holdRunDir locks cfg's run folder for the search, unless the caller
// already holds that lock; release gives back a lock taken here.
func holdRunDir(cfg Config) (release func(), err error) {
	release = func() {}
	if cfg.RunDir == "" {
		return release, nil
	}
	switch {
	case cfg.Lock == nil:
		l, err := LockRunDir(cfg.RunDir)
		if err != nil {
			return nil, err
		}
		return func() { l.Release() }, nil
	case cfg.Lock.Dir() != cfg.RunDir:
		return nil, fmt.Errorf("the lock held is on %s, not on the run folder %s", cfg.Lock.Dir(), cfg.RunDir)
	}
	return release, nil
}

// takePrior keeps the journal's results of a resumed search and returns
// their keys in finishing order, each once. The journal's runs were spent
// and calibrate the predictions as they did in the run that measured
// them, so a resumed search makes the budget decisions the uninterrupted
// one would have made.
func (r *runner) takePrior(prior []journalLine) []resKey {
	var order []resKey
	for _, l := range prior {
		k := resKey{l.Round, l.Key}
		if _, dup := r.prior[k]; !dup {
			order = append(order, k)
		}
		r.prior[k] = finished{round: l.Round, gpu: l.GPU, res: *l.Result, resumed: true}
	}
	for _, k := range order {
		res := r.prior[k].res
		formula := runCostMs(res, r.w.ScaleFactor(), r.opts(res.Step.N))
		r.spentMs += spentOf(res, formula)
		r.calibrate(res, formula)
	}
	r.resumedRuns = len(order)
	return order
}

// finish ranks what strategy s ran against the reference candidate ref
// (its Ranked filled here), ends the journal and emits the DoneEvent,
// which it returns with the journal's error.
func (r *runner) finish(ctx context.Context, cfg Config, s strategy, ref Reference) (DoneEvent, error) {
	d := DoneEvent{RunDir: cfg.RunDir, Interrupted: ctx.Err() != nil, Strategy: cfg.strategy()}
	es := s.entries()
	d.Emulation = r.emulationCheck(ctx, onFullestEagerPool(es))
	opts := r.rankOptions()
	opts.Emulation = d.Emulation
	d.Ranking, d.WhatIf = r.rank(es, opts, &ref)
	d.KnownToFitMiB, d.Reference, d.Accepted = opts.KnownToFitMiB, &ref, cfg.Accept
	if d.Reference.Ranked == nil && d.Reference.Why == "" {
		d.Reference.Why = "it did not finish"
	}
	d.Winner = Winner(d.Ranking)
	r.mu.Lock()
	d.Runs, d.Resumed, d.GPUTimeMs = r.runs, r.resumedRuns, r.spentMs
	d.Notes = append(r.notes, s.notes()...)
	jerr := r.endJournal(&d)
	r.mu.Unlock()
	r.emit(d)
	return d, jerr
}

// endJournal marks the run folder of a search that finished (r.mu held),
// or, after the journal could not be written, puts the error and what the
// journal kept into d; it returns that error.
func (r *runner) endJournal(d *DoneEvent) error {
	if r.journal != nil && r.jerr == nil && !d.Interrupted {
		r.jerr = markFinished(r.cfg.RunDir, d.Runs+d.Resumed)
	}
	if r.journal != nil && r.jerr == nil {
		if err := writeRanking(r.cfg.RunDir, *d); err != nil {
			d.Notes = append(d.Notes, fmt.Sprintf("the ranking was not kept beside the journal (%v): cgtune runs show ranks the journal's runs instead", err))
		}
	}
	if r.jerr != nil {
		d.Err = r.jerr.Error()
		d.Kept = keptInJournal(r.cfg.RunDir)
	}
	return r.jerr
}

// prepare runs cfg.Prepare (if any), its lines sent to emit as
// PrepareEvents, and returns what the search notes of a failure ("" when
// it succeeded).
func prepare(ctx context.Context, cfg Config, w *stepmodel.Workload, emit func(Event)) string {
	if cfg.Prepare == nil {
		return ""
	}
	say := func(msg string) {
		if emit != nil {
			emit(PrepareEvent{Message: msg})
		}
	}
	if err := cfg.Prepare(ctx, w, say); err != nil {
		return "preparing the search: " + err.Error()
	}
	return ""
}

// gpuNumbers names each engine by its device index when those are
// distinct (workers on GPUs 2 and 3 are "GPU 2" and "GPU 3"), else by its
// position (several estimate engines all say index 0).
func gpuNumbers(es []engine.Engine) []int {
	out := make([]int, len(es))
	seen := map[int]bool{}
	distinct := true
	for i, e := range es {
		out[i] = e.Device().Index
		if seen[out[i]] {
			distinct = false
		}
		seen[out[i]] = true
	}
	if !distinct {
		for i := range out {
			out[i] = i
		}
	}
	return out
}

// runCostMs is the GPU time a run of result r's candidate with opts takes
// on the engine: the eager baseline steps, the warm-up steps and the
// measured steps, each at the run's own step time (the engine runs fewer
// micro-batches than the job and scales the step up by scale), plus the
// capture. A failed run stops at the capture.
func runCostMs(r engine.Result, scale float64, opts engine.RunOptions) float64 {
	opts = opts.WithDefaults()
	if scale < 1 {
		scale = 1
	}
	opt := 0.0 // the optimizer part of the step, which is not scaled
	if r.FwdBwdMs > 0 && r.Step.Median > r.FwdBwdMs {
		opt = r.Step.Median - r.FwdBwdMs
	}
	unscale := func(ms float64) float64 {
		if ms <= opt {
			return ms / scale
		}
		return (ms-opt)/scale + opt
	}
	eager := unscale(r.Eager.Median)
	cost := float64(opts.EagerSteps+max(1, r.Candidate.Warmup))*eager + r.CaptureMs
	if !r.Failed() {
		cost += float64(opts.MeasuredSteps) * unscale(r.Step.Median)
	}
	return cost
}

// DeadlineFor gives worker supervisors a per-candidate deadline from the
// estimate engine est: five times the estimated run (eager baseline,
// warm-up and the longest round's measured steps at the run's step time,
// plus the capture), and never under a minute, so that a slow GPU or a
// cold start is not mistaken for a hang. A nil est gives 10 minutes.
func DeadlineFor(est engine.Engine) func(*stepmodel.Workload, presets.Candidate) time.Duration {
	return func(w *stepmodel.Workload, c presets.Candidate) time.Duration {
		if est == nil {
			return 10 * time.Minute
		}
		opts := engine.RunOptions{MeasuredSteps: finalSteps}
		r := est.Run(context.Background(), w, c, opts, nil)
		d := stepmodel.MsDuration(5 * runCostMs(r, w.ScaleFactor(), opts))
		return max(time.Minute, d)
	}
}

// calib is how much longer runs take than runCostMs predicts, from the
// finished runs (1 until one finished). Estimated results cost what the
// formula says, so only measured ones move it.
func (r *runner) calibLocked() float64 {
	if r.predMs <= 0 {
		return 1
	}
	return r.actualMs / r.predMs
}

// calibrate adds a finished run to the calibration of the predictions.
func (r *runner) calibrate(res engine.Result, formula float64) {
	if formula > 0 {
		r.predMs += formula
		r.actualMs += spentOf(res, formula)
		r.wallMs += res.WallMs
	}
}

// spentOf is the GPU time a finished run cost: what it took when measured,
// the simulated time when estimated (the estimate engine itself is instant).
func spentOf(res engine.Result, pred float64) float64 {
	if res.Source != engine.SourceEstimated && res.WallMs > 0 {
		return res.WallMs
	}
	return pred
}

// eta is the wall time the planned runs still need on all engines, from
// the predictions scaled by how long runs actually took.
func (r *runner) eta() time.Duration {
	wallPerPred := 1.0
	if r.predMs > 0 {
		wallPerPred = r.wallMs / r.predMs
	}
	ms := (r.pendMs + r.inflight) * wallPerPred / float64(len(r.cfg.Engines))
	return stepmodel.MsDuration(ms).Round(time.Second)
}

// trial is one candidate run a strategy asks for.
type trial struct {
	cand  presets.Candidate
	round int
	steps int
	pred  float64 // predicted GPU time, ms (before calibration)
}

// roundOutcome is what a round produced, by candidate key.
type roundOutcome struct {
	results map[string]finished
	skipped []trial // not issued: the budget ran out
}

// runRound runs jobs on the engines, in order, one per engine at a time.
// Jobs the journal already holds are taken from it. Before each new run
// the budget is checked: once minIssue jobs are under way, a job whose
// predicted cost (with reserveMs for the rounds after this one) would go
// over budgetMs is skipped, with the rest of the round.
func (r *runner) runRound(ctx context.Context, jobs []trial, minIssue int, budgetMs float64, reserve func() float64) roundOutcome {
	out := roundOutcome{results: map[string]finished{}}
	free := make(chan int, len(r.cfg.Engines))
	for i := range r.cfg.Engines {
		free <- i
	}
	var wg sync.WaitGroup
	var outMu sync.Mutex
	issued := 0
dispatch:
	for n, jb := range jobs {
		key := jb.cand.Key()
		r.mu.Lock()
		if f, ok := r.prior[resKey{jb.round, key}]; ok {
			delete(r.prior, resKey{jb.round, key})
			r.all = append(r.all, f)
			r.mu.Unlock()
			outMu.Lock()
			out.results[key] = f
			outMu.Unlock()
			issued++
			continue
		}
		r.mu.Unlock()
		var slot int
		select {
		case slot = <-free:
		case <-ctx.Done():
			break dispatch
		}
		if ctx.Err() != nil {
			free <- slot
			break
		}
		r.mu.Lock()
		stop := r.jerr != nil
		pred := jb.pred * r.calibLocked()
		if !stop && issued >= minIssue && r.spentMs+r.inflight+pred+reserve()*r.calibLocked() > budgetMs {
			stop = true
			out.skipped = append(out.skipped, jobs[n:]...)
			for _, s := range jobs[n:] {
				r.pending--
				r.pendMs -= s.pred
			}
		}
		if stop {
			r.mu.Unlock()
			free <- slot
			break
		}
		r.inflight += pred
		r.pending--
		r.pendMs -= jb.pred
		r.mu.Unlock()
		issued++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { free <- slot }()
			f, ok := r.execute(ctx, slot, jb, pred)
			if ok {
				outMu.Lock()
				out.results[key] = f
				outMu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// opts are the run options of a round with steps measured steps.
func (r *runner) opts(steps int) engine.RunOptions {
	o := r.cfg.Measured
	o.MeasuredSteps = steps
	return o.WithDefaults()
}

// notePrediction says, on a candidate run although its capture was
// predicted to fail, whether the engine agreed.
func (r *runner) notePrediction(res *engine.Result) {
	p := r.byKey[res.Candidate.Key()]
	if p == nil || p.PredictedFailure == "" || res.ErrKind == engine.FailureCancel {
		return
	}
	verdict := "the run captured it: the prediction is wrong for this framework"
	if res.Failed() {
		verdict = "the run failed too (" + string(res.ErrKind) + ")"
	}
	res.Notes = append(res.Notes, fmt.Sprintf("predicted to fail (%s); %s", p.PredictedFailure, verdict))
}

// execute runs one job on engine slot and records its result; ok is false
// when the search was cancelled under it (nothing is recorded then).
func (r *runner) execute(ctx context.Context, slot int, jb trial, pred float64) (finished, bool) {
	gpu := r.gpus[slot]
	opts := r.opts(jb.steps)
	r.emit(StartEvent{Candidate: jb.cand, GPU: gpu, Round: jb.round, Steps: opts.MeasuredSteps})
	res := r.run(ctx, slot, jb.cand, opts, func(s engine.StepSample) {
		s.Candidate = jb.cand.Name() // engines tag samples their own way
		r.emit(SampleEvent{GPU: gpu, Sample: s})
	})
	formula := runCostMs(res, r.w.ScaleFactor(), opts)
	r.notePrediction(&res)
	r.mu.Lock()
	r.inflight -= pred
	if ctx.Err() != nil && (res.ErrKind == engine.FailureCancel || res.Failed()) {
		// Stopped by the interruption, not a result: it runs again on resume.
		r.pending++
		r.pendMs += jb.pred
		r.mu.Unlock()
		return finished{}, false
	}
	f := finished{round: jb.round, gpu: gpu, res: res}
	r.all = append(r.all, f)
	r.runs++
	r.done++
	r.spentMs += spentOf(res, formula)
	r.calibrate(res, formula)
	if r.journal != nil && r.jerr == nil {
		if err := r.journal.append(journalLine{Type: "result", Round: jb.round, Key: jb.cand.Key(), GPU: gpu, Result: &res}); err != nil {
			r.jerr = err
		}
	}
	ev := ResultEvent{GPU: gpu, Round: jb.round, Result: res, Done: r.done, Total: r.done + r.pending, ETA: r.eta()}
	r.mu.Unlock()
	r.emit(ev)
	switch res.ErrKind {
	case engine.FailureCrash:
		r.emit(WorkerEvent{GPU: gpu, Message: fmt.Sprintf("worker on GPU %d died during %s (%s); the next candidate starts a new one", gpu, jb.cand.Name(), res.Err)})
	case engine.FailureTimeout:
		r.emit(WorkerEvent{GPU: gpu, Message: fmt.Sprintf("worker on GPU %d hung on %s (%s); the next candidate starts a new one", gpu, jb.cand.Name(), res.Err)})
	}
	return f, true
}

// run runs candidate c on engine slot, on the workload c runs on (a
// what-if row's changes make its own); the result names c as the search
// does, whatever the engine's worker wrote back.
func (r *runner) run(ctx context.Context, slot int, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	w, err := r.ws.of(c)
	if err != nil {
		e := r.cfg.Engines[slot]
		return engine.Result{Candidate: c, Device: e.Device(), Err: err.Error(), ErrKind: engine.FailureUnsupported}
	}
	res := r.cfg.Engines[slot].Run(ctx, w, c, opts, emit)
	res.Candidate.WhatIf = slices.Clone(c.WhatIf)
	return res
}

// note records a line for the DoneEvent.
func (r *runner) note(format string, args ...any) {
	r.mu.Lock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}
