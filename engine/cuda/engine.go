package cuda

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"cgtune/engine"
	"cgtune/presets"
)

// Options configure the CUDA engine.
type Options struct {
	Ordinal int
	// Rates come from the probes (matrix rate through cuBLAS, copy
	// bandwidth, launch costs) or the spec table.
	Rates engine.Rates
	// Host is the framework's per-op host cost the eager path emulates.
	Host engine.HostCosts
}

// Engine measures candidates on one GPU. Runs must not overlap.
type Engine struct {
	dev    *Device
	k      *Kernels
	stream Stream
	nvml   *NVML
	rates  engine.Rates
	host   engine.HostCosts
	info   engine.DeviceInfo
	// baselines caches the eager baseline and kernel sums per workload, so
	// every candidate of a search compares against the same eager run.
	baselines map[string]baseline
}

type baseline struct {
	eager             engine.Stats
	kernelMs, fbKerMs float64
}

// New opens GPU opts.Ordinal, loads the kernels and calibrates them.
func New(opts Options) (*Engine, error) {
	dev, err := Open(opts.Ordinal)
	if err != nil {
		return nil, err
	}
	unbind, err := dev.Bind()
	if err != nil {
		dev.Close()
		return nil, err
	}
	defer unbind()
	e := &Engine{dev: dev, rates: opts.Rates, host: opts.Host, baselines: map[string]baseline{}}
	fail := func(err error) (*Engine, error) {
		e.Close()
		return nil, err
	}
	if e.k, err = LoadKernels(dev); err != nil {
		return fail(err)
	}
	if e.stream, err = NewStream(); err != nil {
		return fail(err)
	}
	if err := e.k.Calibrate(e.stream); err != nil {
		return fail(err)
	}
	e.info = engine.DeviceInfo{Index: opts.Ordinal, Name: dev.Name, MemoryMiB: dev.Memory >> 20, SMs: dev.SMs}
	e.info.CUDA, _ = DriverVersion()
	if n, err := OpenNVML(); err == nil {
		e.nvml = n
		e.info.Driver, _ = n.Driver()
	}
	return e, nil
}

// Name is "cuda".
func (e *Engine) Name() string { return "cuda" }

// Device describes the GPU.
func (e *Engine) Device() engine.DeviceInfo { return e.info }

// Kernels exposes the loaded kernels to the probes.
func (e *Engine) Kernels() *Kernels { return e.k }

// Close releases everything the engine holds.
func (e *Engine) Close() error {
	if e.dev == nil {
		return nil
	}
	unbind, err := e.dev.Bind()
	if err == nil {
		defer unbind()
		if e.k != nil {
			e.k.Close()
		}
		if e.stream.h != nil {
			e.stream.Destroy()
		}
	}
	if e.nvml != nil {
		e.nvml.Close()
	}
	err = e.dev.Close()
	e.dev = nil
	return err
}

// deviceUsed is the whole device's used memory in bytes.
func (e *Engine) deviceUsed() int64 {
	if e.nvml != nil {
		if used, _, err := e.nvml.Memory(e.info.Index); err == nil {
			return used
		}
	}
	free, total, err := MemInfo()
	if err != nil {
		return 0
	}
	return total - free
}

// memWatch samples device and process memory on its own goroutine (NVML
// needs no CUDA context) and keeps the peaks.
type memWatch struct {
	mu                sync.Mutex
	peakDev, peakProc int64
	stop              chan struct{}
	done              chan struct{}
}

func (e *Engine) watchMemory() *memWatch {
	w := &memWatch{stop: make(chan struct{}), done: make(chan struct{})}
	if e.nvml == nil {
		close(w.done)
		return w
	}
	pid := os.Getpid()
	go func() {
		defer close(w.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			w.sample(e.nvml, e.info.Index, pid)
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *memWatch) sample(n *NVML, idx, pid int) {
	used, _, err := n.Memory(idx)
	proc, perr := n.ProcessMemory(idx, pid)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.peakDev = max(w.peakDev, used)
	}
	if perr == nil {
		w.peakProc = max(w.peakProc, proc)
	}
}

func (w *memWatch) finish() (peakDev, peakProc int64) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peakDev, w.peakProc
}

