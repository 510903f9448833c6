package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/engine/estimate"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// fakeEngine gives every candidate a fixed step time from a table (or a
// default), fails the ones named in fail with the given kind, and counts
// what it ran. It checks that it never runs two candidates at once.
type fakeEngine struct {
	idx   int
	step  func(c presets.Candidate) float64
	fail  map[string]engine.FailureKind // arm key or candidate key → error kind
	delay time.Duration

	mu      sync.Mutex
	busy    bool
	overlap bool
	ran     []string
}

func (f *fakeEngine) Name() string              { return "fake" }
func (f *fakeEngine) Device() engine.DeviceInfo { return engine.DeviceInfo{Index: f.idx, Name: "fake"} }
func (f *fakeEngine) Close() error              { return nil }

func (f *fakeEngine) Run(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	f.mu.Lock()
	if f.busy {
		f.overlap = true
	}
	f.busy = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.busy = false
		f.mu.Unlock()
	}()
	opts = opts.WithDefaults()
	res := engine.Result{Candidate: c, Source: engine.SourceMeasured, Device: f.Device(), WallMs: 1}
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			res.Err, res.ErrKind = ctx.Err().Error(), engine.FailureCancel
			return res
		}
	}
	f.mu.Lock()
	f.ran = append(f.ran, c.Key())
	f.mu.Unlock()
	res.Eager = stepmodel.Stats{Median: 1000, P10: 1000, P90: 1000, N: opts.EagerSteps}
	kind := f.fail[c.Key()]
	if kind == "" {
		kind = f.fail[armKey(c)]
	}
	if kind != "" {
		res.Err, res.ErrKind = "fake "+string(kind), kind
		return res
	}
	ms := 1000.0
	if f.step != nil {
		ms = f.step(c)
	}
	for i := range opts.MeasuredSteps {
		emit(engine.StepSample{Candidate: c.Key(), Phase: engine.PhaseMeasure, Step: i, StepMs: ms})
	}
	res.Step = stepmodel.Stats{Median: ms, P10: ms, P90: ms, N: opts.MeasuredSteps}
	res.Speedup = 1000 / ms
	if c.Graphed() {
		res.CaptureMs = 50
		res.Memory.GraphMiB, res.Memory.GraphFullJobMiB = 100*int64(len(c.Scopes)+1), 100*int64(len(c.Scopes)+1)
	}
	res.Memory.DevicePeakMiB = 1000 + res.Memory.GraphMiB
	return res
}

func (f *fakeEngine) runs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ran...)
}

// events collects a run's events (emit is serialised by Run).
type events struct {
	plan    *PlanEvent
	results []ResultEvent
	starts  []StartEvent
	samples int
	workers []WorkerEvent
	done    []DoneEvent
}

func (e *events) emit(ev Event) {
	switch x := ev.(type) {
	case PlanEvent:
		e.plan = &x
	case StartEvent:
		e.starts = append(e.starts, x)
	case SampleEvent:
		e.samples++
	case ResultEvent:
		e.results = append(e.results, x)
	case WorkerEvent:
		e.workers = append(e.workers, x)
	case DoneEvent:
		e.done = append(e.done, x)
	}
}

func (e *events) resumed() (n int) {
	for _, r := range e.results {
		if r.Resumed {
			n++
		}
	}
	return n
}

