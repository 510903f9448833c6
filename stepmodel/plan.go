package stepmodel

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"cgtune/presets"
)

// A CapturePlan is what a candidate captures on one rank, decided once
// from the workload (model, layout), the candidate and the framework
// generation, following what Megatron-Core does. Both emulating engines
// execute (cuda) or compute (estimate) the same plan; neither decides what
// is captured.
//
// Facts the plan follows (Megatron-LM core_v0.16.0 to core_v0.20.0; the
// code below cites the function):
//
//   - transformer_engine (TECudaGraphHelper, megatron/core/transformer/
//     cuda_graphs.py): a layer is graphed when _layer_is_graphable says so;
//     the graphed callable covers what TransformerLayer._te_cuda_graph_capture
//     runs (attention when attn is listed, the MLP or MoE up to the listed
//     module), one forward and one backward graph per layer and captured
//     micro-batch; captured micro-batches are 1 when PP == 1 and EP
//     communication overlap is off, else every micro-batch of the step
//     (_get_cuda_graph_input_data; with EP overlap the combined 1F1B
//     schedule runs two micro-batches' layers interleaved, so each
//     micro-batch needs its own graphs even without pipelining). The
//     uncovered part of the layer runs eagerly.
//   - local (CudaGraphManager): GPTModel's TransformerLayer gets one
//     manager on the WHOLE layer when the module list is empty, names attn
//     (and the layer has attention) or names mlp (dense layers; a MoE layer
//     asserts); otherwise no graph at all (TransformerLayer.
//     create_mcore_cudagraph_manager). So [attn] graphs the whole layer and
//     [attn,moe_router,moe_preprocess] the whole MoE layer, dispatch
//     included. Only the hybrid model's MoETransformerLayer splits an MoE
//     layer into a router graph and a postprocess graph with the dispatch
//     and experts eager. Runners are reused across micro-batches when
//     PP == 1 (reuse_cudagraphs), else one per micro-batch.
//   - full iteration (FullCudaGraphWrapper, megatron/core/full_cuda_graph.py):
//     one graph of every micro-batch's forward and backward, the optimizer
//     outside, inputs copied into static buffers of every micro-batch
//     (StaticBufferLoader).
//   - A host sync inside a graphed region (dropless MoE copies its token
//     counts to the host before the dispatch) makes the capture fail with
//     cudaErrorStreamCaptureInvalidated.
//   - The gated delta-net and DeepSeek-V4's attention are a TransformerLayer's
//     self_attention, so attn covers them as it covers softmax attention;
//     a hyper-connection is part of the block it wraps; a latent MoE's
//     projections belong to MoELayer.preprocess and postprocess. The MTP
//     blocks' layers are graphed as decoder layers where the mechanism
//     reaches them (mtpGraphable), their prelude never per layer.
type CapturePlan struct {
	Candidate  presets.Candidate  `json:"candidate"`
	Generation presets.Generation `json:"generation,omitempty"`
	Mechanism  string             `json:"mechanism"`
	// Config is the Megatron-Core configuration the generation sets for
	// the candidate (G2 cuda_graph_scope, G3 cuda_graph_modules and impl
	// full_iteration).
	Config string `json:"config"`
	// Layers has one entry per layer of the emulated stage (w.Layers).
	Layers []LayerPlan `json:"layers,omitempty"`
	// Graphs are the graphs captured in the emulated run, in capture order.
	Graphs []PlannedGraph `json:"graphs,omitempty"`
	// Captured is the micro-batches the run captures graphs for (each
	// region has one graph pair per captured micro-batch); RealCaptured the
	// real job's.
	Captured     int `json:"captured_microbatches"`
	RealCaptured int `json:"real_captured_microbatches"`
	// WarmupPasses is how many eager passes of each graphed region run
	// before its capture (TE's num_warmup_iters per captured micro-batch,
	// or each local runner's cuda_graph_warmup_steps).
	WarmupPasses int `json:"warmup_passes"`
	// FullIteration is set for a full-iteration graph.
	FullIteration *FullIterationPlan `json:"full_iteration,omitempty"`
	// Failure is why the candidate cannot run as planned (nil: it can).
	Failure *CaptureFailure `json:"failure,omitempty"`
	Notes   []string        `json:"notes,omitempty"`
}