// Run measures candidate c on workload w. Everything the run allocates is
// freed before it returns, whether it succeeded or not.
func (e *Engine) Run(ctx context.Context, w *engine.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	start := time.Now()
	opts = opts.WithDefaults()
	res := engine.Result{Candidate: c, Source: engine.Measured, Device: e.info, Notes: append([]string(nil), w.Notes...)}
	if emit == nil {
		emit = func(engine.StepSample) {}
	}
	unbind, err := e.dev.Bind()
	if err != nil {
		return failed(res, err, start)
	}
	defer unbind()
	res.Memory.DeviceBaseMiB = e.deviceUsed() >> 20
	watch := e.watchMemory()
	r := &run{e: e, ctx: ctx, w: w, c: c, opts: opts, emit: emit, key: c.Key()}
	err = r.measure(&res)
	if err == nil {
		// The graphs are still alive here: this is the candidate's peak.
		r.sampleNow(watch)
	}
	r.teardown()
	peakDev, peakProc := watch.finish()
	res.Memory.DevicePeakMiB = max(peakDev>>20, res.Memory.DeviceBaseMiB)
	res.Memory.ProcessPeakMiB = peakProc >> 20
	res.Memory.DeviceAfterMiB = e.deviceUsed() >> 20
	if err != nil {
		return failed(res, err, start)
	}
	if res.Step.Median > 0 {
		res.Speedup = res.Eager.Median / res.Step.Median
	}
	res.WallMs = msSince(start)
	return res
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

func failed(res engine.Result, err error, start time.Time) engine.Result {
	res.Err = err.Error()
	var ce *captureError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		res.ErrKind = engine.ErrCancel
	case IsOOM(err):
		res.ErrKind = engine.ErrOOM
	case errors.As(err, &ce):
		res.ErrKind = engine.ErrCapture
	default:
		res.ErrKind = engine.ErrCUDA
	}
	res.WallMs = msSince(start)
	return res
}

// captureError marks a failure during stream capture or instantiation.
type captureError struct{ err error }

func (c *captureError) Error() string { return "capture failed: " + c.err.Error() }
func (c *captureError) Unwrap() error { return c.err }

// run is the state of one candidate's measurement.
type run struct {
	e    *Engine
	ctx  context.Context
	w    *engine.Workload
	c    presets.Candidate
	opts engine.RunOptions
	emit func(engine.StepSample)
	key  string

	allocs   []DevPtr
	host     *HostBuffer
	scratch  DevPtr
	half     int64 // bytes of each half of the scratch
	syncSrc  DevPtr
	events   []Event
	programs []*Program
	execs    []GraphExec
	graphs   int
	nodes    int
	staticB  int64 // bytes of static buffers allocated for graphs
	inGraph  bool
}

func (r *run) sampleNow(w *memWatch) {
	if r.e.nvml != nil {
		w.sample(r.e.nvml, r.e.info.Index, os.Getpid())
	}
}

func (r *run) alloc(bytes int64) (DevPtr, error) {
	p, err := Alloc(bytes)
	if err != nil {
		return 0, err
	}
	r.allocs = append(r.allocs, p)
	return p, nil
}

func (r *run) event() (Event, error) {
	ev, err := NewEvent()
	if err == nil {
		r.events = append(r.events, ev)
	}
	return ev, err
}

func (r *run) program(capacity int) *Program {
	p := NewProgram(capacity)
	r.programs = append(r.programs, p)
	return p
}

func (r *run) teardown() {
	if r.inGraph {
		if g, err := r.e.stream.EndCapture(); err == nil {
			g.Destroy()
		}
	}
	r.e.stream.Sync()
	for _, x := range r.execs {
		x.Destroy()
	}
	for _, p := range r.programs {
		p.Free()
	}
	for _, ev := range r.events {
		ev.Destroy()
	}
	for _, p := range r.allocs {
		Free(p)
	}
	if r.host != nil {
		r.host.Free()
	}
	r.execs, r.programs, r.events, r.allocs, r.host = nil, nil, nil, nil, nil
}

// setup allocates the scratch the ops stream through and the sync buffers.
func (r *run) setup(w *engine.Workload) error {
	maxB := int64(w.MaxOpBytes())
	r.half = max(1<<20, (maxB/2+63)/64*64)
	var err error
	if r.scratch, err = r.alloc(2 * r.half); err != nil {
		return err
	}
	if err := r.e.k.FillRandom(r.e.stream, r.scratch, 2*r.half, 11); err != nil {
		return err
	}
	if r.syncSrc, err = r.alloc(1 << 16); err != nil {
		return err
	}
	r.host, err = AllocHost(1 << 16)
	return err
}

