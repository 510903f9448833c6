// Package estimate is cgtune's computed engine: the same workload and the
// same timing model as engine/cuda, with the host and the GPU simulated
// instead of run, for planning without a GPU or for a GPU that is not
// here. Every result it gives says "estimated".
package estimate

import (
	"context"
	"fmt"
	"time"

	"cgtune/engine"
	"cgtune/presets"
)

// Costs of capture and instantiation the probes do not measure, fitted to
// the CUDA engine's capture times on an H200 (bench/results).
const (
	captureLaunchUs   = 2.0   // cuLaunchKernel into a capturing stream
	instantiateNodeUs = 3.5   // cuGraphInstantiate, per node
	instantiateUs     = 200.0 // per graph: cuGraphInstantiate and its static buffers' allocation
	syncWakeUs        = 3.0   // cuStreamSynchronize returning after the GPU drained
	contextMiB        = 1230  // device memory in use with cgtune's context loaded (H200, driver 580)
	graphNodeBytes    = 2048  // device memory an instantiated graph takes per node
)

// Engine computes results for one GPU's rates and a framework's host costs.
type Engine struct {
	rates engine.Rates
	host  engine.HostCosts
	dev   engine.DeviceInfo
}

// New makes an estimate engine from explicit rates (cached probe results
// of a real GPU, or a spec-table entry).
func New(rates engine.Rates, host engine.HostCosts, dev engine.DeviceInfo) *Engine {
	if dev.MemoryMiB == 0 {
		dev.MemoryMiB = rates.MemoryMiB
	}
	return &Engine{rates: rates, host: host, dev: dev}
}

// ForGPU makes an estimate engine from the spec table ("h100", "NVIDIA
// H200", "gb200", ...) and the default host costs.
func ForGPU(name string) (*Engine, error) {
	r, ok := engine.SpecFor(name)
	if !ok {
		return nil, fmt.Errorf("no spec for GPU %q (allowed: %v)", name, engine.SpecNames())
	}
	return New(r, engine.DefaultHostCosts(), engine.DeviceInfo{Name: r.Source[len("spec table: "):] + " (estimated)"}), nil
}

// Name is "estimate".
func (e *Engine) Name() string { return "estimate" }

// Device is the GPU the estimate is for.
func (e *Engine) Device() engine.DeviceInfo { return e.dev }

// Close does nothing.
func (e *Engine) Close() error { return nil }

// timeline simulates the host issuing work and the GPU running it, in µs,
// as the CUDA engine's executor does: the host spins the framework cost,
// calls the driver, and the GPU starts the work when it is free and the
// launch has arrived.
type timeline struct {
	h, g float64
	r    engine.Rates
	hc   engine.HostCosts
}

func (t *timeline) op(o engine.Op) {
	t.h += t.hc.OpHostUs(o) + t.r.LaunchUs
	t.g = max(t.g, t.h) + t.r.OpGPUUs(o)
	if o.HostSync {
		t.h = max(t.h, t.g) + syncWakeUs
	}
}

func (t *timeline) ops(ops []engine.Op) {
	for _, o := range ops {
		t.op(o)
	}
}

func (t *timeline) graph(ops []engine.Op) {
	var gpu float64
	for _, o := range ops {
		gpu += t.r.OpGraphGPUUs(o)
	}
	t.h += t.hc.GraphReplayUs + t.r.GraphLaunchHostUs(len(ops))
	t.g = max(t.g, t.h) + gpu
}

// event is when the GPU reaches an event recorded now.
func (t *timeline) event() float64 { return max(t.g, t.h) }

// step times one step the way the executor does (events at the start,
// after forward-backward and after the optimizer) and scales it to the
// real job.
func step(w *engine.Workload, r engine.Rates, hc engine.HostCosts, fwdBwd func(*timeline)) (stepMs, fbMs float64) {
	t := &timeline{r: r, hc: hc}
	fwdBwd(t)
	e1 := t.event()
	t.ops(w.Optimizer)
	e2 := t.event()
	fb := e1 / 1000 * w.ScaleFactor()
	return fb + (e2-e1)/1000, fb
}

func eagerFwdBwd(w *engine.Workload) func(*timeline) {
	return func(t *timeline) {
		for range w.RunMicroBatches {
			t.ops(w.MicroBatchOps())
		}
	}
}