// Capture mechanisms.
const (
	MechanismNone          = "none"
	MechanismTE            = "transformer_engine per-layer (TECudaGraphHelper)"
	MechanismLocal         = "local per-layer (CudaGraphManager)"
	MechanismFullIteration = "full iteration (FullCudaGraphWrapper)"
)

// Region names a graphed region: the whole layer, the cuda-graph modules
// that apply to the layer joined with commas in their canonical order
// ("attn", "attn,moe_router,moe_preprocess", ...), the hybrid MoE layer's
// postprocess graph, or the full iteration. Framework profiles key their
// graphed regions by these names.
type Region string

// The regions that are not a list of modules.
const (
	RegionLayer          Region = "layer"
	RegionMoEPostprocess Region = "moe_postprocess"
	RegionFullIteration  Region = "full_iteration"
)

// Failure stages.
const (
	FailBuild   = "build"   // the framework rejects the configuration when it builds the model
	FailCapture = "capture" // stream capture fails
)

// CaptureFailure says why a planned capture cannot work.
type CaptureFailure struct {
	Stage   string `json:"stage"`
	Layer   int    `json:"layer,omitempty"` // model layer index (capture failures)
	Region  Region `json:"region,omitempty"`
	Op      string `json:"op,omitempty"` // the op that breaks the capture
	Message string `json:"message"`
}

func (f *CaptureFailure) Error() string { return f.Message }

// LayerPlan is one layer's ops cut into eager and graphed runs.
type LayerPlan struct {
	Index int               `json:"index"`
	Kind  presets.LayerKind `json:"kind"`
	Fwd   []Segment         `json:"fwd"`
	Bwd   []Segment         `json:"bwd"`
	// Regions are the graphed regions of the layer, in forward order.
	Regions []Region `json:"regions,omitempty"`
}

// Graphed reports whether any of the layer is graphed.
func (l LayerPlan) Graphed() bool { return len(l.Regions) > 0 }

// Segment is a run of a layer's ops (From..To of LayerTrace.Fwd or .Bwd)
// that one graph covers (Region set) or that runs eagerly (Region empty).
type Segment struct {
	Region   Region `json:"region,omitempty"`
	From, To int
	Ops      []Op `json:"-"`
}

// Graphed reports whether a graph covers the segment.
func (s Segment) Graphed() bool { return s.Region != "" }

// PlannedGraph is one graph the run captures.
type PlannedGraph struct {
	Layer      int    `json:"layer"` // index into Workload.Layers; -1 for the full iteration
	Region     Region `json:"region"`
	Backward   bool   `json:"backward,omitempty"`
	MicroBatch int    `json:"microbatch"` // captured micro-batch it serves
	Ops        []Op   `json:"-"`
	// StaticBytes is the graph's static input and output buffers; PoolBytes
	// the memory its capture keeps in the graph pool (the forward graph
	// holds the activations its backward reads; the backward graph none
	// beyond its static buffers).
	StaticBytes float64 `json:"static_bytes"`
	PoolBytes   float64 `json:"pool_bytes"`
}

// FullIterationPlan is the full-iteration graph: the forward and backward
// of every run micro-batch, fed from static buffers of each micro-batch.
type FullIterationPlan struct {
	MicroBatches     int     `json:"microbatches"`      // in the run
	RealMicroBatches int     `json:"real_microbatches"` // in the real job
	StaticBytesPerMB float64 `json:"static_bytes_per_microbatch"`
	PoolBytes        float64 `json:"pool_bytes"` // activations of one iteration, held by the graph
}

// Graphed reports whether the plan captures anything.
func (p *CapturePlan) Graphed() bool { return len(p.Graphs) > 0 }

