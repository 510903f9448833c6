package search

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// gate holds every run of the engines it wraps until the test lets it go,
// so the test sees which runs are in flight at once without timing
// anything.
type gate struct {
	entered chan int      // the engine index of each run that starts
	release chan struct{} // one token per run let go
}

// gatedEngine is a fakeEngine whose runs wait at a gate before running.
type gatedEngine struct {
	*fakeEngine
	g *gate
}

func (e gatedEngine) Run(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	select {
	case e.g.entered <- e.idx:
	case <-ctx.Done():
	}
	select {
	case <-e.g.release:
	case <-ctx.Done():
	}
	return e.fakeEngine.Run(ctx, w, c, opts, emit)
}

// lockstep drives a search on gated engines: it lets runs go only when
// every engine has one in flight, or when the runs in flight are the last
// of the total runs. It returns how many times all engines had a run in
// flight at once; a run that never finds a partner fails the test.
func lockstep(t *testing.T, g *gate, engines, total int, done <-chan struct{}) (together int) {
	t.Helper()
	inFlight := map[int]bool{}
	released := 0
	let := func() {
		for range inFlight {
			g.release <- struct{}{}
		}
		released += len(inFlight)
		inFlight = map[int]bool{}
	}
	stuck := time.NewTimer(30 * time.Second)
	defer stuck.Stop()
	for {
		select {
		case i := <-g.entered:
			if inFlight[i] {
				t.Errorf("engine %d was given a second candidate while its first ran", i)
			}
			inFlight[i] = true
			switch {
			case len(inFlight) == engines:
				together++
				let()
			case released+len(inFlight) == total:
				let()
			}
		case <-done:
			return together
		case <-stuck.C:
			t.Fatalf("%d run(s) in flight on %d engines after %d released of %d: the search gave the other engines nothing",
				len(inFlight), engines, released, total)
		}
	}
}

// One engine per GPU runs the candidates concurrently: with two engines
// the exhaustive search runs two candidates at a time, each engine runs
// half of them and never two at once, and the winner is the one engine's.
func TestEnginesRunConcurrently(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	step := func(c presets.Candidate) float64 { return 1000 - 50*float64(len(c.Scopes)) - float64(c.Warmup) }
	one, err := Run(context.Background(), Config{Model: m, Layout: l, Strategy: StrategyExhaustive,
		Engines: []engine.Engine{&fakeEngine{step: step}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := one.Runs
	if n < 8 {
		t.Fatalf("%d runs on one engine; want the whole space", n)
	}

	g := &gate{entered: make(chan int), release: make(chan struct{})}
	fakes := []*fakeEngine{{idx: 0, step: step}, {idx: 1, step: step}}
	cfg := Config{Model: m, Layout: l, Strategy: StrategyExhaustive, Engines: []engine.Engine{gatedEngine{fakes[0], g}, gatedEngine{fakes[1], g}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // a failed lockstep lets the search go
	done := make(chan struct{})
	var two DoneEvent
	go func() {
		defer close(done)
		two, err = Run(ctx, cfg, nil)
	}()
	together := lockstep(t, g, 2, n, done)
	if err != nil {
		t.Fatal(err)
	}
	if two.Runs != n {
		t.Fatalf("runs: %d on one engine, %d on two", n, two.Runs)
	}
	if together != n/2 {
		t.Errorf("both engines had a candidate in flight %d times; want %d (every pair of the %d runs)", together, n/2, n)
	}
	for _, f := range fakes {
		if f.overlap {
			t.Errorf("engine %d ran two candidates at once", f.idx)
		}
		if got := len(f.runs()); got < n/2 || got > n-n/2 {
			t.Errorf("engine %d ran %d of %d candidates; want half", f.idx, got, n)
		}
	}
	if one.Winner == nil || two.Winner == nil || one.Winner.Result.Candidate.Key() != two.Winner.Result.Candidate.Key() {
		t.Errorf("winners differ: %v vs %v", one.Winner, two.Winner)
	}
}

// BenchmarkEnginesRunConcurrently times the exhaustive search of
// candidates that each take a fixed 5 ms on one engine and on two: the
// wall time two engines save, which a unit test cannot assert on a loaded
// machine.
func BenchmarkEnginesRunConcurrently(b *testing.B) {
	m, l := builtin(b, "llama3_8b", "h100")
	step := func(c presets.Candidate) float64 { return 1000 - 50*float64(len(c.Scopes)) - float64(c.Warmup) }
	for _, engines := range []int{1, 2} {
		b.Run(fmt.Sprintf("engines=%d", engines), func(b *testing.B) {
			var es []engine.Engine
			for i := range engines {
				es = append(es, &fakeEngine{idx: i, step: step, delay: 5 * time.Millisecond})
			}
			cfg := Config{Model: m, Layout: l, Strategy: StrategyExhaustive, Engines: es}
			for b.Loop() {
				if _, err := Run(context.Background(), cfg, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
