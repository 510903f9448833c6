package recipe

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"cgtune/internal/testmodel"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// A --set of a field that moves memory reaches the layout the memory
// model reads, with the value Megatron-Bridge runs; others leave the
// layout as it was.
func TestLayoutWithSets(t *testing.T) {
	m, l := testmodel.Builtin(t, "llama3_8b", "h100")
	for _, tc := range []struct {
		name string
		sets map[string]string
		want func(presets.Layout) bool
	}{
		{"full uniform", map[string]string{"model.recompute_granularity": "full", "model.recompute_method": "uniform", "model.recompute_num_layers": "1"},
			func(o presets.Layout) bool {
				return o.FullRecompute() && o.RecomputeMethod == "uniform" && o.RecomputeLayers == 1 && o.RecomputeModules == nil
			}},
		{"full block", map[string]string{"model.recompute_granularity": "full", "model.recompute_method": "block", "model.recompute_num_layers": "4"},
			func(o presets.Layout) bool { return o.RecomputeMethod == "block" && o.RecomputeLayers == 4 }},
		{"selective", map[string]string{"model.recompute_granularity": "selective", "model.recompute_modules": "[mlp,layernorm]"},
			func(o presets.Layout) bool {
				return o.RecomputeGranularity == "selective" && slices.Equal(o.RecomputeModules, []string{"mlp", "layernorm"})
			}},
		{"cpu offloading", map[string]string{"model.cpu_offloading": "true", "model.cpu_offloading_num_layers": "4"},
			func(o presets.Layout) bool { return o.CPUOffloadLayers == 4 }},
		{"offloading count without the switch", map[string]string{"model.cpu_offloading_num_layers": "4"},
			func(o presets.Layout) bool { return o.CPUOffloadLayers == 0 }},
		{"fine-grained offload", map[string]string{"model.fine_grained_activation_offloading": "true", "model.offload_modules": "[core_attn]"},
			func(o presets.Layout) bool { return slices.Equal(o.OffloadModules, []string{"core_attn"}) }},
		{"fp32 buffer", map[string]string{"mixed_precision.grad_reduce_in_fp32": "true"},
			func(o presets.Layout) bool { return o.GradReduceInFP32 }},
		// MB copies mixed_precision's value onto ddp at start-up.
		{"ddp's buffer flag alone", map[string]string{"ddp.grad_reduce_in_fp32": "true"},
			func(o presets.Layout) bool { return !o.GradReduceInFP32 }},
		{"precision-aware", map[string]string{"optimizer.use_precision_aware_optimizer": "true"},
			func(o presets.Layout) bool { return o.PrecisionAwareOptimizer }},
		{"pipeline", map[string]string{"model.pipeline_model_parallel_size": "2", "model.account_for_loss_in_pipeline_split": "true"},
			func(o presets.Layout) bool { return o.PP == 2 && o.AccountForLoss && !o.AccountForEmbedding }},
		{"another allocator setting", map[string]string{"env.PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.6"},
			func(o presets.Layout) bool { return !stepmodel.ExpandableSegments(o) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LayoutWithSets(m, l, "0.7", tc.sets)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.want(got) {
				t.Errorf("%v: %+v", tc.sets, got)
			}
		})
	}
	for _, sets := range []map[string]string{nil, {"model.cuda_graph_warmup_steps": "1"}} {
		if got, err := LayoutWithSets(m, l, "0.7", sets); err != nil || !reflect.DeepEqual(got, l) {
			t.Errorf("%v changed the layout: %+v (%v)", sets, got, err)
		}
	}
	// The allocator's configuration moves the model's reserve.
	plain := l.Clone()
	delete(plain.Settings, "env.PYTORCH_CUDA_ALLOC_CONF")
	if got, err := LayoutWithSets(m, plain, "0.7", map[string]string{"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}); err != nil || stepmodel.ExpandableSegments(plain) || !stepmodel.ExpandableSegments(got) {
		t.Errorf("a --set of expandable segments did not reach the layout: %v (%v)", got.Settings, err)
	}
	if _, err := LayoutWithSets(m, l, "0.7", map[string]string{"model.recompute_method": "blocks"}); err == nil {
		t.Error("a bad --set was accepted")
	}
}

// EP overlap reaches the workload as the model runs it: comm_overlap's
// value where set (it wins), the model's otherwise.
func TestEPOverlapReachesTheWorkload(t *testing.T) {
	m, shipped := testmodel.Builtin(t, "qwen3_30b_a3b", "h100")
	if o, err := MoEWorkload(stepmodel.WorkloadOptions{}, m, shipped, "0.7", nil); err != nil || !o.EPOverlap {
		t.Errorf("the h100 recipe's comm_overlap turns EP overlap on; the workload has %v (%v)", o.EPOverlap, err)
	}
	l := shipped.Clone()
	delete(l.Settings, "comm_overlap.overlap_moe_expert_parallel_comm")
	delete(l.Settings, "comm_overlap.delay_wgrad_compute")
	for _, tc := range []struct {
		sets map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"comm_overlap.overlap_moe_expert_parallel_comm": "true"}, true},
		{map[string]string{"model.overlap_moe_expert_parallel_comm": "true"}, true},
	} {
		o, err := MoEWorkload(stepmodel.WorkloadOptions{}, m, l, "0.7", tc.sets)
		if err != nil {
			t.Fatal(err)
		}
		if o.EPOverlap != tc.want {
			t.Errorf("%v: EP overlap %v, want %v", tc.sets, o.EPOverlap, tc.want)
		}
	}
	// Both set: comm_overlap's value is the one MB runs, so the model's is
	// refused, every time (the overrides apply in key order).
	both := map[string]string{"model.overlap_moe_expert_parallel_comm": "true", "comm_overlap.overlap_moe_expert_parallel_comm": "false"}
	for range 20 {
		if _, err := MoEWorkload(stepmodel.WorkloadOptions{}, m, l, "0.7", both); err == nil || !strings.Contains(err.Error(), "comm_overlap.overlap_moe_expert_parallel_comm (false) wins") {
			t.Fatalf("%v: %v, want comm_overlap's value to win", both, err)
		}
	}
}
