package recipe

import (
	"testing"

	"cgtune/internal/testmodel"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// The layer spec the recipe names reaches the workload, and with it the
// memory the model counts: the local spec's unfused attention keeps the
// s² softmax that Transformer Engine's flash attention does not.
func TestRecipeLayerSpecReachesTheWorkload(t *testing.T) {
	m, l := testmodel.Builtin(t, "llama3_8b", "h100")
	acts := map[string]int64{}
	for _, spec := range []string{"transformer_engine", "local"} {
		t.Run(spec, func(t *testing.T) {
			o, err := MoEWorkload(stepmodel.WorkloadOptions{}, m, l, "0.4", map[string]string{"model.transformer_impl": spec})
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]string{"local": "local"}[spec]; o.LayerSpec != want {
				t.Errorf("layer spec %q, want %q", o.LayerSpec, want)
			}
			w, err := stepmodel.BuildWorkload(m, l, o)
			if err != nil {
				t.Fatal(err)
			}
			none := presets.Candidate{Impl: presets.ImplNone}
			acts[spec] = stepmodel.PredictMemory(w, stepmodel.PlanCapture(w, none, presets.G2), nil, 0, stepmodel.MemoryOptions{}).Activations
		})
	}
	if acts["local"] <= acts["transformer_engine"] {
		t.Errorf("local spec activations %d MiB, not above Transformer Engine's %d", acts["local"], acts["transformer_engine"])
	}
	if _, err := MoEWorkload(stepmodel.WorkloadOptions{}, m, l, "0.4", map[string]string{"model.transformer_impl": "banana"}); err == nil {
		t.Error("model.transformer_impl=banana accepted")
	}
}

// The engines are told the dispatch syncs with the host unless the recipe
// gives the experts static shapes: drop-and-pad, or the flex dispatcher's
// static per-rank budget on hybridep or ncclep. The inference-only padding
// flag does not.
func TestMoEWorkloadStaticDispatch(t *testing.T) {
	flex := map[string]string{"model.moe_token_dispatcher_type": "flex", "model.moe_flex_dispatcher_backend": "hybridep"}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		mb       string
		sets     map[string]string
		dropless bool
		capacity float64
	}{
		{"default dropless", "0.7", nil, true, 0},
		{"drop and pad", "0.7", map[string]string{"model.moe_expert_capacity_factor": "1.5", "model.moe_pad_expert_input_to_capacity": "true"}, false, 1.5},
		{"capacity without padding", "0.7", map[string]string{"model.moe_expert_capacity_factor": "1.5"}, true, 0},
		{"hybridep rank budget", "0.7", with(flex, "model.moe_expert_rank_capacity_factor", "1.5"), false, 0},
		{"ncclep rank budget", "0.7", with(flex, "model.moe_flex_dispatcher_backend", "ncclep", "model.moe_expert_rank_capacity_factor", "1.5"), false, 0},
		{"deepep rank budget", "0.7", with(flex, "model.moe_flex_dispatcher_backend", "deepep", "model.moe_expert_rank_capacity_factor", "1.5"), true, 0},
		{"rank budget on alltoall", "0.7", with(flex, "model.moe_token_dispatcher_type", "alltoall", "model.moe_expert_rank_capacity_factor", "1.5"), true, 0},
		{"hybridep without a budget", "0.7", flex, true, 0},
		{"inference padding only", "0.7", with(flex, "model.moe_pad_experts_for_cuda_graph_inference", "true"), true, 0},
		{"G2 hybridep", "0.4", flex, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := layoutFor(moeModel)
			opts, err := MoEWorkload(stepmodel.WorkloadOptions{}, moeModel, l, tc.mb, tc.sets)
			if err != nil {
				t.Fatal(err)
			}
			if opts.Dropless == nil || *opts.Dropless != tc.dropless || opts.MoECapacityFactor != tc.capacity {
				t.Errorf("dropless %v, capacity %v; want %v, %v", opts.Dropless, opts.MoECapacityFactor, tc.dropless, tc.capacity)
			}
		})
	}
	// A layout's own settings count as the recipe's.
	l := layoutFor(moeModel)
	l.Dispatcher = "flex"
	l.Settings = map[string]string{"model.moe_flex_dispatcher_backend": "hybridep", "model.moe_expert_rank_capacity_factor": "5"}
	opts, err := MoEWorkload(stepmodel.WorkloadOptions{}, moeModel, l, "0.7", nil)
	if err != nil || opts.Dropless == nil || *opts.Dropless {
		t.Errorf("layout settings: dropless %v, err %v; want static", opts.Dropless, err)
	}
}

// The recipe's Transformer Engine decides whether FusedAdam copies bf16
// Adam moments to fp32 at its step (fused from 2.14): MB 0.3 pins 2.12,
// 0.4 and later 2.14 and newer; a te_version given wins.
func TestTEVersionReachesTheMomentCopies(t *testing.T) {
	m, l := testmodel.Builtin(t, "llama3_8b", "h100")
	for _, tc := range []struct {
		mb   string
		sets map[string]string
		want bool
	}{
		{"0.3", nil, true},
		{"0.4", nil, false},
		{"0.7", nil, false},
		{"0.7", map[string]string{"te_version": "2.13.0"}, true},
		{"0.3", map[string]string{"te_version": "2.14.0"}, false},
	} {
		o, err := MoEWorkload(stepmodel.WorkloadOptions{}, m, l, tc.mb, tc.sets)
		if err != nil {
			t.Fatal(err)
		}
		if o.BF16MomentCopies != tc.want {
			t.Errorf("MB %s %v: bf16 moment copies %v, want %v", tc.mb, tc.sets, o.BF16MomentCopies, tc.want)
		}
	}
}
