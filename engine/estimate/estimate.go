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
	"cgtune/stepmodel"
)

// Costs of capture and instantiation the probes do not measure, fitted to
// the CUDA engine's capture times on an H200 (the GPU tests' acceptance
// table, docs/cuda-engine-h200-2026-11-29.md).
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
	rates   stepmodel.Rates
	host    stepmodel.HostCosts
	dev     engine.DeviceInfo
	costSrc stepmodel.CostSource
}

// New makes an estimate engine from explicit rates (cached probe results
// of a real GPU, or a spec-table entry) and the per-op host costs used
// where no framework profile is found.
func New(rates stepmodel.Rates, host stepmodel.HostCosts, dev engine.DeviceInfo) *Engine {
	if dev.MemoryMiB == 0 {
		dev.MemoryMiB = rates.MemoryMiB
	}
	return &Engine{rates: rates, host: host, dev: dev}
}

// WithCosts makes the engine compute from the costs src decides per
// workload (a framework profile where one is cached, the user's
// adjustments); nil: the per-op costs as given.
func (e *Engine) WithCosts(src stepmodel.CostSource) *Engine {
	e.costSrc = src
	return e
}

// ForGPU makes an estimate engine from the spec table ("h100", "NVIDIA
// H200", "gb200", ...) and the default host costs.
func ForGPU(name string) (*Engine, error) {
	r, ok := stepmodel.SpecFor(name)
	if !ok {
		return nil, fmt.Errorf("no spec for GPU %q (allowed: %v)", name, stepmodel.SpecNames())
	}
	return New(r, stepmodel.DefaultHostCosts(), engine.DeviceInfo{Name: r.Source[len("spec table: "):] + " (estimated)"}), nil
}

// Name is "estimate".
func (e *Engine) Name() string { return "estimate" }

// Device is the GPU the estimate is for.
func (e *Engine) Device() engine.DeviceInfo { return e.dev }

// Close does nothing.
func (e *Engine) Close() error { return nil }

// timeline simulates the host issuing a schedule's items and the GPU
// running them, in µs, as the CUDA engine's executor does: the host spends
// the framework's cost, calls the driver, and the GPU starts the work when
// it is free and the launch has arrived; a host sync waits for the GPU.
type timeline struct {
	h, g float64
	r    stepmodel.Rates
	s    *stepmodel.Schedule
}

func (t *timeline) item(it stepmodel.Item) {
	switch it.Kind {
	case stepmodel.ItemGraph:
		t.h += it.HostUs + t.r.GraphLaunchHostUs(len(t.s.Plan.Graphs[it.Graph].Ops))
	default:
		t.h += it.HostUs + t.r.LaunchUs
	}
	t.g = max(t.g, t.h) + it.GPUUs
	if it.Kind == stepmodel.ItemOp && it.Op.HostSync {
		t.h = max(t.h, t.g) + syncWakeUs
	}
}

func (t *timeline) items(items []stepmodel.Item) {
	for _, it := range items {
		t.item(it)
	}
}

// event is when the GPU reaches an event recorded now.
func (t *timeline) event() float64 { return max(t.g, t.h) }

// stepMs times one step the way the executor does (events at the start,
// before the last run micro-batch, after forward-backward and after the
// optimizer) and scales it to the real job (Workload.FwdBwdMs).
func stepMs(s *stepmodel.Schedule, st stepmodel.Step, r stepmodel.Rates) (step, fwdBwd float64) {
	t := &timeline{r: r, s: s}
	last, lastOK := s.W.LastMicroBatchStart(len(st.FwdBwd))
	eb := -1.0
	t.items(st.Start)
	for i, it := range st.FwdBwd {
		if lastOK && i == last {
			eb = t.event()
		}
		t.item(it)
	}
	e1 := t.event()
	t.items(st.Optimizer)
	e2 := t.event()
	lastMs := -1.0
	if eb >= 0 {
		lastMs = (e1 - eb) / 1000
	}
	fb := s.FwdBwdMs(st, e1/1000, lastMs)
	return fb + (e2-e1)/1000, fb
}

// costs are the host and GPU costs for workload w: its framework profile
// if one is found, else the per-op model.
func (e *Engine) costs(w *stepmodel.Workload) stepmodel.Costs {
	if e.costSrc != nil {
		return e.costSrc.CostsFor(w, e.rates, e.host)
	}
	return stepmodel.Costs{Rates: e.rates, Host: e.host}
}

