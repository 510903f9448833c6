package presets

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func builtins(t *testing.T) []Model {
	t.Helper()
	ms, err := BuiltinModels()
	if err != nil {
		t.Fatalf("BuiltinModels: %v", err)
	}
	return ms
}

func TestBuiltinModelsOrder(t *testing.T) {
	// The 17 LLM pretraining models of MB HEAD's perf recipes.
	want := []string{"llama3_8b", "llama3_70b", "llama31_405b", "qwen3_30b_a3b", "qwen3_235b_a22b", "qwen3_next_80b_a3b",
		"deepseek_v3", "deepseek_v4_flash", "deepseek_v4_pro", "kimi_k2", "gpt_oss_20b", "gpt_oss_120b",
		"nemotronh_56b", "nemotron_3_nano", "nemotron_3_5_lightning", "nemotron_3_super", "nemotron_3_ultra"}
	var got []string
	for _, m := range builtins(t) {
		got = append(got, m.Name)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("built-in models = %v, want %v", got, want)
	}
}

func countRunes(s string) map[rune]int {
	c := map[rune]int{}
	for _, r := range s {
		c[r]++
	}
	return c
}

func TestHybridPatterns(t *testing.T) {
	for _, tc := range []struct {
		model        string
		layers       int
		m, attn, mlp int
		moe          int
	}{
		{"nemotronh_56b", 118, 54, 10, 54, 0},
		{"nemotron_3_nano", 52, 23, 6, 0, 23},
		{"nemotron_3_5_lightning", 52, 23, 6, 0, 23},
		{"nemotron_3_super", 88, 40, 8, 0, 40},
		{"nemotron_3_ultra", 108, 48, 12, 0, 48},
	} {
		t.Run(tc.model, func(t *testing.T) {
			m, err := LookupModel(tc.model)
			if err != nil {
				t.Fatal(err)
			}
			p := m.Arch.HybridPattern
			c := countRunes(p)
			if len(p) != tc.layers || m.Arch.Layers != tc.layers {
				t.Errorf("%s: pattern length %d, layers %d, want %d", tc.model, len(p), m.Arch.Layers, tc.layers)
			}
			if c['M'] != tc.m || c['*'] != tc.attn || c['-'] != tc.mlp || c['E'] != tc.moe {
				t.Errorf("%s: pattern has M=%d *=%d -=%d E=%d, want %d %d %d %d", tc.model, c['M'], c['*'], c['-'], c['E'], tc.m, tc.attn, tc.mlp, tc.moe)
			}
			kinds := m.Arch.LayerKinds()
			if len(kinds) != tc.layers {
				t.Errorf("%s: LayerKinds has %d entries", tc.model, len(kinds))
			}
			if !m.Arch.HasMamba() || !m.Arch.HasAttention() {
				t.Errorf("%s: hybrid must have mamba and attention layers", tc.model)
			}
		})
	}
	// The exact strings, as MB's providers spell them.
	nano, _ := LookupModel("nemotron_3_nano")
	if nano.Arch.HybridPattern != "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME" {
		t.Errorf("nemotron_3_nano pattern = %q", nano.Arch.HybridPattern)
	}
	nh, _ := LookupModel("nemotronh_56b")
	if !strings.HasPrefix(nh.Arch.HybridPattern, "M-M-M-M*-M-M-M-M-M*-") || !strings.HasSuffix(nh.Arch.HybridPattern, "M*-M-M-M-M-M-") {
		t.Errorf("nemotronh_56b pattern = %q", nh.Arch.HybridPattern)
	}
}

