package stepmodel

import (
	"fmt"

	"cgtune/presets"
)

// CollectiveRanks is the world size at which a layout's per-rank slice
// runs every collective of its layers for real: its tensor- and
// expert-parallel degrees together (what the megatron engine runs on
// ranks; context parallelism stays modelled).
func CollectiveRanks(l presets.Layout) int { return l.TPSize() * l.EPSize() }

// ExposureFor is the profile's collective exposure for layers that span
// ranks ranks: the one measured at that world size (exact), else the one
// at the largest measured world size below it that divides it
// (extrapolated from there); ok is false when there is none.
func (p *FrameworkProfile) ExposureFor(ranks int) (e CollectiveExposure, exact, ok bool) {
	if p == nil {
		return CollectiveExposure{}, false, false
	}
	for _, c := range p.Collectives {
		if c.WorldSize == ranks {
			return c, true, true
		}
		if c.WorldSize < ranks && ranks%c.WorldSize == 0 && (!ok || c.WorldSize > e.WorldSize) {
			e, ok = c, true
		}
	}
	return e, false, ok
}

// layerCollectives counts a layer's collectives, forward and backward.
func layerCollectives(lt LayerTrace) int {
	n := 0
	for _, ops := range [][]Op{lt.Fwd, lt.Bwd} {
		for _, o := range ops {
			if o.Kind == KindCollective {
				n++
			}
		}
	}
	return n
}

// exposeCollectives adds the profile's collective exposure for the
// layout's rank count: the eager share as host time before each of a
// layer's collectives, and returns the graphed share per collective of
// each layer (µs) for the replays; it says in the notes where the
// collective effect comes from.
func (s *Schedule) exposeCollectives() []float64 {
	ranks := CollectiveRanks(s.W.Layout)
	if ranks <= 1 {
		return nil
	}
	e, exact, ok := s.Costs.Profile.ExposureFor(ranks)
	if !ok {
		s.Notes = append(s.Notes, fmt.Sprintf("collective effect extrapolated from world size 1: the layers' collectives over %d ranks "+
			"keep their modelled time, without the host work the ranks wait for at each one in eager mode "+
			"(no framework profile measured at world size %d)", ranks, ranks))
		return nil
	}
	how := fmt.Sprintf("measured at world size %d", e.WorldSize)
	if !exact {
		how = fmt.Sprintf("extrapolated from world size %d to the layers' %d ranks", e.WorldSize, ranks)
	}
	s.Notes = append(s.Notes, fmt.Sprintf("collective effect %s (framework profile): %.3f ms eager, %.3f ms graphed exposed host time per layer and micro-batch",
		how, e.EagerExposedHostMsPerLayer, e.GraphedExposedHostMsPerLayer))
	graphed := make([]float64, len(s.W.Layers))
	for i, lt := range s.W.Layers {
		n := layerCollectives(lt)
		if n == 0 {
			continue
		}
		eager := e.EagerExposedHostMsPerLayer * 1000 / float64(n)
		graphed[i] = e.GraphedExposedHostMsPerLayer * 1000 / float64(n)
		for _, oc := range []struct {
			ops []Op
			c   opCosts
		}{{lt.Fwd, s.sc.fwd[i]}, {lt.Bwd, s.sc.bwd[i]}} {
			for j, o := range oc.ops {
				if o.Kind == KindCollective {
					oc.c.host[j] += eager
				}
			}
		}
	}
	return graphed
}

// exposeGraphs adds the graphed exposure of the collectives each plan
// graph holds to its replay's host time.
func (s *Schedule) exposeGraphs(perColl []float64) {
	if perColl == nil {
		return
	}
	for g, pg := range s.Plan.Graphs {
		var us float64
		if pg.Layer < 0 { // the full iteration holds every layer of every micro-batch
			for i, lt := range s.W.Layers {
				us += perColl[i] * float64(layerCollectives(lt)*s.W.RunMicroBatches)
			}
		} else {
			for _, it := range s.GraphNodes(g) {
				if it.Op.Kind == KindCollective {
					us += perColl[pg.Layer]
				}
			}
		}
		s.replay[g] += us
	}
}
