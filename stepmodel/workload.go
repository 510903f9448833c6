package stepmodel

import (
	"context"
	"fmt"
	"math"
	"slices"

	"cgtune/presets"
)

// OpKind says which resource bounds an op and so how its time is derived.
type OpKind string

const (
	KindGEMM        OpKind = "gemm"        // matrix unit: FLOPs / matrix rate
	KindAttention   OpKind = "attention"   // fused attention or SSM scan: FLOPs / (matrix rate × efficiency)
	KindElementwise OpKind = "elementwise" // memory-bound: bytes / bandwidth
	KindNorm        OpKind = "norm"        // memory-bound, norms are their own host-cost class
	KindCollective  OpKind = "collective"  // TP/EP/CP/PP/DP communication: bytes / link bandwidth
	KindOptimizer   OpKind = "optimizer"   // multi-tensor apply: memory-bound
	KindSync        OpKind = "host_sync"   // device-to-host copy the host waits for
)

// Scope tags are the cuda_graph_scope names plus "other" for ops no scope
// covers (embedding, loss, pipeline p2p, optimizer).
const (
	ScopeOther = "other"
	// ScopeMoEPostprocess tags the MoE ops after the expert combine
	// (unpermute and the residual add): no cuda_graph_scope names them
	// alone, but the moe scope covers them and the hybrid model's
	// MoETransformerLayer graphs them as its postprocess graph.
	ScopeMoEPostprocess = "moe_postprocess"
)

// Link is the interconnect a collective uses.
const (
	LinkNVLink  = "nvlink"
	LinkNetwork = "network"
)

// Op is one kernel launch of the training step.
type Op struct {
	Name  string  `json:"name"`
	Kind  OpKind  `json:"kind"`
	Scope string  `json:"scope"`
	FLOPs float64 `json:"flops,omitempty"`
	Bytes float64 `json:"bytes,omitempty"`
	// RateScale multiplies the matrix rate (2 for fp8 GEMMs on Hopper).
	RateScale float64 `json:"rate_scale,omitempty"`
	Link      string  `json:"link,omitempty"`
	// NetFrac is the fraction of a collective's bytes that leave the NVLink
	// domain (the rest moves over NVLink at the same time).
	NetFrac  float64 `json:"net_frac,omitempty"`
	Backward bool    `json:"backward,omitempty"`
	// HostSync marks a device-to-host copy the host waits for (dropless MoE
	// token counts): the GPU queue drains, and a graph cannot contain it.
	HostSync bool `json:"host_sync,omitempty"`
}

// LayerTrace is one decoder layer's forward and backward ops on this rank.
type LayerTrace struct {
	Index int               `json:"index"`
	Kind  presets.LayerKind `json:"kind"`
	// MTP marks a layer of a multi-token-prediction block (after the last
	// stage's decoder layers; addMTP).
	MTP bool `json:"mtp,omitempty"`
	Fwd []Op `json:"fwd"`
	Bwd []Op `json:"bwd"`
}

// Workload is the op trace of one training step on one pipeline rank.
//
// Order of one step: for every micro-batch, Pre, each layer's Fwd, Head,
// each layer's Bwd in reverse, PreBwd; then Optimizer once.
type Workload struct {
	Model  string         `json:"model"`
	Layout presets.Layout `json:"layout"`
	// Stage is the pipeline stage emulated (the last one, which carries the
	// loss, when PP > 1).
	Stage           int `json:"stage"`
	Hidden          int `json:"hidden"`
	TokensPerMB     int `json:"tokens_per_microbatch"` // tokens of one micro-batch on this rank (MBS·seq/CP)
	MicroBatches    int `json:"microbatches"`          // micro-batches per step in the real job
	RunMicroBatches int `json:"run_microbatches"`      // micro-batches the engine runs per step
	// StageLayers is the layer count of the emulated stage; Layers holds
	// fewer when the workload is a slice of it (WorkloadOptions.RunLayers).
	StageLayers int `json:"stage_layers"`
	// DroplessMoE: token counts go to the host before the experts.
	DroplessMoE bool         `json:"dropless_moe"`
	Pre         []Op         `json:"pre"`
	Layers      []LayerTrace `json:"layers"`
	Head        []Op         `json:"head"`
	PreBwd      []Op         `json:"pre_bwd"`
	Optimizer   []Op         `json:"optimizer"`
	ParamsLocal float64      `json:"params_local"` // parameters held by this rank
	Notes       []string     `json:"notes,omitempty"`
	Spec        WorkloadSpec `json:"-"`
}

