package recipe

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cgtune/presets"
)

func newCfg(t *testing.T, m presets.Model, mb string) *Recipe {
	t.Helper()
	c, err := New(m, layoutFor(m), mb)
	if err != nil {
		t.Fatalf("NewConfig: %v", err)
	}
	return c
}

func TestNewConfigDefaults(t *testing.T) {
	c := newCfg(t, deepseekModel, "0.4")
	get := func(k string) Value {
		v, ok := c.Get(k)
		if !ok {
			t.Fatalf("no value for %s", k)
		}
		return v
	}
	if v := get("model.num_moe_experts"); v.Null || v.Int != 8 {
		t.Errorf("num_moe_experts = %+v", v)
	}
	if v := get("model.moe_layer_freq"); !v.IsList || !slices.Equal(v.Ints, []int{0, 1, 1, 1}) {
		t.Errorf("moe_layer_freq = %+v, want [0 1 1 1]", v)
	}
	if v := get("model.moe_shared_expert_intermediate_size"); v.Null || v.Int != 512 {
		t.Errorf("shared expert = %+v", v)
	}
	if v := get("model.expert_model_parallel_size"); v.Int != 8 {
		t.Errorf("EP = %d", v.Int)
	}
	if v := get("model.cuda_graph_warmup_steps"); v.Int != 3 {
		t.Errorf("warmup = %d", v.Int)
	}
	if v := get("model.moe_expert_capacity_factor"); !v.Null {
		t.Errorf("capacity factor = %+v, want null", v)
	}
	if !get("rerun_state_machine.check_for_nan_in_loss").Bool || !get("ddp.check_for_nan_in_grad").Bool {
		t.Error("NaN checks should default on")
	}
	if v := get("te_version"); v.Str != "2.14.0" {
		t.Errorf("te_version for MB 0.4 = %q", v.Str)
	}
	if v := get("env.NCCL_GRAPH_REGISTER"); v.Str != "" {
		t.Errorf("unset env reads %q", v.Str)
	}
	if _, ok := c.Get("model.cuda_graph_modules"); ok {
		t.Error("G2 config has cuda_graph_modules")
	}

	d := newCfg(t, moeModel, "0.6")
	if v, _ := d.Get("model.moe_layer_freq"); v.IsList || v.Int != 1 {
		t.Errorf("all-MoE moe_layer_freq = %+v, want 1", v)
	}
	if v, ok := d.Get("model.cuda_graph_modules"); !ok || !v.Scalar || v.Str != "full" {
		t.Errorf("G3 cuda_graph_modules = %+v, want \"full\"", v)
	}
	if v, _ := d.Get("te_version"); v.Str != "2.17.1" {
		t.Errorf("te_version for MB 0.6 = %q", v.Str)
	}

	l := layoutFor(denseModel)
	l.Precision = "fp8mx"
	l.RecomputeModules = []string{"mlp"}
	e, err := New(denseModel, l, "0.4")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := e.Get("model.fp8"); v.Str != "e4m3" {
		t.Errorf("fp8mx fp8 = %+v", v)
	}
	if v, _ := e.Get("model.fp8_recipe"); v.Str != "mxfp8" {
		t.Errorf("fp8mx recipe = %+v", v)
	}
	if v, _ := e.Get("model.recompute_granularity"); v.Str != "selective" {
		t.Errorf("granularity = %+v", v)
	}

	if _, err := New(denseModel, l, "0.9"); err == nil || !strings.Contains(err.Error(), `unknown Megatron-Bridge version "0.9"`) {
		t.Errorf("bad version: %v", err)
	}
	l.Precision = "fp6"
	if _, err := New(denseModel, l, "0.4"); err == nil || !strings.Contains(err.Error(), `unknown precision "fp6"`) {
		t.Errorf("bad precision: %v", err)
	}
}

