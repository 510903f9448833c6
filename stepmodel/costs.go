package stepmodel

import (
	"fmt"
	"slices"
	"strings"
)

// Costs give every op of a step its host and GPU time, from a framework
// profile measured on the real framework where one exists, else from the
// per-op model (PyTorch per-op host costs and the GPU's rates).
//
// With a profile, the measured totals are spread over the ops of what they
// measured in proportion to the per-op model, so that the op structure
// (where the host syncs, which ops a graph covers, when the GPU may start)
// stays and the sums are the measured ones:
//
//   - a layer kind's eager forward (backward) host time, less the driver's
//     own launch cost of each op, over its ops' framework host costs; its
//     GPU time over its ops' GPU times;
//   - a graphed region's GPU time (forward and backward together) over the
//     graph's nodes; its replay host time, half per forward and backward
//     graph, less the driver's cuGraphLaunch cost, on the replay;
//   - the other forward (embedding, output layer, loss) and backward, and
//     the optimizer step, the same way;
//   - a full-iteration graph's replay host time per step.
//
// Collectives and host syncs keep the model's costs: the profile is
// measured on one GPU, without the job's collectives ("collectives:
// modelled"). What the layers' collectives expose of the ranks' host work
// at the layout's rank count comes on top, from the profile's Collectives
// where it has them (exposure.go).
type Costs struct {
	Rates   Rates
	Host    HostCosts
	Profile *FrameworkProfile
	// Calibration says which calibration scaled the host costs ("" none):
	// every result the costs give says so (CalibrationNotes).
	Calibration string
}

// CalibrationNotes is the note a result emulated with c carries when a
// calibration fitted from real jobs changed its host costs.
func (c Costs) CalibrationNotes() []string {
	if c.Calibration == "" {
		return nil
	}
	return []string{"calibrated: " + c.Calibration}
}

// Source says where the host costs come from, for every result's notes.
func (c Costs) Source() string {
	if c.Profile != nil {
		return "framework profile (" + c.Profile.Source + ")"
	}
	return "PyTorch per-op (fallback): " + c.Host.Source
}

// Source values of Result.HostCosts.
const (
	HostCostsProfile = "framework profile"
	HostCostsPerOp   = "PyTorch per-op (fallback)"
)

// Kind is HostCostsProfile or HostCostsPerOp.
func (c Costs) Kind() string {
	if c.Profile != nil {
		return HostCostsProfile
	}
	return HostCostsPerOp
}

// opCosts are the host and GPU µs of a list of ops, and each op's GPU µs
// as a node of a replayed graph.
type opCosts struct{ host, gpu, node []float64 }

// stepCosts are the costs of one workload's ops.
type stepCosts struct {
	c                      Costs
	fwd, bwd               []opCosts // per w.Layers
	pre, head, preBwd, opt opCosts
	notes                  []string
}

// modelled reports whether an op keeps the model's costs under a profile.
func modelled(o Op) bool { return o.Kind == KindCollective || o.HostSync }

func (c Costs) perOp(ops []Op) opCosts {
	oc := opCosts{host: make([]float64, len(ops)), gpu: make([]float64, len(ops)), node: make([]float64, len(ops))}
	for i, o := range ops {
		oc.host[i] = c.Host.OpHostUs(o)
		oc.gpu[i] = c.Rates.OpGPUUs(o)
		oc.node[i] = c.Rates.OpGraphGPUUs(o)
	}
	return oc
}

// fit scales the host and GPU costs of the profiled ops among ops[sel] so
// that they add up to m (host measured with the launches, on an idle GPU).
func (c Costs) fit(oc opCosts, ops []Op, sel func(int) bool, m HostGPU) {
	var host, gpu float64
	n := 0
	for i, o := range ops {
		if sel(i) && !modelled(o) {
			host += oc.host[i]
			gpu += oc.gpu[i]
			n++
		}
	}
	if n == 0 {
		return
	}
	fw := max(0, m.HostMs*1000-float64(n)*c.Rates.LaunchUs)
	for i, o := range ops {
		if !sel(i) || modelled(o) {
			continue
		}
		if host > 0 {
			oc.host[i] *= fw / host
		}
		if gpu > 0 && m.GPUMs > 0 {
			oc.gpu[i] *= m.GPUMs * 1000 / gpu
			oc.node[i] = oc.gpu[i] - c.Rates.KernelUs + c.Rates.GraphNodeUs
		}
	}
}

// fitHost scales the host costs of the profiled ops among ops[sel] so
// that, with their launches, they add up to ms; false when there are none
// (a later pipeline stage's Pre is only its receive).
func (c Costs) fitHost(oc opCosts, ops []Op, sel func(int) bool, ms float64) bool {
	var host float64
	n := 0
	for i, o := range ops {
		if sel(i) && !modelled(o) {
			host += oc.host[i]
			n++
		}
	}
	if n == 0 || host <= 0 {
		return false
	}
	f := max(0, ms*1000-float64(n)*c.Rates.LaunchUs) / host
	for i, o := range ops {
		if sel(i) && !modelled(o) {
			oc.host[i] *= f
		}
	}
	return true
}

func allOps(int) bool { return true }

