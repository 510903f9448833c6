// Package engine is the contract between the search and what measures a
// candidate: the Engine that runs one candidate on one workload
// (stepmodel.Workload), the Delegator that hands some candidates on, the
// RunOptions, the StepSamples streamed while it runs and the Result, with
// its Memory, its Source and the kind of a failure (FailureKind).
// SliceWhenTooBig wraps an emulating engine so that a stage too big for
// its GPU runs as a slice of its layers.
//
// The engines are its subpackages: engine/megatron measures on the real
// framework (Megatron-Core), engine/cuda replays the step model's trace
// on a GPU, engine/estimate computes it from the step model alone,
// engine/job runs the real training job, and engine/worker runs any of
// them in a child process per GPU. The step model they share is package
// stepmodel.
package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"cgtune/presets"
	"cgtune/stepmodel"
)

// Engine runs one candidate on one workload and reports how fast it was.
// Run streams StepSamples through emit while it works and returns the
// Result; a failing candidate (capture error, out of memory) is a Result
// with Err set, never a panic.
type Engine interface {
	// Name is the engine's name as --engine takes it: "megatron", "cuda",
	// "estimate" or "job"; a worker's client reports the name of the
	// engine its worker runs.
	Name() string
	Device() DeviceInfo
	Run(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, opts RunOptions, emit func(StepSample)) Result
	Close() error
}

// Delegator is an engine that hands some candidates to another engine
// (the megatron engine gives transformer_engine candidates to the cuda
// engine where Transformer Engine is not importable). A search measures
// the candidates the engine runs itself first: under a budget, the
// framework's own measurements are what the answer should rest on.
type Delegator interface {
	Delegates(c presets.Candidate) bool
	// Fallback is the engine the candidates are handed to (nil: none).
	Fallback() Engine
}

// DeviceInfo names the GPU a result was measured on (or estimated for).
type DeviceInfo struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	Driver    string `json:"driver,omitempty"`
	CUDA      string `json:"cuda,omitempty"`
	MemoryMiB int64  `json:"memory_mib"`
	SMs       int    `json:"sms,omitempty"`
}

// RunOptions tune one run. Zero values take the defaults.
type RunOptions struct {
	MeasuredSteps int `json:"measured_steps,omitempty"` // graphed steps timed after capture (default 8)
	EagerSteps    int `json:"eager_steps,omitempty"`    // eager baseline steps (default 5)
	// Layers, when set, makes the megatron engine build exactly this many
	// layers (profiling fits costs per layer from two layer counts).
	Layers int `json:"layers,omitempty"`
}

// WithDefaults fills unset options.
func (o RunOptions) WithDefaults() RunOptions {
	if o.MeasuredSteps <= 0 {
		o.MeasuredSteps = 8
	}
	if o.EagerSteps <= 0 {
		o.EagerSteps = 5
	}
	return o
}

// Phase is the part of a candidate's run a step sample is of.
type Phase string

// Phases of a step sample.
const (
	PhaseEager   Phase = "eager"   // eager baseline
	PhaseWarmup  Phase = "warmup"  // the candidate's eager warm-up steps
	PhaseCapture Phase = "capture" // the step that captures
	PhaseMeasure Phase = "measure" // steady-state steps that count
)

// StepSample is one step of a running candidate, streamed for live display.
type StepSample struct {
	Candidate string  `json:"candidate"`
	Phase     Phase   `json:"phase"`
	Step      int     `json:"step"`
	StepMs    float64 `json:"step_ms"`
	DeviceMiB int64   `json:"device_mib,omitempty"`
}

