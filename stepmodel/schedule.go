package stepmodel

import "fmt"

// ItemKind is what the host does for one item of a step.
type ItemKind int

const (
	// ItemOp: the host spends HostUs of framework work, then launches the op.
	ItemOp ItemKind = iota
	// ItemGraph: the host spends HostUs (the framework's replay path), then
	// launches plan graph Graph.
	ItemGraph
	// ItemCopy: the host copies an eagerly computed input into the static
	// input buffer of plan graph Graph (or, for the full iteration, one
	// micro-batch's inputs).
	ItemCopy
)

// Item is one thing the host issues, with its costs in µs. HostUs is the
// framework's own work before the launch; the launch call's cost
// (cuLaunchKernel, cuGraphLaunch) is the driver's and is not in it.
type Item struct {
	Kind   ItemKind
	Op     Op // ItemOp and ItemCopy
	Graph  int
	HostUs float64
	GPUUs  float64 // ItemGraph: the sum of its nodes
}

// Step is one step of the emulated run as the host issues it: its start
// (once per step, before the first micro-batch), the forward-backward of
// the run's micro-batches, then the optimizer. Start and FwdBwd are both
// inside the step's forward-backward time.
type Step struct {
	Start, FwdBwd, Optimizer []Item
}

// Schedule is what both emulating engines run or compute for one
// candidate on one workload: the eager step, the capture (warm-up passes
// and each planned graph's nodes) and the graphed step, with the costs of
// every item. Both engines take their order and their costs from here.
type Schedule struct {
	W     *Workload
	Plan  *CapturePlan
	Costs Costs
	sc    *stepCosts
	// node is the GPU µs of each op of a graphed segment as a graph node,
	// by (layer, backward, first op).
	node map[segKey][]float64
	// replay is the host µs of the framework's replay path per plan graph.
	replay []float64
	// Failure is a capture failure the framework profile measured for a
	// region the plan graphs (nil: none).
	Failure *CaptureFailure
	Notes   []string
}

type segKey struct {
	layer int
	bwd   bool
	from  int
}

// NewSchedule prices plan p of workload w with costs c.
func NewSchedule(w *Workload, p *CapturePlan, c Costs) *Schedule {
	s := &Schedule{W: w, Plan: p, Costs: c, sc: c.costsOf(w), node: map[segKey][]float64{}}
	s.Notes = append(s.Notes, s.sc.notes...)
	graphedExposure := s.exposeCollectives()
	if p.FullIteration != nil {
		s.priceFullIteration()
	} else {
		s.priceRegions()
	}
	s.exposeGraphs(graphedExposure)
	return s
}

// priceRegions sets each graphed segment's node costs and each graph's
// replay host cost, from the profile's measurement of the region where it
// has one.
func (s *Schedule) priceRegions() {
	c := s.Costs
	missing := map[string]bool{}
	for i, lp := range s.Plan.Layers {
		lt := s.W.Layers[i]
		for _, r := range lp.Regions {
			var fwd, bwd *Segment
			for k := range lp.Fwd {
				if lp.Fwd[k].Region == r {
					fwd = &lp.Fwd[k]
				}
			}
			for k := range lp.Bwd {
				if lp.Bwd[k].Region == r {
					bwd = &lp.Bwd[k]
				}
			}
			fn := append([]float64(nil), s.sc.fwd[i].node[fwd.From:fwd.To]...)
			var bn []float64
			if bwd != nil {
				bn = append([]float64(nil), s.sc.bwd[i].node[bwd.From:bwd.To]...)
			}
			if c.Profile != nil {
				reg, ok := c.Profile.region(string(lt.Kind), r)
				if !ok {
					missing[string(lt.Kind)+" "+string(r)] = true
				} else {
					if reg.CaptureError != "" && s.Failure == nil {
						s.Failure = &CaptureFailure{Stage: FailCapture, Layer: lt.Index, Region: r,
							Message: fmt.Sprintf("the framework could not capture the %s region of %s layers on this node: %s", r, lt.Kind, reg.CaptureError)}
					}
					fitNodes(c, fn, fwd.Ops, bn, segOps(bwd), reg.GPUMs*1000)
				}
			}
			s.node[segKey{i, false, fwd.From}] = fn
			if bwd != nil {
				s.node[segKey{i, true, bwd.From}] = bn
			}
		}
	}
	s.replay = make([]float64, len(s.Plan.Graphs))
	for gi, g := range s.Plan.Graphs {
		s.replay[gi] = c.Host.GraphReplayUs
		if c.Profile == nil {
			continue
		}
		if reg, ok := c.Profile.region(string(s.W.Layers[g.Layer].Kind), g.Region); ok {
			s.replay[gi] = max(0, reg.ReplayHostMs*1000/2-c.Rates.GraphLaunchHostUs(len(g.Ops)))
		}
	}
	for _, k := range sortedKeys(missing) {
		s.Notes = append(s.Notes, fmt.Sprintf("the framework profile did not measure the graphed region %s: its replay is modelled per op", k))
	}
}

