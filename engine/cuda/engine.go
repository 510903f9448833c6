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
	"cgtune/stepmodel"
)

// Options configure the CUDA engine.
type Options struct {
	Ordinal int
	// Rates come from the probes (matrix rate through cuBLAS, copy
	// bandwidth, launch costs) or the spec table.
	Rates stepmodel.Rates
	// Host is the framework's per-op host cost the eager path emulates
	// where no framework profile is found.
	Host stepmodel.HostCosts
	// Costs decides a workload's costs (nil: Host and Rates as given): with
	// a framework profile the engine spends the measured host and GPU
	// times per region.
	Costs stepmodel.CostSource
}

// Engine measures candidates on one GPU. Runs must not overlap.
type Engine struct {
	dev     *Device
	k       *Kernels
	stream  Stream
	nvml    *NVML
	rates   stepmodel.Rates
	host    stepmodel.HostCosts
	costSrc stepmodel.CostSource
	info    engine.DeviceInfo
	// baselines caches the eager baseline and kernel sums per workload, so
	// every candidate of a search compares against the same eager run.
	baselines map[string]baseline
}

type baseline struct {
	eager             stepmodel.Stats
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
	e := &Engine{dev: dev, rates: opts.Rates, host: opts.Host, costSrc: opts.Costs, baselines: map[string]baseline{}}
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
func (e *Engine) Run(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	start := time.Now()
	opts = opts.WithDefaults()
	costs := stepmodel.Costs{Rates: e.rates, Host: e.host}
	if e.costSrc != nil {
		costs = e.costSrc.CostsFor(w, e.rates, e.host)
	}
	plan := stepmodel.PlanCapture(w, c, w.Spec.Options.Generation)
	sched := stepmodel.NewSchedule(w, plan, costs)
	res := engine.Result{Candidate: c, Source: engine.SourceMeasured, Device: e.info, HostCosts: costs.Kind(), ProfileFrom: engine.ProfileFrom(costs)}
	res.Notes = append(append([]string{"host costs: " + costs.Source()}, costs.CalibrationNotes()...), w.Notes...)
	res.Notes = append(append(append(res.Notes, plan.Describe()), plan.Notes...), sched.Notes...)
	res.Memory.Breakdown = stepmodel.PredictMemory(w, plan, costs.Profile, stepmodel.JobGPUMiB(w.Layout, e.info.MemoryMiB), stepmodel.MemoryOptions{})
	res.Notes = append(res.Notes, res.Memory.Breakdown.Describe())
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
	r := &run{e: e, ctx: ctx, w: w, c: c, opts: opts, emit: emit, key: c.Key(), s: sched, spin: costs.Profile != nil}
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
	res.Eager = stepmodel.EagerWithFrameworkSpread(res.Eager, costs.Profile)
	if step, note := stepmodel.WithFrameworkSpread(res.Step, costs.Profile, plan); note != "" {
		res.Step, res.Notes = step, append(res.Notes, note)
	}
	if plan.Graphed() {
		res.Memory.GraphFullJobMiB = res.Memory.Breakdown.Graphs
	}
	res.WallMs = msSince(start)
	return res
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

func failed(res engine.Result, err error, start time.Time) engine.Result {
	res.Err = err.Error()
	var ce *captureError
	var pf *stepmodel.CaptureFailure
	switch {
	case errors.As(err, &pf):
		res.ErrKind = engine.FailureCapture
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		res.ErrKind = engine.FailureCancel
	case IsOOM(err):
		res.ErrKind = engine.FailureOOM
	case errors.As(err, &ce):
		res.ErrKind = engine.FailureCapture
	default:
		res.ErrKind = engine.FailureCUDA
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
	w    *stepmodel.Workload
	c    presets.Candidate
	opts engine.RunOptions
	emit func(engine.StepSample)
	key  string
	s    *stepmodel.Schedule
	// spin makes every kernel a spin kernel of the schedule's GPU time
	// (costs from a framework profile); else memory-bound ops stream their
	// bytes through the scratch.
	spin bool

	allocs   []DevPtr
	host     *HostBuffer
	scratch  DevPtr
	half     int64 // bytes of each half of the scratch
	syncSrc  DevPtr
	events   []Event
	programs []*Program
	execs    []GraphExec // one per plan graph, in the plan's order
	statics  []staticBuf // each plan graph's static input buffer
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
	r.execs, r.statics, r.programs, r.events, r.allocs, r.host = nil, nil, nil, nil, nil, nil
}

// setup allocates the scratch the ops stream through and the sync buffers.
func (r *run) setup(w *stepmodel.Workload) error {
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

// addItem appends the launch that does an eager op or a graph node's work
// on this GPU, after the framework host time the item carries.
func (r *run) addItem(p *Program, it stepmodel.Item) {
	hostNs := int64(it.HostUs * 1000)
	op := it.Op
	k := r.e.k
	switch {
	case op.Kind == stepmodel.KindSync:
		p.Sync(op.Name, r.syncSrc, max(4, int64(op.Bytes)), r.host, hostNs)
	case !r.spin && (op.Kind == stepmodel.KindElementwise || op.Kind == stepmodel.KindNorm || op.Kind == stepmodel.KindOptimizer):
		n := max(1, int64(op.Bytes)/32)
		n = min(n, r.half/16)
		p.Stream(op.Name, k.Stream, k.StreamGrid(n), blockSize, r.scratch, r.scratch+DevPtr(r.half), n, hostNs)
	default: // GEMM, attention, collectives, and every op priced by a profile: its GPU time
		p.Spin(op.Name, k.Spin, k.SpinGrid(), blockSize, k.spinOut, k.SpinIters(it.GPUUs), hostNs)
	}
}

// stepTimer holds a step's events: at the start, before the last run
// micro-batch (eb, recorded only where the items show the boundary: last
// is true), after forward-backward and after the optimizer.
type stepTimer struct {
	e0, eb, e1, e2 Event
	last           bool
	step           stepmodel.Step // the program's step, for scaling it to the job (Schedule.FwdBwdMs)
}

func (r *run) timer() (stepTimer, error) {
	var t stepTimer
	var err error
	for _, e := range []*Event{&t.e0, &t.eb, &t.e1} {
		if *e, err = r.event(); err != nil {
			return t, err
		}
	}
	t.e2, err = r.event()
	return t, err
}

// runStep runs the whole program once and returns the real job's step time
// (forward-backward scaled to every micro-batch) and the unscaled
// forward-backward part.
func (r *run) runStep(p *Program, t stepTimer) (stepMs, fbMs float64, err error) {
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
	last := -1.0
	if t.last {
		if last, err = Elapsed(t.eb, t.e1); err != nil {
			return 0, 0, err
		}
	}
	fb = r.s.FwdBwdMs(t.step, fb, last)
	return fb + opt, fb, nil
}

// stepProgram is a step of the schedule as a program: its items between
// the timer's events. Graph items launch the captured graphs; copy items
// write the static input buffer of their graph. The timer returned is t
// saying whether this program records eb.
func (r *run) stepProgram(st stepmodel.Step, t stepTimer) (*Program, stepTimer) {
	p := r.program(len(st.Start) + len(st.FwdBwd) + len(st.Optimizer) + 4)
	p.Event(t.e0)
	for _, it := range st.Start {
		r.addStepItem(p, it)
	}
	last, ok := r.s.W.LastMicroBatchStart(len(st.FwdBwd))
	t.last, t.step = ok, st
	for i, it := range st.FwdBwd {
		if ok && i == last {
			p.Event(t.eb)
		}
		r.addStepItem(p, it)
	}
	p.Event(t.e1)
	for _, it := range st.Optimizer {
		r.addStepItem(p, it)
	}
	p.Event(t.e2)
	return p, t
}

func (r *run) addStepItem(p *Program, it stepmodel.Item) {
	switch it.Kind {
	case stepmodel.ItemGraph:
		p.Graph(fmt.Sprintf("graph %d (%s)", it.Graph, r.s.Plan.Graphs[it.Graph].Region), r.execs[it.Graph], int64(it.HostUs*1000))
	case stepmodel.ItemCopy:
		in := r.statics[it.Graph]
		n := max(1, min(int64(it.Op.Bytes)/32, in.bytes/16, r.half/16))
		p.Stream(it.Op.Name, r.e.k.Stream, r.e.k.StreamGrid(n), blockSize, r.scratch, in.p, n, int64(it.HostUs*1000))
	default:
		r.addItem(p, it)
	}
}

func (r *run) steps(p *Program, t stepTimer, phase engine.Phase, n int) ([]float64, []float64, error) {
	var ms, fbs []float64
	for i := 0; i < n; i++ {
		s, fb, err := r.runStep(p, t)
		if err != nil {
			return nil, nil, err
		}
		ms, fbs = append(ms, s), append(fbs, fb)
		r.emit(engine.StepSample{Candidate: r.key, Phase: phase, Step: i, StepMs: s, DeviceMiB: r.e.deviceUsed() >> 20})
	}
	return ms, fbs, nil
}

// workloadKey names a workload and the costs it runs with, for the
// baselines measured once per workload.
func (r *run) workloadKey() string {
	w := r.w
	return fmt.Sprintf("%s|%+v|%d|%t|%d|%s", w.Model, w.Layout, w.RunMicroBatches, w.DroplessMoE, len(w.Layers), r.s.Costs.Source())
}

// measure runs the candidate: eager baseline (cached per workload),
// warm-up steps, capture, measured steps.
func (r *run) measure(res *engine.Result) error {
	w, plan := r.w, r.s.Plan
	if err := r.setup(w); err != nil {
		return err
	}
	t, err := r.timer()
	if err != nil {
		return err
	}
	eagerP, et := r.stepProgram(r.s.Eager(), t)
	if res.Eager, err = r.eagerBaseline(eagerP, et); err != nil {
		return err
	}
	kb, err := r.kernelBaseline()
	if err != nil {
		return err
	}
	res.KernelSumMs, res.FwdBwdKernelMs = kb.kernelMs, kb.fbKerMs
	if w.RunMicroBatches < w.MicroBatches {
		res.Scaling = "ran " + w.ScalingText()
	}
	// A configuration the framework rejects when it builds the model, or
	// a region the framework profile could not capture on this node, fails
	// without a run; a capture failure of the plan's own (a host sync in a
	// graph) is met by capturing.
	if plan.Failure != nil && plan.Failure.Stage == stepmodel.FailBuild {
		return plan.Failure
	}
	if r.s.Failure != nil {
		return r.s.Failure
	}

	// The candidate's own eager warm-up steps (at least one: lazy init).
	warm := time.Now()
	if _, _, err := r.steps(eagerP, et, engine.PhaseWarmup, max(1, r.c.Warmup)); err != nil {
		return err
	}
	res.WarmupMs = msSince(warm)

	p, pt := eagerP, et
	if plan.Graphed() {
		capStart := time.Now()
		before := r.e.deviceUsed()
		if err := r.capture(); err != nil {
			return err
		}
		p, pt = r.stepProgram(r.s.Graphed(), t)
		res.CaptureMs = msSince(capStart)
		res.Graphs, res.Nodes = r.graphs, r.nodes
		res.Memory.GraphMiB = max(0, r.e.deviceUsed()-before) >> 20
		r.emit(engine.StepSample{Candidate: r.key, Phase: engine.PhaseCapture, StepMs: res.CaptureMs, DeviceMiB: r.e.deviceUsed() >> 20})
	}
	ms, fbs, err := r.steps(p, pt, engine.PhaseMeasure, r.opts.MeasuredSteps)
	if err != nil {
		return err
	}
	res.Step = stepmodel.Summarise(ms)
	res.FwdBwdMs = stepmodel.Summarise(fbs).Median
	return nil
}

// eagerBaseline is the eager step time of the workload, measured once per
// workload in this process.
func (r *run) eagerBaseline(eagerP *Program, t stepTimer) (stepmodel.Stats, error) {
	key := "eager|" + r.workloadKey()
	if b, ok := r.e.baselines[key]; ok {
		return b.eager, nil
	}
	if _, _, err := r.steps(eagerP, t, engine.PhaseEager, 1); err != nil { // warm-up
		return stepmodel.Stats{}, err
	}
	ms, _, err := r.steps(eagerP, t, engine.PhaseEager, r.opts.EagerSteps)
	if err != nil {
		return stepmodel.Stats{}, err
	}
	r.e.baselines[key] = baseline{eager: stepmodel.Summarise(ms)}
	return r.e.baselines[key].eager, nil
}

// kernelBaseline is the kernel sums of the workload, measured once per workload.
func (r *run) kernelBaseline() (baseline, error) {
	key := "kernels|" + r.workloadKey()
	if b, ok := r.e.baselines[key]; ok {
		return b, nil
	}
	var b baseline
	var err error
	if b.kernelMs, b.fbKerMs, err = r.kernelSums(); err != nil {
		return b, err
	}
	r.e.baselines[key] = b
	return b, nil
}

// kernelSums times every distinct kernel of the eager step alone (ten back
// to back behind a blocking kernel, so launch cost is hidden) and adds
// them up over the real job's step: the GPU time a perfect launcher
// reaches.
func (r *run) kernelSums() (stepMs, fbMs float64, err error) {
	type sig struct {
		kind           stepmodel.OpKind
		bytes, flops   float64
		scale, netFrac float64
		link           string
		gpuUs          float64
	}
	cache := map[sig]float64{}
	t, err := newEventTimer()
	if err != nil {
		return 0, 0, err
	}
	defer t.destroy()
	const reps = 10
	timeItem := func(it stepmodel.Item) (float64, error) {
		op := it.Op
		if op.Kind == stepmodel.KindSync {
			op.Kind = stepmodel.KindElementwise // the copy, not the host's wait
		}
		it.Op, it.HostUs = op, 0
		s := sig{op.Kind, op.Bytes, op.FLOPs, op.RateScale, op.NetFrac, op.Link, it.GPUUs}
		if v, ok := cache[s]; ok {
			return v, nil
		}
		p := r.e.k.queued(t, 300, reps, func(p *Program) { r.addItem(p, it) })
		defer p.Free()
		ms, err := t.runMs(r.e.stream, p)
		if err != nil {
			return 0, err
		}
		cache[s] = ms / reps
		return ms / reps, nil
	}
	st := r.s.Eager()
	var mb, opt float64
	for _, it := range st.FwdBwd {
		v, err := timeItem(it)
		if err != nil {
			return 0, 0, err
		}
		mb += v
	}
	for _, it := range st.Optimizer {
		v, err := timeItem(it)
		if err != nil {
			return 0, 0, err
		}
		opt += v
	}
	fb := mb / float64(r.w.RunMicroBatches) * float64(r.w.MicroBatches)
	return fb + opt, fb, nil
}

// staticBuf is a graph's static input buffer.
type staticBuf struct {
	p     DevPtr
	bytes int64
}

// captureItems captures items into one graph (with the host costs the
// framework spends during capture) and instantiates it.
func (r *run) captureItems(items []stepmodel.Item) (GraphExec, error) {
	p := NewProgram(len(items))
	defer p.Free()
	for _, it := range items {
		r.addItem(p, it)
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
	r.graphs++
	r.nodes += n
	return x, nil
}

// capture does what the plan's mechanism does: the eager warm-up passes
// of the graphed regions (TE's, or each local runner's), then every
// planned graph in capture order, each with its static buffers and the
// pool memory its capture keeps (the activations its backward reads).
func (r *run) capture() error {
	if warm := r.s.Warmup(); len(warm) > 0 {
		p := r.program(len(warm))
		for _, it := range warm {
			r.addItem(p, it)
		}
		if err := p.Run(r.e.stream, 0, p.Len()); err != nil {
			return err
		}
		if err := r.e.stream.Sync(); err != nil {
			return err
		}
	}
	for g, pg := range r.s.Plan.Graphs {
		static := max(1<<16, int64(pg.StaticBytes))
		in, err := r.alloc(static)
		if err != nil {
			return err
		}
		// The rest of what the graph holds (the framework profile's
		// measurement, or the plan's pool).
		if pool := int64(r.s.GraphBytes(g)) - static; pool > 0 {
			if _, err := r.alloc(pool); err != nil {
				return err
			}
			r.staticB += pool
		}
		r.staticB += static
		x, err := r.captureItems(r.s.GraphNodes(g))
		if err != nil {
			return err
		}
		r.execs = append(r.execs, x)
		r.statics = append(r.statics, staticBuf{in, static})
	}
	return nil
}
