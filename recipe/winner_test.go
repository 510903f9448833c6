package recipe

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"cgtune/presets"
)

var (
	fullIter    = presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 2}
	teAttn      = presets.Candidate{Impl: presets.ImplTE, Scopes: []string{presets.ScopeAttn}, Warmup: 3}
	dropPadSets = map[string]string{"model.moe_expert_capacity_factor": "1.0", "model.moe_pad_expert_input_to_capacity": "true"}
)

// entryKeys are the keys of the overrides' entries.
func entryKeys(o Overrides) []string {
	var out []string
	for _, e := range o.Entries {
		out = append(out, e.Key)
	}
	return out
}

// holdsOnStockRecipe applies the rendered YAML to the stock recipe of
// o's target (no --set, the layout Megatron-Bridge ships) and checks it as
// cgtune check does: the perf harness's own pass, the rules and the
// capture plan.
func holdsOnStockRecipe(t *testing.T, tg Target, o Overrides) Report {
	t.Helper()
	data, err := o.Render("yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := tg.Stock()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ApplyYAML("winner.yaml", data); err != nil {
		t.Fatalf("the rules do not read the overrides: %v\n%s", err, data)
	}
	if _, vs := ApplyHarness(r, tg.MBridge); len(vs) > 0 {
		return Report{Violations: vs}
	}
	return CheckWithCapture(r, tg.MBridge)
}

// entryOf is the entry of key, failing the test when there is none.
func entryOf(t *testing.T, o Overrides, key string) Entry {
	t.Helper()
	i := slices.Index(entryKeys(o), key)
	if i < 0 {
		t.Fatalf("%s missing from %v", key, entryKeys(o))
	}
	return o.Entries[i]
}

// A full-iteration winner of an MoE model searched with drop-and-pad
// experts carries the capacity factor and the padding, each with the
// capture failure it avoids, in every format; a --set that leaves the
// recipe's value as it was is not written; and on the recipe without any
// --set the overrides pass the rules and the capture plan, in both
// generations.
func TestWinnerOverridesCarryTheSettingsTheyNeed(t *testing.T) {
	m, l := moeModel, layoutFor(moeModel)
	sets := map[string]string{"model.moe_router_padding_for_fp8": "false"}
	for k, v := range dropPadSets {
		sets[k] = v
	}
	for _, mb := range []string{"0.4", "0.6"} {
		t.Run("MB_"+mb, func(t *testing.T) {
			tg := Target{Model: m, Layout: l, MBridge: mb, Sets: sets}
			o := WinnerOverrides(tg, fullIter)
			keys := entryKeys(o)
			if slices.Contains(keys, "model.moe_router_padding_for_fp8") {
				t.Errorf("a --set of the recipe's own value is emitted: %v", keys)
			}
			// Without the capacity factor Megatron-Core refuses the padding
			// (TC-43); without the padding the experts are dropless.
			for k, want := range map[string]struct {
				value any
				why   string
			}{
				"model.moe_expert_capacity_factor":       {1.0, "TC-43: moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity"},
				"model.moe_pad_expert_input_to_capacity": {true, WillFailID + ": dropless MoE syncs with the host"},
			} {
				t.Run(k, func(t *testing.T) {
					e := entryOf(t, o, k)
					if e.Value != want.value || !strings.Contains(e.Why, "given with --set") || !strings.Contains(e.Why, want.why) {
						t.Errorf("%s = %v, why %q", k, e.Value, e.Why)
					}
				})
			}
			if rep := holdsOnStockRecipe(t, tg, o); !rep.OK() {
				t.Errorf("on the stock recipe: %v", rep.Violations)
			}
			for _, f := range Formats {
				data, err := o.Render(f)
				if err != nil {
					t.Fatal(err)
				}
				got := string(data)
				if f == "json" {
					var obj map[string]any
					if err := json.Unmarshal(data, &obj); err != nil {
						t.Fatal(err)
					}
					why, _ := obj[JSONWhyKey].(map[string]any)
					if obj["model.moe_expert_capacity_factor"] != 1.0 || obj["model.moe_pad_expert_input_to_capacity"] != true ||
						!strings.Contains(why["model.moe_pad_expert_input_to_capacity"].(string), "dropless MoE") {
						t.Errorf("json:\n%s", got)
					}
					continue
				}
				if !strings.Contains(got, "moe_expert_capacity_factor") || !strings.Contains(got, "moe_pad_expert_input_to_capacity") ||
					!strings.Contains(got, "# ") || !strings.Contains(got, "dropless MoE syncs with the host") {
					t.Errorf("%s lacks the settings or why:\n%s", f, got)
				}
			}
		})
	}
	// A candidate that would hold on the dropless recipe was still ranked
	// with drop-and-pad experts: the overrides say so rather than leave it
	// out (the step it was ranked on is the drop-and-pad one).
	// The capacity factor is still needed by the padding beside it: MCore
	// refuses the padding without one (TC-43).
	o := WinnerOverrides(Target{Model: m, Layout: l, MBridge: "0.4", Sets: sets}, teAttn)
	if e := entryOf(t, o, "model.moe_pad_expert_input_to_capacity"); !strings.Contains(e.Why, "the search ranked the candidate with it") || strings.Contains(e.Why, "needed") {
		t.Errorf("padding: why %q", e.Why)
	}
	if e := entryOf(t, o, "model.moe_expert_capacity_factor"); !strings.Contains(e.Why, "TC-43") {
		t.Errorf("capacity factor: why %q", e.Why)
	}
}

