package search

import (
	"context"
	"sync"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/presets"
)

// concurrency counts how many engines run a candidate at the same time.
type concurrency struct {
	mu       sync.Mutex
	now, max int
}

func (c *concurrency) enter() {
	c.mu.Lock()
	c.now++
	c.max = max(c.max, c.now)
	c.mu.Unlock()
}

func (c *concurrency) leave() {
	c.mu.Lock()
	c.now--
	c.mu.Unlock()
}

// sleepingEngine is a fakeEngine (one candidate at a time, known step
// times) whose runs take d of wall time, counted in a shared concurrency.
type sleepingEngine struct {
	*fakeEngine
	c *concurrency
}

func (s sleepingEngine) Run(ctx context.Context, w *engine.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	s.c.enter()
	defer s.c.leave()
	return s.fakeEngine.Run(ctx, w, c, opts, emit)
}

// One engine per GPU runs the candidates concurrently: with two engines
// the exhaustive search of N sleeping candidates takes about half the wall
// time of one engine, each engine runs about half of them, never two at
// once, and the winner is the same.
func TestEnginesRunConcurrently(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	step := func(c presets.Candidate) float64 { return 1000 - 50*float64(len(c.Scopes)) - float64(c.Warmup) }
	const delay = 60 * time.Millisecond
	search := func(gpus int) (DoneEvent, time.Duration, []*fakeEngine, int) {
		t.Helper()
		c := &concurrency{}
		var fakes []*fakeEngine
		var engines []engine.Engine
		for i := range gpus {
			f := &fakeEngine{idx: i, step: step, delay: delay}
			fakes = append(fakes, f)
			engines = append(engines, sleepingEngine{f, c})
		}
		cfg := Config{Model: m, Layout: l, Strategy: StrategyExhaustive, Engines: engines}
		start := time.Now()
		d, err := Run(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return d, time.Since(start), fakes, c.max
	}
	one, oneWall, _, oneMax := search(1)
	two, twoWall, fakes, twoMax := search(2)
	n := one.Runs
	if n < 8 || two.Runs != n {
		t.Fatalf("runs: %d on one engine, %d on two", n, two.Runs)
	}
	if oneMax != 1 || twoMax != 2 {
		t.Errorf("at most %d candidate(s) at once on one engine, %d on two; want 1 and 2", oneMax, twoMax)
	}
	for _, f := range fakes {
		if f.overlap {
			t.Errorf("engine %d ran two candidates at once", f.idx)
		}
		if got := len(f.runs()); got < n/2-2 || got > n/2+2 {
			t.Errorf("engine %d ran %d of %d candidates; want about half", f.idx, got, n)
		}
	}
	if oneWall < time.Duration(n)*delay {
		t.Fatalf("one engine took %s for %d candidates of %s", oneWall, n, delay)
	}
	if ratio := float64(twoWall) / float64(oneWall); ratio > 0.7 {
		t.Errorf("two engines took %s, one %s (ratio %.2f); want about half", twoWall, oneWall, ratio)
	}
	if one.Winner == nil || two.Winner == nil || one.Winner.Result.Candidate.Key() != two.Winner.Result.Candidate.Key() {
		t.Errorf("winners differ: %v vs %v", one.Winner, two.Winner)
	}
	t.Logf("%d candidates of %s: one engine %s, two engines %s", n, delay, oneWall.Round(time.Millisecond), twoWall.Round(time.Millisecond))
}