func estimator(t testing.TB, gpu string) engine.Engine {
	t.Helper()
	e, err := estimate.ForGPU(gpu)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Halving on the estimate engine picks the winner exhaustive picks, and
// the same best graphed configuration, for a fraction of the runs.
func TestHalvingMatchesExhaustive(t *testing.T) {
	for _, name := range []string{"qwen3_30b_a3b", "llama3_8b"} {
		t.Run(name, func(t *testing.T) {
			m, l := builtin(t, name, "h100")
			base := Config{Model: m, Layout: l, Estimator: estimator(t, "h100"), JobGPUMemoryMiB: 81559}
			outcome := map[string]DoneEvent{}
			for _, s := range Strategies() {
				cfg := base
				cfg.Strategy = s
				cfg.Engines = []engine.Engine{estimator(t, "h100")}
				d, err := Run(context.Background(), cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				if d.Winner == nil || d.Interrupted {
					t.Fatalf("%s %s: no winner (%+v)", name, s, d.Notes)
				}
				outcome[s] = d
			}
			h, e := outcome[StrategyHalving], outcome[StrategyExhaustive]
			if hw, ew := h.Winner.Result.Candidate.Key(), e.Winner.Result.Candidate.Key(); hw != ew {
				t.Errorf("%s: halving chose %s, exhaustive %s", name, hw, ew)
			}
			if hg, eg := bestGraphed(h.Ranking), bestGraphed(e.Ranking); hg != eg {
				t.Errorf("%s: best graphed: halving %s, exhaustive %s", name, hg, eg)
			}
			if h.Runs >= e.Runs || h.GPUTimeMs > float64(DefaultBudget.Milliseconds()) {
				t.Errorf("%s: halving %d runs / %.0f ms, exhaustive %d runs", name, h.Runs, h.GPUTimeMs, e.Runs)
			}
			t.Logf("%s: winner %s (best graphed %s); halving %d runs, simulated GPU time %s; exhaustive %d runs, %s",
				name, h.Winner.Result.Candidate.Name(), bestGraphed(h.Ranking), h.Runs, fmtMs(h.GPUTimeMs), e.Runs, fmtMs(e.GPUTimeMs))
		})
	}
}

func bestGraphed(rs []Ranked) string {
	for _, r := range rs {
		if r.Result.Candidate.Graphed() && !r.Result.Failed() {
			return r.Result.Candidate.Key()
		}
	}
	return ""
}

// The halving rounds on a fake engine where the step time is known: every
// impl×scope once in round 1 at warm-up 3, the best third on, the best 3
// last; the other warm-ups derived, none from the eager baselines.
func TestHalvingRounds(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	// Each arm's step time, in ms, distinct and far apart (no ties).
	steps := map[string]float64{
		"transformer_engine/layer": 700, "transformer_engine/attn": 900, "transformer_engine/mlp": 800,
		"transformer_engine/attn,mlp": 750, "local/layer": 710, "local/attn": 910, "local/mlp": 810,
		"local/attn,mlp": 760, "local/full_iteration": 600,
	}
	fe := &fakeEngine{step: func(c presets.Candidate) float64 { return steps[armKey(c)] }}
	var ev events
	d, err := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{fe}, Budget: -1}, ev.emit)
	if err != nil {
		t.Fatal(err)
	}
	// 5 arms: round 1 all of them (3 steps), then the best 3 (15 steps):
	// the second round would measure those same 3, so it is left out.
	perRound := map[int][]string{}
	for _, s := range ev.starts {
		perRound[s.Round] = append(perRound[s.Round], armKey(s.Candidate))
		if s.Candidate.Warmup != 3 {
			t.Errorf("ran %s: halving runs warm-up 3 and derives the others", s.Candidate.Key())
		}
		if want := map[int]int{1: round1Steps, 2: finalSteps}[s.Round]; s.Steps != want {
			t.Errorf("round %d ran %d steps", s.Round, s.Steps)
		}
	}
	// impl local graphs llama's layers whole for attn and mlp too, and te
	// attn,mlp covers a dense layer whole: those spellings are the
	// whole-layer graphs and not run again.
	if len(perRound[1]) != 5 || strings.Join(perRound[2], " ") != "local/full_iteration transformer_engine/layer local/layer" {
		t.Errorf("rounds %v", perRound)
	}
	if ev.plan == nil || ev.plan.Total != 8 || len(ev.results) != 8 || ev.results[7].Done != 8 || ev.results[7].Total != 8 {
		t.Errorf("plan total %v, %d results", ev.plan, len(ev.results))
	}
	if d.Winner == nil || d.Winner.Result.Candidate.Key() != "local/full_iteration/w1" {
		t.Fatalf("winner %v", d.Winner)
	}
	// w1: shortest job (graphed steps are faster than eager ones).
	var derived, none int
	for _, r := range d.Ranking {
		if r.Derived {
			derived++
		}
		if r.Result.Candidate.Impl == presets.ImplNone {
			none++
			if r.Result.Step.Median != 1000 || !r.Derived {
				t.Errorf("none %+v", r)
			}
		}
	}
	// 5 arms × 2 derived warm-ups, and none.
	if derived != 11 || none != 1 || len(d.Ranking) != 16 {
		t.Errorf("%d derived, %d none, %d ranked", derived, none, len(d.Ranking))
	}
	if len(fe.runs()) != 8 || fe.overlap {
		t.Errorf("engine ran %d (overlap %v)", len(fe.runs()), fe.overlap)
	}
}

