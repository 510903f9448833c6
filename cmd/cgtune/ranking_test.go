package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
	"cgtune/stepmodel"
)

// aliasPreset searches a space in which [full_iteration] and
// [full_iteration, attn] are both spelled out.
const aliasPreset = `version: 1
name: alias-space
model: llama3_8b
gpu: h100
space:
  impls: [none, local, transformer_engine]
  scopes:
    - [full_iteration]
    - [full_iteration, attn]
    - [attn]
    - [attn, mamba]
  warmups: [1, 3]
mbridge: "0.4"
`

// A headless exhaustive search over a space holding [full_iteration] and
// [full_iteration, attn] ranks one row for them, and no two ranked rows
// emit the same overrides; the table names the other spelling.
func TestHeadlessOneRowPerEffectiveConfiguration(t *testing.T) {
	isolate(t)
	p := writeFile(t, "alias-space.yaml", aliasPreset)
	code, out, errb := cgtune(t, "--headless", "--preset", p, "--engine", "estimate", "--strategy", "exhaustive", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var res struct {
		Ranking []search.Ranked `json:"ranking"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	full := 0
	for _, r := range res.Ranking {
		c := r.Result.Candidate
		if c.FullIteration() {
			full++
		}
		o, err := recipe.WinnerOverrides(recipe.Target{Model: mustModel(t, "llama3_8b"), Layout: mustLayout(t, "llama3_8b"), MBridge: "0.4"}, c).Render("dotlist")
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := seen[string(o)]; dup {
			t.Errorf("%s and %s emit the same overrides: %s", prev, c.Key(), o)
		}
		seen[string(o)] = c.Key()
	}
	// none, and per warm-up: local full_iteration, local whole-layer
	// (what local attn graphs), te attn.
	if full != 2 || len(res.Ranking) != 7 {
		t.Errorf("%d full-iteration rows in %d: %v", full, len(res.Ranking), keysOf(res.Ranking))
	}
	code, out, errb = cgtune(t, "--headless", "--preset", p, "--engine", "estimate", "--strategy", "exhaustive")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb)
	}
	// The other spellings name only layers the model has: llama3_8b has
	// no Mamba layer, so "te attn,mamba" is te attn and not named.
	for _, want := range []string{"also spelled: local full_iteration,attn w3", "also spelled: local attn w3", "\nwhy: "} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "mamba") {
		t.Errorf("the table names Mamba layers llama3_8b does not have:\n%s", out)
	}
	perf05, _ := recipe.LookupRule("PERF-05")
	for _, want := range []string{"11 configurations (8 other spellings run as one of them), 7 valid, 4 rejected: PERF-05 (" + perf05.Summary + ") ×4\n"} {
		if !strings.Contains(errb, want) {
			t.Errorf("progress lacks %q:\n%s", want, errb)
		}
	}
}

func keysOf(rs []search.Ranked) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Result.Candidate.Key())
	}
	return out
}

func mustLayout(t *testing.T, name string) presets.Layout {
	t.Helper()
	l, err := mustModel(t, name).Layout("h100")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustModel(t *testing.T, name string) presets.Model {
	t.Helper()
	m, err := presets.LookupModel(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The headless table is honest about estimates: no spread ("—"), no GPU
// time spent; it says why the winner won and marks tied rows; --tie moves
// the band.
func TestHeadlessTableEstimate(t *testing.T) {
	isolate(t)
	code, out, errb := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--strategy", "exhaustive")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb)
	}
	// By default an estimate's table leaves out the spread it does not
	// have and the one source its caption names; --wide shows them.
	header, row := tableHeader(t, out)
	if !strings.Contains(header, "TIE") || strings.Contains(header, "P10–P90") || strings.Contains(header, "SOURCE") {
		t.Errorf("header %q: want TIE, no P10–P90 or SOURCE", header)
	}
	_, wide, _ := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--strategy", "exhaustive", "--wide")
	header, row = tableHeader(t, wide)
	for _, col := range []string{"P10–P90", "TIE", "SOURCE", "NOTE"} {
		if !strings.Contains(header, col) {
			t.Errorf("--wide header %q lacks %s", header, col)
		}
	}
	if !strings.Contains(row, "  —  ") || !strings.Contains(row, "estimated") {
		t.Errorf("--wide first row %q: want a dash for the spread of an estimate", row)
	}
	if !strings.Contains(out, "\nwhy: ") || !strings.Contains(out, "1% of the step") {
		t.Errorf("no reason under the table:\n%s", out)
	}
	if !strings.Contains(errb, "of computation (estimated: no GPU ran; measured on a GPU, these runs would take about") || strings.Contains(errb, "engine time") {
		t.Errorf("done line:\n%s", errb)
	}
	code, out, _ = cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--strategy", "exhaustive", "--tie", "0.1%")
	if code != exitOK || !strings.Contains(out, "0.1% of the step") {
		t.Errorf("--tie 0.1%%: exit %d\n%s", code, out)
	}
	for _, bad := range []string{"1", "-2%", "abc"} {
		t.Run(bad, func(t *testing.T) {
			if code, _, errb := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--tie", bad); code != exitBadInput || !strings.Contains(errb, "--tie") {
				t.Errorf("--tie %s: exit %d %q", bad, code, errb)
			}
		})
	}
}

// A preset saved by name is found by name: check and the search take
// --preset NAME through the search path; preset save targets MB 0.4 and
// the default warm-ups, and saves the canonical space.
func TestPresetByName(t *testing.T) {
	home := isolate(t)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	t.Setenv("CGTUNE_PRESETS", "")
	code, _, errb := cgtune(t, "preset", "save", "qwen-team", "--model", "qwen3_30b_a3b", "--gpu-type", "h200",
		"--scopes", "full_iteration,attn;full_iteration;attn,mamba")
	if code != exitOK {
		t.Fatalf("save: exit %d %s", code, errb)
	}
	code, out, errb := cgtune(t, "preset", "show", "qwen-team")
	if code != exitOK {
		t.Fatalf("show: %d %s", code, errb)
	}
	for _, want := range []string{"mbridge: \"0.4\"", "warmups: [1, 2, 3]", "gpu: h200", "- [full_iteration]\n", "- [attn]\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("saved preset lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "mamba") || strings.Count(out, "full_iteration") != 1 {
		t.Errorf("saved space is not canonical:\n%s", out)
	}
	if code, out, errb := cgtune(t, "check", "--preset", "qwen-team", "--impl", "transformer_engine", "--scope", "attn"); code != exitOK || out != "valid\n" {
		t.Errorf("check --preset NAME: exit %d %q %q", code, out, errb)
	}
	if code, _, errb := cgtune(t, "--headless", "--preset", "qwen-team", "--engine", "estimate"); code != exitOK {
		t.Errorf("--headless --preset NAME: exit %d %s", code, errb)
	}
	code, _, errb = cgtune(t, "check", "--preset", "no-such-team", "--impl", "none")
	if code != exitBadInput || !strings.Contains(errb, `preset "no-such-team" not found (searched: `) {
		t.Errorf("unknown preset: exit %d %q", code, errb)
	}
	code, _, errb = cgtune(t, "check", "--preset", "./missing.yaml", "--impl", "none")
	if code != exitBadInput || !strings.Contains(errb, "no such file") {
		t.Errorf("missing preset file: exit %d %q", code, errb)
	}
}

// --report writes the Markdown report and its plot beside it; a path that
// cannot take it is refused before the search starts.
func TestHeadlessReport(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	md := filepath.Join(dir, "r.md")
	code, _, errb := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--report", md)
	if code != exitOK || !strings.Contains(errb, "wrote the report to "+md+" and its plot to "+filepath.Join(dir, "r.svg")) {
		t.Fatalf("exit %d: %s", code, errb)
	}
	data, err := os.ReadFile(md)
	if err != nil || !strings.Contains(string(data), "# cgtune report: llama3_8b on h100") || !strings.Contains(string(data), "](r.svg)") {
		t.Errorf("report %v:\n%.400s", err, data)
	}
	if svg, err := os.ReadFile(filepath.Join(dir, "r.svg")); err != nil || !strings.Contains(string(svg), "<svg") {
		t.Errorf("plot: %v", err)
	}
	for _, bad := range []string{filepath.Join(dir, "r.svg"), filepath.Join(dir, "missing", "r.md")} {
		t.Run(strings.TrimPrefix(bad, dir), func(t *testing.T) {
			if code, _, errb := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--report", bad); code != exitBadInput || !strings.Contains(errb, "--report") {
				t.Errorf("--report %s: exit %d %q", bad, code, errb)
			}
		})
	}
}

// The done line says how many runs ran now and how many were read back
// from the journal, never one number in brackets of the other.
func TestRunsText(t *testing.T) {
	for _, tc := range []struct {
		name          string
		runs, resumed int
		want          string
	}{
		{"fresh", 16, 0, "16 runs"},
		{"one", 1, 0, "1 run"},
		{"resumed", 1, 60, "1 run now, 60 runs read back from the journal (61 in all)"},
		{"all from the journal", 0, 2, "0 runs now, 2 runs read back from the journal (2 in all)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runsText(search.DoneEvent{Runs: tc.runs, Resumed: tc.resumed}); got != tc.want {
				t.Errorf("runsText(%d, %d) = %q, want %q", tc.runs, tc.resumed, got, tc.want)
			}
		})
	}
}

// The table says which optimizer the framework's runs stepped: the job's,
// or the stand-in for it.
func TestTableNamesTheFrameworkOptimizer(t *testing.T) {
	r := search.Ranked{Rank: 1, Fits: true}
	r.Result.Candidate = presets.Candidate{Impl: presets.ImplNone}
	r.Result.Framework = &engine.FrameworkInfo{Optimizer: "torch fused AdamW + foreach norms (standing in for FusedAdam)"}
	var b strings.Builder
	printRanking(&b, search.DoneEvent{Ranking: []search.Ranked{r}}, nil, search.Config{}, false)
	if !strings.Contains(b.String(), "optimizer (framework runs): torch fused AdamW + foreach norms (standing in for FusedAdam)") {
		t.Errorf("the table does not name the optimizer:\n%s", b.String())
	}
}

// GRAPH MiB means one thing headless as in the TUI: the job's per-rank
// graph memory (the memory model's graphs term), in the table, the winner
// line, the progress line and the JSON (job_graph_mib), for a result whose
// run measured 22908 MiB on its slice and 9133 MiB scaled to the stage
// (the three figures).
func TestHeadlessGraphMemoryIsTheJobsPerRank(t *testing.T) {
	b := &stepmodel.MemoryBreakdown{Graphs: 3072, GPUMiB: 143771, Fits: true}
	r := search.Ranked{Rank: 1, Fits: true}
	r.Result.Candidate = presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}, Warmup: 3}
	r.Result.Step, r.Result.Eager, r.Result.Speedup = stepmodel.Stats{Median: 100, N: 8}, stepmodel.Stats{Median: 110, N: 8}, 1.1
	r.Result.Memory = engine.Memory{GraphMiB: 22908, GraphFullJobMiB: 9133, Breakdown: b}
	var out strings.Builder
	printRanking(&out, search.DoneEvent{Ranking: []search.Ranked{r}, Winner: &r}, nil, search.Config{}, false)
	_, row := tableHeader(t, out.String())
	winner := ""
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "winner: ") {
			winner = l
		}
	}
	if !strings.Contains(row, "  3072  ") || !strings.Contains(winner, "graphs 3072 MiB") || strings.Contains(out.String(), "9133") || strings.Contains(out.String(), "22908") {
		t.Errorf("table:\n%s", out.String())
	}
	var prog strings.Builder
	(&progress{w: &prog}).event(search.ResultEvent{Result: r.Result, Done: 1, Total: 1})
	if !strings.Contains(prog.String(), "graphs 3072 MiB") {
		t.Errorf("progress line %q", prog.String())
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Result struct {
			Memory map[string]any `json:"memory"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &back); err != nil || back.Result.Memory["job_graph_mib"] != 3072.0 {
		t.Errorf("json memory %v (%v)", back.Result.Memory, err)
	}
}