// Memory is what a candidate cost in device memory, in MiB.
type Memory struct {
	DeviceBaseMiB  int64 `json:"device_base_mib"`  // whole device before the candidate
	DevicePeakMiB  int64 `json:"device_peak_mib"`  // whole device at the candidate's peak
	DeviceAfterMiB int64 `json:"device_after_mib"` // whole device after it was torn down
	ProcessPeakMiB int64 `json:"process_peak_mib"` // this process at the peak (NVML), 0 if unknown
	GraphMiB       int64 `json:"graph_mib"`        // static buffers and graph memory the candidate added
	// GraphFullJobMiB scales GraphMiB to the real job's captured
	// micro-batches and layers when the run emulated fewer.
	GraphFullJobMiB int64 `json:"graph_full_job_mib"`
	// OutsideAllocatorMiB is what the framework's process holds on the
	// device outside PyTorch's caching allocator, measured in the warm
	// worker after its steps (NVML used less torch reserved); 0: not
	// measured (the emulating engines have no allocator).
	OutsideAllocatorMiB int64 `json:"outside_allocator_mib,omitempty"`
	// Breakdown is the memory model's per-rank prediction for the real
	// job's GPU (nil when the engine did not compute one).
	Breakdown *stepmodel.MemoryBreakdown `json:"breakdown,omitempty"`
}

// JobGraphMiB is the one figure every output calls graph memory ("GRAPH
// MiB"): what the candidate's graphs take per rank in the real job. That
// is the memory model's graphs term where the result carries a breakdown
// (the figure its fit is judged on; the megatron engine puts its
// measurement there when its run was the whole job), else the run's graph
// memory scaled to the job's captured micro-batches and layers, else what
// the run captured. What the run itself measured (GraphMiB) is a detail.
func (m Memory) JobGraphMiB() int64 {
	switch {
	case m.Breakdown != nil:
		return m.Breakdown.Graphs
	case m.GraphFullJobMiB > 0:
		return m.GraphFullJobMiB
	}
	return m.GraphMiB
}

// MarshalJSON writes the memory with job_graph_mib (JobGraphMiB), the
// figure the tables show, beside the run's own graph_mib.
func (m Memory) MarshalJSON() ([]byte, error) {
	type plain Memory // without this method
	return json.Marshal(struct {
		plain
		JobGraphMiB int64 `json:"job_graph_mib"`
	}{plain(m), m.JobGraphMiB()})
}

// FailureKind says why a candidate failed; its values are the results'
// error_kind.
type FailureKind string

// Failure kinds of a failed candidate.
const (
	FailureCapture FailureKind = "capture" // stream capture or instantiation failed
	FailureOOM     FailureKind = "oom"     // out of device memory
	FailureCUDA    FailureKind = "cuda"    // any other CUDA error
	FailureTimeout FailureKind = "timeout" // the watchdog's deadline passed
	FailureCrash   FailureKind = "crash"   // the worker died (a training job: it exited non-zero)
	FailureCancel  FailureKind = "cancelled"
	// FailureUnsupported: the installed framework cannot run the candidate
	// (e.g. transformer_engine without Transformer Engine).
	FailureUnsupported FailureKind = "unsupported"
	// FailureDrift: a graphed run whose loss left eager's; broken, not fast.
	FailureDrift   FailureKind = "drift"
	FailureNaN     FailureKind = "nan"      // a training job found NaN or Inf in its loss or gradients
	FailureNoSteps FailureKind = "no_steps" // a training job ended without logging steady-state iterations
)

// Source says where a result came from.
type Source string

// Sources of a result, in the order of how far they can be trusted: a
// real training job, the real framework on this GPU, cgtune's emulation
// measured on this GPU, cgtune's computation.
const (
	SourceJob       Source = "job"
	SourceFramework Source = "framework"
	SourceMeasured  Source = "measured"
	SourceEstimated Source = "estimated"
)

// FrameworkInfo says what a framework-measured result ran on.
type FrameworkInfo struct {
	Torch     string `json:"torch"`
	MCore     string `json:"mcore"`
	TE        string `json:"te,omitempty"`
	LayerSpec string `json:"layer_spec"` // "transformer_engine" or "local"
	WorldSize int    `json:"world_size"`
	// Optimizer is the optimizer the run stepped: the job's (Transformer
	// Engine's or apex's FusedAdam) or a labelled stand-in for it.
	Optimizer string `json:"optimizer,omitempty"`
	// Modelled lists the job's parallel degrees the run did not execute
	// (their collectives are added from the workload model).
	Modelled []string `json:"modelled,omitempty"`
}