// A budget too small for every arm keeps the estimate's best, and the
// simulated GPU time stays within it.
func TestHalvingBudget(t *testing.T) {
	m, l := builtin(t, "qwen3_30b_a3b", "h100")
	for _, b := range []time.Duration{45 * time.Second, 90 * time.Second, 5 * time.Minute} {
		t.Run(b.String(), func(t *testing.T) {
			d, err := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{estimator(t, "h100")}, Estimator: estimator(t, "h100"), Budget: b}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d.GPUTimeMs > float64(b.Milliseconds()) && !strings.Contains(strings.Join(d.Notes, " "), "below the smallest search") {
				t.Errorf("budget %s: spent %s (%v)", b, fmtMs(d.GPUTimeMs), d.Notes)
			}
			if d.Winner == nil {
				t.Errorf("budget %s: no winner", b)
			}
			t.Logf("budget %s: %d runs, %s: %v", b, d.Runs, fmtMs(d.GPUTimeMs), d.Notes)
		})
	}
	// Two engines: twice the GPU time in the same wall time.
	one, _ := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{estimator(t, "h100")}, Estimator: estimator(t, "h100"), Budget: time.Minute}, nil)
	two, _ := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{estimator(t, "h100"), estimator(t, "h100")}, Estimator: estimator(t, "h100"), Budget: time.Minute}, nil)
	if two.Runs <= one.Runs {
		t.Errorf("1 engine %d runs, 2 engines %d runs", one.Runs, two.Runs)
	}
}

// Failed candidates (capture error, OOM, crash, timeout) are results: they
// are listed after the successes with their error, a crash or hang is a
// WorkerEvent, a failed arm does not go on to the next round, and the
// search goes on around them on both engines.
func TestRunnerFailures(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	fail := map[string]engine.FailureKind{
		"transformer_engine/layer": engine.FailureCapture, "local/layer": engine.FailureOOM,
		"transformer_engine/attn": engine.FailureCrash, "local/full_iteration": engine.FailureTimeout,
	}
	step := func(c presets.Candidate) float64 { return 900 - 10*float64(len(c.Scopes)) }
	e1, e2 := &fakeEngine{idx: 0, step: step, fail: fail}, &fakeEngine{idx: 1, step: step, fail: fail}
	for _, s := range Strategies() {
		e1.ran, e2.ran = nil, nil
		var ev events
		d, err := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{e1, e2}, Strategy: s, Budget: -1}, ev.emit)
		if err != nil {
			t.Fatal(err)
		}
		if len(e1.runs()) == 0 || len(e2.runs()) == 0 || e1.overlap || e2.overlap {
			t.Errorf("%s: engine 0 ran %d, engine 1 ran %d (overlap %v %v)", s, len(e1.runs()), len(e2.runs()), e1.overlap, e2.overlap)
		}
		if len(ev.workers) != map[string]int{StrategyHalving: 2, StrategyExhaustive: 6}[s] {
			t.Errorf("%s: %d worker events: %+v", s, len(ev.workers), ev.workers)
		}
		seenFail := false
		kinds := map[engine.FailureKind]bool{}
		for _, r := range d.Ranking {
			if r.Result.Failed() {
				seenFail = true
				kinds[r.Result.ErrKind] = true
				if r.Rank != 0 || !strings.HasPrefix(r.Result.Err, "fake ") {
					t.Errorf("%s: failed %s rank %d err %q", s, r.Result.Candidate.Key(), r.Rank, r.Result.Err)
				}
			} else if seenFail {
				t.Errorf("%s: success %s listed after a failure", s, r.Result.Candidate.Key())
			}
		}
		if len(kinds) != 4 {
			t.Errorf("%s: failure kinds %v", s, kinds)
		}
		if d.Winner == nil || d.Winner.Result.Failed() {
			t.Errorf("%s: winner %v", s, d.Winner)
		}
		if s == StrategyHalving {
			for _, st := range ev.starts {
				if st.Round > 1 && fail[armKey(st.Candidate)] != "" {
					t.Errorf("failed arm %s ran again in round %d", st.Candidate.Key(), st.Round)
				}
			}
		}
	}
}

