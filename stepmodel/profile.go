package stepmodel

// FrameworkProfile is what the real framework costs, measured by the
// megatron engine's worker on this GPU for one model and layout: host
// enqueue time and GPU time per layer and micro-batch, eager and graphed,
// plus the fixed costs of a step. The emulating engines (cuda, estimate)
// spend these measured costs instead of per-op guesses.
//
// All times are milliseconds per layer per micro-batch unless the field
// says otherwise; memory is MiB.
type FrameworkProfile struct {
	Version int        `json:"version"` // ProfileVersion
	Source  string     `json:"source"`  // e.g. "megatron-core 0.16.0, torch 2.11.0, local spec, NVIDIA H200"
	Key     ProfileKey `json:"key"`
	// Layers maps a layer kind ("dense", "moe", "mamba") to its costs.
	Layers map[string]LayerProfile `json:"layers"`
	// Other is the per-micro-batch cost outside the decoder layers
	// (embedding, output layer, loss, the schedule's own work).
	OtherFwd HostGPU `json:"other_fwd"`
	OtherBwd HostGPU `json:"other_bwd"`
	// Optimizer is per step: gradient finalisation and the optimizer, the
	// part that does not grow with the layers; OptimizerPerLayer is what
	// each layer of the stage adds (its parameters' share). Profiles
	// without the per-layer part hold the whole step's figure in Optimizer.
	// A GPU time of 0 leaves the optimizer's kernels to the per-op model;
	// with a profile the emulated optimizer starts on an idle GPU, as the
	// profile measured it (Schedule.optimizerItems).
	Optimizer         HostGPU `json:"optimizer"`
	OptimizerPerLayer HostGPU `json:"optimizer_per_layer,omitempty"`
	// StepStart is the host's work at the start of every step, before the
	// first micro-batch: zeroing the gradient buffers, fixed plus per layer
	// like the optimizer. Its kernels run while the host goes on to the
	// first micro-batch; what they add is in the fitted GPU times.
	StepStart         HostGPU `json:"step_start,omitempty"`
	StepStartPerLayer HostGPU `json:"step_start_per_layer,omitempty"`
	// PreFwdHostMs is the part of OtherFwd's host time before a
	// micro-batch reaches its first layer (embedding, rotary tables, the
	// schedule's set-up). With per-layer graphs the GPU waits through it
	// at the start of the step (traced with torch.profiler on an H200,
	// docs/emulation-accuracy-2026-12-01.md);
	// 0: not measured, OtherFwd is split over its ops by the per-op model.
	PreFwdHostMs float64 `json:"pre_fwd_host_ms,omitempty"`
	// FullIteration holds what a full-iteration graph costs per step.
	FullIteration FullIterationProfile `json:"full_iteration"`
	// GraphPoolFixedMiB is what a per-layer capture adds once, beside its
	// layers' graphs (the pool's first segments, the buffers outside the
	// layers), fitted like the per-layer figure from the profile's two layer counts.
	GraphPoolFixedMiB float64 `json:"graph_pool_fixed_mib,omitempty"`
	// OutsideAllocatorMiB is the device memory the framework's process
	// holds outside PyTorch's caching allocator (NVML used less torch
	// reserved, in the warm worker after its measured steps), the largest
	// of the profile's runs; 0: not measured.
	OutsideAllocatorMiB float64 `json:"outside_allocator_mib,omitempty"`
	// Collectives records how the layers' collectives expose the ranks'
	// host work, per rank count the slice ran at (2 or more); empty when
	// the profile was only measured at world size 1. The emulating engines
	// add the exposure of the layout's rank count (CollectiveRanks) to the
	// layers' collectives; without it they say the collective effect is
	// extrapolated from world size 1.
	Collectives []CollectiveExposure `json:"collectives,omitempty"`
	// MeasuredAt says how the profile was measured (layer and micro-batch
	// counts of the runs it was fitted from).
	MeasuredAt string `json:"measured_at,omitempty"`
	// Host and Date say where and when the profile was measured (the
	// machine's name, RFC 3339 in UTC); empty in profiles measured before
	// they were kept. A profile travels with team presets (cgtune preset
	// export --with-profile), and a search elsewhere names its origin.
	Host string `json:"host,omitempty"`
	Date string `json:"date,omitempty"`
	// Spread is how much the framework's steps varied in the profile's
	// runs at its larger layer count, by kind of capture (SpreadEager,
	// SpreadLayer, SpreadFullIteration); absent in profiles measured
	// before it was kept. See StepSpread.
	Spread map[string]StepSpread `json:"spread,omitempty"`
	Notes  []string              `json:"notes,omitempty"`
}