// JobInfo names the training job a result was read from.
type JobInfo struct {
	Launcher string `json:"launcher"` // local or slurm
	ID       string `json:"id"`       // the Slurm job id, or local:PID
	Nodes    int    `json:"nodes,omitempty"`
	GPUs     int    `json:"gpus,omitempty"` // all nodes together, 0 when not known
	Output   string `json:"output,omitempty"`
	State    string `json:"state,omitempty"` // the launcher's last state (COMPLETED, FAILED, ...)
	ExitCode int    `json:"exit_code,omitempty"`
	Command  string `json:"command,omitempty"` // the rendered command line
}

// Result is what one candidate did on one workload.
type Result struct {
	Candidate presets.Candidate `json:"candidate"`
	Source    Source            `json:"source"` // where the figures came from (a Source: SourceJob ... SourceEstimated)
	Device    DeviceInfo        `json:"device"`
	Step      stepmodel.Stats   `json:"step"`  // steady-state step time of the candidate
	Eager     stepmodel.Stats   `json:"eager"` // eager baseline, same workload, same process
	// Speedup is Eager.Median / Step.Median (>1 is faster than eager).
	Speedup   float64 `json:"speedup"`
	CaptureMs float64 `json:"capture_ms"` // capture incl. TE's internal warm-up passes and instantiation
	WarmupMs  float64 `json:"warmup_ms"`  // the candidate's eager warm-up steps
	Graphs    int     `json:"graphs"`
	Nodes     int     `json:"nodes"`
	Memory    Memory  `json:"memory"`
	// KernelSumMs is the sum of the kernels' GPU times of one step
	// (each kernel timed alone), the floor a perfect launch would reach.
	KernelSumMs float64 `json:"kernel_sum_ms,omitempty"`
	// FwdBwdMs is the measured forward-backward part of the step (scaled),
	// FwdBwdKernelMs the same part's kernel sum: a full-iteration graph
	// should bring the first down to the second.
	FwdBwdMs       float64 `json:"fwd_bwd_ms,omitempty"`
	FwdBwdKernelMs float64 `json:"fwd_bwd_kernel_ms,omitempty"`
	Scaling        string  `json:"scaling,omitempty"` // how the run was scaled to the real job, if it was
	// SliceLayers is the layers an emulation ran of a stage that did not
	// fit its GPU (SliceWhenTooBig); 0: the whole stage.
	SliceLayers int `json:"slice_layers,omitempty"`
	// Framework is set on results measured on the real framework.
	Framework *FrameworkInfo `json:"framework,omitempty"`
	// HostEnqueueMs is the host time one step's forward-backward takes to
	// enqueue when it starts on an idle GPU (framework results).
	HostEnqueueMs      float64 `json:"host_enqueue_ms,omitempty"`
	EagerHostEnqueueMs float64 `json:"eager_host_enqueue_ms,omitempty"`
	// Loss is the last step's loss; EagerLoss eager's at the same step.
	Loss      *float64 `json:"loss,omitempty"`
	EagerLoss *float64 `json:"eager_loss,omitempty"`
	// Raw holds a framework run's unscaled medians (what ran, before
	// scaling to the job); the framework profile is fitted from them.
	Raw *RawTimes `json:"raw,omitempty"`
	// CollectivesMs is the modelled collective time added to each step
	// for parallel degrees the run did not execute.
	CollectivesMs float64 `json:"collectives_ms,omitempty"`
	// HostCosts says where the emulation's host costs came from:
	// "framework profile" (measured on the real framework) or "PyTorch
	// per-op (fallback)"; the notes name the profile or the probe.
	HostCosts string `json:"host_costs,omitempty"`
	// ProfileFrom says where and how the framework profile was measured
	// when HostCosts is one ("NVIDIA H200, driver 580, 2026-12-01, host
	// n1 (megatron-core 0.16.0, ...)").
	ProfileFrom string      `json:"profile_from,omitempty"`
	Notes       []string    `json:"notes,omitempty"`
	Err         string      `json:"error,omitempty"`
	ErrKind     FailureKind `json:"error_kind,omitempty"`
	WallMs      float64     `json:"wall_ms"` // wall time the run took
	// Job names the training job a result of source job was read from.
	Job *JobInfo `json:"job,omitempty"`
	// Delegated says why the truer engine could not run the candidate
	// here and handed it on (Transformer Engine not importable, say): the
	// result is a prediction of a cheaper engine, for that reason.
	Delegated string `json:"delegated,omitempty"`
	// EagerPool names the eager baseline a framework result was compared
	// with, a pool that grows with every eager step the search measures
	// of the same slice; the search compares every result of one pool
	// with its fullest state (search.onFullestEagerPool).
	EagerPool string `json:"eager_pool,omitempty"`
}