// WorkloadOptions adjust how a workload is built.
type WorkloadOptions struct {
	// RunMicroBatches caps the micro-batches the engine runs per step; the
	// step time is scaled to the real count (default 2).
	RunMicroBatches int `json:"run_microbatches,omitempty"`
	// RunLayers, when set below the stage's layer count, builds only the
	// stage's first RunLayers layers: the slice an emulating engine runs
	// when the whole stage does not fit its GPU (SliceWhenTooBig), as the
	// megatron engine builds at most --max-layers.
	RunLayers int `json:"run_layers,omitempty"`
	// Dropless overrides the model's MoE mode; nil = dropless (Megatron's
	// default: moe_expert_capacity_factor None).
	Dropless *bool `json:"dropless,omitempty"`
	// MoECapacityFactor is moe_expert_capacity_factor of a drop-and-pad
	// MoE (0: none).
	MoECapacityFactor float64 `json:"moe_capacity_factor,omitempty"`
	// LayerSpec is the layer spec the job builds: "" or
	// "transformer_engine" (Megatron-Bridge's jobs: fused attention), or
	// "local" (Megatron-Core's own modules, what a node without Transformer
	// Engine runs: unfused attention that keeps the s² scores). It moves
	// the activations the memory model counts.
	LayerSpec string `json:"layer_spec,omitempty"`
	// Generation is the Megatron-Bridge API generation the candidates are
	// for (0: not known); the capture plan names its fields.
	Generation presets.Generation `json:"generation,omitempty"`
	// EPOverlap is the recipe's effective overlap_moe_expert_parallel_comm
	// (comm_overlap's value where it sets one): the schedules keep one
	// more micro-batch in flight and Transformer Engine's graphs are
	// captured per micro-batch even without pipelining.
	EPOverlap bool `json:"ep_overlap,omitempty"`
	// BF16MomentCopies: the job's Transformer Engine is older than 2.14,
	// whose FusedAdam copies bf16 Adam moments to fp32 at the step
	// (adamOf); the zero value is the fused kernel of the Transformer
	// Engine Megatron-Bridge 0.4 and later pin.
	BF16MomentCopies bool `json:"bf16_moment_copies,omitempty"`
}

// WorkloadSpec is what a workload is built from: enough to build it again
// in another process (the worker protocol sends it).
type WorkloadSpec struct {
	Model   presets.Model   `json:"model"`
	Layout  presets.Layout  `json:"layout"`
	Options WorkloadOptions `json:"options"`
}

// Build builds the workload the spec describes.
func (s WorkloadSpec) Build() (*Workload, error) {
	return BuildWorkloadContext(context.Background(), s.Model, s.Layout, s.Options)
}

// BuildContext is Build that stops when ctx ends.
func (s WorkloadSpec) BuildContext(ctx context.Context) (*Workload, error) {
	return BuildWorkloadContext(ctx, s.Model, s.Layout, s.Options)
}

const bf16 = 2.0 // bytes per element

// BuildWorkload builds the op trace of one training step of model m with
// layout l on one rank.
func BuildWorkload(m presets.Model, l presets.Layout, opt WorkloadOptions) (*Workload, error) {
	return BuildWorkloadContext(context.Background(), m, l, opt)
}

