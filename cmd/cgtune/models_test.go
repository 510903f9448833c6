package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"cgtune/presets"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestModelsTable(t *testing.T) {
	code, out, _ := runCmd(t, "models")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	n := len(presets.BuiltinModelNames())
	if n != 17 || len(lines) != n+2 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("want a header, the 17 LLM pretraining models of MB HEAD's perf recipes and the h200 note:\n%s", out)
	}
	for i, name := range presets.BuiltinModelNames() {
		if f := strings.Fields(lines[i+1]); f[0] != name {
			t.Errorf("row %d is %q, want %s", i+1, f[0], name)
		}
	}
	for _, want := range []string{
		`\ndeepseek_v3 +61 +7168 +moe +256/8 `,
		`\nnemotronh_56b +118 +8192 +hybrid +- `,
		`\nnemotron_3_nano +52 +2688 +hybrid +128/6 `,
		`\ngpt_oss_20b +24 +2880 +moe +32/4 +b300\(8\) gb200\(8\) gb300\(8\) vr200\(8\)\n`,
		`\nkimi_k2 +61 +7168 +moe +384/8 +h100\(1024\) h200\(h100's\)`,
		`\nnemotron_3_ultra +108 +8192 +hybrid +512/22 +gb200\(256\) gb300\(256\)\n`,
		`\nh200\(h100's\): MB has no h200 perf recipes; its jobs run the h100 layouts`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("table does not match %q:\n%s", want, out)
		}
	}
	// h200 borrows h100's layouts; it has no GPU count of its own.
	if strings.Contains(out, "h200(0)") {
		t.Errorf("h200 shown with 0 GPUs:\n%s", out)
	}
}

// Each layout row names the MB perf recipe it is and the CUDA-graph
// setting that recipe ships.
func TestModelsShowRecipeAndShippedGraph(t *testing.T) {
	ms, err := presets.BuiltinModels()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range presets.GPUs() {
		code, out, _ := runCmd(t, "models", "--gpu-type", g)
		if code != exitOK {
			t.Fatalf("--gpu-type %s: exit %d", g, code)
		}
		rows := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 {
				rows[f[0]] = line
			}
		}
		for _, m := range ms {
			l, err := m.Layout(g)
			if err != nil {
				continue
			}
			t.Run(m.Name+"/"+g, func(t *testing.T) {
				_, fn := recipeOf(l.Source)
				if fn == "" || !strings.Contains(l.Source, fn) {
					t.Fatalf("no recipe function in source %q", l.Source)
				}
				if row := rows[m.Name]; !strings.HasSuffix(row, " "+fn) || !strings.Contains(row, "  "+graphText(l.ShippedGraph())+"  ") {
					t.Errorf("row %q lacks the recipe %s and the graph %q", row, fn, graphText(l.ShippedGraph()))
				}
			})
		}
	}
	// Two rows read off MB HEAD's perf recipes.
	_, out, _ := runCmd(t, "models", "--gpu-type", "b200")
	for _, want := range []string{`\nllama3_8b .* full_iteration w3 +llama3_8b_pretrain_8gpu_b200_bf16_config\n`,
		`\nqwen3_235b_a22b .* none +qwen3_235b_a22b_pretrain_64gpu_b200_bf16_config\n`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("b200 table does not match %q:\n%s", want, out)
		}
	}
}

func TestModelsNoLayoutForGPUType(t *testing.T) {
	oss, err := presets.LookupModel("gpt_oss_20b")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := layoutsTable(&out, []presets.Model{oss}, "h100"); err != nil {
		t.Fatal(err)
	}
	if out.String() != "no built-in model has a layout for GPU type h100: MB's perf recipes have none for it\n" {
		t.Errorf("got %q", out.String())
	}
}