// CollectiveExposure is what a layer's collectives cost at world size N
// beyond what the world-size-1 slice and the modelled collective time
// account for. In eager mode every collective makes the ranks wait for
// each other's host work (the slowest rank's enqueue sets the pace), so
// host overhead compounds with the rank count; a graph replays its
// collectives without the host in between, and exposes less.
//
// Milliseconds per layer per micro-batch, forward and backward together.
// The emulation spreads each figure evenly over the layer's collectives:
// the eager one as host time before each eagerly issued collective, the
// graphed one on the replay of each graph that holds collectives.
type CollectiveExposure struct {
	WorldSize                    int     `json:"world_size"`
	EagerExposedHostMsPerLayer   float64 `json:"eager_exposed_host_ms_per_layer"`
	GraphedExposedHostMsPerLayer float64 `json:"graphed_exposed_host_ms_per_layer"`
	// Source says how the figures were measured.
	Source string `json:"source,omitempty"`
}

// ProfileVersion is the version of the profile file format. Version 2:
// the optimizer is host time (GPU 0, the per-op model's kernels) started
// on an idle GPU, and the full iteration's GPU time leaves out its launch
// (version 1 counted the optimizer's wall time twice, as host and as GPU
// time, and the launch twice); cached version-1 profiles are measured
// again. Version 3: the step's start (zeroing the gradient buffers) and
// the host's lead-in before the first layer are measured, and the full
// iteration's replay host time leaves out the step's start.
const ProfileVersion = 3

// ProfileKey says which GPU, driver, framework, model and layout a
// profile belongs to; a profile is only used for the same key.
type ProfileKey struct {
	GPU       string `json:"gpu"`
	Driver    string `json:"driver,omitempty"`
	Torch     string `json:"torch"`
	MCore     string `json:"mcore"`
	TE        string `json:"te,omitempty"`         // empty when Transformer Engine is not importable
	LayerSpec string `json:"layer_spec"`           // "transformer_engine" or "local"
	Model     string `json:"model"`                // model name (inline models: a content hash)
	Layout    string `json:"layout"`               // presets.Layout's per-rank shape, as a stable string
	WorldSize int    `json:"world_size,omitempty"` // ranks the profile ran with (1 = one GPU)
}

// HostGPU is a host enqueue time (measured on an idle GPU) and the GPU
// time of the same work.
type HostGPU struct {
	HostMs float64 `json:"host_ms"`
	GPUMs  float64 `json:"gpu_ms"`
}

// LayerProfile is one layer kind's cost per layer per micro-batch.
type LayerProfile struct {
	EagerFwd HostGPU `json:"eager_fwd"`
	EagerBwd HostGPU `json:"eager_bwd"`
	// Graphed maps a region the framework can graph ("layer" for the
	// whole layer, or a scope name such as "attn", "moe_router") to what
	// it costs graphed. Regions the installed framework cannot graph on
	// this node are absent.
	Graphed map[string]GraphedRegion `json:"graphed,omitempty"`
}

// GraphedRegion is one graphed region of a layer, per layer per
// micro-batch, forward and backward together.
type GraphedRegion struct {
	ReplayHostMs float64 `json:"replay_host_ms"`
	GPUMs        float64 `json:"gpu_ms"`
	// GraphMiB is the graph pool one captured layer and micro-batch adds.
	GraphMiB float64 `json:"graph_mib"`
	// CaptureError is the framework's first exception when the region
	// cannot be captured (e.g. the dropless MoE dispatch syncs with the
	// host); empty when it captures.
	CaptureError string `json:"capture_error,omitempty"`
	// FirstReplayHostMs is the host's extra work, once per step, before
	// the step's first replay of the region's graphs: the first replay's
	// path beyond a later one's and the decoder's extra work before its
	// first graphed layer. The GPU, idle at the step's start, waits
	// through it (the figures for dense-small and moe-small are in
	// docs/emulation-accuracy-2026-12-01.md).
	// 0: not measured.
	FirstReplayHostMs float64 `json:"first_replay_host_ms,omitempty"`
}

// FullIterationProfile is what one full-iteration graph costs per step.
type FullIterationProfile struct {
	ReplayHostMs float64 `json:"replay_host_ms"`
	// GraphMiBPerMicroBatch is the pool and static input buffers a
	// full-iteration graph adds per micro-batch it holds.
	GraphMiBPerMicroBatch float64 `json:"graph_mib_per_microbatch"`
	// GraphMiBFixed + GraphMiBPerLayer × layers is the graph's memory with
	// one pipeline stage (PP 1 keeps one micro-batch's activations at a
	// time), fitted from the profile's two layer counts; when set it is used instead of
	// GraphMiBPerMicroBatch.
	GraphMiBFixed    float64 `json:"graph_mib_fixed,omitempty"`
	GraphMiBPerLayer float64 `json:"graph_mib_per_layer,omitempty"`
	CaptureError     string  `json:"capture_error,omitempty"`
}