// addOp appends the launch that does op's work on this GPU.
func (r *run) addOp(p *Program, op engine.Op, withHost bool) {
	var hostNs int64
	if withHost {
		hostNs = int64(r.e.host.OpHostUs(op) * 1000)
	}
	k := r.e.k
	switch op.Kind {
	case engine.KindElementwise, engine.KindNorm, engine.KindOptimizer:
		n := max(1, int64(op.Bytes)/32)
		n = min(n, r.half/16)
		p.Stream(op.Name, k.Stream, k.StreamGrid(n), blockSize, r.scratch, r.scratch+DevPtr(r.half), n, hostNs)
	case engine.KindSync:
		p.Sync(op.Name, r.syncSrc, max(4, int64(op.Bytes)), r.host, hostNs)
	default: // GEMM, attention, collectives: the op's time at this GPU's rates
		us := r.e.rates.OpGPUUs(op)
		p.Spin(op.Name, k.Spin, k.SpinGrid(), blockSize, k.spinOut, k.SpinIters(us), hostNs)
	}
}

// stepTimer wraps a step program with events: start, after forward-backward, after the optimizer.
type stepTimer struct{ e0, e1, e2 Event }

func (r *run) timer() (stepTimer, error) {
	var t stepTimer
	var err error
	if t.e0, err = r.event(); err != nil {
		return t, err
	}
	if t.e1, err = r.event(); err != nil {
		return t, err
	}
	t.e2, err = r.event()
	return t, err
}

// runStep runs the whole program once and returns the real job's step time
// (forward-backward scaled to every micro-batch) and the unscaled
// forward-backward part.
func (r *run) runStep(p *Program, t stepTimer, w *engine.Workload) (stepMs, fbMs float64, err error) {
	if err := r.ctx.Err(); err != nil {
		return 0, 0, err
	}
	if err := p.Run(r.e.stream, 0, p.Len()); err != nil {
		return 0, 0, err
	}
	if err := t.e2.Sync(); err != nil {
		return 0, 0, err
	}
	fb, err := Elapsed(t.e0, t.e1)
	if err != nil {
		return 0, 0, err
	}
	opt, err := Elapsed(t.e1, t.e2)
	if err != nil {
		return 0, 0, err
	}
	return fb*w.ScaleFactor() + opt, fb * w.ScaleFactor(), nil
}

// eagerProgram is a whole step op by op, with the framework's host costs.
func (r *run) eagerProgram(w *engine.Workload, t stepTimer) *Program {
	ops := w.StepOps()
	p := r.program(len(ops) + 3)
	p.Event(t.e0)
	for range w.RunMicroBatches {
		for _, op := range w.MicroBatchOps() {
			r.addOp(p, op, true)
		}
	}
	p.Event(t.e1)
	for _, op := range w.Optimizer {
		r.addOp(p, op, true)
	}
	p.Event(t.e2)
	return p
}

func (r *run) steps(p *Program, t stepTimer, w *engine.Workload, phase string, n int) ([]float64, []float64, error) {
	var ms, fbs []float64
	for i := 0; i < n; i++ {
		s, fb, err := r.runStep(p, t, w)
		if err != nil {
			return nil, nil, err
		}
		ms, fbs = append(ms, s), append(fbs, fb)
		r.emit(engine.StepSample{Candidate: r.key, Phase: phase, Step: i, StepMs: s, DeviceMiB: r.e.deviceUsed() >> 20})
	}
	return ms, fbs, nil
}

func workloadKey(w *engine.Workload) string {
	return fmt.Sprintf("%s|%+v|%d|%t|%d", w.Model, w.Layout, w.RunMicroBatches, w.DroplessMoE, len(w.Layers))
}

