package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lfPreset is the lf.yaml: qwen3_30b_a3b on h100 (whose recipe
// turns EP communication overlap on), MB 0.4, full-iteration graphs only.
const lfPreset = `version: 1
name: lf
model: qwen3_30b_a3b
gpu: h100
space:
  impls: [local]
  scopes:
    - [full_iteration]
  warmups: [3]
mbridge: "0.4"
`

// The headless case: the winner needs drop-and-pad and EP overlap
// off; the file --emit writes carries all three, and on the stock h100
// recipe cgtune check calls it valid, in every format check reads (YAML)
// and as the JSON object (the same entries).
func TestHeadlessEmitHoldsOnTheStockRecipe(t *testing.T) {
	isolate(t)
	preset := writeFile(t, "lf.yaml", lfPreset)
	dir := t.TempDir()
	out := filepath.Join(dir, "o.yaml")
	code, stdout, errb := cgtune(t, "--headless", "--preset", preset, "--engine", "estimate", "--strategy", "exhaustive", "--tie", "0%",
		"--set", "model.moe_expert_capacity_factor=1.0", "--set", "model.moe_pad_expert_input_to_capacity=true",
		"--set", "comm_overlap.overlap_moe_expert_parallel_comm=false", "--emit", out, "--json")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errb)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cuda_graph_scope: [full_iteration]", "moe_expert_capacity_factor: 1.0", "moe_pad_expert_input_to_capacity: true",
		"comm_overlap:\n  # needed (given with --set): with the recipe's value (true), TC-36"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the overrides lack %q:\n%s", want, data)
		}
	}
	code, got, errb := cgtune(t, "check", "--model", "qwen3_30b_a3b", "--gpu-type", "h100", out)
	if code != exitOK || got != "valid\n" {
		t.Errorf("check: exit %d, %q %q", code, got, errb)
	}
	var res struct {
		OverridesObject map[string]map[string]any `json:"overrides_object"`
		OverridesWhy    map[string]string         `json:"overrides_why"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.OverridesObject["comm_overlap"]["overlap_moe_expert_parallel_comm"] != false ||
		!strings.Contains(res.OverridesWhy["comm_overlap.overlap_moe_expert_parallel_comm"], "TC-36") {
		t.Errorf("--json overrides_object %v, overrides_why %v", res.OverridesObject, res.OverridesWhy)
	}
}

// The emit case on MB 0.5, whose harness asserts that a
// transformer_engine recipe's cuda_graph_scope is a list: emit writes the
// whole layer as cuda_graph_scope: [], which check calls valid; the file
// emit used to write (cuda_graph_scope: null) check calls invalid, as the
// harness would.
func TestEmitTEForMB05HoldsInItsHarness(t *testing.T) {
	code, out, errb := cgtune(t, "emit", "--impl", "transformer_engine", "--warmup", "3", "--mbridge", "0.5", "--format", "yaml")
	if code != exitOK || !strings.Contains(out, "  cuda_graph_scope: []\n") || strings.Contains(out, "cuda_graph_scope: null") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errb)
	}
	p := writeFile(t, "te.yaml", out)
	if code, got, errb := cgtune(t, "check", "--model", "llama3_8b", "--mbridge", "0.5", p); code != exitOK || got != "valid\n" {
		t.Errorf("check of what emit wrote: exit %d, %q %q", code, got, errb)
	}
	old := writeFile(t, "old.yaml", "model:\n  cuda_graph_impl: transformer_engine\n  cuda_graph_modules: []\n  cuda_graph_scope: null\n"+
		"  cuda_graph_warmup_steps: 3\n  use_te_rng_tracker: true\nrng:\n  te_rng_tracker: true\n")
	if code, got, _ := cgtune(t, "check", "--model", "llama3_8b", "--mbridge", "0.5", old); code != exitInvalid || !strings.HasPrefix(got, "PERF-05: Invalid cuda graph scope: None") {
		t.Errorf("check of a null scope on MB 0.5: exit %d, %q", code, got)
	}
}
