package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dropped is what every output says of a drop-and-pad recipe.
const dropped = "tokens over an expert's capacity are dropped, which changes training"

// A search whose recipe makes the stock recipe's dropless experts
// drop-and-pad (a capacity factor with its padding) says in one line,
// next to the speed-up, that tokens over capacity are dropped: under the
// table, in the emitted file, the report and --json. A search of the stock
// recipe says nothing of the kind.
func TestDropAndPadIsACondition(t *testing.T) {
	isolate(t)
	dnp := []string{"--set", "model.moe_expert_capacity_factor=1.0", "--set", "model.moe_pad_expert_input_to_capacity=true"}
	for _, tc := range []struct {
		name  string
		sets  []string
		drops bool
	}{{"drop-and-pad", dnp, true}, {"dropless", nil, false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"--headless", "--model", "qwen3_30b_a3b", "--gpu-type", "h100", "--engine", "estimate"}, tc.sets...)
			emit, rep := filepath.Join(dir, "o.yaml"), filepath.Join(dir, "r.md")
			code, out, errb := cgtune(t, append(args, "--emit", emit, "--report", rep, "--run-dir", filepath.Join(dir, "run"))...)
			if code != exitOK {
				t.Fatalf("exit %d\n%s", code, errb)
			}
			code, js, _ := cgtune(t, append(args, "--json", "--run-dir", filepath.Join(dir, "json"))...)
			var res struct {
				DropsTokens string `json:"drops_tokens"`
				Winner      struct {
					Name        string  `json:"name"`
					VsReference float64 `json:"vs_reference"`
				} `json:"winner"`
			}
			if err := json.Unmarshal([]byte(js), &res); code != exitOK || err != nil {
				t.Fatalf("--json: exit %d %v", code, err)
			}
			file, _ := os.ReadFile(emit)
			report, _ := os.ReadFile(rep)
			// One line, next to the speed-up the winner was ranked at.
			buys := "ranked with it at"
			// The ranking's lines wrap at 160 columns, the next indented.
			unwrapped := regexp.MustCompile(`\n {2,}`).ReplaceAllString(out, " ")
			for where, text := range map[string]string{"the ranking": unwrapped, "the emitted file": string(file), "the report": string(report), "--json's drops_tokens": res.DropsTokens} {
				line := lineWith(text, dropped)
				switch {
				case tc.drops && (line == "" || !strings.Contains(line, res.Winner.Name+" was ranked with it at")):
					t.Errorf("%s does not say in one line, next to the speed-up, that tokens are dropped:\n%s", where, text)
				case !tc.drops && (line != "" || strings.Contains(text, buys)):
					t.Errorf("%s of a dropless search says tokens are dropped:\n%s", where, line)
				}
			}
		})
	}
}

// lineWith is the line of text that holds s, "" when none does.
func lineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