// measure runs the candidate: eager baseline (cached per workload),
// warm-up steps, capture, measured steps.
func (r *run) measure(res *engine.Result) error {
	w := r.w
	if r.c.FullIteration() {
		w = w.FullIterationVariant()
		if w != r.w {
			res.Notes = w.Notes
		}
	}
	if err := r.setup(w); err != nil {
		return err
	}
	t, err := r.timer()
	if err != nil {
		return err
	}
	// The eager baseline is always the workload as the user runs it (for a
	// dropless MoE that is with the token-count sync), the kernel sums are
	// those of what this candidate runs.
	eagerP := r.eagerProgram(w, t)
	baseP := eagerP
	if w != r.w {
		baseP = r.eagerProgram(r.w, t)
	}
	if res.Eager, err = r.eagerBaseline(r.w, baseP, t); err != nil {
		return err
	}
	kb, err := r.kernelBaseline(w)
	if err != nil {
		return err
	}
	res.KernelSumMs, res.FwdBwdKernelMs = kb.kernelMs, kb.fbKerMs
	if w.RunMicroBatches < w.MicroBatches {
		res.Scaling = fmt.Sprintf("ran %d of %d micro-batches per step; forward-backward scaled ×%.1f", w.RunMicroBatches, w.MicroBatches, w.ScaleFactor())
	}

	// The candidate's own eager warm-up steps (at least one: lazy init).
	warm := time.Now()
	if _, _, err := r.steps(eagerP, t, w, engine.PhaseWarmup, max(1, r.c.Warmup)); err != nil {
		return err
	}
	res.WarmupMs = msSince(warm)

	p := eagerP
	if r.c.Graphed() {
		capStart := time.Now()
		before := r.e.deviceUsed()
		var err error
		if r.c.FullIteration() {
			p, err = r.captureFullIteration(w, t)
		} else {
			p, err = r.captureLayers(w, t)
		}
		if err != nil {
			return err
		}
		res.CaptureMs = msSince(capStart)
		res.Graphs, res.Nodes = r.graphs, r.nodes
		res.Memory.GraphMiB = max(0, r.e.deviceUsed()-before) >> 20
		res.Memory.GraphFullJobMiB = res.Memory.GraphMiB
		if r.c.FullIteration() {
			res.Memory.GraphFullJobMiB = int64(float64(res.Memory.GraphMiB) * w.ScaleFactor())
		} else if w.CapturedMicroBatches < w.RealCapturedMicroBatches {
			res.Memory.GraphFullJobMiB = res.Memory.GraphMiB * int64(w.RealCapturedMicroBatches) / int64(w.CapturedMicroBatches)
		}
		r.emit(engine.StepSample{Candidate: r.key, Phase: engine.PhaseCapture, StepMs: res.CaptureMs, DeviceMiB: r.e.deviceUsed() >> 20})
	}
	ms, fbs, err := r.steps(p, t, w, engine.PhaseMeasure, r.opts.MeasuredSteps)
	if err != nil {
		return err
	}
	res.Step = engine.Summarise(ms)
	res.FwdBwdMs = engine.Summarise(fbs).Median
	return nil
}

// eagerBaseline is the eager step time of workload w, measured once per
// workload in this process.
func (r *run) eagerBaseline(w *engine.Workload, eagerP *Program, t stepTimer) (engine.Stats, error) {
	key := "eager|" + workloadKey(w)
	if b, ok := r.e.baselines[key]; ok {
		return b.eager, nil
	}
	if _, _, err := r.steps(eagerP, t, w, engine.PhaseEager, 1); err != nil { // warm-up
		return engine.Stats{}, err
	}
	ms, _, err := r.steps(eagerP, t, w, engine.PhaseEager, r.opts.EagerSteps)
	if err != nil {
		return engine.Stats{}, err
	}
	r.e.baselines[key] = baseline{eager: engine.Summarise(ms)}
	return r.e.baselines[key].eager, nil
}

// kernelBaseline is the kernel sums of workload w, measured once per workload.
func (r *run) kernelBaseline(w *engine.Workload) (baseline, error) {
	key := "kernels|" + workloadKey(w)
	if b, ok := r.e.baselines[key]; ok {
		return b, nil
	}
	var b baseline
	var err error
	if b.kernelMs, b.fbKerMs, err = r.kernelSums(w); err != nil {
		return b, err
	}
	r.e.baselines[key] = b
	return b, nil
}