// Every result goes to the journal as it finishes; a cancelled search
// keeps them and says Interrupted; resuming takes them from the journal
// (re-emitted as Resumed) and runs only the rest.
func TestJournalResume(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	for _, s := range Strategies() {
		dir := filepath.Join(t.TempDir(), "run")
		fe := &fakeEngine{step: func(c presets.Candidate) float64 { return 900 - float64(len(c.Scopes)) }}
		cfg := Config{Model: m, Layout: l, Engines: []engine.Engine{fe}, Strategy: s, RunDir: dir, Budget: -1}
		ctx, cancel := context.WithCancel(context.Background())
		var first events
		d, err := Run(ctx, cfg, func(e Event) {
			first.emit(e)
			if r, ok := e.(ResultEvent); ok && r.Done == 5 {
				cancel()
			}
		})
		cancel()
		if err != nil || !d.Interrupted || d.Runs != 5 || len(first.done) != 1 {
			t.Fatalf("%s: interrupted run: err %v, interrupted %v, runs %d", s, err, d.Interrupted, d.Runs)
		}
		lines := journalLines(t, dir)
		if len(lines) != 1+5 || lines[0]["type"] != "header" {
			t.Fatalf("%s: journal has %d lines", s, len(lines))
		}
		firstRuns := fe.runs()

		// Resume with a fresh engine: nothing that finished runs again.
		fe2 := &fakeEngine{step: fe.step}
		cfg.Engines, cfg.Resume = []engine.Engine{fe2}, true
		var second events
		d2, err := Run(context.Background(), cfg, second.emit)
		if err != nil || d2.Interrupted {
			t.Fatalf("%s: resume: %v", s, err)
		}
		if second.resumed() != 5 || d2.Resumed != 5 {
			t.Errorf("%s: %d results resumed (done says %d), want 5", s, second.resumed(), d2.Resumed)
		}
		finishedFirst := map[string]bool{}
		for _, r := range first.results {
			finishedFirst[fmt.Sprintf("%d %s", r.Round, r.Result.Candidate.Key())] = true
		}
		for _, st := range second.starts {
			if k := fmt.Sprintf("%d %s", st.Round, st.Candidate.Key()); finishedFirst[k] {
				t.Errorf("%s: round %d %s ran again", s, st.Round, st.Candidate.Key())
			}
		}
		// The whole search ran each (round, candidate) once: the same
		// runs as one uninterrupted search.
		fe3 := &fakeEngine{step: fe.step}
		whole, err := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{fe3}, Strategy: s, Budget: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(firstRuns)+len(fe2.runs()), len(fe3.runs()); got != want || d2.Runs+d2.Resumed != whole.Runs {
			t.Errorf("%s: interrupted+resumed ran %d (%d+%d), one search %d", s, got, d2.Runs, d2.Resumed, want)
		}
		if d2.Winner == nil || whole.Winner == nil || d2.Winner.Result.Candidate.Key() != whole.Winner.Result.Candidate.Key() {
			t.Errorf("%s: resumed winner %v, uninterrupted %v", s, d2.Winner, whole.Winner)
		}
		for i, r := range second.results {
			if r.Done != i+1 || r.Total != whole.Runs {
				t.Errorf("%s: result %d says %d/%d, want %d/%d", s, i, r.Done, r.Total, i+1, whole.Runs)
			}
		}
		// The interrupted search left no finished mark; the resumed one,
		// which ran to its end, marks the folder.
		if n := len(journalLines(t, dir)); n != 1+whole.Runs {
			t.Errorf("%s: journal has %d lines after the resume, want %d", s, n, 1+whole.Runs)
		}
		if finished, known, err := Finished(dir); err != nil || !known || !finished {
			t.Errorf("%s: after the resume ran to its end: finished %v (known %v, %v)", s, finished, known, err)
		}
	}
}