// costsOf computes the costs of workload w's ops.
func (c Costs) costsOf(w *Workload) *stepCosts {
	s := &stepCosts{c: c}
	headFwd := func(i int) bool { return !w.Head[i].Backward }
	headBwd := func(i int) bool { return w.Head[i].Backward }
	s.pre, s.head, s.preBwd, s.opt = c.perOp(w.Pre), c.perOp(w.Head), c.perOp(w.PreBwd), c.perOp(w.Optimizer)
	for _, lt := range w.Layers {
		s.fwd = append(s.fwd, c.perOp(lt.Fwd))
		s.bwd = append(s.bwd, c.perOp(lt.Bwd))
	}
	defer s.hideEPAllToAll(w)
	p := c.Profile
	if p == nil {
		return s
	}
	// The other forward is the embedding and the head's forward ops; the
	// other backward the head's backward ops and the embedding's.
	c.fitSplit(s.pre, w.Pre, s.head, w.Head, headFwd, p.OtherFwd)
	if pre := min(p.PreFwdHostMs, p.OtherFwd.HostMs); pre > 0 {
		// The measured lead-in goes to the ops before the first layer, the
		// rest of the forward's host time to the head's.
		if c.fitHost(s.pre, w.Pre, allOps, pre) {
			c.fitHost(s.head, w.Head, headFwd, p.OtherFwd.HostMs-pre)
		}
	}
	c.fitSplit(s.preBwd, w.PreBwd, s.head, w.Head, headBwd, p.OtherBwd)
	c.fit(s.opt, w.Optimizer, allOps, p.optimizerStep(len(w.Layers)))
	missing := map[string]bool{}
	for i, lt := range w.Layers {
		lp, ok := p.Layers[string(lt.Kind)]
		if !ok {
			missing[string(lt.Kind)] = true
			continue
		}
		c.fit(s.fwd[i], lt.Fwd, allOps, lp.EagerFwd)
		c.fit(s.bwd[i], lt.Bwd, allOps, lp.EagerBwd)
	}
	for _, k := range sortedKeys(missing) {
		s.notes = append(s.notes, fmt.Sprintf("the framework profile has no %s layers: their costs are modelled per op", k))
	}
	return s
}

// fitSplit fits m over two op lists together (the part of b that selB
// picks, and all of a).
func (c Costs) fitSplit(ca opCosts, a []Op, cb opCosts, b []Op, selB func(int) bool, m HostGPU) {
	ops := append(append([]Op(nil), a...), b...)
	oc := opCosts{host: append(append([]float64(nil), ca.host...), cb.host...),
		gpu: append(append([]float64(nil), ca.gpu...), cb.gpu...), node: append(append([]float64(nil), ca.node...), cb.node...)}
	c.fit(oc, ops, func(i int) bool { return i < len(a) || selB(i-len(a)) }, m)
	copy(ca.host, oc.host[:len(a)])
	copy(ca.gpu, oc.gpu[:len(a)])
	copy(ca.node, oc.node[:len(a)])
	for i := range b {
		if selB(i) {
			cb.host[i], cb.gpu[i], cb.node[i] = oc.host[len(a)+i], oc.gpu[len(a)+i], oc.node[len(a)+i]
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// region is the profile's entry for a graphed region of a layer kind: the
// region's own measurement, or, for a region that joins modules the
// profile measured apart, one replay (the largest of their replay host
// times) over their summed GPU time and memory.
func (p *FrameworkProfile) region(kind string, name Region) (GraphedRegion, bool) {
	lp, ok := p.Layers[kind]
	if !ok {
		return GraphedRegion{}, false
	}
	if r, ok := lp.Graphed[string(name)]; ok {
		return r, true
	}
	parts := strings.Split(string(name), ",")
	if len(parts) < 2 {
		return GraphedRegion{}, false
	}
	var out GraphedRegion
	for _, part := range parts {
		r, ok := lp.Graphed[part]
		if !ok {
			return GraphedRegion{}, false
		}
		out.ReplayHostMs = max(out.ReplayHostMs, r.ReplayHostMs)
		out.FirstReplayHostMs = max(out.FirstReplayHostMs, r.FirstReplayHostMs)
		out.GPUMs += r.GPUMs
		out.GraphMiB += r.GraphMiB
		if out.CaptureError == "" {
			out.CaptureError = r.CaptureError
		}
	}
	return out, true
}

// stepStart is the host's work at the start of a step of a stage with
// layers layers.
func (p *FrameworkProfile) stepStart(layers int) HostGPU {
	return perStep(p.StepStart, p.StepStartPerLayer, layers)
}

// optimizerStep is the optimizer's measured time for a step of a stage
// with the given number of layers.
func (p *FrameworkProfile) optimizerStep(layers int) HostGPU {
	return perStep(p.Optimizer, p.OptimizerPerLayer, layers)
}

// perStep is a per-step figure fitted as fixed plus perLayer per layer,
// for a stage of layers layers.
func perStep(fixed, perLayer HostGPU, layers int) HostGPU {
	n := float64(layers)
	return HostGPU{HostMs: fixed.HostMs + n*perLayer.HostMs, GPUMs: fixed.GPUMs + n*perLayer.GPUMs}
}