// qwenH100 is the built-in qwen3_30b_a3b and its h100 layout, whose
// recipe turns EP communication overlap on.
func qwenH100(t *testing.T) (presets.Model, presets.Layout) {
	t.Helper()
	m, err := presets.LookupModel("qwen3_30b_a3b")
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Layout("h100")
	if err != nil {
		t.Fatal(err)
	}
	if l.Settings["comm_overlap.overlap_moe_expert_parallel_comm"] != "true" {
		t.Fatalf("the h100 recipe no longer overlaps EP communication: %v", l.Settings)
	}
	return m, l
}

// The headless case: qwen3_30b_a3b on h100 searched with
// drop-and-pad and EP communication overlap off (the h100 recipe turns
// it on). The overrides of the full-iteration winner carry all three (on
// MB 0.4, EP overlap off with the rule it avoids, TC-36), and on the
// stock h100 recipe they pass the rules and the capture plan.
func TestWinnerOverridesTurnTheRecipesEPOverlapOff(t *testing.T) {
	m, l := qwenH100(t)
	sets := map[string]string{"comm_overlap.overlap_moe_expert_parallel_comm": "false"}
	for k, v := range dropPadSets {
		sets[k] = v
	}
	for _, mb := range []string{"0.4", "0.6"} {
		t.Run("MB_"+mb, func(t *testing.T) {
			tg := Target{Model: m, Layout: l, MBridge: mb, Sets: sets}
			full := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 3}
			o := WinnerOverrides(tg, full)
			e := entryOf(t, o, "comm_overlap.overlap_moe_expert_parallel_comm")
			needed := strings.Contains(e.Why, "with the recipe's value (true)") && strings.Contains(e.Why, "TC-36")
			if e.Value != false || !strings.Contains(e.Why, "given with --set") || (mb == "0.4" && !needed) {
				t.Errorf("EP overlap = %v, why %q", e.Value, e.Why)
			}
			if rep := holdsOnStockRecipe(t, tg, o); !rep.OK() {
				t.Errorf("on the stock h100 recipe: %v", rep.Violations)
			}
			if !slices.ContainsFunc(o.Notes, func(n string) bool { return strings.Contains(n, "tokens over an expert's capacity are dropped") }) {
				t.Errorf("nothing says drop-and-pad drops tokens: %q", o.Notes)
			}
		})
	}
	// The recipe's own dropless experts need no such line.
	if o := WinnerOverrides(Target{Model: m, Layout: l, MBridge: "0.4"}, teAttn); slices.ContainsFunc(o.Notes, func(n string) bool { return strings.Contains(n, "dropped") }) {
		t.Errorf("a dropless winner says tokens are dropped: %q", o.Notes)
	}
}