// Run computes the candidate's result.
func (e *Engine) Run(ctx context.Context, w *engine.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	start := time.Now()
	opts = opts.WithDefaults()
	if emit == nil {
		emit = func(engine.StepSample) {}
	}
	res := engine.Result{Candidate: c, Source: engine.Estimated, Device: e.dev}
	res.Notes = append([]string{fmt.Sprintf("estimated: rates %s; host costs %s", e.rates.Source, e.host.Source)}, w.Notes...)
	if err := ctx.Err(); err != nil {
		res.Err, res.ErrKind = err.Error(), engine.ErrCancel
		return res
	}
	run := w
	if c.FullIteration() {
		run = w.FullIterationVariant()
		res.Notes = append(res.Notes[:1], run.Notes...)
	}
	if w.RunMicroBatches < w.MicroBatches {
		res.Scaling = fmt.Sprintf("ran %d of %d micro-batches per step; forward-backward scaled ×%.1f", w.RunMicroBatches, w.MicroBatches, w.ScaleFactor())
	}
	eager, _ := step(w, e.rates, e.host, eagerFwdBwd(w))
	res.Eager = fixed(eager, opts.EagerSteps)
	for i := range opts.EagerSteps {
		emit(engine.StepSample{Candidate: c.Key(), Phase: engine.PhaseEager, Step: i, StepMs: eager})
	}
	runEager, _ := step(run, e.rates, e.host, eagerFwdBwd(run))
	for i := range max(1, c.Warmup) {
		emit(engine.StepSample{Candidate: c.Key(), Phase: engine.PhaseWarmup, Step: i, StepMs: runEager})
	}
	res.WarmupMs = float64(max(1, c.Warmup)) * runEager / run.ScaleFactor()
	res.KernelSumMs, res.FwdBwdKernelMs = e.kernelSums(run)

	base := contextMiB + int64(2*max(run.MaxOpBytes()/2, 1<<20))>>20
	res.Memory.DeviceBaseMiB = contextMiB
	graphed, fb := runEager, 0.0
	switch {
	case !c.Graphed():
		_, fb = step(run, e.rates, e.host, eagerFwdBwd(run))
	case c.FullIteration():
		graphed, fb = e.fullIteration(run, &res)
	default:
		graphed, fb = e.layers(run, c, &res)
	}
	if res.Failed() {
		res.WallMs = float64(time.Since(start).Microseconds()) / 1000
		return res
	}
	if c.Graphed() {
		emit(engine.StepSample{Candidate: c.Key(), Phase: engine.PhaseCapture, StepMs: res.CaptureMs})
	}
	for i := range opts.MeasuredSteps {
		emit(engine.StepSample{Candidate: c.Key(), Phase: engine.PhaseMeasure, Step: i, StepMs: graphed})
	}
	res.Step = fixed(graphed, opts.MeasuredSteps)
	res.FwdBwdMs = fb
	res.Speedup = res.Eager.Median / res.Step.Median
	res.Memory.DevicePeakMiB = base + res.Memory.GraphMiB
	res.Memory.DeviceAfterMiB = contextMiB
	res.Memory.ProcessPeakMiB = res.Memory.DevicePeakMiB
	if res.Memory.DevicePeakMiB > e.dev.MemoryMiB && e.dev.MemoryMiB > 0 {
		res.Err = fmt.Sprintf("estimated peak %d MiB exceeds the GPU's %d MiB", res.Memory.DevicePeakMiB, e.dev.MemoryMiB)
		res.ErrKind = engine.ErrOOM
	}
	res.WallMs = float64(time.Since(start).Microseconds()) / 1000
	return res
}

func fixed(ms float64, n int) engine.Stats {
	return engine.Stats{Median: ms, P10: ms, P90: ms, N: n}
}

// kernelSums is the sum of the step's kernels' GPU times, scaled as the
// CUDA engine scales it.
func (e *Engine) kernelSums(w *engine.Workload) (stepMs, fbMs float64) {
	var mb, opt float64
	for _, o := range w.MicroBatchOps() {
		mb += e.rates.OpGPUUs(o)
	}
	for _, o := range w.Optimizer {
		opt += e.rates.OpGPUUs(o)
	}
	fb := mb * float64(w.MicroBatches) / 1000
	return fb + opt/1000, fb
}

func (e *Engine) captureHostUs(ops []engine.Op) float64 {
	var us float64
	for _, o := range ops {
		us += e.host.OpHostUs(o) + captureLaunchUs + instantiateNodeUs
	}
	return us + instantiateUs
}