// kernelSums times every distinct kernel of the step alone (ten back to
// back behind a blocking kernel, so launch cost is hidden) and adds them
// up over the real job's step: the GPU time a perfect launcher reaches.
func (r *run) kernelSums(w *engine.Workload) (stepMs, fbMs float64, err error) {
	type sig struct {
		kind           engine.OpKind
		bytes, flops   float64
		scale, netFrac float64
		link           string
	}
	cache := map[sig]float64{}
	t, err := newEventTimer()
	if err != nil {
		return 0, 0, err
	}
	defer t.destroy()
	const reps = 10
	timeOp := func(op engine.Op) (float64, error) {
		if op.Kind == engine.KindSync {
			op.Kind = engine.KindElementwise // the copy, not the host's wait
		}
		s := sig{op.Kind, op.Bytes, op.FLOPs, op.RateScale, op.NetFrac, op.Link}
		if v, ok := cache[s]; ok {
			return v, nil
		}
		p := r.e.k.queued(t, 300, reps, func(p *Program) { r.addOp(p, op, false) })
		defer p.Free()
		ms, err := t.runMs(r.e.stream, p)
		if err != nil {
			return 0, err
		}
		cache[s] = ms / reps
		return ms / reps, nil
	}
	var mb, opt float64
	for _, op := range w.MicroBatchOps() {
		v, err := timeOp(op)
		if err != nil {
			return 0, 0, err
		}
		mb += v
	}
	for _, op := range w.Optimizer {
		v, err := timeOp(op)
		if err != nil {
			return 0, 0, err
		}
		opt += v
	}
	fb := mb * float64(w.MicroBatches)
	return fb + opt, fb, nil
}

// segment is an engine.Segment with its captured graphs.
type segment struct {
	ops    []engine.Op
	graphs []GraphExec // one per captured micro-batch; nil when eager
	in     []DevPtr    // static input buffer per captured micro-batch
}

func split(ops []engine.Op, scopes []string) []*segment {
	var out []*segment
	for _, s := range engine.SplitScopes(ops, scopes) {
		seg := &segment{ops: s.Ops}
		if s.Graphed {
			seg.graphs = []GraphExec{}
		}
		out = append(out, seg)
	}
	return out
}

func (s *segment) graphed() bool { return s.graphs != nil }

// captureOps captures ops into one graph (with the host costs the
// framework spends during capture) and instantiates it.
func (r *run) captureOps(ops []engine.Op, withHost bool) (GraphExec, error) {
	p := NewProgram(len(ops))
	defer p.Free()
	for _, op := range ops {
		r.addOp(p, op, withHost)
	}
	if err := r.e.stream.BeginCapture(); err != nil {
		return GraphExec{}, &captureError{err}
	}
	r.inGraph = true
	runErr := p.Run(r.e.stream, 0, p.Len())
	g, endErr := r.e.stream.EndCapture()
	r.inGraph = false
	if runErr != nil {
		if endErr == nil {
			g.Destroy()
		}
		return GraphExec{}, &captureError{runErr}
	}
	if endErr != nil {
		return GraphExec{}, &captureError{endErr}
	}
	defer g.Destroy()
	n, err := g.Nodes()
	if err != nil {
		return GraphExec{}, &captureError{err}
	}
	x, err := g.Instantiate()
	if err != nil {
		return GraphExec{}, &captureError{err}
	}
	r.execs = append(r.execs, x)
	r.graphs++
	r.nodes += n
	return x, nil
}

