package recipe

import (
	"encoding/json"
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

// holdsOnStockRecipe applies the rendered YAML to the recipe without any
// --set and checks it as the search would (rules and capture plan).
func holdsOnStockRecipe(t *testing.T, m presets.Model, l presets.Layout, mb string, o Overrides) Report {
	t.Helper()
	data, err := o.Render("yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(m, l, mb)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ApplyYAML("winner.yaml", data); err != nil {
		t.Fatalf("the rules do not read the overrides: %v\n%s", err, data)
	}
	return CheckWithCapture(r, mb)
}

// A full-iteration winner of an MoE model searched with drop-and-pad
// experts carries the capacity factor and the padding, each with the
// capture failure it avoids, in every format; a --set it does not need is
// left out; and on the recipe without any --set the overrides pass the
// rules and the capture plan, in both generations.
func TestWinnerOverridesCarryTheSettingsTheyNeed(t *testing.T) {
	m, l := moeModel, layoutFor(moeModel)
	sets := map[string]string{"model.moe_router_padding_for_fp8": "false"}
	for k, v := range dropPadSets {
		sets[k] = v
	}
	for _, mb := range []string{"0.4", "0.6"} {
		t.Run("MB_"+mb, func(t *testing.T) {
			o := WinnerOverrides(Target{Model: m, Layout: l, MBridge: mb, Sets: sets}, fullIter)
			keys := entryKeys(o)
			if slices.Contains(keys, "model.moe_router_padding_for_fp8") {
				t.Errorf("a --set the candidate does not need is emitted: %v", keys)
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
					i := slices.Index(keys, k)
					if i < 0 {
						t.Fatalf("%s missing from %v", k, keys)
					}
					e := o.Entries[i]
					if e.Value != want.value || !strings.Contains(e.Why, "given with --set") || !strings.Contains(e.Why, want.why) {
						t.Errorf("%s = %v, why %q", k, e.Value, e.Why)
					}
				})
			}
			if rep := holdsOnStockRecipe(t, m, l, mb, o); !rep.OK() {
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
	// A candidate that holds on the dropless recipe needs none of them.
	o := WinnerOverrides(Target{Model: m, Layout: l, MBridge: "0.4", Sets: sets}, teAttn)
	if keys := entryKeys(o); !slices.Equal(keys, entryKeys(BuildOverrides(teAttn, presets.G2))) {
		t.Errorf("te attn carries %v", keys)
	}
}

// The layout's own settings are derived the same way: those the winner
// needs are emitted, the reason naming the layout.
func TestWinnerOverridesCarryLayoutSettings(t *testing.T) {
	m, l := moeModel, layoutFor(moeModel)
	l.Settings = map[string]string{"model.moe_shared_expert_overlap": "false"}
	for k, v := range dropPadSets {
		l.Settings[k] = v
	}
	o := WinnerOverrides(Target{Model: m, Layout: l, MBridge: "0.4"}, fullIter)
	keys := entryKeys(o)
	if slices.Contains(keys, "model.moe_shared_expert_overlap") {
		t.Errorf("a layout setting the candidate does not need is emitted: %v", keys)
	}
	i := slices.Index(keys, "model.moe_expert_capacity_factor")
	if i < 0 || !strings.Contains(o.Entries[i].Why, "set by the layout") {
		t.Fatalf("entries %+v", o.Entries)
	}
	bare := l.Clone()
	bare.Settings = nil
	if rep := holdsOnStockRecipe(t, m, bare, "0.4", o); !rep.OK() {
		t.Errorf("on the recipe without the layout's settings: %v", rep.Violations)
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
// be an override: when the candidate needs it, it is a note.
func TestWinnerOverridesNoteWhatIsNotARecipeField(t *testing.T) {
	sets := map[string]string{"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "env.NCCL_GRAPH_REGISTER": "0"}
	o := WinnerOverrides(Target{Model: denseModel, Layout: layoutFor(denseModel), MBridge: "0.4", Sets: sets}, teAttn)
	if len(o.Notes) != 1 || !strings.Contains(o.Notes[0], "env.NCCL_GRAPH_REGISTER=0") || !strings.Contains(o.Notes[0], "ARG-06") {
		t.Errorf("notes %q", o.Notes)
	}
	for _, k := range entryKeys(o) {
		if strings.HasPrefix(k, "env.") {
			t.Errorf("%s emitted as an override", k)
		}
	}
}
