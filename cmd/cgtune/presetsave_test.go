package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
)

// planRejections counts the plan's rejected configurations by rule id.
func planRejections(t *testing.T, events string) map[string]int {
	t.Helper()
	for _, l := range strings.Split(events, "\n") {
		var ev struct {
			Event string
			Space []search.Planned
		}
		if json.Unmarshal([]byte(l), &ev) != nil || ev.Event != "plan" {
			continue
		}
		ids := map[string]int{}
		for _, p := range ev.Space {
			if !p.Valid() {
				ids[p.Violations[0].ID]++
			}
		}
		return ids
	}
	t.Fatalf("no plan event:\n%.2000s", events)
	return nil
}

// preset save takes the layout flags and --set, so a drop-and-pad preset
// is made headless: the saved preset shows its layout and settings, and a
// search of it no longer rejects the MoE graphs that only drop-and-pad
// experts allow, as the same layout without the settings does.
func TestPresetSaveLayoutFlagsAndSet(t *testing.T) {
	isolate(t)
	user := presetEnv(t, "")
	dnp := []string{"--set", "model.moe_expert_capacity_factor=1.0", "--set", "model.moe_pad_expert_input_to_capacity=true"}
	// A small space: whole-layer and MoE graphs, which only drop-and-pad
	// experts allow, and the attention beside them.
	space := []string{"--impls", "none,transformer_engine", "--scopes", ";moe;attn;moe_router,moe_preprocess", "--warmups", "3"}
	code, out, errb := cgtune(t, append(append([]string{"preset", "save", "dnp", "--model", "qwen3_30b_a3b", "--gpu-type", "h100", "--ep", "8", "--gbs", "512"}, space...), dnp...)...)
	if code != exitOK {
		t.Fatalf("save: exit %d %s", code, errb)
	}
	if code, _, errb := cgtune(t, append([]string{"preset", "save", "plain", "--model", "qwen3_30b_a3b", "--gpu-type", "h100", "--ep", "8", "--gbs", "512"}, space...)...); code != exitOK {
		t.Fatalf("save plain: exit %d %s", code, errb)
	}
	p, err := presets.NewStore("", "", filepath.Dir(filepath.Dir(user))).Load("dnp")
	if err != nil {
		t.Fatal(err)
	}
	def, _ := mustModel(t, "qwen3_30b_a3b").Layout("h100")
	if p.Layout.EP != 8 || p.Layout.GBS != 512 || p.Layout.TP != def.TP || p.Layout.Settings["model.moe_expert_capacity_factor"] != "1.0" ||
		p.Layout.Settings["model.moe_pad_expert_input_to_capacity"] != "true" || !strings.Contains(p.Layout.Source, "edited with cgtune preset save: --ep 8 --gbs 512") {
		t.Errorf("saved layout %+v", p.Layout)
	}
	code, out, errb = cgtune(t, "preset", "show", "dnp")
	if code != exitOK || !strings.Contains(out, "model.moe_expert_capacity_factor: \"1.0\"") || !strings.Contains(out, "ep: 8") {
		t.Errorf("show: exit %d\n%s%s", code, out, errb)
	}
	rejected := map[string]map[string]int{}
	for _, name := range []string{"dnp", "plain"} {
		code, _, errb := cgtune(t, "--headless", "--preset", name, "--engine", "estimate", "--json")
		if code != exitOK {
			t.Fatalf("search of %s: exit %d\n%.3000s", name, code, errb)
		}
		rejected[name] = planRejections(t, errb)
	}
	// TC-22: "moe cuda graph is only supported with drop-padding MoE."
	if rejected["plain"]["TC-22"] == 0 || rejected["plain"][recipe.WillFailID] == 0 {
		t.Fatalf("the dropless layout rejects no MoE graph: %v", rejected["plain"])
	}
	if rejected["dnp"]["TC-22"] != 0 || rejected["dnp"][recipe.WillFailID] != 0 {
		t.Errorf("the drop-and-pad preset still rejects MoE graphs: %v", rejected["dnp"])
	}
}

// preset save refuses, naming the flag, a layout the preset file would
// refuse, a --set the layout decides, a field the recipe does not have,
// and writes nothing.
func TestPresetSaveLayoutRefusals(t *testing.T) {
	user := presetEnv(t, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tp", "3"}, "preset save bad (--tp 3): layout for h100: tp×pp×cp = 3×1×1 = 3 does not divide num_gpus 16"},
		{[]string{"--mbs", "-1"}, "--mbs -1: allowed: 0 or more"},
		{[]string{"--precision", "fp9"}, `--precision "fp9": allowed: bf16`},
		{[]string{"--dispatcher", "carrier-pigeon"}, `--dispatcher "carrier-pigeon": allowed: alltoall, allgather, flex`},
		{[]string{"--set", "model.tensor_model_parallel_size=2"}, "--set model.tensor_model_parallel_size: the layout decides it; give --tp"},
		{[]string{"--set", "model.bogus=1"}, "unknown field model.bogus"},
		{[]string{"--set", "novalue"}, `--set "novalue": want KEY=VALUE`},
	} {
		t.Run(argsName(tc.args), func(t *testing.T) {
			code, _, errb := cgtune(t, append([]string{"preset", "save", "bad", "--model", "qwen3_30b_a3b", "--gpu-type", "h100"}, tc.args...)...)
			if code != exitBadInput || !strings.Contains(errb, tc.want) || strings.Count(strings.TrimSpace(errb), "\n") != 0 {
				t.Errorf("exit %d %q, want 2 and %q", code, errb, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(user, "bad.yaml")); !os.IsNotExist(err) {
		t.Errorf("a refused preset was written: %v", err)
	}
	if code, _, errb := cgtune(t, "preset", "save", "dense", "--model", "llama3_8b", "--dispatcher", "alltoall"); code != exitBadInput || !strings.Contains(errb, "no MoE layers") {
		t.Errorf("--dispatcher on a dense model: exit %d %q", code, errb)
	}
}