// BuildWorkloadContext is BuildWorkload that stops, with ctx's error, when
// ctx ends. Every size is checked against presets' bounds first, whoever
// built the model (a preset, the TUI, a journal, the worker protocol), so
// the build is bounded in time and memory too.
func BuildWorkloadContext(ctx context.Context, m presets.Model, l presets.Layout, opt WorkloadOptions) (*Workload, error) {
	a := m.Arch
	if err := checkWorkloadInputs(m, l, opt); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	kinds := a.LayerKinds()
	if a.MLA == nil && slices.ContainsFunc(kinds, func(k presets.LayerKind) bool { return k.Mixer() == presets.MixerDSv4 }) {
		return nil, fmt.Errorf("model %s: compressed_attention needs mla (DeepSeek-V4's attention reads its q_lora_rank, qk_rope_dim, v_head_dim, o_groups and o_lora_rank)", m.Name)
	}
	pp := l.PPSize()
	split, err := SplitPipeline(a, l)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Name, err)
	}
	b := newBuilder(a, l, opt)

	w := &Workload{Spec: WorkloadSpec{Model: m, Layout: l, Options: opt}, Model: m.Name, Layout: l, Stage: pp - 1, Hidden: a.Hidden, TokensPerMB: int(b.T), MicroBatches: l.MicroBatches(), DroplessMoE: b.dropless}
	run := opt.RunMicroBatches
	if run <= 0 {
		run = 2
	}
	w.RunMicroBatches = min(run, w.MicroBatches)
	if w.RunMicroBatches < w.MicroBatches {
		w.Notes = append(w.Notes, "runs "+w.ScalingText())
	}

	// Layers of the emulated stage: the last stage carries the loss, which
	// makes it the slowest in a balanced split.
	stage := split.RankLayers(w.Stage)
	if split.Note != "" {
		w.Notes = append(w.Notes, split.Note)
	}
	if pp > 1 {
		w.Notes = append(w.Notes, fmt.Sprintf("emulates pipeline stage %d of %d (layers %s, with the loss)", w.Stage+1, pp, describeLayers(stage)))
	}
	w.StageLayers = len(stage)
	if opt.RunLayers > 0 && opt.RunLayers < w.StageLayers {
		stage = stage[:opt.RunLayers]
		w.Notes = append(w.Notes, fmt.Sprintf("runs the first %d of the stage's %d layers", opt.RunLayers, w.StageLayers))
	}
	for _, i := range stage {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lt := LayerTrace{Index: i, Kind: kinds[i]}
		b.layer(&lt)
		w.Layers = append(w.Layers, lt)
		w.ParamsLocal += b.layerParams(kinds[i])
	}
	streams := residualStreams(a)
	if w.Stage == 0 {
		w.Pre = append(w.Pre, b.mem("embedding", ScopeOther, KindElementwise, 2*b.Ts*float64(a.Hidden)*bf16))
		w.PreBwd = append(w.PreBwd, b.mem("embedding_grad", ScopeOther, KindElementwise, 3*b.Ts*float64(a.Hidden)*bf16))
		w.ParamsLocal += float64(a.Vocab) * float64(a.Hidden) / float64(b.tp)
	} else {
		act := b.Ts * float64(a.Hidden) * bf16 * streams
		w.Pre = append(w.Pre, b.coll("pp_recv_activation", ScopeOther, act, LinkNetwork))
		w.PreBwd = append(w.PreBwd, b.coll("pp_send_grad", ScopeOther, act, LinkNetwork))
	}
	if w.Stage == pp-1 {
		w.Head = b.head()
		w.ParamsLocal += float64(a.Vocab) * float64(a.Hidden) / float64(b.tp)
		if len(stage) == w.StageLayers { // the MTP blocks follow the stage's last decoder layer
			b.addMTP(w, split.MTP(w.Stage))
		}
	} else {
		act := b.Ts * float64(a.Hidden) * bf16 * streams
		w.Head = []Op{b.coll("pp_send_activation", ScopeOther, act, LinkNetwork), b.coll("pp_recv_grad", ScopeOther, act, LinkNetwork)}
	}
	w.Optimizer = b.optimizer(w.ParamsLocal / float64(l.DP()))
	return w, nil
}

// checkWorkloadInputs refuses a model, layout or options a workload
// cannot be built from, before any layer is built.
func checkWorkloadInputs(m presets.Model, l presets.Layout, opt WorkloadOptions) error {
	a := m.Arch
	if a.Hidden <= 0 || a.Layers <= 0 {
		return fmt.Errorf("model %s: hidden and layers must be positive", m.Name)
	}
	if l.Seq <= 0 || l.MBS <= 0 || l.GBS <= 0 {
		return fmt.Errorf("model %s: layout needs seq, mbs and gbs", m.Name)
	}
	if err := m.CheckSizes(); err != nil {
		return err
	}
	if err := l.CheckSizes(); err != nil {
		return fmt.Errorf("model %s: %w", m.Name, err)
	}
	if opt.RunMicroBatches < 0 || opt.RunMicroBatches > presets.MaxGBS {
		return fmt.Errorf("run_microbatches %d is out of range (allowed: 0 for the default, up to %d)", opt.RunMicroBatches, presets.MaxGBS)
	}
	if opt.RunLayers < 0 || opt.RunLayers > presets.MaxLayers {
		return fmt.Errorf("run_layers %d is out of range (allowed: 0 for the whole stage, up to %d)", opt.RunLayers, presets.MaxLayers)
	}
	return nil
}

// newBuilder is the op builder for a's layers on layout l: tokens per
// rank, the GEMM rate's precision scale and the MoE dispatch mode.
func newBuilder(a presets.Arch, l presets.Layout, opt WorkloadOptions) *builder {
	b := &builder{a: a, l: l, tp: l.TPSize(), cp: l.CPSize(), ep: l.EPSize(), etp: l.ETPSize()}
	b.T = float64(l.MBS * l.Seq / b.cp) // bounded by CheckSizes: no overflow
	b.Ts = b.T
	if b.tp > 1 {
		b.Ts = b.T / float64(b.tp) // sequence parallel: norms and residuals see T/TP tokens
	}
	b.gemmScale = 1
	switch l.Precision {
	case "", "bf16", "fp16":
	default:
		// fp8 / fp4 GEMMs run at twice the bf16 rate on Hopper; Blackwell's
		// fp4 rate is not modelled.
		b.gemmScale = 2
	}
	b.dropless = a.MoE != nil
	if opt.Dropless != nil {
		b.dropless = a.MoE != nil && *opt.Dropless
	}
	if !b.dropless && a.MoE != nil {
		b.capacity = opt.MoECapacityFactor
	}
	return b
}