func journalLines(t *testing.T, dir string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("journal line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestJournalRefusals(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	dir := filepath.Join(t.TempDir(), "run")
	fe := &fakeEngine{}
	teAttn := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}, Warmup: 3}
	cfg := Config{Model: m, Layout: l, Engines: []engine.Engine{fe}, RunDir: dir, Strategy: StrategyExhaustive,
		Space: presets.Space{Impls: []string{presets.ImplTE}, Scopes: [][]string{{"attn"}}, Warmups: []int{3}}, Reference: &teAttn}
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	// A new search does not write into another's folder.
	if _, err := Run(context.Background(), cfg, nil); err == nil || !strings.Contains(err.Error(), "already holds a search") {
		t.Errorf("second search in the same folder: %v", err)
	}
	// Resume refuses a folder of a different search, naming what differs.
	other := cfg
	other.Resume, other.Strategy = true, StrategyHalving
	if _, err := Run(context.Background(), other, nil); err == nil || !strings.Contains(err.Error(), "different search (strategy differ") {
		t.Errorf("resume with another strategy: %v", err)
	}
	q, ql := builtin(t, "qwen3_30b_a3b", "h100")
	other = cfg
	other.Resume, other.Model, other.Layout = true, q, ql
	if _, err := Run(context.Background(), other, nil); err == nil || !strings.Contains(err.Error(), "layout, model") {
		t.Errorf("resume with another model: %v", err)
	}
	other = cfg
	other.Resume, other.RunDir = true, t.TempDir()
	if _, err := Run(context.Background(), other, nil); err == nil || !strings.Contains(err.Error(), "no search to resume") {
		t.Errorf("resume of an empty folder: %v", err)
	}
	// A torn last line (killed while writing) is dropped, and the resume
	// appends after the intact lines.
	f, _ := os.OpenFile(filepath.Join(dir, JournalFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"type":"result","round":1,"key":"trans`)
	f.Close()
	cfg.Resume = true
	var ev events
	d, err := Run(context.Background(), cfg, ev.emit)
	if err != nil || ev.resumed() != 1 || d.Runs != 0 {
		t.Fatalf("resume after a torn line: %v, %d resumed, %d runs", err, ev.resumed(), d.Runs)
	}
	if n := len(journalLines(t, dir)); n != 2 {
		t.Errorf("journal has %d lines", n)
	}
	fp, rs, err := ReadJournal(dir, false)
	if err != nil || fp.Strategy != StrategyExhaustive || len(rs) != 1 {
		t.Errorf("ReadJournal: %v %v %d", err, fp.Strategy, len(rs))
	}
}

func TestDeadlineFor(t *testing.T) {
	m, l := builtin(t, "qwen3_30b_a3b", "h100")
	w, err := stepmodel.BuildWorkload(m, l, stepmodel.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}, Warmup: 3}
	d := DeadlineFor(estimator(t, "h100"))(w, c)
	// (5 eager + 3 warm-up + 15 measured) steps of ~0.93 s unscaled, ×5.
	if d < 90*time.Second || d > 3*time.Minute {
		t.Errorf("deadline %s", d)
	}
	small, sl := builtin(t, "llama3_8b", "h100")
	sl.GBS = sl.MBS * sl.DP() // one micro-batch: a short run
	sw, _ := stepmodel.BuildWorkload(small, sl, stepmodel.WorkloadOptions{})
	if d := DeadlineFor(estimator(t, "h100"))(sw, c); d != time.Minute {
		t.Errorf("short run: deadline %s, want the 1 minute floor", d)
	}
	if d := DeadlineFor(nil)(w, c); d != 10*time.Minute {
		t.Errorf("no estimator: %s", d)
	}
}

func TestRunBadConfig(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	if _, err := Run(context.Background(), Config{Model: m, Layout: l}, nil); err == nil {
		t.Error("no engines accepted")
	}
	if _, err := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{&fakeEngine{}}, Strategy: "random"}, nil); err == nil {
		t.Error("unknown strategy accepted")
	}
	if _, err := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{&fakeEngine{}}, Resume: true}, nil); err == nil {
		t.Error("resume without a run folder accepted")
	}
}

