package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// whatIfRow finds the line of the what-if table (after "what if:") whose
// candidate and changes are cand and changes.
func whatIfRow(t *testing.T, out, cand, changes string) []string {
	t.Helper()
	_, table, ok := strings.Cut(out, "\nwhat if: ")
	if !ok {
		t.Fatalf("no what-if table:\n%s", out)
	}
	re := regexp.MustCompile(`(?m)^\d+\s+` + regexp.QuoteMeta(cand) + `\s{2,}` + regexp.QuoteMeta(changes) + `\s{2,}.*$`)
	line := re.FindString(table)
	if line == "" {
		t.Fatalf("no what-if row of %s with %s:\n%s", cand, changes, table)
	}
	return regexp.MustCompile(`\s{2,}`).Split(line, -1)
}

// The acceptance: the headless search of qwen3_30b_a3b on the
// estimate engine lists local full_iteration and te attn,moe, which its
// h100 recipe rejects (dropless experts, EP overlap on), as what-if rows
// with drop-and-pad and EP overlap off; their speed-ups are over the
// recipe's own eager step (the none row of the ranking), their eager step
// with the changes is shown apart, and the winner stays a candidate the
// recipe allows. --json carries the same rows.
func TestHeadlessWhatIfListsWhatTheChangesUnlock(t *testing.T) {
	isolate(t)
	code, out, errb := cgtune(t, "--headless", "--model", "qwen3_30b_a3b", "--engine", "estimate", "--what-if")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errb)
	}
	none := regexp.MustCompile(`(?m)^\d+\s+none\s+(?:—\s+)?([0-9.]+)\s`).FindStringSubmatch(out)
	if none == nil {
		t.Fatalf("no none row:\n%s", out)
	}
	eager, _ := strconv.ParseFloat(none[1], 64)
	if !strings.Contains(out, "SPEED-UP is over the recipe's own eager step as it runs today ("+none[1]+" ms/step") {
		t.Errorf("the what-if table does not say its speed-ups are over the recipe's eager step %s ms:\n%s", none[1], out)
	}
	for _, cand := range []string{"full_iteration w3", "te attn,moe w3"} {
		// RANK CANDIDATE CHANGES STEP SPEED-UP VS-RECIPE EAGER-WITH-CHANGES CHANGES-ALONE GRAPH-GAIN ...
		f := whatIfRow(t, out, cand, "ep-overlap-off, drop-and-pad")
		step, _ := strconv.ParseFloat(f[3], 64)
		changed, _ := strconv.ParseFloat(f[6], 64)
		if want := strconv.FormatFloat(eager/step, 'f', 3, 64) + "×"; f[4] != want {
			t.Errorf("%s: speed-up %s, want %s (the recipe's eager %.2f over its step %.2f)", cand, f[4], want, eager, step)
		}
		if want := strconv.FormatFloat(changed/step, 'f', 3, 64) + "×"; f[8] != want || changed == eager {
			t.Errorf("%s: graph gain %s over its own eager %.2f, want %s, apart from the recipe's %.2f", cand, f[8], changed, want, eager)
		}
	}
	for _, want := range []string{"\nwinner: te moe_router,moe_preprocess w3", "  drop-and-pad: ", "  ep-overlap-off: ", "comm_overlap.overlap_moe_expert_parallel_comm=false",
		"cost: tokens over an expert's capacity are dropped", "estimate engine: modelled"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q", want)
		}
	}

	code, js, errb := cgtune(t, "--headless", "--model", "qwen3_30b_a3b", "--engine", "estimate", "--what-if", "--json")
	if code != exitOK {
		t.Fatalf("--json: exit %d\n%s", code, errb)
	}
	var res struct {
		Ranking []struct {
			Result struct {
				Candidate struct {
					WhatIf []string `json:"what_if"`
				} `json:"candidate"`
			} `json:"result"`
		} `json:"ranking"`
		WhatIf []struct {
			Result struct {
				Candidate struct {
					Impl   string   `json:"impl"`
					Scopes []string `json:"scopes"`
					WhatIf []string `json:"what_if"`
				} `json:"candidate"`
				Speedup float64 `json:"speedup"`
			} `json:"result"`
			WhatIf struct {
				Changes []struct {
					Name, Cost, Priced string
				} `json:"changes"`
				RecipeEager struct {
					Median float64 `json:"median_ms"`
				} `json:"recipe_eager"`
				ChangedEager struct {
					Median float64 `json:"median_ms"`
				} `json:"changed_eager"`
			} `json:"what_if"`
		} `json:"what_if"`
	}
	if err := json.Unmarshal([]byte(js), &res); err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Ranking {
		if len(r.Result.Candidate.WhatIf) > 0 {
			t.Errorf("--json: a what-if row %v in the ranking", r.Result.Candidate.WhatIf)
		}
	}
	found := false
	for _, r := range res.WhatIf {
		c := r.Result.Candidate
		if c.Impl == "local" && slices.Equal(c.Scopes, []string{"full_iteration"}) && len(c.WhatIf) == 2 {
			found = true
			if len(r.WhatIf.Changes) != 2 || r.WhatIf.Changes[0].Cost == "" || r.WhatIf.RecipeEager.Median <= 0 || r.WhatIf.ChangedEager.Median <= 0 {
				t.Errorf("--json: the full-iteration row's pricing: %+v", r.WhatIf)
			}
		}
	}
	if !found {
		t.Errorf("--json: no what-if row of local full_iteration:\n%s", js)
	}
}