// A team preset's layout (or the TUI's layout editor) that differs from
// the built-in recipe's: what it changed is written, each saying it came
// from the search's layout, and what no override can change is a note.
func TestWinnerOverridesCarryTheSearchsLayout(t *testing.T) {
	m, stock := qwenH100(t)
	l := stock.Clone()
	l.TP, l.GBS, l.NumGPUs = 2, stock.GBS*2, stock.NumGPUs*2
	l.Settings["comm_overlap.overlap_moe_expert_parallel_comm"] = "false"
	for k, v := range dropPadSets {
		l.Settings[k] = v
	}
	tg := Target{Model: m, Layout: l, MBridge: "0.4"}
	o := WinnerOverrides(tg, teAttn)
	for k, want := range map[string]any{"model.tensor_model_parallel_size": 2, "train.global_batch_size": stock.GBS * 2,
		"comm_overlap.overlap_moe_expert_parallel_comm": false, "model.moe_expert_capacity_factor": 1.0} {
		if e := entryOf(t, o, k); e.Value != want || !strings.Contains(e.Why, "the search's layout sets it") {
			t.Errorf("%s = %v (want %v), why %q", k, e.Value, want, e.Why)
		}
	}
	for _, k := range entryKeys(o) {
		if _, ok := stock.Settings[k]; ok && k != "comm_overlap.overlap_moe_expert_parallel_comm" {
			t.Errorf("%s, a setting of the recipe itself, is written", k)
		}
	}
	if !slices.ContainsFunc(o.Notes, func(n string) bool { return strings.Contains(n, fmt.Sprintf("GPUs %d", l.NumGPUs)) }) {
		t.Errorf("the GPU count is not noted: %q", o.Notes)
	}
	if rep := holdsOnStockRecipe(t, tg, o); !rep.OK() {
		t.Errorf("on the stock recipe: %v", rep.Violations)
	}
}

// The companions say what needs them, found by leaving them out (the two
// RNG-tracker fields together, since MB keeps them in sync). MB's start-up
// has no rule on the gradient NaN check (only Megatron-LM's launcher has,
// ARG-03), so nothing names one for it.
func TestWinnerOverridesExplainCompanions(t *testing.T) {
	o := WinnerOverrides(Target{Model: denseModel, Layout: layoutFor(denseModel), MBridge: "0.4"}, fullIter)
	if i := slices.Index(entryKeys(o), KeyNaNGrad); i < 0 || o.Entries[i].Why != "" {
		t.Errorf("%s: entries %+v", KeyNaNGrad, o.Entries)
	}
	for k, id := range map[string]string{
		KeyNaNLoss: "MB-03", KeyModelRNG: "MB-01", KeyRNG: "MB-01",
	} {
		t.Run(k, func(t *testing.T) {
			i := slices.Index(entryKeys(o), k)
			if i < 0 || !strings.Contains(o.Entries[i].Why, id+": ") {
				t.Errorf("%s: why %q, want %s", k, o.Entries[i].Why, id)
			}
		})
	}
	for _, e := range o.Entries {
		if slices.Contains(graphKeys, e.Key) && e.Why != "" {
			t.Errorf("%s is the graph setting itself; why %q", e.Key, e.Why)
		}
	}
}

// A setting that is not a recipe field (an environment variable) cannot
// be an override: it is a note, with what needs it.
func TestWinnerOverridesNoteWhatIsNotARecipeField(t *testing.T) {
	sets := map[string]string{"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "env.NCCL_GRAPH_REGISTER": "0"}
	o := WinnerOverrides(Target{Model: denseModel, Layout: layoutFor(denseModel), MBridge: "0.4", Sets: sets}, teAttn)
	var nccl []string
	for _, n := range o.Notes {
		if strings.Contains(n, "env.NCCL_GRAPH_REGISTER=0") {
			nccl = append(nccl, n)
		}
	}
	if len(o.Notes) != 2 || len(nccl) != 1 || !strings.Contains(nccl[0], "ARG-06") || !strings.Contains(nccl[0], "with the recipe's value (unset)") {
		t.Errorf("notes %q", o.Notes)
	}
	for _, k := range entryKeys(o) {
		if strings.HasPrefix(k, "env.") {
			t.Errorf("%s emitted as an override", k)
		}
	}
}

// mbOf is a Megatron-Bridge release of generation gen whose spelling is
// the generation's own (0.5 spells transformer_engine scopes its own way).
func mbOf(gen presets.Generation) string {
	if gen >= presets.G3 {
		return "0.6"
	}
	return "0.4"
}
