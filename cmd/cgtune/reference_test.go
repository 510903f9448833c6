package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The recipe's own setting and the winner's gain over it are in the
// headless table, the --json object, the report and the emitted file: a
// recipe that ships a graph (llama3_8b b200: local full_iteration), one
// that ships TE scopes (qwen3_30b_a3b gb200) and one that ships none
// (llama3_8b h100).
func TestHeadlessShowsTheRecipesSetting(t *testing.T) {
	for _, tc := range []struct{ model, gpu, ships string }{
		{"llama3_8b", "b200", "full_iteration w3"},
		{"qwen3_30b_a3b", "gb200", "te attn,moe_router,moe_preprocess w3"},
		{"llama3_8b", "h100", "none"},
	} {
		t.Run(tc.model+"/"+tc.gpu, func(t *testing.T) {
			dir := t.TempDir()
			report, emit := filepath.Join(dir, "r.md"), filepath.Join(dir, "o.yaml")
			code, out, errb := cgtune(t, "--headless", "--model", tc.model, "--gpu-type", tc.gpu, "--engine", "estimate", "--mbridge", "0.7",
				"--run-dir", filepath.Join(dir, "run"), "--report", report, "--emit", emit)
			if code != 0 {
				t.Fatalf("exit %d\n%s%s", code, out, errb)
			}
			want := "the recipe ships " + tc.ships
			if !strings.Contains(out, "VS RECIPE") || !strings.Contains(out, "reference: "+want) {
				t.Errorf("the table does not show the reference (%q):\n%s", want, out)
			}
			for name, path := range map[string]string{"report": report, "overrides": emit} {
				t.Run(name, func(t *testing.T) {
					b, err := os.ReadFile(path)
					if err != nil || !strings.Contains(string(b), want) {
						t.Errorf("the %s does not say %q (%v)", name, want, err)
					}
				})
			}
			code, out, errb = cgtune(t, "--headless", "--model", tc.model, "--gpu-type", tc.gpu, "--engine", "estimate", "--mbridge", "0.7",
				"--run-dir", filepath.Join(dir, "run2"), "--json")
			var res struct {
				Reference *struct {
					Ranked *struct {
						VsReference float64 `json:"vs_reference"`
					} `json:"ranked"`
				} `json:"reference"`
				Winner *struct {
					VsReference float64 `json:"vs_reference"`
				} `json:"winner"`
				ReferenceText string `json:"reference_text"`
			}
			if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil {
				t.Fatalf("--json: exit %d, %v\n%s", code, err, errb)
			}
			if res.Reference == nil || res.Reference.Ranked == nil || res.Winner == nil || res.Winner.VsReference <= 0 ||
				!strings.HasPrefix(res.ReferenceText, want) {
				t.Errorf("--json lacks the reference and the winner's gain over it: %+v", res)
			}
		})
	}
}