// Run computes the candidate's result.
func (e *Engine) Run(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	start := time.Now()
	opts = opts.WithDefaults()
	if emit == nil {
		emit = func(engine.StepSample) {}
	}
	costs := e.costs(w)
	res := engine.Result{Candidate: c, Source: engine.SourceEstimated, Device: e.dev, HostCosts: costs.Kind(), ProfileFrom: engine.ProfileFrom(costs)}
	res.Notes = append(append([]string{fmt.Sprintf("estimated: rates %s; host costs: %s", e.rates.Source, costs.Source())}, costs.CalibrationNotes()...), w.Notes...)
	if err := ctx.Err(); err != nil {
		res.Err, res.ErrKind = err.Error(), engine.FailureCancel
		return res
	}
	plan := stepmodel.PlanCapture(w, c, w.Spec.Options.Generation)
	s := stepmodel.NewSchedule(w, plan, costs)
	res.Notes = append(append(append(res.Notes, plan.Describe()), plan.Notes...), s.Notes...)
	res.Memory.Breakdown = stepmodel.PredictMemory(w, plan, costs.Profile, stepmodel.JobGPUMiB(w.Layout, e.dev.MemoryMiB), stepmodel.MemoryOptions{})
	res.Notes = append(res.Notes, res.Memory.Breakdown.Describe())
	if w.RunMicroBatches < w.MicroBatches {
		res.Scaling = "ran " + w.ScalingText()
	}
	eager, _ := stepMs(s, s.Eager(), e.rates)
	res.Eager = stepmodel.EagerWithFrameworkSpread(fixed(eager, opts.EagerSteps), costs.Profile)
	for i := range opts.EagerSteps {
		emit(engine.StepSample{Candidate: c.Key(), Phase: engine.PhaseEager, Step: i, StepMs: eager})
	}
	for i := range max(1, c.Warmup) {
		emit(engine.StepSample{Candidate: c.Key(), Phase: engine.PhaseWarmup, Step: i, StepMs: eager})
	}
	res.WarmupMs = float64(max(1, c.Warmup)) * eager / w.ScaleFactor()
	res.KernelSumMs, res.FwdBwdKernelMs = kernelSums(s)
	res.Memory.DeviceBaseMiB = contextMiB
	if f := failure(plan, s); f != nil {
		res.Err, res.ErrKind = f.Message, engine.FailureCapture
		res.WallMs = float64(time.Since(start).Microseconds()) / 1000
		return res
	}
	graphed, fb := stepMs(s, s.Graphed(), e.rates)
	if plan.Graphed() {
		res.CaptureMs = e.captureMs(s)
		res.Graphs, res.Nodes = len(plan.Graphs), plan.Nodes()
		res.Memory.GraphMiB = int64(s.GraphMemoryBytes()+float64(plan.Nodes())*graphNodeBytes) >> 20
		res.Memory.GraphFullJobMiB = res.Memory.Breakdown.Graphs
		emit(engine.StepSample{Candidate: c.Key(), Phase: engine.PhaseCapture, StepMs: res.CaptureMs})
	}
	for i := range opts.MeasuredSteps {
		emit(engine.StepSample{Candidate: c.Key(), Phase: engine.PhaseMeasure, Step: i, StepMs: graphed})
	}
	res.Step = fixed(graphed, opts.MeasuredSteps)
	if step, note := stepmodel.WithFrameworkSpread(res.Step, costs.Profile, plan); note != "" {
		res.Step, res.Notes = step, append(res.Notes, note)
	}
	res.FwdBwdMs = fb
	res.Speedup = res.Eager.Median / res.Step.Median
	base := contextMiB + int64(2*max(w.MaxOpBytes()/2, 1<<20))>>20
	res.Memory.DevicePeakMiB = base + res.Memory.GraphMiB
	res.Memory.DeviceAfterMiB = contextMiB
	res.Memory.ProcessPeakMiB = res.Memory.DevicePeakMiB
	if res.Memory.DevicePeakMiB > e.dev.MemoryMiB && e.dev.MemoryMiB > 0 {
		res.Err = fmt.Sprintf("estimated peak %d MiB exceeds the GPU's %d MiB", res.Memory.DevicePeakMiB, e.dev.MemoryMiB)
		res.ErrKind = engine.FailureOOM
	}
	res.WallMs = float64(time.Since(start).Microseconds()) / 1000
	return res
}

// failure is why the plan cannot run: the plan's own (a build or capture
// failure) or one the framework profile measured.
func failure(p *stepmodel.CapturePlan, s *stepmodel.Schedule) *stepmodel.CaptureFailure {
	if p.Failure != nil {
		return p.Failure
	}
	return s.Failure
}

func fixed(ms float64, n int) stepmodel.Stats {
	return stepmodel.Stats{Median: ms, P10: ms, P90: ms, N: n}
}

// kernelSums is the sum of the eager step's kernels' GPU times over the
// real job's micro-batches, as the CUDA engine sums them.
func kernelSums(s *stepmodel.Schedule) (stepMs, fbMs float64) {
	st := s.Eager()
	var start, mb, opt float64
	for _, it := range st.Start {
		start += it.GPUUs
	}
	for _, it := range st.FwdBwd {
		mb += it.GPUUs
	}
	for _, it := range st.Optimizer {
		opt += it.GPUUs
	}
	fb := (start + mb/float64(s.W.RunMicroBatches)*float64(s.W.MicroBatches)) / 1000
	return fb + opt/1000, fb
}

// captureMs is the plan's capture: the warm-up passes of the graphed
// regions, then each graph captured (the framework's host cost of each
// op and a launch into the capturing stream) and instantiated.
func (e *Engine) captureMs(s *stepmodel.Schedule) float64 {
	warm := &timeline{r: e.rates, s: s}
	warm.items(s.Warmup())
	var us float64
	for g := range s.Plan.Graphs {
		for _, n := range s.GraphNodes(g) {
			us += n.HostUs + captureLaunchUs + instantiateNodeUs
		}
		us += instantiateUs
	}
	return (warm.event() + us) / 1000
}