func segOps(s *Segment) []Op {
	if s == nil {
		return nil
	}
	return s.Ops
}

// fitNodes scales the profiled nodes of a region's forward and backward
// graphs so that they add up to gpuUs.
func fitNodes(c Costs, fn []float64, fops []Op, bn []float64, bops []Op, gpuUs float64) {
	if gpuUs <= 0 {
		return
	}
	var sum float64
	for i, o := range fops {
		if !modelled(o) {
			sum += fn[i]
		}
	}
	for i, o := range bops {
		if !modelled(o) {
			sum += bn[i]
		}
	}
	if sum <= 0 {
		return
	}
	f := gpuUs / sum
	for i, o := range fops {
		if !modelled(o) {
			fn[i] *= f
		}
	}
	for i, o := range bops {
		if !modelled(o) {
			bn[i] *= f
		}
	}
}

// priceFullIteration: the graph's nodes run at their graphed GPU time (the
// profile's whole-layer graph where it measured one) and its replay costs
// the profile's full-iteration replay host time.
func (s *Schedule) priceFullIteration() {
	c := s.Costs
	for i, lt := range s.W.Layers {
		fn := append([]float64(nil), s.sc.fwd[i].node...)
		bn := append([]float64(nil), s.sc.bwd[i].node...)
		if c.Profile != nil {
			if reg, ok := c.Profile.region(string(lt.Kind), RegionLayer); ok {
				fitNodes(c, fn, lt.Fwd, bn, lt.Bwd, reg.GPUMs*1000)
			}
		}
		s.node[segKey{i, false, 0}] = fn
		s.node[segKey{i, true, 0}] = bn
	}
	s.replay = []float64{c.Host.GraphReplayUs}
	if c.Profile != nil && c.Profile.FullIteration.ReplayHostMs > 0 {
		s.replay[0] = max(0, c.Profile.FullIteration.ReplayHostMs*1000-c.Rates.GraphLaunchHostUs(len(s.Plan.Graphs[0].Ops)))
	}
	if c.Profile != nil && c.Profile.FullIteration.CaptureError != "" && s.Plan.Failure == nil {
		s.Failure = &CaptureFailure{Stage: FailCapture, Region: RegionFullIteration,
			Message: "the framework could not capture the full iteration on this node: " + c.Profile.FullIteration.CaptureError}
	}
}

func eagerItems(ops []Op, oc opCosts, from, to int) []Item {
	items := make([]Item, 0, to-from)
	for j := from; j < to; j++ {
		items = append(items, Item{Kind: ItemOp, Op: ops[j], HostUs: oc.host[j], GPUUs: oc.gpu[j]})
	}
	return items
}

// optimizerItems are the optimizer's ops. With a framework profile they
// start with a wait for the GPU: the profile's optimizer time is the wall
// time of optimizer.step() begun on an idle GPU (the megatron engine
// synchronises before it, and Megatron-Core's step reads the gradient
// norm back near its start), so the emulated one begins the same way.
func (s *Schedule) optimizerItems() []Item {
	items := eagerItems(s.W.Optimizer, s.sc.opt, 0, len(s.W.Optimizer))
	if s.Costs.Profile == nil {
		return items
	}
	wait := Op{Name: "optimizer_start_sync", Kind: KindSync, Scope: ScopeOther, Bytes: 8, HostSync: true}
	return append([]Item{{Kind: ItemOp, Op: wait, GPUUs: s.Costs.Rates.OpGPUUs(wait)}}, items...)
}

