package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"cgtune/presets"
)

// ConfigContainer YAML files MB's own to_yaml wrote (mbconfig/testdata).
const (
	libraryRecipeYAML = "../../mbconfig/testdata/llama32_1b_pretrain_1gpu_h100_bf16_config.yaml"
	builtinRecipeYAML = "../../mbconfig/testdata/qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config.yaml"
)

// A recipe cgtune has no built-in for (an MB library recipe of Llama 3.2
// 1B) imports, plans and searches with the estimate engine.
func TestMBridgeConfigImportsPlansAndSearches(t *testing.T) {
	code, out, errs := runCmd(t, "--headless", "--mbridge-config", libraryRecipeYAML, "--engine", "estimate", "--budget", "0", "--json",
		"--run-dir", filepath.Join(t.TempDir(), "run"))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Model   string `json:"model"`
		Ranking []struct {
			Candidate presets.Candidate `json:"candidate"`
		} `json:"ranking"`
		Winner *struct {
			Candidate presets.Candidate `json:"candidate"`
		} `json:"winner"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if res.Model != "llama32_1b" || len(res.Ranking) < 2 || res.Winner == nil {
		t.Errorf("result: model %q, %d ranked, winner %v\n%s", res.Model, len(res.Ranking), res.Winner, out)
	}
}

// The imported layout is the recipe's: the model its file names, one
// GPU, the batch and the graph the recipe ships.
func TestMBridgeConfigLayoutAndCheck(t *testing.T) {
	code, out, errs := runCmd(t, "check", "--mbridge-config", builtinRecipeYAML, "--impl", "transformer_engine", "--scope", "attn,moe")
	if code != exitInvalid || !strings.Contains(out+errs, "moe") {
		t.Errorf("check of an invalid scope on the imported qwen3_30b_a3b: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCmd(t, "check", "--mbridge-config", builtinRecipeYAML)
	if code != exitOK {
		t.Errorf("check of the imported recipe's own setting: exit %d\n%s%s", code, out, errs)
	}
}

func TestMBridgeConfigBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("model:\n  num_layers: x\ntrain: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notMB := filepath.Join(dir, "overrides.yaml")
	if err := os.WriteFile(notMB, []byte("model:\n  cuda_graph_impl: none\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^cgtune: [^\n]+\n$`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--headless", "--mbridge-config", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"--headless", "--mbridge-config", bad}, `bad.yaml:2: field model.num_layers: want an integer, got "x"`},
		{[]string{"--headless", "--mbridge-config", notMB}, "overrides.yaml:1: no train: section"},
		{[]string{"--headless", "--mbridge-config", libraryRecipeYAML, "--model", "llama3_8b"}, "give one of --model, --preset and --mbridge-config/--recipe"},
		{[]string{"--headless", "--mbridge-config", libraryRecipeYAML, "--recipe", "x"}, "not both"},
		{[]string{"--headless", "--model", "llama3_8b", "--num-gpus", "8"}, "--num-gpus and --vocab-size are for --mbridge-config or --recipe"},
	} {
		code, _, errs := runCmd(t, tc.args...)
		if code != exitBadInput || !line.MatchString(errs) || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, code, errs, tc.want)
		}
	}
}

// preset save keeps an imported model and layout as a team preset.
func TestPresetSaveImported(t *testing.T) {
	presetEnv(t, "")
	code, out, errs := runCmd(t, "preset", "save", "mine", "--mbridge-config", libraryRecipeYAML, "--warmups", "3")
	if code != exitOK || !strings.Contains(out, "saved mine (model llama32_1b, h100 layout") {
		t.Fatalf("save: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCmd(t, "preset", "show", "mine", "--json")
	var p presets.TeamPreset
	if code != exitOK || json.Unmarshal([]byte(out), &p) != nil {
		t.Fatalf("show: exit %d\n%s%s", code, out, errs)
	}
	if p.ModelInline == nil || p.ModelInline.Arch.Layers != 16 || p.Layout.NumGPUs != 1 || p.GPU != "h100" || len(p.Space.Warmups) != 1 {
		t.Errorf("saved preset %+v", p)
	}
}

// The layout flags of preset save edit a built-in's layout; given with an
// imported recipe they are refused, not silently dropped.
func TestPresetSaveImportedRefusesLayoutFlags(t *testing.T) {
	presetEnv(t, "")
	for _, flags := range [][]string{{"--tp", "2"}, {"--set", "model.seq_length=2048"}, {"--with-profile"}} {
		args := append([]string{"preset", "save", "mine", "--mbridge-config", libraryRecipeYAML}, flags...)
		code, out, errs := runCmd(t, args...)
		if code != exitBadInput || !strings.Contains(errs, flags[0]+" apply to --model only") || out != "" {
			t.Errorf("%v: exit %d\n%s%s", flags, code, out, errs)
		}
	}
}

// --recipe runs the recipe in the given Python (here a stand-in that
// writes what MB's to_yaml wrote for it) and imports what it writes.
func TestRecipeRunsInTheUsersPython(t *testing.T) {
	data, err := os.ReadFile(libraryRecipeYAML)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fixture := filepath.Join(dir, "fixture.yaml")
	if err := os.WriteFile(fixture, data, 0o644); err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(dir, "python")
	script := "#!/bin/sh\nwhile [ $# -gt 0 ]; do\n  case $1 in --out) cp " + fixture + " \"$2\"; shift;; --recipe) r=$2; shift;; esac; shift\ndone\n" +
		"if [ \"$r\" = broken ]; then echo 'Traceback (most recent call last):' >&2; echo 'RecipeError: recipe broken: no function of that name' >&2; exit 2; fi\n" +
		"echo '{\"recipe\": \"megatron.bridge.recipes.llama.h100.llama3:llama32_1b_pretrain_1gpu_h100_bf16_config\"}'\n"
	if err := os.WriteFile(python, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCmd(t, "check", "--recipe", "llama32_1b_pretrain_1gpu_h100_bf16_config", "--python", python)
	if code != exitOK {
		t.Errorf("check --recipe: exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = runCmd(t, "check", "--recipe", "broken", "--python", python)
	if code != exitBadInput || errs != "cgtune: --recipe: recipe broken: RecipeError: recipe broken: no function of that name\n" {
		t.Errorf("a recipe that fails: exit %d, %q", code, errs)
	}
}

// An interrupt while --recipe runs the user's recipe (a stand-in Python
// that never finishes) ends the import at once with exit 130, as an
// interrupt of the search does, not with a bad-input error.
func TestRecipeImportStopsOnInterrupt(t *testing.T) {
	python := filepath.Join(t.TempDir(), "python")
	if err := os.WriteFile(python, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	imp := &mbImportFlags{recipe: "llama32_1b_pretrain_1gpu_h100_bf16_config"}
	_, err := imp.load(ctx, python, "", "0.6")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitInterrupted || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 20*time.Second {
		t.Errorf("load: %v after %s; want exit %d wrapping the context's error, within seconds", err, time.Since(start), exitInterrupted)
	}
}
