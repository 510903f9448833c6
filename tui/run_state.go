package tui

import (
	"context"
	"slices"
	"time"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/search"
)

// The state of one search as it runs: the session's (the run screen
// follows it, the results screen reads what ran).

// runState is one search, from start to DoneEvent: the session's, as the
// results screen reads what ran.
type runState struct {
	req     Request
	cancel  context.CancelFunc
	events  <-chan search.Event
	started time.Time
	ended   time.Time // when the DoneEvent (or the end of the stream) came

	total, done int
	eta         time.Duration
	etaAt       time.Time // when eta was reported; the countdown goes on from there

	plan  []search.Planned // the space as the runner planned it
	rows  []runRow
	index map[string]int // candidate key → row
	live  map[int]*liveRun
	// prev keeps each GPU's last candidate with samples, drawn until the
	// next one's first step arrives (an engine may take a while to start).
	prev map[int]*liveRun
	mem  map[int]search.MemoryEvent

	pausedAt time.Time      // when the stop question paused the search (zero: running)
	last     *engine.Result // the latest finished candidate
	lastOK   *engine.Result // the latest one that succeeded
	stopping bool
	finished bool
}

// Candidate states on the run screen.
const (
	stQueued  = "queued"
	stRunning = "running"
	stDone    = "done"
	stFailed  = "failed"
)

type runRow struct {
	cand   presets.Candidate
	state  string
	gpu    int
	round  int
	result *engine.Result
}

// liveRun is what one GPU is doing now.
type liveRun struct {
	cand    presets.Candidate
	round   int
	steps   int
	samples []engine.StepSample
	ended   bool
}

// maxSamples bounds the chart's memory; it shows at most its width anyway.
const maxSamples = 512

func newRunState(req Request, now time.Time) *runState {
	return &runState{req: req, started: now, index: map[string]int{}, live: map[int]*liveRun{}, prev: map[int]*liveRun{}, mem: map[int]search.MemoryEvent{}}
}

func (r *runState) setPlan(plan []search.Planned) {
	r.plan = plan
	r.rows, r.index = nil, map[string]int{}
	for _, p := range plan {
		if !p.Valid() {
			continue
		}
		r.index[p.Candidate.Key()] = len(r.rows)
		r.rows = append(r.rows, runRow{cand: p.Candidate, state: stQueued})
	}
}

// row finds (or adds) the row of a candidate.
func (r *runState) row(c presets.Candidate) *runRow {
	i, ok := r.index[c.Key()]
	if !ok {
		i = len(r.rows)
		r.index[c.Key()] = i
		r.rows = append(r.rows, runRow{cand: c, state: stQueued})
	}
	return &r.rows[i]
}

func (r *runState) liveGPUs() []int {
	var gpus []int
	for g := range r.live {
		gpus = append(gpus, g)
	}
	slices.Sort(gpus)
	return gpus
}

// etaLeft is the time the search still needs: the runner's estimate counted
// down since it was made, or, when that is the larger, what the runs so far
// took each (the runner's first estimates know nothing of start-up costs).
func (r *runState) etaLeft(now time.Time) time.Duration {
	left := max(r.eta-now.Sub(r.etaAt), 0)
	if r.done > 0 && r.total > r.done {
		perRun := r.etaAt.Sub(r.started) / time.Duration(r.done)
		left = max(left, perRun*time.Duration(r.total-r.done)-now.Sub(r.etaAt))
	}
	return max(left, time.Second)
}

func measuredSteps(s []engine.StepSample) int {
	n := 0
	for _, x := range s {
		if x.Phase == engine.PhaseMeasure {
			n++
		}
	}
	return n
}

// runningOn names the candidate running on GPU g, for its gauge (several
// GPUs run candidates at once); "" when it runs none.
func (r *runState) runningOn(g int) string {
	for _, row := range r.rows {
		if row.state == stRunning && row.gpu == g {
			return " · ▶ " + row.cand.Name()
		}
	}
	return ""
}

// onStart marks the candidate running on its GPU; the GPU's last
// candidate with samples is kept for the chart until the new one's come.
func (r *runState) onStart(ev search.StartEvent) {
	row := r.row(ev.Candidate)
	row.state, row.gpu, row.round = stRunning, ev.GPU, ev.Round
	if old := r.live[ev.GPU]; old != nil && len(old.samples) > 0 {
		r.prev[ev.GPU] = old
	}
	r.live[ev.GPU] = &liveRun{cand: ev.Candidate, round: ev.Round, steps: ev.Steps}
}

// onSample keeps a step of the candidate running on the sample's GPU.
func (r *runState) onSample(ev search.SampleEvent) {
	lr := r.live[ev.GPU]
	if lr == nil {
		lr = &liveRun{}
		r.live[ev.GPU] = lr
	}
	lr.samples = append(lr.samples, ev.Sample)
	if len(lr.samples) > maxSamples {
		lr.samples = slices.Clone(lr.samples[len(lr.samples)-maxSamples:])
	}
}

// onResult takes a finished candidate and the runner's progress, as of
// now.
func (r *runState) onResult(ev search.ResultEvent, now time.Time) {
	res := ev.Result
	row := r.row(res.Candidate)
	row.result, row.gpu, row.round = &res, ev.GPU, ev.Round
	row.state = stDone
	if res.Failed() {
		row.state = stFailed
	}
	if lr := r.live[ev.GPU]; lr != nil {
		lr.ended = true
	}
	r.done, r.total, r.eta, r.etaAt = ev.Done, ev.Total, ev.ETA, now
	r.last = &res
	if !res.Failed() {
		r.lastOK = &res
	}
}
