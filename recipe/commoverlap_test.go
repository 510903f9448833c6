package recipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// overlapRecipe is moeModel's recipe whose comm_overlap turns EP
// communication overlap on, as MB's qwen3_30b_a3b h100 perf recipe does.
func overlapRecipe(t *testing.T, mb string, settings map[string]string) *Recipe {
	t.Helper()
	l := layoutFor(moeModel)
	l.Settings = settings
	r, err := New(moeModel, l, mb)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOverrideThatCommOverlapOverwritesIsRefused(t *testing.T) {
	on := map[string]string{"comm_overlap.overlap_moe_expert_parallel_comm": "true"}
	r := overlapRecipe(t, "0.4", on)
	err := r.ApplySet("model.overlap_moe_expert_parallel_comm=false")
	want := "--set model.overlap_moe_expert_parallel_comm=false: the recipe's comm_overlap.overlap_moe_expert_parallel_comm (true) wins: " +
		"Megatron-Bridge copies it onto model.overlap_moe_expert_parallel_comm when it starts " +
		"(MB src/megatron/bridge/training/comm_overlap.py CommOverlapConfig.setup); set comm_overlap.overlap_moe_expert_parallel_comm=false instead"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	// A comm_overlap config that leaves delay_wgrad_compute unset still
	// writes False over the model's.
	if err := r.ApplySet("model.delay_wgrad_compute=true"); err == nil || !strings.Contains(err.Error(), "the recipe's comm_overlap.delay_wgrad_compute (unset, which MB copies as false) wins") {
		t.Errorf("delay_wgrad_compute: %v", err)
	}
	if err := r.ApplySet("comm_overlap.overlap_moe_expert_parallel_comm=false"); err != nil {
		t.Errorf("the key that wins: %v", err)
	}

	p := filepath.Join(t.TempDir(), "o.yaml")
	if err := os.WriteFile(p, []byte("model:\n  cuda_graph_impl: transformer_engine\n  overlap_moe_expert_parallel_comm: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = overlapRecipe(t, "0.4", on)
	err = r.LoadOverridesFile(p)
	if err == nil || !strings.HasPrefix(err.Error(), p+":3: field model.overlap_moe_expert_parallel_comm: the recipe's comm_overlap.overlap_moe_expert_parallel_comm (true) wins") {
		t.Errorf("file: %v", err)
	}
	if v, _ := r.Get("model.cuda_graph_impl"); v.Str != "none" {
		t.Errorf("a refused file was half applied: cuda_graph_impl %q", v.Str)
	}

	// Without a comm_overlap config the model's own field counts.
	if err := overlapRecipe(t, "0.4", nil).ApplySet("model.overlap_moe_expert_parallel_comm=true"); err != nil {
		t.Errorf("no comm_overlap: %v", err)
	}
}

// MB copies the comm_overlap config's value, False where it is unset, over
// the model's own, which the recipe may set too.
func TestCommOverlapConfigOverwritesTheModel(t *testing.T) {
	graph := append([]string{te, "model.cuda_graph_scope=[moe]", rngOn}, dropPad...)
	for _, tc := range []struct {
		settings map[string]string
		tc36     bool
	}{
		{map[string]string{"model.overlap_moe_expert_parallel_comm": "true"}, true},
		{map[string]string{"model.overlap_moe_expert_parallel_comm": "true", "comm_overlap.delay_wgrad_compute": "false"}, false},
		{map[string]string{"comm_overlap.overlap_moe_expert_parallel_comm": "true"}, true},
	} {
		r := overlapRecipe(t, "0.4", tc.settings)
		for _, s := range graph {
			if err := r.ApplySet(s); err != nil {
				t.Fatal(err)
			}
		}
		rep := Check(r, "0.4")
		fired := len(rep.Violations) > 0 && rep.Violations[0].ID == "TC-36"
		if fired != tc.tc36 || (!tc.tc36 && !rep.OK()) {
			t.Errorf("%v: %v", tc.settings, rep.Violations)
		}
	}
}

// A message about EP overlap names the key that turns it on, as the
// recipe spells it.
func TestOverlapHintsNameTheKeyThatCounts(t *testing.T) {
	graph := append([]string{te, "model.cuda_graph_scope=[moe]", rngOn}, dropPad...)
	for _, tc := range []struct {
		settings map[string]string
		sets     []string
		key      string
	}{
		{map[string]string{"comm_overlap.overlap_moe_expert_parallel_comm": "true"}, nil, "comm_overlap.overlap_moe_expert_parallel_comm"},
		{nil, []string{overlap}, "model.overlap_moe_expert_parallel_comm"},
	} {
		r := overlapRecipe(t, "0.4", tc.settings)
		for _, s := range append(graph, tc.sets...) {
			if err := r.ApplySet(s); err != nil {
				t.Fatal(err)
			}
		}
		rep := Check(r, "0.4")
		want := "EP communication overlap is on, " + tc.key + "=true: graph neither moe nor mlp, or set " + tc.key + "=false"
		if len(rep.Violations) != 1 || rep.Violations[0].ID != "TC-36" || rep.Violations[0].Hint != want {
			t.Errorf("%s: %+v", tc.key, rep.Violations)
		}
	}
}