// StepOps returns every op of one step of the emulated run, in launch order.
func (w *Workload) StepOps() []Op {
	var ops []Op
	for range w.RunMicroBatches {
		ops = append(ops, w.MicroBatchOps()...)
	}
	return append(ops, w.Optimizer...)
}

// MicroBatchOps returns the ops of one micro-batch's forward and backward.
func (w *Workload) MicroBatchOps() []Op {
	n := len(w.Pre) + len(w.Head) + len(w.PreBwd)
	for _, lt := range w.Layers {
		n += len(lt.Fwd) + len(lt.Bwd)
	}
	ops := make([]Op, 0, n)
	ops = append(ops, w.Pre...)
	for _, lt := range w.Layers {
		ops = append(ops, lt.Fwd...)
	}
	ops = append(ops, w.Head...)
	for i := len(w.Layers) - 1; i >= 0; i-- {
		ops = append(ops, w.Layers[i].Bwd...)
	}
	return append(ops, w.PreBwd...)
}

// ScaleFactor is how much the forward-backward part of a run step is
// multiplied to give the real step (micro-batches not run).
func (w *Workload) ScaleFactor() float64 {
	return float64(w.MicroBatches) / float64(w.RunMicroBatches)
}

// ScalingText says how a run step becomes the real one, for notes.
func (w *Workload) ScalingText() string {
	return fmt.Sprintf("%d of %d micro-batches per step; each one not run costs what the last run one did (the steady state), or ×%d/%d where the run shows no boundary between them",
		w.RunMicroBatches, w.MicroBatches, w.MicroBatches, w.RunMicroBatches)
}

// LastMicroBatchStart is the index, in a step's forward-backward items,
// where the run's last micro-batch starts: the items repeat once per run
// micro-batch (eager ops, per-layer graph replays). ok is false when
// there is nothing to extrapolate (every micro-batch runs) or no boundary
// (one run micro-batch, or a full-iteration graph holding them all).
func (w *Workload) LastMicroBatchStart(items int) (start int, ok bool) {
	run := w.RunMicroBatches
	if run < 2 || run >= w.MicroBatches || items < run || items%run != 0 {
		return 0, false
	}
	return items - items/run, true
}

// FwdBwdMs is the real step's forward-backward time from a run of
// RunMicroBatches that took runMs, the last of which took lastMs (< 0:
// not known). The micro-batches not run each cost what the last one did,
// in the steady state the host and GPU reach after the first: scaling the
// whole run instead would repeat its start (the GPU waiting for the first
// launches) and its end (the GPU draining the host's lead) once per
// micro-batch not run. Without lastMs it scales by ScaleFactor.
func (w *Workload) FwdBwdMs(runMs, lastMs float64) float64 {
	if lastMs < 0 || w.RunMicroBatches >= w.MicroBatches {
		return runMs * w.ScaleFactor()
	}
	return runMs + float64(w.MicroBatches-w.RunMicroBatches)*lastMs
}

// TotalFLOPs is the FLOPs of one real step on this rank (all micro-batches).
func (w *Workload) TotalFLOPs() float64 {
	var mb, opt float64
	for _, o := range w.MicroBatchOps() {
		mb += o.FLOPs
	}
	for _, o := range w.Optimizer {
		opt += o.FLOPs
	}
	return mb*float64(w.MicroBatches) + opt
}

// MaxOpBytes is the largest bytes any memory-bound op moves: the scratch
// buffers the CUDA engine needs.
func (w *Workload) MaxOpBytes() float64 {
	var m float64
	for _, o := range w.StepOps() {
		if o.Kind == KindElementwise || o.Kind == KindNorm || o.Kind == KindOptimizer {
			m = math.Max(m, o.Bytes)
		}
	}
	return m
}

// StaticBufferBytes is the size of one graph's static input (or output):
// the layer's hidden states, (seq/CP[/TP with SP]) × MBS × hidden × 2
// bytes, times the residual streams of hyper-connections.
func (w *Workload) StaticBufferBytes() float64 {
	t := float64(w.TokensPerMB)
	if w.Layout.TPSize() > 1 {
		t /= float64(w.Layout.TPSize())
	}
	return t * float64(w.Hidden) * bf16 * residualStreams(w.Spec.Model.Arch)
}
