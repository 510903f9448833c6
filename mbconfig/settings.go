package mbconfig

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"cgtune/presets"
	"cgtune/recipe"
)

// candidateKeys are the recipe fields of a CUDA-graph candidate: a layout
// carries the recipe's in CUDAGraph, not in Settings. The NaN checks are
// among them: MB's perf harness turns them off for every run
// (_benchmark_common) and a recipe outside it keeps them on
// (docs/sources.md), so the layout leaves them at the recipe default.
var candidateKeys = []string{
	"model.cuda_graph_impl", "model.cuda_graph_scope", "model.cuda_graph_modules", "model.cuda_graph_warmup_steps",
	"model.enable_cuda_graph", "model.external_cuda_graph", "model.use_te_rng_tracker", "rng.te_rng_tracker",
	"rerun_state_machine.check_for_nan_in_loss", "ddp.check_for_nan_in_grad",
}

// precisionKeys are the model fields of the mixed-precision recipe: the
// layout's Precision names the recipe, recipe.New writes its fields, and a
// file written before MB applies the recipe holds the provider's defaults
// there instead.
var precisionKeys = []string{"model.bf16", "model.fp16", "model.fp8", "model.fp8_recipe", "model.fp4", "model.fp4_recipe"}

// settingKeys are the recipe fields cgtune's rules can read in generation
// gen: the schema's, and the environment variables the rules read.
func settingKeys(gen presets.Generation) []string {
	var keys []string
	for _, f := range recipe.Schema(gen) {
		// The pipeline layout is the layout's own field (Config.pipeline
		// reads it, list or string): a setting would say it twice.
		if !slices.Contains(candidateKeys, f.Key) && !slices.Contains(precisionKeys, f.Key) && f.Key != "te_version" &&
			f.Key != "model.pipeline_model_parallel_layout" {
			keys = append(keys, f.Key)
		}
	}
	for _, r := range recipe.Rules() {
		for _, k := range r.Fields {
			if strings.HasPrefix(k, "env.") && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// settings are the recipe fields the rules read whose value in the file
// differs from what cgtune seeds a recipe of m on l with (recipe.New):
// with them, the layout's recipe reads as the file does.
func (c *Config) settings(m presets.Model, l presets.Layout, mbridge string) (map[string]string, error) {
	gen, err := presets.ParseMBridge(mbridge)
	if err != nil {
		return nil, err
	}
	l.Settings = nil
	base, err := recipe.New(m, l, mbridge)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.file, err)
	}
	out := map[string]string{}
	for _, k := range settingKeys(gen) {
		if m.Arch.MoE == nil && strings.HasPrefix(k, "model.moe_") {
			continue // nothing reads the MoE fields of a model without experts
		}
		if l.PagedStash == nil && strings.HasPrefix(k, "model.moe_paged_stash_buffer_size_factor_") {
			continue // read only with the stash on, which the layout's PagedStash carries
		}
		key := k
		if name, ok := strings.CutPrefix(k, "env."); ok {
			key = "env_vars." + name
		}
		n := c.node(key)
		if n == nil {
			continue // not in the file: the recipe default stands
		}
		v, ok := hydraValue(n)
		if !ok {
			return nil, c.fieldError(n, key, "want a value cgtune's rules can read, got %s", describe(n))
		}
		trial := base.Clone()
		if err := trial.ApplySet(k + "=" + v); err != nil {
			return nil, c.fieldError(n, key, "%s", strings.TrimPrefix(err.Error(), "--set "))
		}
		was, _ := base.Get(k)
		now, _ := trial.Get(k)
		if !sameValue(k, was, now, m.Arch.Layers) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// sameValue compares two values of a field; an integer moe_layer_freq N
// equals its per-layer list (layer i is MoE when i % N == 0, MCore
// transformer_config.py).
func sameValue(key string, a, b recipe.Value, layers int) bool {
	expand := func(v recipe.Value) recipe.Value {
		if v.IsList || v.Null || v.Int <= 0 || v.Str != "" || len(v.List) > 0 {
			return v
		}
		freq := make([]int, layers)
		for i := range freq {
			if i%v.Int == 0 {
				freq[i] = 1
			}
		}
		return recipe.Value{IsList: true, Ints: freq}
	}
	if a.IsList != b.IsList {
		a, b = expand(a), expand(b)
	}
	// An unset list and an empty one are one setting for offload_modules,
	// which MCore reads only with fine-grained offloading on; no MTP layers
	// is null or 0 alike (MCore transformer_config.py).
	empty := func(v recipe.Value) bool { return v.Null || v.List != nil && len(v.List) == 0 && !v.Scalar }
	if key == "model.offload_modules" && empty(a) && empty(b) {
		return true
	}
	zero := func(v recipe.Value) bool { return v.Null || v.Int == 0 }
	if key == "model.mtp_num_layers" && zero(a) && zero(b) {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// hydraValue renders a YAML value as a Hydra override value: scalars as
// written, null, names of enums and references, lists in brackets.
func hydraValue(n *yaml.Node) (string, bool) {
	switch {
	case isNull(n):
		return "null", true
	case n.Kind == yaml.SequenceNode:
		var parts []string
		for _, e := range n.Content {
			s, ok := name(e)
			if !ok || e.Kind == yaml.SequenceNode {
				return "", false
			}
			parts = append(parts, s)
		}
		return "[" + strings.Join(parts, ",") + "]", true
	}
	return name(n)
}
