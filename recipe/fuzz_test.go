package recipe

import (
	"math"
	"strings"
	"testing"
)

// FuzzApplySet: no --set argument panics; a refusal is one line naming the
// flag; an accepted value is one the schema allows (in range, finite) and
// reads back through Get.
func FuzzApplySet(f *testing.F) {
	for _, s := range []string{
		"model.cuda_graph_warmup_steps=3", "model.cuda_graph_warmup_steps=-5", "model.cuda_graph_scope=[attn,moe_router]",
		"model.cuda_graph_scope=attn,mlp", "model.moe_expert_capacity_factor=1.0", "model.moe_expert_capacity_factor=nan",
		"model.moe_layer_freq=[0,1,1]", "model.recompute_granularity=null", "env.NCCL_GRAPH_REGISTER=1", "te_version=2.11",
		"model.tensor_model_parallel_size=9223372036854775807", "=", "model.hidden_dropout=1e309", "rng.te_rng_tracker='true'",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, arg string, g3 bool) {
		mb := "0.4"
		if g3 {
			mb = "0.6"
		}
		c, err := New(moeModel, layoutFor(moeModel), mb)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ApplySet(arg); err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "--set ") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q is not one --set line", msg)
			}
			return
		}
		key, _, _ := strings.Cut(arg, "=")
		key = strings.TrimSpace(key)
		f, known := c.field(key)
		v, ok := c.Get(key)
		switch {
		case !known:
			t.Fatalf("accepted unknown key %q", key)
		case f.Type == TString && !ok:
			return // a null environment variable unsets it
		case !ok:
			t.Fatalf("accepted %q but Get(%q) has nothing", arg, key)
		}
		if err := checkValue(f, v, c.gen); err != nil {
			t.Fatalf("accepted %q holds a value the schema refuses: %v", arg, err)
		}
		if f.Type == TFloat && (math.IsNaN(v.Float) || math.IsInf(v.Float, 0)) {
			t.Fatalf("accepted a non-finite %v", v.Float)
		}
		if f.Type == TInt && !v.Null && !f.inRange(v.Int) {
			t.Fatalf("accepted %d outside the field's range", v.Int)
		}
	})
}