// delegatingEngine is a fakeEngine that hands transformer_engine
// candidates to another engine (as the megatron engine does without TE).
type delegatingEngine struct{ *fakeEngine }

func (d delegatingEngine) Delegates(c presets.Candidate) bool { return c.Impl == presets.ImplTE }

func (d delegatingEngine) Fallback() engine.Engine { return nil }

// The candidates an engine runs itself are measured before those it hands
// on, whatever the estimate's order (which puts the transformer_engine
// ones first here): in both strategies, every local candidate of round 1
// starts before any transformer_engine one.
func TestOwnCandidatesFirst(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	for _, s := range []string{StrategyHalving, StrategyExhaustive} {
		t.Run(s, func(t *testing.T) {
			fe := delegatingEngine{&fakeEngine{step: func(c presets.Candidate) float64 {
				if c.Impl == presets.ImplTE {
					return 500 // the fastest: the estimate order alone would put them first
				}
				return 800
			}}}
			var ev events
			if _, err := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{fe}, Estimator: estimator(t, "h100"), Strategy: s, Budget: -1}, ev.emit); err != nil {
				t.Fatal(err)
			}
			seenTE, local := false, 0
			for _, st := range ev.starts {
				switch {
				case st.Candidate.Impl == presets.ImplTE:
					seenTE = true
				case st.Candidate.Impl == presets.ImplLocal:
					local++
					if seenTE && st.Round == 1 {
						t.Errorf("%s: local %s started after a transformer_engine candidate in round 1", s, st.Candidate.Key())
					}
				}
			}
			if local == 0 || !seenTE {
				t.Errorf("%s: ran %d local candidates, transformer_engine ones: %v", s, local, seenTE)
			}
		})
	}
}

// When the engine hands every graph candidate on, halving runs none on
// the engine itself first: the eager baseline must be the engine's own,
// not one derived from the other engine's runs.
func TestHalvingRunsNoneWhenEveryArmIsHandedOn(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	// The handed-on candidates gain 0.2 %: inside the tie band, where the
	// baseline's lack of graph memory must decide.
	fe := delegatingEngine{&fakeEngine{step: func(c presets.Candidate) float64 {
		if c.Graphed() {
			return 998
		}
		return 1000
	}}}
	var ev events
	d, err := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{fe}, Budget: -1,
		Space: presets.Space{Impls: []string{presets.ImplNone, presets.ImplTE}, Scopes: [][]string{{}, {"attn"}, {"mlp"}}, Warmups: []int{3}}}, ev.emit)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.starts) == 0 || ev.starts[0].Candidate.Impl != presets.ImplNone {
		t.Fatalf("first run %+v, want none", ev.starts)
	}
	var none *Ranked
	for i, r := range d.Ranking {
		if r.Result.Candidate.Impl == presets.ImplNone {
			none = &d.Ranking[i]
		}
	}
	if none == nil || none.Derived || !strings.Contains(strings.Join(d.Notes, " "), "none is run on its own, first") {
		t.Fatalf("none %+v, notes %q", none, d.Notes)
	}
	// Measured once (the three graph arms go on to a second round without
	// it), and ranked with the finalists: it wins the tie.
	runs := 0
	for _, s := range ev.starts {
		if s.Candidate.Impl == presets.ImplNone {
			runs++
		}
	}
	if runs != 1 || d.Ranking[0].Result.Candidate.Impl != presets.ImplNone {
		t.Errorf("none ran %d times; ranking starts %s (%s)", runs, d.Ranking[0].Result.Candidate.Key(), d.Ranking[0].Note)
	}
	// An engine that runs its own candidates derives none as before.
	ev = events{}
	if _, err := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{&fakeEngine{}}, Budget: -1,
		Space: presets.Space{Impls: []string{presets.ImplNone, presets.ImplTE}, Scopes: [][]string{{"attn"}, {"mlp"}}, Warmups: []int{3}}}, ev.emit); err != nil {
		t.Fatal(err)
	}
	for _, s := range ev.starts {
		if s.Candidate.Impl == presets.ImplNone {
			t.Errorf("none was run on its own by an engine that hands nothing on")
		}
	}
}