// --what-if=accept names the changes the user accepts: a row of only
// those may win, and the file --emit writes carries its changes, each
// with its cost, and passes cgtune check on the stock recipe.
func TestAcceptedWhatIfWinnerEmitsItsChanges(t *testing.T) {
	isolate(t)
	out := filepath.Join(t.TempDir(), "o.yaml")
	code, stdout, errb := cgtune(t, "--headless", "--model", "qwen3_30b_a3b", "--engine", "estimate",
		"--what-if=accept=drop-and-pad,ep-overlap-off", "--emit", out)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errb)
	}
	w := regexp.MustCompile(`(?m)^winner: (.*?) w\d+ \[([a-z, -]+)\]:`).FindStringSubmatch(stdout)
	if w == nil {
		t.Fatalf("the winner is no what-if row:\n%s", stdout)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "# what-if: the recipe rejects "+w[1]+" w") {
		t.Errorf("the overrides do not say the recipe rejects %s today:\n%s", w[1], data)
	}
	for _, ch := range strings.Split(w[2], ", ") {
		if !strings.Contains(string(data), "the what-if change "+ch+"; its cost: ") {
			t.Errorf("the overrides do not carry %s with its cost:\n%s", ch, data)
		}
	}
	if code, got, errb := cgtune(t, "check", "--model", "qwen3_30b_a3b", "--gpu-type", "h100", out); code != exitOK || got != "valid\n" {
		t.Errorf("check of the accepted winner's overrides on the stock recipe: exit %d, %q %q\n%s", code, got, errb, data)
	}
}

// A --what-if value that is neither on nor accept=NAME,... is bad input:
// one line naming the changes allowed, nothing written.
func TestWhatIfRefusesUnknownChanges(t *testing.T) {
	cache := isolate(t)
	out := filepath.Join(t.TempDir(), "o.yaml")
	for _, v := range []string{"--what-if=accept=drop-and-padd", "--what-if=maybe", "--what-if=accept="} {
		code, stdout, errb := cgtune(t, "--headless", "--model", "qwen3_30b_a3b", "--engine", "estimate", v, "--emit", out)
		if code != exitBadInput || strings.Count(strings.TrimSpace(errb), "\n") != 0 || !strings.Contains(errb, "drop-and-pad, ") || stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", v, code, stdout, errb)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: %s written", v, out)
		}
	}
	if runs, _ := filepath.Glob(filepath.Join(cache, "cgtune", "runs", "*")); len(runs) > 0 {
		t.Errorf("run folders left: %v", runs)
	}
}
