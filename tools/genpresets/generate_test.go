package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	dumps  = "../../presets/testdata/mbrecipes"
	models = "../../presets/models"
)

// The committed built-in presets are what the recorded MB recipe dumps
// generate, byte for byte (CI has no Megatron-Bridge: the dumps stand in).
func TestCommittedPresetsMatchTheDumps(t *testing.T) {
	files, err := generate(dumps)
	if err != nil {
		t.Fatal(err)
	}
	if diff := compare(models, files); len(diff) > 0 {
		t.Errorf("regenerate with go run ./tools/genpresets:\n%s", strings.Join(diff, "\n"))
	}
	if len(files) != 17 {
		t.Errorf("%d models, want the 17 LLM pretraining models of MB HEAD's perf recipes", len(files))
	}
}

// A changed dump changes what is generated: the comparison is not vacuous.
func TestChangedDumpChangesThePresets(t *testing.T) {
	tmp := t.TempDir()
	entries, err := os.ReadDir(dumps)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dumps, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "llama3_8b_pretrain_8gpu_h100_bf16_config.yaml" {
			data = bytes.Replace(data, []byte("  global_batch_size: 128\n"), []byte("  global_batch_size: 256\n"), 1)
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := generate(tmp)
	if err != nil {
		t.Fatal(err)
	}
	diff := compare(models, files)
	if len(diff) != 1 || !strings.Contains(diff[0], "llama3_8b.yaml differs") {
		t.Errorf("after changing llama3_8b's h100 dump: %v", diff)
	}
	if !bytes.Contains(files["llama3_8b.yaml"], []byte("gbs: 256")) {
		t.Error("the changed batch size is not in the generated preset")
	}
}

// The index's selection follows the rule docs/mb-generator.md states:
// per model and GPU type, the accepted bf16 pretraining recipe of the
// smallest GPU count, else the accepted one of another precision with the
// smallest count; dev and large-scale variants left out; a plain recipe
// before a variant.
func TestIndexSelectionFollowsTheRule(t *testing.T) {
	ix, err := readIndex(dumps)
	if err != nil {
		t.Fatal(err)
	}
	order := []string{"bf16", "fp8cs", "fp8ds", "fp8sc", "fp8mx", "nvfp4"}
	better := func(a, b recipe) bool { // a ranks before b
		if (a.Precision == "bf16") != (b.Precision == "bf16") {
			return a.Precision == "bf16"
		}
		if a.NumGPUs != b.NumGPUs {
			return a.NumGPUs < b.NumGPUs
		}
		if a.Precision != b.Precision {
			return slices.Index(order, a.Precision) < slices.Index(order, b.Precision)
		}
		return a.Variant == "" && b.Variant != ""
	}
	best := map[[2]string]recipe{}
	for _, r := range ix.Recipes {
		if !r.Accepted || strings.Contains("_"+r.Variant+"_", "_dev_") || strings.Contains(r.Variant, "large_scale") {
			continue
		}
		k := [2]string{r.Model, r.GPU}
		if b, ok := best[k]; !ok || better(r, b) {
			best[k] = r
		}
	}
	selected := 0
	for _, r := range ix.Recipes {
		if r.Selected {
			selected++
			if best[[2]string{r.Model, r.GPU}].Function != r.Function {
				t.Errorf("%s/%s: selected %s, the rule picks %s", r.Model, r.GPU, r.Function, best[[2]string{r.Model, r.GPU}].Function)
			}
		}
	}
	if selected != len(best) {
		t.Errorf("%d recipes selected, the rule picks %d", selected, len(best))
	}
}