// startItems are the step's start: with a profile that measured it, the
// host zeroing the gradient buffers (Megatron-Core's zero_grad_buffer, and
// the optimizer's zero_grad), whose kernels overlap the host's next work
// (GPU 0: what they add is in the profile's fitted GPU times); none
// without one.
func (s *Schedule) startItems() []Item {
	p := s.Costs.Profile
	if p == nil {
		return nil
	}
	st := p.stepStart(len(s.W.Layers))
	if st.HostMs <= 0 {
		return nil
	}
	op := Op{Name: "zero_grad_buffer", Kind: KindElementwise, Scope: ScopeOther}
	return []Item{{Kind: ItemOp, Op: op, HostUs: max(0, st.HostMs*1000-s.Costs.Rates.LaunchUs)}}
}

// FwdBwdMs is the real step's forward-backward time from a run of step st
// that took runMs (Workload.FwdBwdMs). A full-iteration graph holds the
// run's micro-batches with no boundary between them, so its run is
// scaled whole; its launch, host time before the GPU starts, happens
// once per step whatever the micro-batches, and is not scaled.
func (s *Schedule) FwdBwdMs(st Step, runMs, lastMs float64) float64 {
	if lastMs >= 0 || s.Plan.FullIteration == nil || s.W.RunMicroBatches >= s.W.MicroBatches {
		return s.W.FwdBwdMs(runMs, lastMs)
	}
	var launch float64
	for _, it := range st.Start {
		launch += it.HostUs / 1000
	}
	for _, it := range st.FwdBwd {
		if it.Kind == ItemGraph {
			launch += it.HostUs / 1000
		}
	}
	launch = min(launch, runMs)
	return launch + (runMs-launch)*s.W.ScaleFactor()
}

// Eager is the eager step of the workload (no graphs).
func (s *Schedule) Eager() Step {
	w, sc := s.W, s.sc
	st := Step{Start: s.startItems()}
	for range w.RunMicroBatches {
		st.FwdBwd = append(st.FwdBwd, eagerItems(w.Pre, sc.pre, 0, len(w.Pre))...)
		for i, lt := range w.Layers {
			st.FwdBwd = append(st.FwdBwd, eagerItems(lt.Fwd, sc.fwd[i], 0, len(lt.Fwd))...)
		}
		st.FwdBwd = append(st.FwdBwd, eagerItems(w.Head, sc.head, 0, len(w.Head))...)
		for i := len(w.Layers) - 1; i >= 0; i-- {
			st.FwdBwd = append(st.FwdBwd, eagerItems(w.Layers[i].Bwd, sc.bwd[i], 0, len(w.Layers[i].Bwd))...)
		}
		st.FwdBwd = append(st.FwdBwd, eagerItems(w.PreBwd, sc.preBwd, 0, len(w.PreBwd))...)
	}
	st.Optimizer = s.optimizerItems()
	return st
}

// graphIndex finds the plan graph of (layer, region, direction, captured
// micro-batch).
func (s *Schedule) graphIndex(layer int, region Region, bwd bool, mb int) int {
	for gi, g := range s.Plan.Graphs {
		if g.Layer == layer && g.Region == region && g.Backward == bwd && g.MicroBatch == mb {
			return gi
		}
	}
	return -1
}

// copyOp is the copy of a layer's input into a graph's static buffer.
func (s *Schedule) copyItem(g int, bytes float64) Item {
	op := Op{Name: "static_input_copy", Kind: KindElementwise, Bytes: bytes}
	return Item{Kind: ItemCopy, Op: op, Graph: g, HostUs: s.Costs.Host.OpHostUs(op), GPUUs: s.Costs.Rates.OpGPUUs(op)}
}

func (s *Schedule) graphItem(g int) Item {
	var gpu float64
	for _, n := range s.GraphNodes(g) {
		gpu += n.GPUUs
	}
	return Item{Kind: ItemGraph, Graph: g, HostUs: s.replay[g], GPUUs: gpu}
}

