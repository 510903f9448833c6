package tui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"cgtune/engine"
	"cgtune/search"
	"cgtune/stepmodel"
)

// issueMemory is the memory of one result as the issue found it shown:
// 22908 MiB the run measured on its slice, 9133 MiB that scaled to the
// job's stage, 3072 MiB the memory model's graphs per rank in the job.
func issueMemory() engine.Memory {
	b := &stepmodel.MemoryBreakdown{Weights: 8600, Gradients: 17200, Optimizer: 12900, Activations: 21500, Graphs: 3072, Context: 600, GPUMiB: 143771}
	b.Total = b.Weights + b.Gradients + b.Optimizer + b.Activations + b.Graphs + b.Context
	b.Fits = true
	return engine.Memory{GraphMiB: 22908, GraphFullJobMiB: 9133, DevicePeakMiB: 60000, Breakdown: b}
}

// withMemory gives candidate key's result, in every event, memory mem.
func withMemory(evs []search.Event, key string, mem engine.Memory) {
	set := func(r *engine.Result) {
		if r.Candidate.Key() == key {
			r.Memory = mem
		}
	}
	for i, e := range evs {
		switch x := e.(type) {
		case search.ResultEvent:
			set(&x.Result)
			evs[i] = x
		case search.DoneEvent:
			for j := range x.Ranking {
				set(&x.Ranking[j].Result)
			}
			set(&x.Winner.Result)
			evs[i] = x
		}
	}
}

// rowWith is the first line of the view that holds every one of what.
func rowWith(t *testing.T, v string, what ...string) string {
	t.Helper()
	for _, l := range strings.Split(v, "\n") {
		all := true
		for _, w := range what {
			all = all && strings.Contains(l, w)
		}
		if all {
			return l
		}
	}
	t.Fatalf("no line holds %q:\n%s", what, v)
	return ""
}

// GRAPH MiB means one thing, the job's per-rank graph memory: the run
// screen's row and the results screen's row of one result show the same
// figure (the memory model's graphs term), and what the run itself
// measured shows only in the details.
func TestGraphMemoryIsOneFigureOnEveryScreen(t *testing.T) {
	f := newFake(t)
	withMemory(f.events, cTEAttnMLP.Key(), issueMemory())
	m, _, _ := startRun(t, f)
	send(m, tea.WindowSizeMsg{Width: 160, Height: 48})
	playEvents(m, f, len(f.events)-1) // everything but the ranking
	check := func(where, row string) {
		t.Helper()
		if !strings.Contains(row, " 3072 ") || strings.Contains(row, "22908") || strings.Contains(row, "9133") {
			t.Errorf("%s row %q: want the job's per-rank graph memory, 3072 MiB", where, row)
		}
	}
	check("run screen", rowWith(t, view(m), "te attn,mlp w3", "104.0"))
	send(m, eventMsg{ev: f.events[len(f.events)-1]})
	if m.screen != screenResults {
		t.Fatalf("screen %d", m.screen)
	}
	v := view(m)
	check("results screen", rowWith(t, v, "te attn,mlp w3", "104.0"))
	if d := rowWith(t, v, "memory    graphs"); !strings.Contains(d, "graphs 3072 MiB per rank in the job (the run measured 22908 MiB)") {
		t.Errorf("details %q", d)
	}
}
