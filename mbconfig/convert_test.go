package mbconfig

import (
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"cgtune/presets"
)

func load(t *testing.T, path string) *Config {
	t.Helper()
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A ConfigContainer YAML written by MB's own to_yaml (whole, untrimmed)
// for the perf recipe of a built-in layout imports to that layout.
func TestToYAMLOfABuiltinRecipeImportsToTheBuiltin(t *testing.T) {
	c := load(t, "testdata/qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config.yaml")
	got, err := Convert(c, Options{Name: "qwen3_30b_a3b", GPU: "h100", NumGPUs: 16, MBridge: "0.7"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := presets.LookupModel("qwen3_30b_a3b")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Arch, want.Arch) {
		t.Errorf("arch\n got %+v\nwant %+v", got.Arch, want.Arch)
	}
	gl, wl := got.Layouts["h100"], want.Layouts["h100"]
	gl.Source, wl.Source, wl.GPU = "", "", "" // where each came from; the built-in's key names its GPU
	if !reflect.DeepEqual(gl, wl) {
		t.Errorf("layout\n got %+v\nwant %+v", gl, wl)
	}
}

// The converter reads only keys the recipe dumper keeps (keys.txt): a key
// read but not listed would be missing from every dump.
func TestEveryKeyReadIsListed(t *testing.T) {
	files, _ := filepath.Glob("../presets/testdata/mbrecipes/*_config.yaml")
	files = append(files, "testdata/llama32_1b_pretrain_1gpu_h100_bf16_config.yaml")
	if len(files) < 20 {
		t.Fatalf("only %d dumps", len(files))
	}
	keys := Keys()
	listed := func(k string) bool {
		for _, l := range keys {
			if k == l || strings.HasPrefix(k, l+".") {
				return true
			}
		}
		return false
	}
	gpuRe := regexp.MustCompile(`_(\d+)gpu_([a-z0-9]+)_`)
	for _, f := range files {
		c := load(t, f)
		m := gpuRe.FindStringSubmatch(f)
		if _, err := Convert(c, Options{Name: "m", GPU: m[2], NumGPUs: atoi(m[1]), Vocab: 131072, MBridge: "0.7"}); err != nil {
			t.Errorf("%v", err)
		}
		for k := range c.read {
			if !listed(k) {
				t.Errorf("%s: the converter reads %s, which keys.txt does not list", f, k)
			}
		}
	}
}

func atoi(s string) int {
	n := 0
	for _, ch := range s {
		n = n*10 + int(ch-'0')
	}
	return n
}

// base is a minimal ConfigContainer as MB's to_yaml writes one.
const base = `model:
  _target_: megatron.bridge.models.gpt_provider.GPTModelProvider
  num_layers: 4
  hidden_size: 512
  ffn_hidden_size: 2048
  num_attention_heads: 8
  num_query_groups: 8
  kv_channels: 64
  vocab_size: 1000
  seq_length: 2048
  activation_func:
    _call_: false
    _target_: torch.nn.functional.silu
  gated_linear_unit: true
  tensor_model_parallel_size: 2
  pipeline_model_parallel_size: 1
  context_parallel_size: 1
  cuda_graph_impl: none
  cuda_graph_scope: []
  cuda_graph_modules: full
  cuda_graph_warmup_steps: 3
train:
  global_batch_size: 32
  micro_batch_size: 1
mixed_precision:
  bf16: true
  fp8: null
  fp4: null
ddp:
  use_distributed_optimizer: true
`

func convert(t *testing.T, src string) (presets.Layout, presets.Arch, error) {
	t.Helper()
	c, err := Parse("in.yaml", []byte(src))
	if err != nil {
		return presets.Layout{}, presets.Arch{}, err
	}
	m, err := Convert(c, Options{Name: "m", GPU: "h100", NumGPUs: 8, MBridge: "0.7"})
	return m.Layouts["h100"], m.Arch, err
}

func TestGraphSettingInTheHarnessVocabulary(t *testing.T) {
	// Each spelling MB and MCore write (G2 scopes, G3 modules as the enum
	// mappings MCore's YAML representer writes, the full_iteration impl),
	// read as the perf harness names the setting.
	enum := func(name string, v int) string {
		return "\n  - _args_:\n    - " + string(rune('0'+v)) + "\n    _call_: true\n    _name_: " + name +
			"\n    _target_: megatron.core.transformer.enums.CudaGraphModule"
	}
	for _, tc := range []struct{ graph, want string }{
		{"  cuda_graph_impl: none\n", "none/-/w3"},
		{"  cuda_graph_impl: local\n  cuda_graph_scope:\n  - full_iteration\n", "local/full_iteration/w3"},
		{"  cuda_graph_impl: full_iteration\n  cuda_graph_scope: null\n  cuda_graph_modules: []\n", "local/full_iteration/w3"},
		{"  cuda_graph_impl: transformer_engine\n  cuda_graph_scope:\n  - moe_router\n  - attn\n", "transformer_engine/attn,moe_router/w3"},
		{"  cuda_graph_impl: transformer_engine\n  cuda_graph_scope: null\n  cuda_graph_modules:" + enum("attn", 1) + enum("mamba", 6) + "\n", "transformer_engine/attn,mamba/w3"},
		{"  cuda_graph_impl: transformer_engine\n  cuda_graph_scope: full\n  cuda_graph_warmup_steps: 1\n", "transformer_engine/layer/w1"},
		{"  cuda_graph_impl: none\n  enable_cuda_graph: true\n  cuda_graph_scope: attn,mlp\n", "local/attn,mlp/w3"},
	} {
		src := strings.Replace(base, "  cuda_graph_impl: none\n  cuda_graph_scope: []\n  cuda_graph_modules: full\n", tc.graph, 1)
		if strings.Contains(tc.graph, "warmup") {
			src = strings.Replace(src, "  cuda_graph_warmup_steps: 3\n", "", 1)
		}
		l, _, err := convert(t, src)
		if err != nil {
			t.Errorf("%q: %v", tc.graph, err)
			continue
		}
		if got := l.ShippedGraph().Key(); got != tc.want {
			t.Errorf("%q: graph %s, want %s", tc.graph, got, tc.want)
		}
	}
}

func TestPrecisionFromTheMixedPrecisionRecipe(t *testing.T) {
	for _, tc := range []struct{ mp, want string }{
		{"mixed_precision: bf16_mixed\n", "bf16"},
		{"mixed_precision: bf16_with_fp8_current_scaling_mixed\n", "fp8cs"},
		{"mixed_precision: nemotron_3_super_bf16_with_nvfp4_mixed\n", "nvfp4"},
		{"mixed_precision:\n  bf16: true\n  fp8: hybrid\n  fp8_recipe: blockwise\n  fp4: null\n", "fp8sc"},
		{"mixed_precision:\n  bf16: true\n  fp8: hybrid\n  fp8_recipe: tensorwise\n  fp4: null\n", "fp8cs"},
		{"mixed_precision:\n  bf16: true\n  fp8: hybrid\n  fp8_recipe: delayed\n  fp4: null\n", "fp8ds"},
		{"mixed_precision:\n  bf16: true\n  fp8: e4m3\n  fp8_recipe: mxfp8\n  fp4: null\n", "fp8mx"},
		{"mixed_precision:\n  bf16: true\n  fp8: null\n  fp4: e2m1\n  fp4_recipe: nvfp4\n", "nvfp4"},
	} {
		src := strings.Replace(base, "mixed_precision:\n  bf16: true\n  fp8: null\n  fp4: null\n", tc.mp, 1)
		l, _, err := convert(t, src)
		if err != nil || l.Precision != tc.want {
			t.Errorf("%q: precision %q, %v; want %s", tc.mp, l.Precision, err, tc.want)
		}
	}
}

func TestLayoutFields(t *testing.T) {
	src := strings.Replace(base, "  tensor_model_parallel_size: 2\n  pipeline_model_parallel_size: 1\n",
		"  tensor_model_parallel_size: 1\n  pipeline_model_parallel_size: 2\n  virtual_pipeline_model_parallel_size: 2\n"+
			"  pipeline_model_parallel_layout:\n  - [embedding, decoder]\n  - [decoder]\n  - [decoder]\n  - [decoder, loss]\n"+
			"  account_for_loss_in_pipeline_split: true\n  recompute_granularity: selective\n  recompute_modules: [core_attn, mlp]\n"+
			"  sequence_parallel: true\n", 1)
	// MB's mixed-precision recipe sets DDP's grad_reduce_in_fp32 at
	// start-up: its value is the one that runs.
	src = strings.Replace(src, "  fp4: null\n", "  fp4: null\n  grad_reduce_in_fp32: true\n", 1)
	src = strings.Replace(src, "ddp:\n  use_distributed_optimizer: true\n",
		"ddp:\n  use_distributed_optimizer: true\n  grad_reduce_in_fp32: false\n  use_megatron_fsdp: true\n  data_parallel_sharding_strategy: optim_grads_params\n"+
			"optimizer:\n  use_precision_aware_optimizer: true\n  exp_avg_dtype:\n    _call_: false\n    _target_: torch.bfloat16\n", 1)
	l, _, err := convert(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if l.PipelineLayout != "Et|t|t|tL" || !l.AccountForLoss || l.AccountForEmbedding || l.VP != 2 || !l.SequenceParallel {
		t.Errorf("pipeline %+v", l)
	}
	if !slices.Equal(l.RecomputeModules, []string{"core_attn", "mlp"}) || !l.FSDP || l.OptimizerStates != "bf16" || !l.PrecisionAwareOptimizer || !l.GradReduceInFP32 {
		t.Errorf("memory settings %+v", l)
	}
}

// Settings carry the fields cgtune's rules read where the file differs
// from what cgtune would assume, and nothing else.
func TestSettingsAreTheDifferences(t *testing.T) {
	src := strings.Replace(base, "  gated_linear_unit: true\n",
		"  gated_linear_unit: true\n  gradient_accumulation_fusion: false\n  attention_dropout: 0.0\n", 1)
	src += "env_vars:\n  NCCL_GRAPH_REGISTER: 0\n  UNRELATED: 1\ncomm_overlap: null\n"
	l, _, err := convert(t, src)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"model.gradient_accumulation_fusion": "false", "env.NCCL_GRAPH_REGISTER": "0"}
	if !reflect.DeepEqual(l.Settings, want) {
		t.Errorf("settings %v, want %v", l.Settings, want)
	}
}

var oneLine = regexp.MustCompile(`^[^\n]+$`)

func TestBadFilesAreOneLineErrors(t *testing.T) {
	for _, tc := range []struct{ name, old, new, want string }{
		{"int", "  num_layers: 4\n", "  num_layers: four\n", `in.yaml:3: field model.num_layers: want an integer, got "four"`},
		{"activation", "    _target_: torch.nn.functional.silu\n", "    _target_: torch.nn.functional.relu\n", `field model.activation_func: "relu" with gated_linear_unit true is not an activation cgtune models (allowed:`},
		{"fp16", "  bf16: true\n  fp8: null\n", "  bf16: false\n  fp16: true\n  fp8: null\n", "field mixed_precision.fp16: fp16 training is not a precision cgtune models"},
		{"impl", "  cuda_graph_impl: none\n", "  cuda_graph_impl: sometimes\n", `field model.cuda_graph_impl: "sometimes" (allowed: none, local, transformer_engine, full_iteration)`},
		{"both", "  cuda_graph_impl: none\n  cuda_graph_scope: []\n  cuda_graph_modules: full\n",
			"  cuda_graph_impl: transformer_engine\n  cuda_graph_scope: [attn]\n  cuda_graph_modules: [mlp]\n", "are both set; MCore accepts one of them"},
		{"uneven", "  seq_length: 2048\n", "  seq_length: 2048\n  num_layers_in_first_pipeline_stage: 3\n", "an uneven first or last stage is not modelled"},
		{"moe freq", "  seq_length: 2048\n", "  seq_length: 2048\n  num_moe_experts: 8\n  moe_router_topk: 2\n  moe_layer_freq: [1, 0, 1, 1]\n", "dense layers after MoE ones are not modelled"},
		{"groups", "  num_attention_heads: 8\n", "  num_attention_heads: 12\n", "heads (12) is not divisible by kv_groups (8)"},
		{"no model", "model:\n", "modell:\n", "in.yaml:1: no model: section"},
		{"syntax", "  num_layers: 4\n", "  num_layers: [4\n", "in.yaml:"},
	} {
		src := strings.Replace(base, tc.old, tc.new, 1)
		if src == base {
			t.Fatalf("%s: replacement did not apply", tc.name)
		}
		_, _, err := convert(t, src)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !oneLine.MatchString(err.Error()) || !strings.HasPrefix(err.Error(), "in.yaml") {
			t.Errorf("%s: error %v, want one line from in.yaml with %q", tc.name, err, tc.want)
		}
	}
	c, _ := Parse("in.yaml", []byte(base))
	if _, err := Convert(c, Options{Name: "m", GPU: "h100"}); err == nil || !strings.Contains(err.Error(), "--num-gpus") {
		t.Errorf("no GPU count: %v", err)
	}
	c, _ = Parse("in.yaml", []byte(strings.Replace(base, "  vocab_size: 1000\n", "  vocab_size: null\n", 1)))
	if _, err := Convert(c, Options{Name: "m", GPU: "h100", NumGPUs: 8}); err == nil || !strings.Contains(err.Error(), "--vocab-size") {
		t.Errorf("no vocabulary: %v", err)
	}
}

// mtp_use_repeated_layer is the layout's with MTP layers, where MCore
// reads it, and a wrong value is a one-line error naming the field.
func TestMTPRepeatedLayer(t *testing.T) {
	for _, tc := range []struct {
		mtp  string
		want bool
	}{
		{"  mtp_num_layers: 2\n  mtp_use_repeated_layer: true\n", true},
		{"  mtp_num_layers: 2\n  mtp_use_repeated_layer: false\n", false},
		{"  mtp_num_layers: 2\n", false},
		{"  mtp_num_layers: null\n  mtp_use_repeated_layer: true\n", false},
	} {
		l, _, err := convert(t, strings.Replace(base, "  seq_length: 2048\n", "  seq_length: 2048\n"+tc.mtp, 1))
		if err != nil || l.MTPUseRepeatedLayer != tc.want {
			t.Errorf("%q: mtp_use_repeated_layer %v, %v; want %v", tc.mtp, l.MTPUseRepeatedLayer, err, tc.want)
		}
	}
	_, _, err := convert(t, strings.Replace(base, "  seq_length: 2048\n", "  seq_length: 2048\n  mtp_num_layers: 2\n  mtp_use_repeated_layer: maybe\n", 1))
	if err == nil || !oneLine.MatchString(err.Error()) || !strings.Contains(err.Error(), "field model.mtp_use_repeated_layer: want true or false") {
		t.Errorf("bad value: %v", err)
	}
}

// The optimizer: Adam is the default; Megatron-Core's layer-wise
// distributed Muon is "dist_muon", or "muon" with
// use_layer_wise_distributed_optimizer; another is a one-line error.
func TestOptimizer(t *testing.T) {
	for _, tc := range []struct{ opt, want string }{
		{"", ""},
		{"optimizer:\n  optimizer: adam\n", ""},
		{"optimizer:\n  optimizer: dist_muon\n", presets.OptimizerDistMuon},
		{"optimizer:\n  optimizer: muon\n  use_layer_wise_distributed_optimizer: true\n", presets.OptimizerDistMuon},
	} {
		l, _, err := convert(t, base+tc.opt)
		if err != nil || l.Optimizer != tc.want {
			t.Errorf("%q: optimizer %q, %v; want %q", tc.opt, l.Optimizer, err, tc.want)
		}
	}
	for _, opt := range []string{"muon", "sgd"} {
		_, _, err := convert(t, base+"optimizer:\n  optimizer: "+opt+"\n")
		if err == nil || !oneLine.MatchString(err.Error()) || !strings.Contains(err.Error(), "field optimizer.optimizer: optimizer \""+opt+"\" is not modelled (allowed: adam, dist_muon") {
			t.Errorf("%s: %v", opt, err)
		}
	}
}

// moeBase is base with routed experts behind the flex dispatcher, as MB's
// fp8 DeepSeek-V4 recipes set them up.
var moeBase = strings.Replace(base, "  gated_linear_unit: true\n", `  gated_linear_unit: true
  num_moe_experts: 8
  moe_router_topk: 2
  moe_ffn_hidden_size: 256
  expert_model_parallel_size: 4
  expert_tensor_parallel_size: 1
  moe_token_dispatcher_type: flex
  moe_flex_dispatcher_backend: hybridep
  use_transformer_engine_op_fuser: true
`, 1)

// The per-rank budget and the paged stash reach the layout's own fields
// (not its settings), with Megatron-Core's buffer factors where the file
// leaves them out; without the stash the layout has none.
func TestExpertBudgetAndPagedStash(t *testing.T) {
	for _, tc := range []struct {
		name, add string
		capacity  float64
		stash     *presets.PagedStash
	}{
		{"off", "", 0, nil},
		{"budget only", "  moe_expert_rank_capacity_factor: 5\n", 5, nil},
		{"stash off", "  moe_expert_rank_capacity_factor: 1.5\n  moe_paged_stash: false\n  moe_paged_stash_buffer_size_factor_cuda: 1.2\n", 1.5, nil},
		{"stash", "  moe_expert_rank_capacity_factor: 1.5\n  moe_paged_stash: true\n  moe_paged_stash_buffer_size_factor_cuda: 1.2\n  moe_paged_stash_buffer_size_factor_cpu: 0.5\n",
			1.5, &presets.PagedStash{CUDAFactor: 1.2, HostFactor: 0.5}},
		{"stash defaults", "  moe_expert_rank_capacity_factor: 1.5\n  moe_paged_stash: true\n", 1.5, &presets.PagedStash{CUDAFactor: 1.1, HostFactor: 0}},
	} {
		src := strings.Replace(moeBase, "  gated_linear_unit: true\n", "  gated_linear_unit: true\n"+tc.add, 1)
		l, _, err := convert(t, src)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if l.RankCapacityFactor != tc.capacity || !reflect.DeepEqual(l.PagedStash, tc.stash) {
			t.Errorf("%s: capacity %v, stash %+v; want %v, %+v", tc.name, l.RankCapacityFactor, l.PagedStash, tc.capacity, tc.stash)
		}
		for k := range l.Settings {
			if strings.Contains(k, "paged_stash") || strings.Contains(k, "rank_capacity") {
				t.Errorf("%s: %s is a setting as well as a layout field", tc.name, k)
			}
		}
	}
	for _, tc := range []struct{ add, want string }{
		{"  moe_expert_rank_capacity_factor: -1\n", "in.yaml:15: field model.moe_expert_rank_capacity_factor: -1 is not a positive number (allowed: a positive number, or null)"},
		{"  moe_paged_stash: true\n  moe_paged_stash_buffer_size_factor_cuda: lots\n", `in.yaml:16: field model.moe_paged_stash_buffer_size_factor_cuda: want a number, got "lots"`},
	} {
		src := strings.Replace(moeBase, "  gated_linear_unit: true\n", "  gated_linear_unit: true\n"+tc.add, 1)
		if _, _, err := convert(t, src); err == nil || !oneLine.MatchString(err.Error()) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want %s", tc.add, err, tc.want)
		}
	}
}