// Graphed is the step as it runs once the plan's graphs are captured:
// uncovered ops eagerly, each region by its graph of the micro-batch's
// captured set (micro-batch mod captured); a graph whose input an eager op
// produced first has it copied into its static buffer.
func (s *Schedule) Graphed() Step {
	w, p, sc := s.W, s.Plan, s.sc
	if !p.Graphed() {
		return s.Eager()
	}
	st := Step{Start: s.startItems(), Optimizer: s.optimizerItems()}
	if p.FullIteration != nil {
		for range w.RunMicroBatches {
			st.FwdBwd = append(st.FwdBwd, s.copyItem(0, 2*w.StaticInputBytes()))
		}
		st.FwdBwd = append(st.FwdBwd, s.graphItem(0))
		return st
	}
	static := 2 * w.StaticBufferBytes()
	first := true // the step's first replay, which costs the host more
	segs := func(mb, i int, bwd bool, prev *bool) {
		lp := p.Layers[i]
		list, ops, oc := lp.Fwd, w.Layers[i].Fwd, sc.fwd[i]
		if bwd {
			list, ops, oc = lp.Bwd, w.Layers[i].Bwd, sc.bwd[i]
		}
		for _, seg := range list {
			if !seg.Graphed() {
				st.FwdBwd = append(st.FwdBwd, eagerItems(ops, oc, seg.From, seg.To)...)
				*prev = false
				continue
			}
			g := s.graphIndex(i, seg.Region, bwd, mb%p.Captured)
			if !*prev {
				st.FwdBwd = append(st.FwdBwd, s.copyItem(g, static))
			}
			it := s.graphItem(g)
			if first {
				it.HostUs += s.firstReplayUs(g)
				first = false
			}
			st.FwdBwd = append(st.FwdBwd, it)
			*prev = true
		}
	}
	for mb := range w.RunMicroBatches {
		st.FwdBwd = append(st.FwdBwd, eagerItems(w.Pre, sc.pre, 0, len(w.Pre))...)
		prev := false
		for i := range w.Layers {
			segs(mb, i, false, &prev)
		}
		st.FwdBwd = append(st.FwdBwd, eagerItems(w.Head, sc.head, 0, len(w.Head))...)
		prev = false
		for i := len(w.Layers) - 1; i >= 0; i-- {
			segs(mb, i, true, &prev)
		}
		st.FwdBwd = append(st.FwdBwd, eagerItems(w.PreBwd, sc.preBwd, 0, len(w.PreBwd))...)
	}
	return st
}

// firstReplayUs is the host's extra work before the step's first replay,
// plan graph g, where the profile measured it for g's region.
func (s *Schedule) firstReplayUs(g int) float64 {
	p := s.Costs.Profile
	if p == nil {
		return 0
	}
	pg := s.Plan.Graphs[g]
	if reg, ok := p.region(string(s.W.Layers[pg.Layer].Kind), pg.Region); ok {
		return reg.FirstReplayHostMs * 1000
	}
	return 0
}

// Warmup is the eager passes of the graphed regions before capture: per
// pass and captured micro-batch, the forward regions in layer order and
// the backward ones in reverse (TE's num_warmup_iters; a local runner's
// cuda_graph_warmup_steps). A full-iteration graph has none: its warm-up
// is whole eager steps.
func (s *Schedule) Warmup() []Item {
	w, p, sc := s.W, s.Plan, s.sc
	var items []Item
	if p.FullIteration != nil || !p.Graphed() {
		return nil
	}
	for range p.WarmupPasses * p.Captured {
		for i, lp := range p.Layers {
			for _, seg := range lp.Fwd {
				if seg.Graphed() {
					items = append(items, eagerItems(w.Layers[i].Fwd, sc.fwd[i], seg.From, seg.To)...)
				}
			}
		}
		for i := len(p.Layers) - 1; i >= 0; i-- {
			for _, seg := range p.Layers[i].Bwd {
				if seg.Graphed() {
					items = append(items, eagerItems(w.Layers[i].Bwd, sc.bwd[i], seg.From, seg.To)...)
				}
			}
		}
	}
	return items
}