// RegionsOf lists the distinct graphed regions of the plan by layer kind.
func (p *CapturePlan) RegionsOf(kind presets.LayerKind) []Region {
	var out []Region
	for _, l := range p.Layers {
		if l.Kind == kind {
			for _, r := range l.Regions {
				if !slices.Contains(out, r) {
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// StaticBytes and PoolBytes sum the run's graphs; the real job holds
// RealCaptured/Captured times as many per-layer graphs, or the full
// iteration's static inputs of every micro-batch.
func (p *CapturePlan) StaticBytes() float64 {
	var b float64
	for _, g := range p.Graphs {
		b += g.StaticBytes
	}
	return b
}

// PoolBytes is the graph pool memory of the run's graphs.
func (p *CapturePlan) PoolBytes() float64 {
	var b float64
	for _, g := range p.Graphs {
		b += g.PoolBytes
	}
	return b
}

// Nodes is the number of kernels in the run's graphs.
func (p *CapturePlan) Nodes() int {
	n := 0
	for _, g := range p.Graphs {
		n += len(g.Ops)
	}
	return n
}

// moduleScopes maps each cuda-graph module to the op scopes (workload op
// tags) its captured code covers.
var moduleScopes = map[string][]string{
	presets.ScopeAttn:          {presets.ScopeAttn},
	presets.ScopeMLP:           {presets.ScopeMLP},
	presets.ScopeMoE:           {presets.ScopeMoERouter, presets.ScopeMoEPreprocess, presets.ScopeMoE, ScopeMoEPostprocess},
	presets.ScopeMoERouter:     {presets.ScopeMoERouter},
	presets.ScopeMoEPreprocess: {presets.ScopeMoEPreprocess},
	presets.ScopeMamba:         {presets.ScopeMamba},
}

// layerHas reports which blocks a layer kind has: self_attention (softmax
// attention, a gated delta-net or DeepSeek-V4's attention, which the attn
// module covers alike), a dense MLP, MoE, a Mamba mixer.
func layerHas(k presets.LayerKind) (attn, mlp, moe, mamba bool) {
	return k.HasSelfAttention(), k.FFN() == presets.FFNMLP, k.FFN() == presets.FFNMoE, k.Mixer() == presets.MixerMamba
}

// teModules is which of the candidate's modules a TE graph of a layer of
// kind k covers; none means the layer is not graphed
// (_layer_is_graphable, _te_cuda_graph_capture). whole is true for an
// empty module list.
func teModules(k presets.LayerKind, mods []string) (covered []string, whole bool) {
	if len(mods) == 0 {
		return nil, true
	}
	attn, mlp, moe, mamba := layerHas(k)
	for _, m := range presets.LayerScopes {
		if !slices.Contains(mods, m) {
			continue
		}
		switch {
		case m == presets.ScopeAttn && attn,
			m == presets.ScopeMLP && mlp,
			(m == presets.ScopeMoE || m == presets.ScopeMoERouter || m == presets.ScopeMoEPreprocess) && moe,
			m == presets.ScopeMamba && mamba:
			covered = append(covered, m)
		}
	}
	return covered, false
}

// TEGraphable reports whether TECudaGraphHelper graphs a layer of kind k
// with cuda-graph modules mods (MLM megatron/core/transformer/
// cuda_graphs.py _layer_is_graphable).
func TEGraphable(k presets.LayerKind, mods []string) bool {
	covered, whole := teModules(k, mods)
	return whole || len(covered) > 0
}

// localRegions is what the local implementation graphs in a layer of kind
// k: the whole layer, the hybrid MoE layer's router and postprocess
// graphs, nothing, or a build failure.
func localRegions(k presets.LayerKind, mods []string) (whole bool, partialMoE bool, fail string) {
	has := func(m string) bool { return slices.Contains(mods, m) }
	attn, mlp, _, _ := layerHas(k)
	if len(mods) == 0 {
		return true, false, ""
	}
	switch k {
	case presets.LayerMamba: // MambaLayer.create_mcore_cudagraph_manager
		return has(presets.ScopeMamba), false, ""
	case presets.LayerMoEOnly: // MoETransformerLayer.create_mcore_cudagraph_manager
		if has(presets.ScopeMoE) {
			return true, false, ""
		}
		return false, has(presets.ScopeMoERouter) || has(presets.ScopeMoEPreprocess), ""
	}
	// TransformerLayer.create_mcore_cudagraph_manager (GPTModel layers and
	// the hybrid model's attention and MLP layers).
	switch {
	case has(presets.ScopeAttn) && attn:
		return true, false, ""
	case has(presets.ScopeMLP) && (mlp || k == presets.LayerMoE):
		return false, false, localMLPFailure
	}
	return false, false, ""
}

// localMLPFailure is why impl local with mlp listed and no attention
// graph on the layer fails: Megatron-Core 0.16.0 to 0.20 build the
// layer's graph manager from GraphableMegatronModule.__init__, before
// TransformerLayer.__init__ sets is_moe_layer, and the mlp branch of
// create_mcore_cudagraph_manager reads it (transformer_layer.py, core_v0.16.0
// to core_v0.19.0 and main; measured on an H200 with 0.20.0, dense-small
// local mlp: docs/megatron-engine-h200-2026-12-01.md).
const localMLPFailure = "impl local with mlp and no attention graph on the layer: Megatron-Core fails when it builds the layer " +
	"(AttributeError: 'TransformerLayer' object has no attribute 'is_moe_layer'; create_mcore_cudagraph_manager reads it before __init__ sets it)"

// regionName joins the covered modules in their canonical order.
func regionName(mods []string) Region { return Region(strings.Join(mods, ",")) }

// mcoreConfig is the configuration a generation sets for candidate c.
func mcoreConfig(c presets.Candidate, gen presets.Generation) string {
	if !c.Graphed() {
		return "cuda_graph_impl=none"
	}
	if c.FullIteration() {
		if gen == presets.G3 {
			return "cuda_graph_impl=full_iteration cuda_graph_modules=[]"
		}
		return fmt.Sprintf("cuda_graph_impl=%s cuda_graph_scope=[full_iteration]", c.Impl)
	}
	field := "cuda_graph_scope"
	if gen == presets.G3 {
		field = "cuda_graph_modules"
	}
	mods := modulesOf(c)
	return fmt.Sprintf("cuda_graph_impl=%s %s=[%s]", c.Impl, field, strings.Join(mods, ","))
}

// modulesOf is the candidate's per-layer module list as Megatron-Core
// normalises it: canonical order, and local adds moe_router and
// moe_preprocess together (TransformerConfig.__post_init__).
func modulesOf(c presets.Candidate) []string {
	var mods []string
	for _, m := range presets.LayerScopes {
		if slices.Contains(c.Scopes, m) {
			mods = append(mods, m)
		}
	}
	if c.Impl == presets.ImplLocal && (slices.Contains(mods, presets.ScopeMoERouter) || slices.Contains(mods, presets.ScopeMoEPreprocess)) {
		for _, m := range []string{presets.ScopeMoERouter, presets.ScopeMoEPreprocess} {
			if !slices.Contains(mods, m) {
				mods = append(mods, m)
			}
		}
		slices.SortFunc(mods, func(a, b string) int {
			return slices.Index(presets.LayerScopes, a) - slices.Index(presets.LayerScopes, b)
		})
	}
	return mods
}

// PlanCapture decides what candidate c captures on workload w for
// framework generation gen (0: not known; G2 and G3 capture the same and
// differ only in the field names of Config).
func PlanCapture(w *Workload, c presets.Candidate, gen presets.Generation) *CapturePlan {
	p := &CapturePlan{Candidate: c, Generation: gen, Mechanism: MechanismNone, Config: mcoreConfig(c, gen)}
	p.RealCaptured = 1
	if w.Layout.PPSize() > 1 || (c.Impl == presets.ImplTE && w.Spec.Options.EPOverlap) {
		p.RealCaptured = w.MicroBatches
	}
	p.Captured = min(p.RealCaptured, w.RunMicroBatches)
	act := newActivations(w)
	switch {
	case !c.Graphed():
		p.Captured, p.RealCaptured = 0, 0
		p.Layers = eagerLayers(w)
	case c.FullIteration():
		planFullIteration(p, w, act)
	case c.Impl == presets.ImplTE:
		p.Mechanism = MechanismTE
		p.WarmupPasses = TEWarmupPasses(c.Warmup, w.MicroBatches, p.Captured)
		planLayers(p, w, act, func(k presets.LayerKind) []region {
			covered, whole := teModules(k, modulesOf(c))
			if whole {
				return []region{{name: RegionLayer}}
			}
			if len(covered) == 0 {
				return nil
			}
			var scopes []string
			for _, m := range covered {
				scopes = append(scopes, moduleScopes[m]...)
			}
			return []region{{name: regionName(covered), scopes: scopes}}
		})
	case c.Impl == presets.ImplLocal:
		p.Mechanism = MechanismLocal
		p.WarmupPasses = c.Warmup
		planLayers(p, w, act, func(k presets.LayerKind) []region {
			whole, partial, fail := localRegions(k, modulesOf(c))
			switch {
			case fail != "":
				if p.Failure == nil {
					p.Failure = &CaptureFailure{Stage: FailBuild, Message: fail}
				}
				return nil
			case whole:
				return []region{{name: RegionLayer}}
			case partial:
				// MoETransformerLayer: _forward_mlp_router (router, shared
				// expert, preprocess) and _forward_mlp_postprocess graphs.
				return []region{
					{name: regionName([]string{presets.ScopeMoERouter, presets.ScopeMoEPreprocess}), scopes: []string{presets.ScopeMoERouter, presets.ScopeMoEPreprocess}},
					{name: RegionMoEPostprocess, scopes: []string{ScopeMoEPostprocess}},
				}
			}
			return nil
		})
	default:
		p.Failure = &CaptureFailure{Stage: FailBuild, Message: fmt.Sprintf("unknown cuda_graph_impl %q", c.Impl)}
	}
	if c.Graphed() && p.Failure == nil && len(p.Graphs) == 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("%s captures nothing on this model's layers: the step runs eagerly", c.Label()))
	}
	return p
}

// region is a graphed part of a layer: the op scopes it covers (nil: every op).
type region struct {
	name   Region
	scopes []string
}

// covers reports whether the region holds op o. The whole layer holds every
// op of the layer module but the ones of no cuda-graph scope (an MTP
// block's prelude, which runs outside its mtp_model_layer).
func (r region) covers(o Op) bool {
	if r.scopes == nil {
		return o.Scope != ScopeOther
	}
	return slices.Contains(r.scopes, o.Scope)
}

func eagerLayers(w *Workload) []LayerPlan {
	out := make([]LayerPlan, len(w.Layers))
	for i, lt := range w.Layers {
		out[i] = LayerPlan{Index: lt.Index, Kind: lt.Kind,
			Fwd: []Segment{{From: 0, To: len(lt.Fwd), Ops: lt.Fwd}}, Bwd: []Segment{{From: 0, To: len(lt.Bwd), Ops: lt.Bwd}}}
	}
	return out
}

// cut splits ops into maximal runs covered by one region or by none.
func cut(ops []Op, regions []region) []Segment {
	which := func(o Op) Region {
		for _, r := range regions {
			if r.covers(o) {
				return r.name
			}
		}
		return ""
	}
	var segs []Segment
	for i, o := range ops {
		r := which(o)
		if len(segs) == 0 || segs[len(segs)-1].Region != r {
			segs = append(segs, Segment{Region: r, From: i})
		}
		s := &segs[len(segs)-1]
		s.To = i + 1
		s.Ops = ops[s.From:s.To]
	}
	return segs
}

// planLayers cuts every layer by the regions regionsOf gives its kind and
// lists the graphs: for each captured micro-batch, the forward graphs in
// layer order, then the backward graphs in reverse (the schedule's order,
// which is the order TE and MCore capture in so that graphs sharing one
// pool do not clobber each other).
func planLayers(p *CapturePlan, w *Workload, act activations, regionsOf func(presets.LayerKind) []region) {
	p.Layers = make([]LayerPlan, len(w.Layers))
	for i, lt := range w.Layers {
		regs := regionsOf(lt.Kind)
		if lt.MTP && !mtpGraphable(p, w) {
			regs = nil
		}
		lp := LayerPlan{Index: lt.Index, Kind: lt.Kind, Fwd: cut(lt.Fwd, regs), Bwd: cut(lt.Bwd, regs)}
		for _, s := range lp.Fwd {
			if s.Graphed() && !slices.Contains(lp.Regions, s.Region) {
				lp.Regions = append(lp.Regions, s.Region)
			}
		}
		p.Layers[i] = lp
	}
	if p.Failure != nil {
		return
	}
	static := 2 * w.StaticBufferBytes() // a graph's static input and output (hidden states, or their gradients)
	// Captured in schedule order into one pool, the graphs of a
	// micro-batch whose backward has run leave their memory to the next:
	// the pool holds the emulated stage's micro-batches in flight.
	l := w.Layout
	poolMBs := min(p.Captured, int(math.Ceil(inFlightMicroBatches(l.PPSize(), l.VPSize(), w.Stage, w.MicroBatches, w.Spec.Options.EPOverlap))))
	for mb := range p.Captured {
		for i, lp := range p.Layers {
			for _, s := range lp.Fwd {
				if s.Graphed() {
					pool := 0.0
					if mb < poolMBs {
						pool = act.region(lp.Kind, s.Ops)
					}
					p.Graphs = append(p.Graphs, PlannedGraph{Layer: i, Region: s.Region, MicroBatch: mb, Ops: s.Ops, StaticBytes: static, PoolBytes: pool})
				}
			}
		}
		for i := len(p.Layers) - 1; i >= 0; i-- {
			for _, s := range p.Layers[i].Bwd {
				if s.Graphed() {
					p.Graphs = append(p.Graphs, PlannedGraph{Layer: i, Region: s.Region, Backward: true, MicroBatch: mb, Ops: s.Ops, StaticBytes: static})
				}
			}
		}
	}
	for _, g := range p.Graphs {
		for _, o := range g.Ops {
			if o.HostSync {
				p.Failure = &CaptureFailure{Stage: FailCapture, Layer: w.Layers[g.Layer].Index, Region: g.Region, Op: o.Name,
					Message: fmt.Sprintf("capture failed: %s in layer %d's %s graph copies to the host and synchronises inside the capture (cudaErrorStreamCaptureInvalidated)",
						o.Name, w.Layers[g.Layer].Index, g.Region)}
				return
			}
		}
	}
}

// mtpGraphable reports whether the per-layer mechanism graphs the layers
// of the multi-token-prediction blocks. Transformer Engine's helper
// graphs each block's mtp_model_layer when _layer_is_graphable accepts it
// (TECudaGraphHelper._discover_layers): a transformer layer is, like a
// decoder layer; a hybrid model's block is a HybridStack, a MegatronModule
// but no GraphableMegatronModule, so it runs eagerly. The local
// implementation's managers sit on every GraphableMegatronModule, the
// hybrid block's inner layers included.
func mtpGraphable(p *CapturePlan, w *Workload) bool {
	return p.Mechanism != MechanismTE || w.Spec.Model.Arch.HybridPattern == ""
}

// planFullIteration is FullCudaGraphWrapper: one graph of the run's
// micro-batches, static inputs of each.
func planFullIteration(p *CapturePlan, w *Workload, act activations) {
	p.Mechanism = MechanismFullIteration
	p.Layers = eagerLayers(w)
	for i := range p.Layers {
		p.Layers[i].Fwd[0].Region = RegionFullIteration
		p.Layers[i].Bwd[0].Region = RegionFullIteration
		p.Layers[i].Regions = []Region{RegionFullIteration}
	}
	p.Captured, p.RealCaptured = w.RunMicroBatches, w.MicroBatches
	mb := w.MicroBatchOps()
	ops := make([]Op, 0, len(mb)*w.RunMicroBatches)
	for range w.RunMicroBatches {
		ops = append(ops, mb...)
	}
	fi := &FullIterationPlan{MicroBatches: w.RunMicroBatches, RealMicroBatches: w.MicroBatches,
		StaticBytesPerMB: w.StaticInputBytes(), PoolBytes: act.iteration(w)}
	p.FullIteration = fi
	p.Graphs = []PlannedGraph{{Layer: -1, Region: RegionFullIteration, Ops: ops,
		StaticBytes: float64(fi.MicroBatches) * fi.StaticBytesPerMB, PoolBytes: fi.PoolBytes}}
	for _, o := range ops {
		if o.HostSync {
			p.Failure = &CaptureFailure{Stage: FailCapture, Region: RegionFullIteration, Op: o.Name,
				Message: fmt.Sprintf("capture failed: %s copies to the host and synchronises inside the full-iteration graph (cudaErrorStreamCaptureInvalidated); dropless MoE cannot be captured whole", o.Name)}
			return
		}
	}
}

// Describe is the plan in one line, for results' notes: what Megatron-Core
// is configured with and what it captures (so that, e.g., a local [attn]
// that graphs whole layers shows).
func (p *CapturePlan) Describe() string {
	if !p.Candidate.Graphed() {
		return "capture plan: eager (" + p.Config + ")"
	}
	var regions []string
	layers := 0
	for _, l := range p.Layers {
		if l.Graphed() {
			layers++
		}
		for _, r := range l.Regions {
			if !slices.Contains(regions, string(r)) {
				regions = append(regions, string(r))
			}
		}
	}
	s := fmt.Sprintf("capture plan: %s, %s: %d graphs, regions [%s] in %d of %d layers, %d captured micro-batch(es) in the run, %d in the real job",
		p.Mechanism, p.Config, len(p.Graphs), strings.Join(regions, "; "), layers, len(p.Layers), p.Captured, p.RealCaptured)
	if p.Failure != nil {
		s += "; fails: " + p.Failure.Message
	}
	return s
}
