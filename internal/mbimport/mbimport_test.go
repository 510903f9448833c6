package mbimport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOptionsFromRecipeName(t *testing.T) {
	o := Options{}.fromName("megatron.bridge.recipes.llama.h100.llama3:llama3_8b_pretrain_2gpu_h100_bf16_config")
	if o.Name != "llama3_8b" || o.NumGPUs != 2 || o.GPU != "h100" {
		t.Errorf("from a library recipe's name: %+v", o)
	}
	o = Options{GPU: "b200", NumGPUs: 16, Name: "mine"}.fromName("qwen3_30b_a3b_pretrain_8gpu_gb200_bf16_config.yaml")
	if o.Name != "mine" || o.NumGPUs != 16 || o.GPU != "b200" {
		t.Errorf("given options must win over the name: %+v", o)
	}
	if o := (Options{}).fromName("ConfigContainer.yaml"); o != (Options{}) {
		t.Errorf("a name without a recipe in it gave %+v", o)
	}
	for in, want := range map[string]string{"/x/ConfigContainer.yaml": "configcontainer", "/x/My Recipe (v2).yml": "my-recipe-v2", "/x/__.yaml": "imported"} {
		if got := fileName(in); got != want {
			t.Errorf("fileName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A --dryrun file says its data-parallel size: the GPU count follows.
func TestFromFileTakesTheGPUCountOfADryRun(t *testing.T) {
	data, err := os.ReadFile("../../mbconfig/testdata/qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "ConfigContainer.yaml")
	if err := os.WriteFile(plain, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FromFile(plain, Options{}); err == nil || !strings.Contains(err.Error(), "--num-gpus") {
		t.Errorf("a file without a GPU count: %v", err)
	}
	dry := strings.Replace(string(data), "  data_parallel_size: null\n", "  data_parallel_size: 32\n", 1)
	if dry == string(data) {
		t.Fatal("no comm_overlap.data_parallel_size in the fixture")
	}
	if err := os.WriteFile(plain, []byte(dry), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := FromFile(plain, Options{GPU: "b200"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "configcontainer" || p.GPU != "b200" || p.Layout.NumGPUs != 32 || p.ModelInline == nil || p.ModelInline.Arch.MoE.Experts != 128 || p.MBridge == "" {
		t.Errorf("preset %+v, layout %+v", p, p.Layout)
	}
}