func TestApplyYAML(t *testing.T) {
	c := newCfg(t, moeModel, "0.6")
	doc := `
model:
  cuda_graph_impl: transformer_engine
  cuda_graph_modules: [attn, moe_router, moe_preprocess]
  cuda_graph_scope: null
  cuda_graph_warmup_steps: 2
  moe_expert_capacity_factor: 1
  moe_token_dispatcher_type: flex
  moe_layer_freq: [0, 1, 1, 1]
rng:
  te_rng_tracker: true
dataset:
  offline_packing_specs:
    pad_cu_seqlens: true
env:
  NCCL_GRAPH_REGISTER: 0
te_version: 2.11
`
	if err := c.ApplyYAML("o.yaml", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	want := map[string]Value{
		"model.cuda_graph_impl":                        {Str: "transformer_engine"},
		"model.cuda_graph_modules":                     {List: []string{"attn", "moe_router", "moe_preprocess"}},
		"model.cuda_graph_scope":                       {Null: true},
		"model.cuda_graph_warmup_steps":                {Int: 2},
		"model.moe_expert_capacity_factor":             {Float: 1},
		"model.moe_layer_freq":                         {IsList: true, Ints: []int{0, 1, 1, 1}},
		"rng.te_rng_tracker":                           {Bool: true},
		"dataset.offline_packing_specs.pad_cu_seqlens": {Bool: true},
		"env.NCCL_GRAPH_REGISTER":                      {Str: "0"},
		"te_version":                                   {Str: "2.11"},
	}
	for k, w := range want {
		t.Run(k, func(t *testing.T) {
			got, _ := c.Get(k)
			if got.Null != w.Null || got.Bool != w.Bool || got.Int != w.Int || got.Float != w.Float || got.Str != w.Str ||
				!slices.Equal(got.List, w.List) || !slices.Equal(got.Ints, w.Ints) || got.IsList != w.IsList {
				t.Errorf("%s = %+v, want %+v", k, got, w)
			}
		})
	}
	if r := Check(c, "0.6"); !r.OK() {
		t.Errorf("valid file reported %v", r.Violations)
	}
}

func TestApplyYAMLErrors(t *testing.T) {
	cases := []struct {
		mb, doc, want string
	}{
		{"0.4", "model:\n  cuda_graph_impl: transformer_engine\n  xyz: 1\n", "o.yaml:3: unknown field model.xyz"},
		{"0.4", "model:\n  cuda_graph_modules: [attn]\n",
			"o.yaml:2: unknown field model.cuda_graph_modules (Megatron-Bridge 0.4 is G2: it has no such field; use model.cuda_graph_scope)"},
		{"0.6", "model:\n  cuda_graph_impl: foo\n",
			`o.yaml:2: field model.cuda_graph_impl: bad value "foo" (allowed: none, local, transformer_engine, full_iteration)`},
		{"0.6", "model:\n  cuda_graph_modules:\n    - attn\n    - atn\n",
			`o.yaml:4: field model.cuda_graph_modules: bad value "atn" (allowed: a list of: full, full_iteration, attn, mlp, moe, moe_router, moe_preprocess, mamba, null)`},
		{"0.4", "model:\n  cuda_graph_scope: attn,mlpp\n",
			`o.yaml:2: field model.cuda_graph_scope: bad value "mlpp" (allowed: a list of: full, full_iteration, attn, mlp, moe, moe_router, moe_preprocess, mamba, null)`},
		{"0.4", "model:\n  cpu_offloading: yes\n", `o.yaml:2: field model.cpu_offloading: bad value "yes" (allowed: true, false)`},
		{"0.4", "model:\n  cuda_graph_warmup_steps: 2.5\n", `o.yaml:2: field model.cuda_graph_warmup_steps: bad value "2.5" (allowed: an integer from 0 to 1000)`},
		{"0.4", "model:\n  tensor_model_parallel_size: 0\n", `o.yaml:2: field model.tensor_model_parallel_size: bad value "0" (allowed: an integer from 1 to 65536)`},
		{"0.4", "model:\n  cuda_graph_impl: null\n", `o.yaml:2: field model.cuda_graph_impl: bad value "null" (allowed: none, local, transformer_engine, full_iteration)`},
		{"0.4", "model:\n  cuda_graph_impl: [local]\n", `o.yaml:2: field model.cuda_graph_impl: bad value "[local]" (allowed: none, local, transformer_engine, full_iteration)`},
		{"0.4", "model:\n  cuda_graph_impl: {a: 1}\n", `o.yaml:2: field model.cuda_graph_impl: bad value "a mapping" (allowed: none, local, transformer_engine, full_iteration)`},
		{"0.4", "model: 3\n", `o.yaml:1: field model: expected a mapping of fields, got "3"`},
		{"0.4", "train:\n  train_iters: 5\n", "o.yaml:2: unknown field train.train_iters"},
		{"0.4", "optimizer_x:\n  lr: 5\n", "o.yaml:1: unknown field optimizer_x"},
		{"0.4", "model:\n  cpu_offloading: true\n  cpu_offloading: false\n", "o.yaml:3: field model.cpu_offloading: set twice in this file"},
		// yaml.v3 reports the line where the enclosing block starts.
		{"0.4", "model:\n  a: 1\n b: 2\n", "o.yaml:2: did not find expected key"},
		{"0.4", "te_version: latest\n", `o.yaml:1: field te_version: bad value "latest" (allowed: a version such as 2.11 or 2.11.0)`},
		{"0.4", "env:\n  BAD-NAME: 1\n", "o.yaml:2: bad environment variable name in env.BAD-NAME"},
		{"0.4", "a: 1\n---\nb: 2\n", "o.yaml:2: a second YAML document; an overrides file holds one"},
		{"0.4", "model:\n  moe_layer_freq: [0, 2]\n", `o.yaml:2: field model.moe_layer_freq: bad value "2" (allowed: an integer, or a list of 0 and 1 per layer)`},
		{"0.4", "model:\n  offload_modules: [fused_group_mlp]\n",
			`o.yaml:2: field model.offload_modules: bad value "fused_group_mlp" (allowed: a list of: attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm, expert_fc1, moe_act, null)`},
		{"0.4", "model:\n  recompute_modules: [mla_up_proj, mhc]\n",
			`o.yaml:2: field model.recompute_modules: bad value "mhc" (allowed: a list of: core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts, null)`},
	}
	for _, tc := range cases {
		t.Run(tc.mb, func(t *testing.T) {
			c := newCfg(t, moeModel, tc.mb)
			before := c.Clone()
			err := c.ApplyYAML("o.yaml", []byte(tc.doc))
			if err == nil || err.Error() != tc.want {
				t.Errorf("%q:\n got: %v\nwant: %s", tc.doc, err, tc.want)
			}
			if !slices.Equal(c.Keys(), before.Keys()) {
				t.Errorf("%q: a failed file changed the config", tc.doc)
			}
			if v, _ := c.Get("model.cuda_graph_impl"); v.Str != "none" {
				t.Errorf("%q: a failed file changed cuda_graph_impl to %q", tc.doc, v.Str)
			}
		})
	}
}

func TestLoadOverridesFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "o.yaml")
	if err := os.WriteFile(p, []byte("model:\n  cuda_graph_impl: local\n  bogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCfg(t, denseModel, "0.4")
	if err := c.LoadOverridesFile(p); err == nil || err.Error() != p+":3: unknown field model.bogus" {
		t.Errorf("got %v", err)
	}
	if err := c.LoadOverridesFile(filepath.Join(dir, "missing.yaml")); err == nil || !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.LoadOverridesFile(empty); err != nil {
		t.Errorf("empty file: %v", err)
	}
}

func TestApplySet(t *testing.T) {
	c := newCfg(t, moeModel, "0.6")
	for _, s := range []string{
		"model.cuda_graph_modules=[attn, moe_router]",
		"model.cuda_graph_scope=null",
		"model.recompute_modules=core_attn,mlp",
		"model.offload_modules=[]",
		"model.moe_expert_capacity_factor=1",
		"model.use_te_rng_tracker=True",
		"env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
		"model.moe_token_dispatcher_type='flex'",
		"model.mtp_num_layers=+1",
	} {
		t.Run(s, func(t *testing.T) {
			if err := c.ApplySet(s); err != nil {
				t.Errorf("%s: %v", s, err)
			}
		})
	}
	check := func(k string, ok func(Value) bool) {
		if v, _ := c.Get(k); !ok(v) {
			t.Errorf("%s = %+v", k, v)
		}
	}
	check("model.cuda_graph_modules", func(v Value) bool { return slices.Equal(v.List, []string{"attn", "moe_router"}) && !v.Scalar })
	check("model.cuda_graph_scope", func(v Value) bool { return v.Null })
	check("model.recompute_modules", func(v Value) bool { return slices.Equal(v.List, []string{"core_attn", "mlp"}) })
	check("model.offload_modules", func(v Value) bool { return !v.Null && len(v.List) == 0 })
	check("model.moe_expert_capacity_factor", func(v Value) bool { return !v.Null && v.Float == 1 })
	check("model.use_te_rng_tracker", func(v Value) bool { return v.Bool })
	check("env.PYTORCH_CUDA_ALLOC_CONF", func(v Value) bool { return v.Str == "expandable_segments:True" })
	check("model.moe_token_dispatcher_type", func(v Value) bool { return v.Str == "flex" })
	check("model.mtp_num_layers", func(v Value) bool { return v.Int == 1 && !v.Null })

	errs := []struct{ set, mb, want string }{
		{"model.xyz=1", "0.6", "--set model.xyz=1: unknown field model.xyz"},
		{"model.cuda_graph_impl=foo", "0.6",
			`--set model.cuda_graph_impl=foo: field model.cuda_graph_impl: bad value "foo" (allowed: none, local, transformer_engine, full_iteration)`},
		{"model.cuda_graph_scope=[attn,bogus]", "0.4",
			`--set model.cuda_graph_scope=[attn,bogus]: field model.cuda_graph_scope: bad value "bogus" (allowed: a list of: full, full_iteration, attn, mlp, moe, moe_router, moe_preprocess, mamba, null)`},
		{"model.cuda_graph_modules=[attn]", "0.4",
			"--set model.cuda_graph_modules=[attn]: unknown field model.cuda_graph_modules (Megatron-Bridge 0.4 is G2: it has no such field; use model.cuda_graph_scope)"},
		{"model.gtp_weight_remat_size=2", "0.4",
			"--set model.gtp_weight_remat_size=2: unknown field model.gtp_weight_remat_size (Megatron-Bridge 0.4 is G2: it has no such field)"},
		{"model.cpu_offloading", "0.4", "--set model.cpu_offloading: expected KEY=VALUE"},
		{"=1", "0.4", "--set =1: expected KEY=VALUE"},
		{"model.cpu_offloading=1", "0.4", `--set model.cpu_offloading=1: field model.cpu_offloading: bad value "1" (allowed: true, false)`},
		{"model.cuda_graph_warmup_steps=1.5", "0.4", `--set model.cuda_graph_warmup_steps=1.5: field model.cuda_graph_warmup_steps: bad value "1.5" (allowed: an integer from 0 to 1000)`},
		{"model.cuda_graph_impl=local,none", "0.4",
			`--set model.cuda_graph_impl=local,none: field model.cuda_graph_impl: bad value "local,none" (allowed: none, local, transformer_engine, full_iteration)`},
		{"model.num_moe_experts=[1]", "0.4", `--set model.num_moe_experts=[1]: field model.num_moe_experts: bad value "[1]" (allowed: an integer from 1 to 4096, null)`},
		{"model.cuda_graph_warmup_steps=null", "0.4",
			`--set model.cuda_graph_warmup_steps=null: field model.cuda_graph_warmup_steps: bad value "null" (allowed: an integer from 0 to 1000)`},
		{"model.attention_dropout=nan", "0.4", `--set model.attention_dropout=nan: field model.attention_dropout: bad value "nan" (allowed: a probability: a number from 0 up to but not including 1)`},
		{"+model.foo=1", "0.4", "--set +model.foo=1: unknown field +model.foo"},
	}
	for _, e := range errs {
		t.Run(e.set, func(t *testing.T) {
			c := newCfg(t, moeModel, e.mb)
			if err := c.ApplySet(e.set); err == nil || err.Error() != e.want {
				t.Errorf("--set %s:\n got: %v\nwant: %s", e.set, err, e.want)
			}
		})
	}
}

func TestSchemaGenerations(t *testing.T) {
	has := func(gen presets.Generation, key string) bool {
		return slices.ContainsFunc(Schema(gen), func(f Field) bool { return f.Key == key })
	}
	for _, k := range []string{"model.cuda_graph_modules", "model.gtp_weight_remat_size", "model.fine_grained_offloading_max_inflight_offloads"} {
		if has(presets.G2, k) || !has(presets.G3, k) {
			t.Errorf("%s: G2 %v, G3 %v; want G3 only", k, has(presets.G2, k), has(presets.G3, k))
		}
	}
	if !has(presets.G2, "model.cuda_graph_scope") || !has(presets.G3, "model.cuda_graph_scope") {
		t.Error("cuda_graph_scope must exist in both generations")
	}
}

func TestCheckDoesNotModifyConfig(t *testing.T) {
	c := newCfg(t, moeModel, "0.6")
	for _, s := range []string{"model.cuda_graph_impl=local", "model.cuda_graph_modules=[moe_router]", "model.cuda_graph_scope=null", "rng.te_rng_tracker=true"} {
		if err := c.ApplySet(s); err != nil {
			t.Fatal(err)
		}
	}
	before := c.Clone()
	r := Check(c, "0.6")
	if r.OK() {
		t.Fatal("local per-layer graph passed MB 0.6")
	}
	for _, k := range before.Keys() {
		a, _ := before.Get(k)
		b, _ := c.Get(k)
		if a.Str != b.Str || a.Bool != b.Bool || !slices.Equal(a.List, b.List) || a.Null != b.Null {
			t.Errorf("Check changed %s: %+v -> %+v", k, a, b)
		}
	}
	if r := Check(c, "0.4"); r.OK() || r.Violations[0].ID != ConfigID ||
		r.Violations[0].Message != "the configuration was read for G3, but Megatron-Bridge 0.4 is G2" {
		t.Errorf("generation mismatch: %v", r.Violations)
	}
}

// --set refuses values out of a field's range, naming the range: a
// warm-up below 0 or past 1000 (as the harness flag --warmup does), sizes
// past their upper bound, non-finite numbers and dropouts of 1 or more.
func TestApplySetRejectsOutOfRange(t *testing.T) {
	m, l := moeModel, layoutFor(moeModel)
	for _, tc := range []struct{ set, want string }{
		{"model.cuda_graph_warmup_steps=-5", `bad value "-5" (allowed: an integer from 0 to 1000)`},
		{"model.cuda_graph_warmup_steps=1001", `bad value "1001" (allowed: an integer from 0 to 1000)`},
		{"model.tensor_model_parallel_size=4611686018427387904", `bad value "4611686018427387904" (allowed: an integer from 1 to 65536)`},
		{"model.num_moe_experts=99999999999999999999", `bad value "99999999999999999999"`},
		{"model.moe_expert_capacity_factor=nan", `bad value "nan" (allowed: a number, null)`},
		{"model.moe_expert_capacity_factor=1e309", `bad value "1e309" (allowed: a number, null)`},
		{"model.hidden_dropout=inf", `bad value "inf" (allowed: a probability: a number from 0 up to but not including 1)`},
		{"model.attention_dropout=1", `bad value "1" (allowed: a probability`},
	} {
		t.Run(tc.set, func(t *testing.T) {
			c, err := New(m, l, "0.4")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.ApplySet(tc.set); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("--set %s: %v; want %s", tc.set, err, tc.want)
			}
		})
	}
	c, _ := New(m, l, "0.4")
	for _, ok := range []string{"model.cuda_graph_warmup_steps=0", "model.cuda_graph_warmup_steps=1000", "model.moe_expert_capacity_factor=1e3"} {
		t.Run(ok, func(t *testing.T) {
			if err := c.ApplySet(ok); err != nil {
				t.Errorf("--set %s: %v", ok, err)
			}
		})
	}
}