// The search's preparation runs once, with the search's workload, before
// the space is planned; its lines arrive as PrepareEvents ahead of the
// PlanEvent, and a failed preparation is a note of a search that still
// runs every candidate.
func TestPrepareRunsBeforePlanning(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			var order []string
			calls := 0
			prep := func(_ context.Context, w *stepmodel.Workload, say func(string)) error {
				calls++
				if w == nil || w.Spec.Model.Name != m.Name {
					t.Errorf("prepare got workload %v", w)
				}
				say("measuring the profile")
				if fail {
					return errors.New("the eager runs failed")
				}
				return nil
			}
			fe := &fakeEngine{}
			var ev events
			emit := func(e Event) {
				switch x := e.(type) {
				case PrepareEvent:
					order = append(order, "prepare: "+x.Message)
				case PlanEvent:
					order = append(order, "plan")
				}
				ev.emit(e)
			}
			d, err := Run(context.Background(), Config{Model: m, Layout: l, Engines: []engine.Engine{fe}, Strategy: StrategyExhaustive, Prepare: prep}, emit)
			if err != nil {
				t.Fatal(err)
			}
			if calls != 1 || len(order) < 2 || order[0] != "prepare: measuring the profile" || order[1] != "plan" {
				t.Errorf("fail=%v: prepare called %d times, events %v; want it once, before the plan", fail, calls, order)
			}
			noted := slices.ContainsFunc(d.Notes, func(n string) bool { return n == "preparing the search: the eager runs failed" })
			if noted != fail {
				t.Errorf("fail=%v: notes %q", fail, d.Notes)
			}
			if len(ev.results) == 0 || len(ev.results) != len(fe.runs()) {
				t.Errorf("fail=%v: %d results of %d runs", fail, len(ev.results), len(fe.runs()))
			}
		})
	}
}

// Halving and exhaustive judge every candidate's fit the same way, with
// the memory model's breakdown on every ranked candidate, none included:
// Llama 3 70B with TP 1 and PP 1 on one 80 GB H100 per rank (70.6e9
// parameters: 16 bytes each before any activation) fits under neither.
// The estimate runs a slice of the stage, as cgtune wires it
// (engine.SliceWhenTooBig): halving's none, derived from the slices' eager
// baselines, was judged by the slice's peak and "fit".
func TestStrategiesJudgeMemoryAlike(t *testing.T) {
	m, _ := builtin(t, "llama3_70b", "h100")
	l := presets.Layout{GPU: "h100", NumGPUs: 8, Precision: "bf16", TP: 1, PP: 1, CP: 1, EP: 1, GBS: 64, MBS: 1, Seq: 8192}
	fit := map[string]map[string]bool{}
	for _, s := range Strategies() {
		t.Run(s, func(t *testing.T) {
			cfg := Config{Model: m, Layout: l, Estimator: estimator(t, "h100"), JobGPUMemoryMiB: 81559, Strategy: s,
				Engines: []engine.Engine{engine.SliceWhenTooBig(estimator(t, "h100"))}}
			d, err := Run(context.Background(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d.Winner != nil {
				t.Errorf("%s: winner %s fits the job's GPU", s, d.Winner.Result.Candidate.Name())
			}
			fit[s] = map[string]bool{}
			for _, r := range d.Ranking {
				if r.Result.Failed() {
					continue
				}
				if r.Result.Memory.Breakdown == nil {
					t.Errorf("%s: %s has no memory breakdown", s, r.Result.Candidate.Key())
					continue
				}
				fit[s][r.Result.Candidate.Key()] = r.Fits
			}
			if _, ok := fit[s][presets.Candidate{Impl: presets.ImplNone, Warmup: presets.DefaultWarmup}.Key()]; !ok {
				t.Errorf("%s: none is not ranked", s)
			}
		})
	}
	for k, hf := range fit[StrategyHalving] {
		if ef, ok := fit[StrategyExhaustive][k]; ok && ef != hf {
			t.Errorf("%s: halving says fits=%v, exhaustive %v", k, hf, ef)
		}
	}
}