// captureLayers does what Transformer Engine's make_graphed_callables does
// for the chosen scopes: warm-up passes of every graphed region, then one
// forward and one backward graph per region, layer and captured
// micro-batch, each with its static input buffer. It returns the replay
// step program.
func (r *run) captureLayers(w *engine.Workload, t stepTimer) (*Program, error) {
	type layerSegs struct{ fwd, bwd []*segment }
	layers := make([]layerSegs, len(w.Layers))
	for i, lt := range w.Layers {
		layers[i] = layerSegs{split(lt.Fwd, r.c.Scopes), split(lt.Bwd, r.c.Scopes)}
	}
	// TE's own warm-up: max(1, ceil((10 − warmup·M) / captured)) passes.
	passes := engine.TEWarmupPasses(r.c.Warmup, w.MicroBatches, w.CapturedMicroBatches)
	warm := r.program(1024)
	for range passes * w.CapturedMicroBatches {
		for _, l := range layers {
			for _, s := range l.fwd {
				if s.graphed() {
					for _, op := range s.ops {
						r.addOp(warm, op, true)
					}
				}
			}
		}
		for i := len(layers) - 1; i >= 0; i-- {
			for _, s := range layers[i].bwd {
				if s.graphed() {
					for _, op := range s.ops {
						r.addOp(warm, op, true)
					}
				}
			}
		}
	}
	if err := warm.Run(r.e.stream, 0, warm.Len()); err != nil {
		return nil, err
	}
	if err := r.e.stream.Sync(); err != nil {
		return nil, err
	}
	static := int64(w.StaticBufferBytes())
	capture := func(s *segment) error {
		if !s.graphed() {
			return nil
		}
		in, err := r.alloc(static)
		if err != nil {
			return err
		}
		out, err := r.alloc(static)
		if err != nil {
			return err
		}
		_ = out // the graph's static output; the next region reads it in place
		r.staticB += 2 * static
		x, err := r.captureOps(s.ops, true)
		if err != nil {
			return err
		}
		s.graphs = append(s.graphs, x)
		s.in = append(s.in, in)
		return nil
	}
	for range w.CapturedMicroBatches {
		for _, l := range layers {
			for _, s := range l.fwd {
				if err := capture(s); err != nil {
					return nil, err
				}
			}
		}
		for i := len(layers) - 1; i >= 0; i-- {
			for _, s := range layers[i].bwd {
				if err := capture(s); err != nil {
					return nil, err
				}
			}
		}
	}
	// Replay: uncovered ops eagerly, each region by its graph; an input
	// that an eager op produced is first copied into the static buffer.
	p := r.program(4096)
	replay := func(segs []*segment, mb int, prevGraphed *bool) {
		for _, s := range segs {
			if !s.graphed() {
				for _, op := range s.ops {
					r.addOp(p, op, true)
				}
				*prevGraphed = false
				continue
			}
			g := mb % len(s.graphs)
			if !*prevGraphed {
				n := static / 16
				copyOp := engine.Op{Name: "static_input_copy", Kind: engine.KindElementwise, Bytes: float64(static) * 2}
				p.Stream(copyOp.Name, r.e.k.Stream, r.e.k.StreamGrid(n), blockSize, r.scratch, s.in[g], min(n, r.half/16),
					int64(r.e.host.OpHostUs(copyOp)*1000))
			}
			p.Graph("graph", s.graphs[g], int64((r.e.host.GraphReplayUs)*1000))
			*prevGraphed = true
		}
	}
	p.Event(t.e0)
	for mb := range w.RunMicroBatches {
		prev := false
		for _, op := range w.Pre {
			r.addOp(p, op, true)
		}
		for _, l := range layers {
			replay(l.fwd, mb, &prev)
		}
		prev = false
		for _, op := range w.Head {
			r.addOp(p, op, true)
		}
		for i := len(layers) - 1; i >= 0; i-- {
			replay(layers[i].bwd, mb, &prev)
		}
		for _, op := range w.PreBwd {
			r.addOp(p, op, true)
		}
	}
	p.Event(t.e1)
	for _, op := range w.Optimizer {
		r.addOp(p, op, true)
	}
	p.Event(t.e2)
	return p, nil
}

// captureFullIteration does what FullCudaGraphWrapper does: the forward
// and backward of every micro-batch in one graph, fed from static buffers
// that hold every micro-batch's inputs; the optimizer stays outside.
func (r *run) captureFullIteration(w *engine.Workload, t stepTimer) (*Program, error) {
	var ops []engine.Op
	for range w.RunMicroBatches {
		ops = append(ops, w.MicroBatchOps()...)
	}
	// tokens, labels, loss mask and position ids of each micro-batch
	inBytes := int64(w.StaticInputBytes())
	var ins []DevPtr
	for range w.RunMicroBatches {
		in, err := r.alloc(inBytes)
		if err != nil {
			return nil, err
		}
		ins = append(ins, in)
		r.staticB += inBytes
	}
	x, err := r.captureOps(ops, true)
	if err != nil {
		return nil, err
	}
	p := r.program(len(w.Optimizer) + w.RunMicroBatches + 4)
	p.Event(t.e0)
	copyOp := engine.Op{Name: "static_batch_copy", Kind: engine.KindElementwise, Bytes: float64(inBytes) * 2}
	for _, in := range ins {
		n := min(inBytes/16, r.half/16)
		p.Stream(copyOp.Name, r.e.k.Stream, r.e.k.StreamGrid(n), blockSize, r.scratch, in, n, int64(r.e.host.OpHostUs(copyOp)*1000))
	}
	p.Graph("full_iteration_graph", x, int64(r.e.host.GraphReplayUs*1000))
	p.Event(t.e1)
	for _, op := range w.Optimizer {
		r.addOp(p, op, true)
	}
	p.Event(t.e2)
	return p, nil
}