// TestBuiltinArch checks the architecture facts (from the MB model providers each file cites) the search
// rules depend on.
func TestBuiltinArch(t *testing.T) {
	get := func(n string) Model {
		m, err := LookupModel(n)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ds := get("deepseek_v3")
	if ds.Arch.MLA == nil || ds.Arch.MLA.QLoraRank != 1536 || ds.Arch.MLA.KVLoraRank != 512 || ds.Arch.KVGroups != 0 {
		t.Errorf("deepseek_v3 MLA = %+v kv_groups %d", ds.Arch.MLA, ds.Arch.KVGroups)
	}
	if ds.Arch.MoE.FirstDenseLayers != 3 || ds.Arch.MoE.Experts != 256 || ds.Arch.MoE.SharedExpertFFN != 2048 || ds.Arch.MoE.Router != "sigmoid" {
		t.Errorf("deepseek_v3 MoE = %+v", ds.Arch.MoE)
	}
	if !ds.Arch.HasDenseMLP() {
		t.Error("deepseek_v3 has 3 dense layers, so the mlp scope must be legal")
	}
	for _, n := range []string{"qwen3_30b_a3b", "qwen3_235b_a22b", "gpt_oss_20b", "gpt_oss_120b", "nemotron_3_nano"} {
		if get(n).Arch.HasDenseMLP() {
			t.Errorf("%s: every FFN is MoE; HasDenseMLP must be false", n)
		}
	}
	for _, n := range []string{"gpt_oss_20b", "gpt_oss_120b"} {
		if !get(n).Arch.AddBiasLinear {
			t.Errorf("%s: add_bias_linear must be true", n)
		}
	}
	if e := get("gpt_oss_20b").Arch.MoE.Experts; e != 32 {
		t.Errorf("gpt_oss_20b experts = %d", e)
	}
	if l := get("llama31_405b").Arch; l.Layers != 126 || l.Hidden != 16384 || l.Heads != 128 {
		t.Errorf("llama31_405b arch = %+v", l)
	}
	if get("nemotronh_56b").Arch.Mamba.StateDim != 256 || get("nemotron_3_nano").Arch.Mamba.StateDim != 128 {
		t.Error("mamba state dims differ from the MB provider")
	}
	if m := get("nemotron_3_nano").Arch.MoE; m.TopK != 6 || m.SharedExpertFFN != 3712 {
		t.Errorf("nemotron_3_nano MoE = %+v", m)
	}
	// The new layer kinds, as MB's bridges build them from the published
	// configs (tools/mbsandbox/hf_configs.json).
	kimi := get("kimi_k2").Arch
	if kimi.MLA == nil || kimi.MoE == nil || kimi.MoE.Experts != 384 || kimi.MoE.FirstDenseLayers != 1 || kimi.MoE.Router != "sigmoid" {
		t.Errorf("kimi_k2 arch = %+v, MoE %+v", kimi, kimi.MoE)
	}
	next := get("qwen3_next_80b_a3b").Arch
	if la := next.LinearAttention; la == nil || la.LinearAttentionFreq != 4 || la.LinearNumValueHeads != 32 || !next.AttentionOutputGate || !next.MoE.MoESharedExpertGate {
		t.Errorf("qwen3_next_80b_a3b arch = %+v, linear attention %+v", next, next.LinearAttention)
	}
	for n, topk := range map[string]int{"deepseek_v4_flash": 512, "deepseek_v4_pro": 1024} {
		a := get(n).Arch
		if a.CompressedAttention == nil || a.CompressedAttention.DSAIndexerTopK != topk || a.HyperConnections == nil || a.MoE.MoENHashLayers != 3 || a.MoE.Router != "sqrtsoftplus" {
			t.Errorf("%s arch = %+v", n, a)
		}
	}
	if s := get("nemotron_3_super").Arch; s.MoE.MoELatentSize != 1024 || s.MTPHybridOverridePattern != "*E" {
		t.Errorf("nemotron_3_super arch = %+v, MoE %+v", s, s.MoE)
	}
}

// builtinGPUs are the GPU types MB HEAD's perf recipes have a runnable
// recipe for, per model (h200 borrows h100's).
var builtinGPUs = map[string][]string{
	"llama3_8b":       {"h100", "h200", "b200", "b300", "gb200", "gb300", "vr200", "r100"},
	"llama3_70b":      {"h100", "h200", "b200", "b300", "gb200", "gb300", "vr200"},
	"llama31_405b":    {"h100", "h200", "b200", "b300", "gb200", "gb300", "vr200"},
	"qwen3_30b_a3b":   {"h100", "h200", "b200", "b300", "gb200", "gb300", "vr200"},
	"qwen3_235b_a22b": {"h100", "h200", "b200", "b300", "gb200", "gb300", "vr200"},
	"deepseek_v3":     {"h100", "h200", "b200", "b300", "gb200", "gb300", "vr200"},
	"gpt_oss_20b":     {"b300", "gb200", "gb300", "vr200"},
	"gpt_oss_120b":    {"h100", "h200", "b200", "b300", "gb200", "gb300", "vr200"},
	"nemotronh_56b":   {"h100", "h200", "b200", "b300", "gb200", "gb300"},
	"nemotron_3_nano": {"h100", "h200", "b200", "b300", "gb200", "gb300", "vr200"},
	// MB HEAD's recipes of the models it added.
	"qwen3_next_80b_a3b":     {"h100", "h200", "b200", "b300", "gb200", "gb300"},
	"deepseek_v4_flash":      {"gb200", "gb300"},
	"deepseek_v4_pro":        {"gb300"},
	"kimi_k2":                {"h100", "h200", "b200", "b300", "gb200", "gb300", "vr200"},
	"nemotron_3_5_lightning": {"h100", "h200", "gb200", "gb300"},
	"nemotron_3_super":       {"h100", "h200", "b200", "b300", "gb200", "gb300", "vr200"},
	"nemotron_3_ultra":       {"gb200", "gb300"},
}

// Every built-in layout parses, validates, ships an explicit CUDA-graph
// setting with its warm-up, and names the MB HEAD perf recipe it is: the
// family's file for its GPU type and a function whose name carries its GPU
// count, GPU type and precision.
func TestBuiltinLayoutsValidateAndNameTheirRecipe(t *testing.T) {
	for _, m := range builtins(t) {
		if got := m.GPUs(); !slices.Equal(got, builtinGPUs[m.Name]) {
			t.Errorf("%s: GPUs %v, want %v", m.Name, got, builtinGPUs[m.Name])
		}
		if !strings.Contains(m.Source, "src/megatron/bridge/perf_recipes/"+m.Family+"/<gpu>/") {
			t.Errorf("%s: source %q names no MB perf recipe file", m.Name, m.Source)
		}
		for _, g := range m.GPUs() {
			if _, own := m.Layouts[g]; !own {
				continue
			}
			t.Run(m.Name+"/"+g, func(t *testing.T) {
				l, err := m.Layout(g)
				if err != nil {
					t.Fatal(err)
				}
				if err := m.ValidateLayout(l); err != nil {
					t.Error(err)
				}
				file := "MB 067f987 src/megatron/bridge/perf_recipes/" + m.Family + "/" + g + "/"
				fn := regexp.MustCompile(fmt.Sprintf(`\b[a-z0-9_]+_%dgpu_%s_%s(_[a-z0-9]+)*_config\b`, l.NumGPUs, g, l.Precision))
				if !strings.HasPrefix(l.Source, file) || !fn.MatchString(l.Source) {
					t.Errorf("source %q does not start with %q and name a %d-GPU %s %s recipe", l.Source, file, l.NumGPUs, g, l.Precision)
				}
				if l.CUDAGraph == nil || l.CUDAGraph.Warmup < 1 {
					t.Errorf("cuda_graph %+v: want the recipe's setting with its warm-up", l.CUDAGraph)
				}
			})
		}
	}
}

// TestBuiltinLayouts pins layouts to the MB HEAD perf recipes they name,
// the ones a user found wrong among them.
func TestBuiltinLayouts(t *testing.T) {
	type row struct {
		n, tp, pp, cp, vp, ep, gbs, mbs, seq int
		prec, disp                           string
		fsdp                                 bool
		cpuOffload                           int
	}
	for _, tc := range []struct {
		model, gpu string
		want       row
		graph      string
		recompute  []string
	}{
		{"llama3_8b", "h100", row{8, 1, 1, 2, 0, 1, 128, 1, 8192, "bf16", "", false, 0}, "none/-/w3", nil},
		{"llama3_8b", "b200", row{8, 1, 1, 1, 0, 1, 128, 2, 8192, "bf16", "", false, 0}, "local/full_iteration/w3", nil},
		// llama31.py: PP 16 CP 1 on B200, Megatron-FSDP with 40 layers offloaded on B300 and GB300.
		{"llama31_405b", "h100", row{512, 8, 8, 2, 8, 1, 768, 1, 8192, "bf16", "", false, 0}, "none/-/w3", nil},
		{"llama31_405b", "b200", row{128, 4, 16, 1, 8, 1, 768, 1, 8192, "bf16", "", false, 0}, "none/-/w3", nil},
		{"llama31_405b", "b300", row{128, 2, 1, 1, 0, 1, 768, 1, 8192, "bf16", "", true, 40}, "none/-/w3", nil},
		{"llama31_405b", "gb300", row{128, 2, 1, 1, 0, 1, 768, 1, 8192, "bf16", "", true, 40}, "none/-/w3", nil},
		// llama3.py: Megatron-FSDP on B300, with CPU offloading on GB200 and GB300.
		{"llama3_70b", "b300", row{64, 1, 1, 1, 0, 1, 256, 1, 8192, "bf16", "", true, 0}, "none/-/w3", nil},
		{"llama3_70b", "gb200", row{32, 1, 1, 1, 0, 1, 128, 1, 8192, "bf16", "", true, 20}, "none/-/w3", nil},
		{"llama3_70b", "gb300", row{32, 1, 1, 1, 0, 1, 128, 2, 8192, "bf16", "", true, 30}, "none/-/w3", nil},
		{"qwen3_30b_a3b", "h100", row{16, 1, 1, 1, 0, 16, 1024, 1, 4096, "bf16", "flex", false, 0}, "transformer_engine/moe_router,moe_preprocess/w3", nil},
		{"qwen3_235b_a22b", "gb200", row{64, 1, 8, 1, 0, 8, 2048, 1, 4096, "bf16", "flex", false, 0}, "transformer_engine/attn,moe_router,moe_preprocess/w3", nil},
		{"deepseek_v3", "gb200", row{256, 1, 4, 1, 4, 64, 4096, 1, 4096, "bf16", "flex", false, 0}, "transformer_engine/attn,moe_router,moe_preprocess/w3", []string{"mla_up_proj"}},
		// gpt_oss.py: seq 4096 from the library recipe; hybridep only where the recipe sets it.
		{"gpt_oss_120b", "h100", row{64, 1, 4, 1, 0, 8, 1280, 1, 4096, "bf16", "alltoall", false, 0}, "none/-/w3", []string{"layernorm", "moe_act"}},
		{"gpt_oss_120b", "b300", row{64, 1, 1, 1, 0, 8, 1280, 4, 4096, "bf16", "flex", false, 0}, "transformer_engine/attn,moe_router,moe_preprocess/w3", nil},
		{"gpt_oss_120b", "gb300", row{64, 1, 1, 1, 0, 64, 1280, 4, 4096, "bf16", "alltoall", false, 0}, "transformer_engine/attn,moe_router,moe_preprocess/w3", nil},
		{"gpt_oss_20b", "b300", row{8, 1, 1, 2, 0, 4, 4, 1, 8192, "fp8mx", "flex", false, 0}, "local/full_iteration/w2", nil},
		{"gpt_oss_20b", "gb200", row{8, 1, 1, 2, 0, 4, 4, 1, 8192, "nvfp4", "flex", false, 0}, "transformer_engine/attn,moe_router,moe_preprocess/w2", nil},
		{"nemotronh_56b", "h100", row{64, 8, 1, 1, 0, 1, 192, 1, 8192, "fp8cs", "", false, 0}, "transformer_engine/mamba/w3", nil},
		{"nemotron_3_nano", "h100", row{16, 1, 1, 1, 0, 8, 1024, 1, 8192, "bf16", "flex", false, 0}, "transformer_engine/attn,mamba/w3", []string{"moe", "layernorm"}},
	} {
		t.Run(tc.model+"/"+tc.gpu, func(t *testing.T) {
			m, err := LookupModel(tc.model)
			if err != nil {
				t.Fatal(err)
			}
			l, err := m.Layout(tc.gpu)
			if err != nil {
				t.Fatal(err)
			}
			got := row{l.NumGPUs, l.TPSize(), l.PPSize(), l.CPSize(), l.VP, l.EPSize(), l.GBS, l.MBS, l.Seq, l.Precision, l.Dispatcher, l.FSDP, l.CPUOffloadLayers}
			if got != tc.want {
				t.Errorf("layout %+v\nwant   %+v", got, tc.want)
			}
			if g := l.ShippedGraph().Key(); g != tc.graph {
				t.Errorf("shipped graph %s, want %s", g, tc.graph)
			}
			if !slices.Equal(l.RecomputeModules, tc.recompute) {
				t.Errorf("recompute %v, want %v", l.RecomputeModules, tc.recompute)
			}
		})
	}
	// Micro-batches per rank follow from the layout: 128 / (1 × 8/2).
	m, _ := LookupModel("llama3_8b")
	l, _ := m.Layout("h100")
	if l.MicroBatches() != 32 {
		t.Errorf("llama3_8b h100 micro-batches = %d, want 32", l.MicroBatches())
	}
}

func TestLayoutReturnsCopy(t *testing.T) {
	m, _ := LookupModel("deepseek_v3")
	l, _ := m.Layout("h100")
	l.RecomputeModules[0] = "changed"
	l2, _ := m.Layout("h100")
	if l2.RecomputeModules[0] != "mla_up_proj" {
		t.Fatal("Layout shares its recompute list with the model")
	}
}

func TestLookupErrors(t *testing.T) {
	_, err := LookupModel("llama3_9b")
	if err == nil {
		t.Fatal("no error for an unknown model")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, `"llama3_9b"`) || !strings.Contains(msg, "llama3_8b, llama3_70b") || !strings.Contains(msg, "nemotron_3_nano") {
		t.Errorf("error %q must be one line naming the bad name and the allowed ones", msg)
	}
	m, _ := LookupModel("gpt_oss_20b")
	_, err = m.Layout("h100")
	if err == nil || !strings.Contains(err.Error(), "allowed: b300, gb200, gb300") || !strings.Contains(err.Error(), `"h100"`) {
		t.Errorf("Layout(h100) error = %v", err)
	}
}

const goodModel = `version: 1
models:
  - name: toy
    arch:
      layers: 4
      hidden: 512
      ffn_hidden: 2048
      heads: 8
      kv_groups: 8
      head_dim: 64
      vocab: 1000
    layouts:
      h100:
        num_gpus: 8
        precision: bf16
        tp: 2
        pp: 1
        cp: 1
        ep: 1
        gbs: 32
        mbs: 1
        seq: 2048
`

func TestParseModelYAMLGood(t *testing.T) {
	ms, err := ParseModelYAML("toy.yaml", []byte(goodModel))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Layouts["h100"].GPU != "h100" || ms[0].Kind() != "dense" {
		t.Fatalf("parsed %+v", ms)
	}
}

var oneLineLoc = regexp.MustCompile(`^bad\.yaml:(\d+): [^\n]+$`)

func TestParseModelYAMLErrors(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		line           int
		want           []string
	}{
		{"unknown field", "      vocab: 1000\n", "      vocab: 1000\n      vocabulary: 3\n", 12, []string{`unknown field "vocabulary"`, "models[0].arch", "allowed: layers, hidden, ffn_hidden"}},
		{"bad version", "version: 1\n", "version: 2\n", 1, []string{`unsupported version "2"`, "allowed: 1"}},
		{"missing version", "version: 1\n", "", 1, []string{`missing field "version"`, "allowed: 1"}},
		{"bad int", "layers: 4", "layers: four", 5, []string{`"models[0].arch.layers"`, "want an integer", `"four"`}},
		{"zero layers", "layers: 4", "layers: 0", 5, []string{`"layers" must be a positive integer`}},
		{"kv groups", "kv_groups: 8", "kv_groups: 3", 9, []string{"heads (8) is not divisible by kv_groups (3)"}},
		{"tp pp cp", "pp: 1", "pp: 3", 14, []string{"tp×pp×cp = 2×3×1 = 6 does not divide num_gpus 8"}},
		{"gbs", "gbs: 32", "gbs: 30", 20, []string{"gbs 30 is not divisible by mbs×dp = 1×4 = 4"}},
		{"precision", "precision: bf16", "precision: fp32", 15, []string{`unknown value "fp32"`, "allowed: bf16, fp8cs"}},
		{"gpu key", "      h100:\n", "      a100:\n", 13, []string{`unknown gpu "a100"`, "allowed: h100, h200, b200"}},
		{"ep on dense", "ep: 1", "ep: 2", 19, []string{"ep 2 needs a MoE model"}},
		{"duplicate key", "      vocab: 1000\n", "      vocab: 1000\n      vocab: 1001\n", 12, []string{`field "vocab" given twice (first at line 11)`}},
		{"pattern count", "      vocab: 1000\n", "      vocab: 1000\n      hybrid_pattern: \"*-*\"\n", 12, []string{"has 3 layers", "but layers is 4"}},
		{"pattern char", "      vocab: 1000\n", "      vocab: 1000\n      hybrid_pattern: \"*-x-\"\n", 12, []string{`character 'x' at position 3`, "allowed: M mamba"}},
		{"pattern needs mamba", "      vocab: 1000\n", "      vocab: 1000\n      hybrid_pattern: \"M*M-\"\n", 12, []string{"no mamba: section"}},
		{"bad name", "name: toy", "name: Toy", 3, []string{`"Toy" is not a valid name`}},
		{"list for mapping", "      h100:\n", "      h100: [1]\n      x100:\n", 13, []string{`field "models[0].layouts.h100": want a mapping, got a list`}},
		{"syntax", "    arch:\n", "    arch: [\n", 5, []string{"bad.yaml:"}},
		{"bad recompute", "seq: 2048\n", "seq: 2048\n        recompute_modules: [mlp, attn]\n", 23, []string{`unknown module "attn"`, "allowed: core_attn"}},
		{"recompute method", "seq: 2048\n", "seq: 2048\n        recompute_method: blocks\n", 23, []string{`"recompute_method": unknown value "blocks"`, "allowed: uniform, block"}},
		{"method needs full", "seq: 2048\n", "seq: 2048\n        recompute_method: block\n", 23, []string{`"recompute_method" needs recompute_granularity: full`}},
		{"optimizer", "seq: 2048\n", "seq: 2048\n        optimizer: sgd\n", 23, []string{`"optimizer": unknown value "sgd"`, "allowed: adam, dist_muon"}},
		{"muon precision-aware", "seq: 2048\n", "seq: 2048\n        optimizer: dist_muon\n        no_distributed_optimizer: true\n        precision_aware_optimizer: true\n", 25, []string{`"precision_aware_optimizer" cannot be true with optimizer dist_muon`}},
		{"pipeline layout", "seq: 2048\n", "seq: 2048\n        pipeline_layout: \"Ett|ttL\"\n", 23, []string{`"pipeline_layout" "Ett|ttL": 2 stages, but pp × vp = 1 × 1 = 1`}},
		{"pipeline layers", "seq: 2048\n", "seq: 2048\n        pipeline_layout: \"EtttL\"\n", 23, []string{"3 decoder layers (t), the model has 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(goodModel, tc.old, tc.new, 1)
			if src == goodModel {
				t.Fatalf("replacement %q did not apply", tc.old)
			}
			_, err := ParseModelYAML("bad.yaml", []byte(src))
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			m := oneLineLoc.FindStringSubmatch(msg)
			if m == nil {
				t.Fatalf("error %q is not one line starting with bad.yaml:LINE:", msg)
			}
			if tc.name != "syntax" && m[1] != strconv.Itoa(tc.line) {
				t.Errorf("error %q: line %s, want %d", msg, m[1], tc.line)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestParseModelYAMLStructural(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"empty", "", "bad.yaml:1: empty file"},
		{"comment only", "# nothing\n", "bad.yaml:1: empty file"},
		{"scalar", "hello\n", "bad.yaml:1: want a YAML mapping"},
		{"two docs", goodModel + "---\nversion: 1\n", "bad.yaml:23: a second YAML document"},
		{"alias", strings.Replace(goodModel, "      h100:\n", "      h100: &a\n", 1), "anchors and aliases are not supported"},
		{"no models", "version: 1\nmodels: []\n", "bad.yaml:2: no models"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseModelYAML("bad.yaml", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: error %v, want one line containing %q", tc.name, err, tc.want)
			}
		})
	}
}

func TestModelValidateInCode(t *testing.T) {
	m, _ := LookupModel("qwen3_30b_a3b")
	if err := m.Validate(); err != nil {
		t.Fatalf("built-in model does not validate: %v", err)
	}
	m.Arch.MoE = &MoE{Experts: 4, TopK: 8, FFNHidden: 1}
	err := m.Validate()
	if err == nil || !strings.Contains(err.Error(), "top_k") {
		t.Fatalf("Validate = %v, want a top_k error", err)
	}
}

func TestModelCloneIsDeep(t *testing.T) {
	m, _ := LookupModel("deepseek_v3")
	c := m.Clone()
	c.Arch.MoE.Experts = 1
	c.Arch.MLA.QLoraRank = 1
	l := c.Layouts["h100"]
	l.RecomputeModules[0] = "x"
	c.Layouts["b200"] = Layout{}
	if m.Arch.MoE.Experts != 256 || m.Arch.MLA.QLoraRank != 1536 || m.Layouts["h100"].RecomputeModules[0] != "mla_up_proj" || m.Layouts["b200"].NumGPUs != 256 {
		t.Fatal("Clone shares state with the original")
	}
	// Validate must not write into the caller's layouts (it fills GPU names).
	m.Layouts["h100"] = Layout{NumGPUs: 1024, Precision: "bf16", TP: 2, PP: 8, EP: 64, ETP: 1, GBS: 16384, MBS: 1, Seq: 4096}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if m.Layouts["h100"].GPU != "" {
		t.Fatal("Validate changed the caller's model")
	}
}

// h200 has no MB perf recipe: a model's h200 layout is its h100 one, with
// the GPU type set and the borrowing said in the source.
func TestH200BorrowsH100Layouts(t *testing.T) {
	m, err := LookupModel("qwen3_30b_a3b")
	if err != nil {
		t.Fatal(err)
	}
	h100, _ := m.Layout("h100")
	h200, err := m.Layout("h200")
	if err != nil {
		t.Fatal(err)
	}
	if h200.GPU != "h200" || h200.TP != h100.TP || h200.EP != h100.EP || h200.GBS != h100.GBS || h200.NumGPUs != h100.NumGPUs {
		t.Errorf("h200 layout %+v, h100 %+v", h200, h100)
	}
	if !strings.Contains(h200.Source, "h200 has no MB perf recipe: h100's layout") {
		t.Errorf("source %q", h200.Source)
	}
	oss, _ := LookupModel("gpt_oss_20b") // no h100 layout to borrow
	if _, err := oss.Layout("h200"); err == nil {
		t.Error("gpt_oss_20b has an h200 layout without an h100 one")
	}
}