func TestModelsGPU(t *testing.T) {
	code, out, _ := runCmd(t, "models", "--gpu-type", "h100")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	// llama3_70b on h100: TP4 PP4 VP5 CP2, GBS 256, MBS 1, DP 64/32 = 2 → 128 micro-batches.
	llama70 := regexp.MustCompile(`\nllama3_70b +64 +bf16 +4 +4 +5 +2 +1 +256 +1 +8192 +128 `)
	if !llama70.MatchString(out) {
		t.Errorf("llama3_70b h100 row missing or wrong:\n%s", out)
	}
	if !strings.Contains(out, "no h100 layout in the MB perf recipes for: deepseek_v4_flash, deepseek_v4_pro, gpt_oss_20b, nemotron_3_ultra") {
		t.Errorf("missing-layout note absent:\n%s", out)
	}

	code, out, _ = runCmd(t, "models", "--gpu-type", "gb200", "--json")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var rows []struct {
		Model        string          `json:"model"`
		Layout       *presets.Layout `json:"layout"`
		MicroBatches int             `json:"micro_batches"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	byName := map[string]int{}
	for i, r := range rows {
		byName[r.Model] = i
	}
	if ds := rows[byName["deepseek_v3"]]; len(rows) != 17 || ds.Layout == nil || ds.Layout.EP != 64 || ds.MicroBatches != 64 {
		t.Errorf("json rows %+v", rows)
	}

	// JSON rows say where a layout came from and what graph it ships;
	// h200's are h100's.
	code, out, _ = runCmd(t, "models", "--gpu-type", "h200", "--json")
	var h200 []modelLayoutJSON
	if err := json.Unmarshal([]byte(out), &h200); code != exitOK || err != nil {
		t.Fatalf("exit %d, %v\n%s", code, err, out)
	}
	at := func(name string) modelLayoutJSON {
		for _, r := range h200 {
			if r.Model == name {
				return r
			}
		}
		t.Fatalf("no %s row", name)
		return modelLayoutJSON{}
	}
	q := at("qwen3_30b_a3b")
	if q.Model != "qwen3_30b_a3b" || q.BorrowedFrom != "h100" || q.Recipe != "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config" ||
		q.RecipeFile != "src/megatron/bridge/perf_recipes/qwen/h100/qwen3_moe.py" || q.ShippedCUDAGraph == nil ||
		q.ShippedCUDAGraph.Key() != "transformer_engine/moe_router,moe_preprocess/w3" {
		t.Errorf("h200 qwen3_30b_a3b row %+v", q)
	}
	if oss := at("gpt_oss_20b"); oss.Layout != nil || oss.ShippedCUDAGraph != nil {
		t.Errorf("h200 gpt_oss_20b row %+v, want no layout", oss)
	}

	// h200, the GPU cgtune was measured on, is a GPU type: MB has no h200
	// perf recipes, so it shows the h100 layouts and says so.
	code, out, errs := runCmd(t, "models", "--gpu-type", "h200")
	if code != exitOK || !llama70.MatchString(out) ||
		!strings.Contains(out, "h200 has no MB perf recipes: the h100 layouts") || !strings.Contains(out, "no h200 layout in the MB perf recipes for: deepseek_v4_flash, deepseek_v4_pro, gpt_oss_20b, nemotron_3_ultra") {
		t.Errorf("--gpu-type h200: exit %d, %q\n%s", code, errs, out)
	}
	code, _, errs = runCmd(t, "models", "--gpu-type", "a100")
	if code != exitBadInput || !strings.Contains(errs, `--gpu-type "a100": unknown GPU type`) || !strings.Contains(errs, "h100, h200, b200") {
		t.Errorf("--gpu-type a100: exit %d, %q", code, errs)
	}
	// --gpu is GPU indices everywhere; a type given to it is pointed at --gpu-type.
	for _, args := range [][]string{{"models", "--gpu", "h100"}, {"check", "--model", "llama3_8b", "--gpu", "h100"}, {"emit", "--impl", "none", "--gpu", "h100"}, {"preset", "save", "x", "--model", "llama3_8b", "--gpu", "h100"}} {
		t.Run(argsName(args), func(t *testing.T) {
			code, _, errs = runCmd(t, args...)
			if code != exitBadInput || !strings.Contains(errs, "--gpu takes GPU indices") || !strings.Contains(errs, "--gpu-type h100") {
				t.Errorf("%v: exit %d, %q", args, code, errs)
			}
		})
	}
}

func TestModelsJSON(t *testing.T) {
	code, out, _ := runCmd(t, "models", "--json")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var ms []presets.Model
	if err := json.Unmarshal([]byte(out), &ms); err != nil {
		t.Fatal(err)
	}
	if len(ms) != 17 || ms[16].Arch.HybridPattern == "" || ms[0].Layouts["h100"].CP != 2 {
		t.Errorf("models json: %d models", len(ms))
	}
	if code, _, _ := runCmd(t, "models", "extra"); code != exitBadInput {
		t.Errorf("models with an argument: exit %d", code)
	}
}
