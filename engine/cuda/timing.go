package cuda

import "sort"

// eventTimer brackets GPU work with a pair of timing events.
type eventTimer struct{ start, end Event }

func newEventTimer() (*eventTimer, error) {
	start, err := NewEvent()
	if err != nil {
		return nil, err
	}
	end, err := NewEvent()
	if err != nil {
		start.Destroy()
		return nil, err
	}
	return &eventTimer{start: start, end: end}, nil
}

func (t *eventTimer) destroy() {
	t.start.Destroy()
	t.end.Destroy()
}

// timeMs records start, issues the work, records end, waits for it and
// returns the milliseconds between the two events.
func (t *eventTimer) timeMs(s Stream, issue func() error) (float64, error) {
	if err := t.start.Record(s); err != nil {
		return 0, err
	}
	if err := issue(); err != nil {
		return 0, err
	}
	if err := t.end.Record(s); err != nil {
		return 0, err
	}
	return t.waitMs()
}

// runMs runs a program that records t's events itself (so that work queued
// before the start event, a blocking kernel say, is not timed).
func (t *eventTimer) runMs(s Stream, p *Program) (float64, error) {
	if err := p.Run(s, 0, p.Len()); err != nil {
		return 0, err
	}
	return t.waitMs()
}

func (t *eventTimer) waitMs() (float64, error) {
	if err := t.end.Sync(); err != nil {
		return 0, err
	}
	return Elapsed(t.start, t.end)
}

// medianOf calls f reps+1 times, drops the first (warm-up) and returns the
// median of the rest.
func medianOf(reps int, f func() (float64, error)) (float64, error) {
	var v []float64
	for i := 0; i <= reps; i++ {
		x, err := f()
		if err != nil {
			return 0, err
		}
		if i > 0 {
			v = append(v, x)
		}
	}
	return median(v), nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// queued builds a program in which a blocking kernel holds the GPU while
// the host enqueues reps launches (each made by add), bracketed by t's
// events: the launches then run back to back, as they do inside a busy
// step, and no launch cost is timed.
func (k *Kernels) queued(t *eventTimer, blockerUs float64, reps int, add func(p *Program)) *Program {
	p := NewProgram(reps + 3)
	p.Spin("blocker", k.Spin, k.SpinGrid(), blockSize, k.spinOut, k.SpinIters(blockerUs), 0)
	p.Event(t.start)
	for range reps {
		add(p)
	}
	p.Event(t.end)
	return p
}
