package main

import (
	"bytes"
	"encoding/json"
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
	if len(lines) != 11 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("want a header and 10 rows:\n%s", out)
	}
	for i, name := range presets.BuiltinModelNames() {
		if f := strings.Fields(lines[i+1]); f[0] != name {
			t.Errorf("row %d is %q, want %s", i+1, f[0], name)
		}
	}
	for _, want := range []string{
		"deepseek_v3      61      7168    moe     256/8",
		"nemotronh_56b    118     8192    hybrid  -",
		"nemotron_3_nano  52      2688    hybrid  128/6",
		"gpt_oss_20b      24      2880    moe     32/4           b300(8) gb200(8) gb300(8)",
		"h100(1024)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestModelsGPU(t *testing.T) {
	code, out, _ := runCmd(t, "models", "--gpu-type", "h100")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	// llama3_70b on h100: TP4 PP4 VP5 CP2, GBS 256, MBS 1, DP 64/32 = 2 → 128 micro-batches.
	if !strings.Contains(out, "llama3_70b       64    bf16       4   4   5   2   1   256    1    8192  128") {
		t.Errorf("llama3_70b h100 row missing or wrong:\n%s", out)
	}
	if !strings.Contains(out, "no h100 layout in the MB perf recipes for: gpt_oss_20b") {
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
	if len(rows) != 10 || rows[5].Model != "deepseek_v3" || rows[5].Layout.EP != 64 || rows[5].MicroBatches != 64 {
		t.Errorf("json rows %+v", rows)
	}

	// h200, the GPU cgtune was measured on, is a GPU type: MB has no h200
	// perf recipes, so it shows the h100 layouts and says so.
	code, out, errs := runCmd(t, "models", "--gpu-type", "h200")
	if code != exitOK || !strings.Contains(out, "llama3_70b       64    bf16       4   4   5   2   1   256    1    8192  128") ||
		!strings.Contains(out, "h200 has no MB perf recipes: the h100 layouts") || !strings.Contains(out, "no h200 layout in the MB perf recipes for: gpt_oss_20b") {
		t.Errorf("--gpu-type h200: exit %d, %q\n%s", code, errs, out)
	}
	code, _, errs = runCmd(t, "models", "--gpu-type", "a100")
	if code != exitBadInput || !strings.Contains(errs, `--gpu-type "a100": unknown GPU type`) || !strings.Contains(errs, "h100, h200, b200") {
		t.Errorf("--gpu-type a100: exit %d, %q", code, errs)
	}
	// --gpu is GPU indices everywhere; a type given to it is pointed at --gpu-type.
	for _, args := range [][]string{{"models", "--gpu", "h100"}, {"check", "--model", "llama3_8b", "--gpu", "h100"}, {"emit", "--impl", "none", "--gpu", "h100"}, {"preset", "save", "x", "--model", "llama3_8b", "--gpu", "h100"}} {
		code, _, errs = runCmd(t, args...)
		if code != exitBadInput || !strings.Contains(errs, "--gpu takes GPU indices") || !strings.Contains(errs, "--gpu-type h100") {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
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
	if len(ms) != 10 || ms[9].Arch.HybridPattern == "" || ms[0].Layouts["h100"].CP != 2 {
		t.Errorf("models json: %d models", len(ms))
	}
	if code, _, _ := runCmd(t, "models", "extra"); code != exitBadInput {
		t.Errorf("models with an argument: exit %d", code)
	}
}