// layers mirrors the executor's per-layer capture (TE make_graphed_callables)
// and replay.
func (e *Engine) layers(w *engine.Workload, c presets.Candidate, res *engine.Result) (stepMs, fbMs float64) {
	type segs struct{ fwd, bwd []engine.Segment }
	layers := make([]segs, len(w.Layers))
	for i, lt := range w.Layers {
		layers[i] = segs{engine.SplitScopes(lt.Fwd, c.Scopes), engine.SplitScopes(lt.Bwd, c.Scopes)}
	}
	// Capture: TE's warm-up passes run eagerly, then each graph is captured.
	warm := &timeline{r: e.rates, hc: e.host}
	var captureUs float64
	var nodes, graphs int
	passes := engine.TEWarmupPasses(c.Warmup, w.MicroBatches, w.CapturedMicroBatches)
	for range passes * w.CapturedMicroBatches {
		for _, l := range layers {
			for _, s := range l.fwd {
				if s.Graphed {
					warm.ops(s.Ops)
				}
			}
		}
		for i := len(layers) - 1; i >= 0; i-- {
			for _, s := range layers[i].bwd {
				if s.Graphed {
					warm.ops(s.Ops)
				}
			}
		}
	}
	for _, l := range layers {
		for _, s := range append(append([]engine.Segment(nil), l.fwd...), l.bwd...) {
			if !s.Graphed {
				continue
			}
			for _, o := range s.Ops {
				if o.HostSync {
					res.Err = "capture failed: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900) in cuStreamSynchronize (op " + o.Name + ")"
					res.ErrKind = engine.ErrCapture
					return 0, 0
				}
			}
			captureUs += float64(w.CapturedMicroBatches) * e.captureHostUs(s.Ops)
			graphs += w.CapturedMicroBatches
			nodes += w.CapturedMicroBatches * len(s.Ops)
		}
	}
	static := w.StaticBufferBytes()
	res.CaptureMs = (warm.event() + captureUs) / 1000
	res.Graphs, res.Nodes = graphs, nodes
	res.Memory.GraphMiB = int64(float64(graphs)*2*static+float64(nodes)*graphNodeBytes) >> 20
	res.Memory.GraphFullJobMiB = res.Memory.GraphMiB * int64(w.RealCapturedMicroBatches) / int64(w.CapturedMicroBatches)

	copyOp := engine.Op{Name: "static_input_copy", Kind: engine.KindElementwise, Bytes: 2 * static}
	replay := func(t *timeline, ss []engine.Segment, prev *bool) {
		for _, s := range ss {
			if !s.Graphed {
				t.ops(s.Ops)
				*prev = false
				continue
			}
			if !*prev {
				t.op(copyOp)
			}
			t.graph(s.Ops)
			*prev = true
		}
	}
	return step(w, e.rates, e.host, func(t *timeline) {
		for range w.RunMicroBatches {
			t.ops(w.Pre)
			prev := false
			for _, l := range layers {
				replay(t, l.fwd, &prev)
			}
			prev = false
			t.ops(w.Head)
			for i := len(layers) - 1; i >= 0; i-- {
				replay(t, layers[i].bwd, &prev)
			}
			t.ops(w.PreBwd)
		}
	})
}

// fullIteration mirrors FullCudaGraphWrapper: one graph of every
// micro-batch's forward and backward, fed from static input buffers.
func (e *Engine) fullIteration(w *engine.Workload, res *engine.Result) (stepMs, fbMs float64) {
	var ops []engine.Op
	for range w.RunMicroBatches {
		ops = append(ops, w.MicroBatchOps()...)
	}
	res.CaptureMs = e.captureHostUs(ops) / 1000
	res.Graphs, res.Nodes = 1, len(ops)
	in := w.StaticInputBytes()
	res.Memory.GraphMiB = int64(float64(w.RunMicroBatches)*in+float64(len(ops))*graphNodeBytes) >> 20
	res.Memory.GraphFullJobMiB = int64(float64(res.Memory.GraphMiB) * w.ScaleFactor())
	copyOp := engine.Op{Name: "static_batch_copy", Kind: engine.KindElementwise, Bytes: 2 * in}
	return step(w, e.rates, e.host, func(t *timeline) {
		for range w.RunMicroBatches {
			t.op(copyOp)
		}
		t.graph(ops)
	})
}
