package search

import (
	"testing"

	"cgtune/engine"
	"cgtune/presets"
)

// The layer spec the recipe names reaches the workload, and with it the
// memory the model counts: the local spec's unfused attention keeps the
// s² softmax that Transformer Engine's flash attention does not.
func TestRecipeLayerSpecReachesTheWorkload(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	acts := map[string]int64{}
	for _, spec := range []string{"transformer_engine", "local"} {
		t.Run(spec, func(t *testing.T) {
			o, err := MoEWorkload(engine.WorkloadOptions{}, m, l, "0.4", map[string]string{"model.transformer_impl": spec})
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]string{"local": "local"}[spec]; o.LayerSpec != want {
				t.Errorf("layer spec %q, want %q", o.LayerSpec, want)
			}
			w, err := engine.BuildWorkload(m, l, o)
			if err != nil {
				t.Fatal(err)
			}
			none := presets.Candidate{Impl: presets.ImplNone}
			acts[spec] = engine.PredictMemory(w, engine.PlanCapture(w, none, presets.G2), nil, 0, engine.MemoryOptions{}).Activations
		})
	}
	if acts["local"] <= acts["transformer_engine"] {
		t.Errorf("local spec activations %d MiB, not above Transformer Engine's %d", acts["local"], acts["transformer_engine"])
	}
	if _, err := MoEWorkload(engine.WorkloadOptions{}, m, l, "0.4", map[string]string{"model.transformer_impl": "banana"}); err == nil {
		t.Error("model.transformer_impl=banana accepted")
	}
}