// GraphNodes is plan graph g's kernels as captured: the framework's host
// cost during capture is the eager one, the GPU time the graph node's.
func (s *Schedule) GraphNodes(g int) []Item {
	w, sc := s.W, s.sc
	pg := s.Plan.Graphs[g]
	if pg.Layer < 0 { // the full iteration
		var items []Item
		node := func(ops []Op, oc opCosts, nodes []float64) {
			for j, o := range ops {
				items = append(items, Item{Kind: ItemOp, Op: o, HostUs: oc.host[j], GPUUs: nodes[j]})
			}
		}
		for range w.RunMicroBatches {
			node(w.Pre, sc.pre, sc.pre.node)
			for i, lt := range w.Layers {
				node(lt.Fwd, sc.fwd[i], s.node[segKey{i, false, 0}])
			}
			node(w.Head, sc.head, sc.head.node)
			for i := len(w.Layers) - 1; i >= 0; i-- {
				node(w.Layers[i].Bwd, sc.bwd[i], s.node[segKey{i, true, 0}])
			}
			node(w.PreBwd, sc.preBwd, sc.preBwd.node)
		}
		return items
	}
	lp := s.Plan.Layers[pg.Layer]
	list, ops, oc := lp.Fwd, w.Layers[pg.Layer].Fwd, sc.fwd[pg.Layer]
	if pg.Backward {
		list, ops, oc = lp.Bwd, w.Layers[pg.Layer].Bwd, sc.bwd[pg.Layer]
	}
	for _, seg := range list {
		if seg.Region != pg.Region {
			continue
		}
		nodes := s.node[segKey{pg.Layer, pg.Backward, seg.From}]
		items := make([]Item, 0, seg.To-seg.From)
		for j := seg.From; j < seg.To; j++ {
			items = append(items, Item{Kind: ItemOp, Op: ops[j], HostUs: oc.host[j], GPUUs: nodes[j-seg.From]})
		}
		return items
	}
	return nil
}

// GraphMemoryBytes is the memory the run's graphs hold (pools and static
// buffers): the profile's measurement per region, layer and captured
// micro-batch where it has one, else the plan's.
func (s *Schedule) GraphMemoryBytes() float64 {
	var b float64
	for g := range s.Plan.Graphs {
		b += s.GraphBytes(g)
	}
	return b
}

// firstPooledGraph is the first per-layer graph with a pool of its own.
func (s *Schedule) firstPooledGraph() int {
	for g, pg := range s.Plan.Graphs {
		if pg.Layer >= 0 && !pg.Backward && pg.PoolBytes > 0 {
			return g
		}
	}
	return -1
}

// fullIteration is the profile's full-iteration part, nil without a profile.
func (p *FrameworkProfile) fullIteration() *FullIterationProfile {
	if p == nil {
		return nil
	}
	return &p.FullIteration
}

// GraphBytes is the memory plan graph g holds, static buffers included.
func (s *Schedule) GraphBytes(g int) float64 {
	pg := s.Plan.Graphs[g]
	pr := s.Costs.Profile
	if pg.Layer < 0 {
		if fi := pr.fullIteration(); fi != nil && fi.GraphMiBPerLayer > 0 && s.W.Layout.PPSize() == 1 {
			return (fi.GraphMiBFixed + fi.GraphMiBPerLayer*float64(len(s.W.Layers))) * bytesPerMiB
		}
		if pr != nil && pr.FullIteration.GraphMiBPerMicroBatch > 0 {
			return pr.FullIteration.GraphMiBPerMicroBatch * bytesPerMiB * float64(s.Plan.FullIteration.MicroBatches)
		}
		return pg.PoolBytes + pg.StaticBytes
	}
	if pr != nil {
		if reg, ok := pr.region(string(s.W.Layers[pg.Layer].Kind), pg.Region); ok && reg.GraphMiB > 0 {
			// Measured per layer and micro-batch, forward and backward
			// graphs together; later micro-batches reuse the pool.
			switch {
			case pg.Backward:
				return 0
			case pg.PoolBytes > 0:
				// The capture's fixed part goes with its first pooled graph.
				if g == s.firstPooledGraph() {
					return (reg.GraphMiB + pr.GraphPoolFixedMiB) * bytesPerMiB
				}
				return reg.GraphMiB * bytesPerMiB
			default:
				return 2 * pg.StaticBytes
			}
		}
	}
	return pg.PoolBytes + pg.StaticBytes
}