// A layout whose recipe sets a field the chosen Megatron-Bridge lacks
// fails with one line naming the field and the releases that have it.
func TestNewRecipeLayoutSettingsOfAnotherGeneration(t *testing.T) {
	m, err := presets.LookupModel("gpt_oss_20b")
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Layout("b300")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(m, l, "0.7"); err != nil {
		t.Fatalf("MB 0.7: %v", err)
	}
	_, err = New(m, l, "0.4")
	want := "model gpt_oss_20b: the b300 layout's recipe sets model.moe_expert_rank_capacity_factor, which Megatron-Bridge 0.4 (G2) does not have (allowed: --mbridge 0.5, 0.6, 0.7)"
	if err == nil || err.Error() != want {
		t.Errorf("MB 0.4: %v\nwant %s", err, want)
	}
	l.Settings = map[string]string{"model.moe_token_dispatcher_type": "ring"}
	_, err = New(m, l, "0.7")
	if err == nil || strings.Contains(err.Error(), "--set") || !strings.Contains(err.Error(), "the b300 layout's settings: model.moe_token_dispatcher_type=ring") {
		t.Errorf("bad setting: %v", err)
	}
}

// DeepSeek-V4 Pro's recipe recomputes its hyper-connections (MB HEAD
// src/megatron/bridge/perf_recipes/deepseek/gb300/deepseek_v4.py:
// recompute_modules [mla_up_proj, mhc]); G3's schema takes it.
func TestRecomputeHyperConnections(t *testing.T) {
	c := newCfg(t, moeModel, "0.7")
	if err := c.ApplyYAML("o.yaml", []byte("model:\n  recompute_modules: [mla_up_proj, mhc]\n")); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Get("model.recompute_modules"); !slices.Equal(v.List, []string{"mla_up_proj", "mhc"}) {
		t.Errorf("recompute_modules %v", v.List)
	}
}