// RawTimes are one framework run's medians per step, as run.
type RawTimes struct {
	LayersBuilt     int     `json:"layers_built"`
	MicroBatchesRun int     `json:"microbatches_run"`
	HostMs          float64 `json:"host_ms"`     // forward-backward enqueue on an idle GPU
	HostFwdMs       float64 `json:"host_fwd_ms"` // forward-only enqueue (eager runs)
	FwdBwdMs        float64 `json:"fwd_bwd_ms"`  // forward-backward, wall, synchronised
	OptMs           float64 `json:"opt_ms"`      // optimizer step, wall, synchronised
	GraphMiB        float64 `json:"graph_mib"`
	// ZeroGradMs is the host time of zeroing the gradient buffers at the
	// start of the step; LeadInMs the host time from then until the first
	// micro-batch reaches the decoder (eager and per-layer runs; 0: not
	// measured, an older worker or a full-iteration replay).
	ZeroGradMs float64 `json:"zero_grad_ms,omitempty"`
	LeadInMs   float64 `json:"lead_in_ms,omitempty"`
	// The host's calls of the first micro-batch's layers: from the
	// decoder's start to the first layer's call (ToFirstLayerMs), the
	// first layer's call to the second's (FirstLayerMs) and the median of
	// the later calls, each to the next (LayerCallMs); 0: not measured.
	ToFirstLayerMs float64 `json:"to_first_layer_ms,omitempty"`
	FirstLayerMs   float64 `json:"first_layer_ms,omitempty"`
	LayerCallMs    float64 `json:"layer_call_ms,omitempty"`
	// LayerShare is the decoder's share of forward-backward (CUDA events
	// at its ends), the part scaled to the stage's layers; 0: not
	// measured, all of it was scaled.
	LayerShare float64 `json:"layer_share,omitempty"`
}

// Failed reports whether the candidate did not produce a step time.
func (r Result) Failed() bool { return r.Err != "" }

// Summary is one line describing the result; estimated results say so.
func (r Result) Summary() string {
	if r.Failed() {
		return fmt.Sprintf("%s: failed (%s): %s", r.Candidate.Name(), r.ErrKind, r.Err)
	}
	return fmt.Sprintf("%s: %.2f ms/step (eager %.2f, %.3fx), capture %.0f ms, %d graphs, %s",
		r.Candidate.Name(), r.Step.Median, r.Eager.Median, r.Speedup, r.CaptureMs, r.Graphs, r.Source)
}

// ProfileFrom is where and how the framework profile of costs was
// measured, for Result.ProfileFrom; "" when the costs have none.
func ProfileFrom(costs stepmodel.Costs) string {
	if costs.Profile == nil {
		return ""
	}
	return costs.Profile.Origin(time.Time{}) + " (" + costs.Profile.Source + ")"
}
