package estimate

import (
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// tpProfiled is profiled's four-layer dense model with tensor parallelism
// tp (its layers issue collectives), on the estimate engine with profile p
// (nil: the per-op costs).
func tpProfiled(t *testing.T, tp int, p *stepmodel.FrameworkProfile) (*Engine, *stepmodel.Workload) {
	t.Helper()
	e, err := ForGPU("h200")
	if err != nil {
		t.Fatal(err)
	}
	m := presets.Model{Name: "tiny", Arch: presets.Arch{Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 8, HeadDim: 128, Vocab: 32000}}
	w, err := stepmodel.BuildWorkload(m, presets.Layout{NumGPUs: tp, TP: tp, GBS: 2, MBS: 1, Seq: 1024}, stepmodel.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.RunMicroBatches != 2 || len(w.Layers) != 4 {
		t.Fatalf("workload: %d micro-batches run, %d layers", w.RunMicroBatches, len(w.Layers))
	}
	for _, lt := range w.Layers {
		if !hasCollective(lt.Fwd) || !hasCollective(lt.Bwd) {
			t.Fatalf("TP %d layer without collectives", tp)
		}
	}
	if p == nil {
		return e, w
	}
	return e.WithCosts(fixedProfile{p}), w
}

func hasCollective(ops []stepmodel.Op) bool {
	for _, o := range ops {
		if o.Kind == stepmodel.KindCollective {
			return true
		}
	}
	return false
}

// withExposure is the host-bound profile with collective exposures.
func withExposure(es ...stepmodel.CollectiveExposure) *stepmodel.FrameworkProfile {
	p := profile(true)
	p.Collectives = es
	return p
}

func notesOf(r engine.Result) string { return strings.Join(r.Notes, "\n") }

// Host-bound, the eager step grows by the eager exposure of every layer and
// micro-batch; whole-layer graphs and the full-iteration graph by the
// graphed one; so the graphs gain more at world size 2 than the profile
// without the exposure predicts, and the results say where it came from.
func TestCollectiveExposureAtItsWorldSize(t *testing.T) {
	const eagerX, graphedX = 1.0, 0.05 // ms per layer and micro-batch
	e0, w := tpProfiled(t, 2, profile(true))
	e1, _ := tpProfiled(t, 2, withExposure(stepmodel.CollectiveExposure{WorldSize: 2, EagerExposedHostMsPerLayer: eagerX, GraphedExposedHostMsPerLayer: graphedX}))
	for _, tc := range []struct {
		cand presets.Candidate
		add  float64
	}{
		{cand("none", ""), 2 * 4 * eagerX},
		{cand("transformer_engine", ""), 2 * 4 * graphedX},
		{cand("local", "full_iteration"), 2 * 4 * graphedX},
	} {
		t.Run(tc.cand.Key(), func(t *testing.T) {
			before, after := run(t, e0, w, tc.cand), run(t, e1, w, tc.cand)
			near(t, tc.cand.Label()+" step with the exposure", after.Step.Median, before.Step.Median+tc.add, 0.01)
			if n := notesOf(after); !strings.Contains(n, "collective effect measured at world size 2 (framework profile): 1.000 ms eager, 0.050 ms graphed") {
				t.Errorf("%s notes:\n%s", tc.cand.Label(), n)
			}
			if n := notesOf(before); !strings.Contains(n, "collective effect extrapolated from world size 1") {
				t.Errorf("%s without the exposure, notes:\n%s", tc.cand.Label(), n)
			}
		})
	}
	eager0, layer0 := run(t, e0, w, cand("none", "")), run(t, e0, w, cand("transformer_engine", ""))
	eager1, layer1 := run(t, e1, w, cand("none", "")), run(t, e1, w, cand("transformer_engine", ""))
	if s0, s1 := eager0.Step.Median/layer0.Step.Median, eager1.Step.Median/layer1.Step.Median; s1 <= s0 {
		t.Errorf("speed-up %.3f with the exposure, %.3f without; want more", s1, s0)
	}
}

// A graph that holds no collective keeps its replay cost; the layer's
// collectives left eager carry the eager exposure.
func TestCollectiveExposureScopedGraphs(t *testing.T) {
	e0, w := tpProfiled(t, 2, profile(true))
	e1, _ := tpProfiled(t, 2, withExposure(stepmodel.CollectiveExposure{WorldSize: 2, EagerExposedHostMsPerLayer: 1, GraphedExposedHostMsPerLayer: 0}))
	eager := run(t, e1, w, cand("none", "")).Step.Median - run(t, e0, w, cand("none", "")).Step.Median
	scoped := run(t, e1, w, cand("transformer_engine", "attn")).Step.Median - run(t, e0, w, cand("transformer_engine", "attn")).Step.Median
	whole := run(t, e1, w, cand("transformer_engine", "")).Step.Median - run(t, e0, w, cand("transformer_engine", "")).Step.Median
	if whole > 1e-9 || scoped <= 0 || scoped > eager+1e-9 {
		t.Errorf("added: eager %.3f ms, attn graphs %.3f ms, whole-layer graphs %.3f ms; want 0 < attn ≤ eager and whole 0", eager, scoped, whole)
	}
}

// Which world size's exposure a layout takes: its own; else the largest
// measured one below that divides it (extrapolated, and said); else none.
func TestCollectiveExposureChoice(t *testing.T) {
	two := stepmodel.CollectiveExposure{WorldSize: 2, EagerExposedHostMsPerLayer: 1}
	three := stepmodel.CollectiveExposure{WorldSize: 3, EagerExposedHostMsPerLayer: 5}
	four := stepmodel.CollectiveExposure{WorldSize: 4, EagerExposedHostMsPerLayer: 2}
	for _, tc := range []struct {
		tp   int
		have []stepmodel.CollectiveExposure
		want string
		add  float64
	}{
		{4, []stepmodel.CollectiveExposure{two, three, four}, "collective effect measured at world size 4", 2},
		{4, []stepmodel.CollectiveExposure{two, three}, "collective effect extrapolated from world size 2 to the layers' 4 ranks", 1},
		{4, []stepmodel.CollectiveExposure{three}, "collective effect extrapolated from world size 1: the layers' collectives over 4 ranks", 0},
		{2, []stepmodel.CollectiveExposure{four}, "collective effect extrapolated from world size 1", 0},
	} {
		t.Run(tc.want, func(t *testing.T) {
			e0, w := tpProfiled(t, tc.tp, profile(true))
			e1, _ := tpProfiled(t, tc.tp, withExposure(tc.have...))
			base, r := run(t, e0, w, cand("none", "")), run(t, e1, w, cand("none", ""))
			if !strings.Contains(notesOf(r), tc.want) {
				t.Errorf("TP %d with %v: notes lack %q:\n%s", tc.tp, tc.have, tc.want, notesOf(r))
			}
			near(t, "eager step", r.Step.Median, base.Step.Median+2*4*tc.add, 0.01)
		})
	}
	// One GPU: no collectives in the layers, nothing to say.
	e, w := profiled(t, withExposure(two))
	if n := notesOf(run(t, e, w, cand("none", ""))); strings.Contains(n, "collective effect") {
		t.Errorf("TP 1 notes:\n%s", n)
	}
	// The per-op costs (no profile) extrapolate too, and say so.
	e, w = tpProfiled(t, 2, nil)
	if n := notesOf(run(t, e, w, cand("none", ""))); !strings.Contains(n, "collective effect extrapolated from world size 1") {
		t.Errorf("per-op TP 2 notes:\n%s", n)
	}
}

// The user's host scale multiplies the exposure (it is host time).
func TestCollectiveExposureHostScale(t *testing.T) {
	p := withExposure(stepmodel.CollectiveExposure{WorldSize: 2, EagerExposedHostMsPerLayer: 1, GraphedExposedHostMsPerLayer: 0.1})
	adj, err := stepmodel.ParseProfileScale("host=2", nil)
	if err != nil {
		t.Fatal(err)
	}
	q := adj.Apply(p)
	if c := q.Collectives[0]; c.EagerExposedHostMsPerLayer != 2 || c.GraphedExposedHostMsPerLayer != 0.2 || c.WorldSize != 2 {
		t.Errorf("scaled exposure %+v", c)
	}
	if p.Collectives[0].EagerExposedHostMsPerLayer != 1 {
		t.Error("Apply changed the cached profile's exposure")
	}
}
