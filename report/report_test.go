package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
	"cgtune/stepmodel"
)

func result(impl string, scopes []string, w int, step, spread float64, graph int64, src engine.Source) engine.Result {
	return engine.Result{
		Candidate: presets.Candidate{Impl: impl, Scopes: scopes, Warmup: w},
		Source:    src, Device: engine.DeviceInfo{Name: "NVIDIA H200", Driver: "580.65.06", CUDA: "13.0", MemoryMiB: 143771},
		Step:    stepmodel.Stats{Median: step, P10: step - spread, P90: step + spread, N: 15},
		Eager:   stepmodel.Stats{Median: 1000, P10: 990, P90: 1010, N: 5},
		Speedup: 1000 / step, CaptureMs: 120,
		Memory: engine.Memory{GraphMiB: graph, GraphFullJobMiB: graph},
		Notes:  []string{"measured: rates probe of NVIDIA H200; host costs measured"},
	}
}

// input is a small measured search: a winner by a clear lead, a tie, a
// failure, a candidate that does not fit (with the memory model's
// breakdown), aliases and rejected candidates.
func input(t *testing.T) Input {
	t.Helper()
	m, err := presets.LookupModel("qwen3_30b_a3b")
	if err != nil {
		t.Fatal(err)
	}
	l, _ := m.Layout("h200")
	big := result(presets.ImplTE, []string{"attn", "moe_router", "moe_preprocess"}, 3, 700, 6, 90000, engine.SourceMeasured)
	big.Memory.Breakdown = &stepmodel.MemoryBreakdown{Weights: 7000, Gradients: 14000, Optimizer: 10500, Activations: 50000, Graphs: 90000, Context: 600, Total: 172100, GPUMiB: 143771}
	failed := result(presets.ImplTE, []string{}, 3, 0, 0, 0, engine.SourceMeasured)
	failed.Err, failed.ErrKind = "capture failed: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", engine.FailureCapture
	opts := search.RankOptions{JobGPUMemoryMiB: 143771}
	ranking := search.Rank([]engine.Result{
		result(presets.ImplLocal, []string{"full_iteration"}, 3, 850, 4, 2000, engine.SourceMeasured),
		result(presets.ImplTE, []string{"attn"}, 3, 905, 5, 3000, engine.SourceMeasured),
		result(presets.ImplNone, nil, 3, 1000, 10, 0, engine.SourceMeasured),
		result(presets.ImplTE, []string{"attn", "moe_router"}, 3, 900, 5, 3100, engine.SourceMeasured),
		big, failed,
	}, opts)
	plan := []search.Planned{
		{Candidate: presets.Candidate{Impl: "local", Scopes: []string{"full_iteration"}, Warmup: 3},
			Also: []presets.Candidate{{Impl: "local", Scopes: []string{"full_iteration", "attn"}, Warmup: 3}}},
		{Candidate: presets.Candidate{Impl: "transformer_engine", Scopes: []string{"moe"}, Warmup: 3},
			Violations: []recipe.Violation{{ID: "TC-22", Message: "moe cuda graph is only supported with drop-padding MoE."}}},
		{Candidate: presets.Candidate{Impl: "local", Scopes: []string{}, Warmup: 3},
			Violations: []recipe.Violation{{ID: recipe.WillFailID, Message: "the whole-layer graph of layer 0 (moe) would hold token_counts_to_host"}}},
	}
	d := search.DoneEvent{Ranking: ranking, Winner: search.Winner(ranking), Strategy: "exhaustive", Runs: 6, GPUTimeMs: 60000,
		RunDir: "/runs/x", Notes: []string{"exhaustive: every valid candidate"}}
	sets := map[string]string{"model.moe_router_padding_for_fp8": "false",
		"model.moe_expert_capacity_factor": "1.0", "model.moe_pad_expert_input_to_capacity": "true"}
	ov, _ := recipe.WinnerOverrides(recipe.Target{Model: m, Layout: l, MBridge: "0.4", Sets: sets}, d.Winner.Result.Candidate).Render("yaml")
	return Input{Version: "0.1.0-test", Now: time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC), Model: m, Layout: l, MBridge: "0.4",
		Engine: "cuda", Strategy: "exhaustive", TrainIters: 50, JobGPUMemoryMiB: 143771, Plan: plan, Done: d, Overrides: ov, Format: "yaml",
		Sets: sets}
}

// The report says what was searched, who won and why, every ranked
// figure with its source, what failed and what was never run with the
// rule, and links the plot it writes beside itself.
func TestWriteReport(t *testing.T) {
	in := input(t)
	dir := t.TempDir()
	md := filepath.Join(dir, "r.md")
	plot, err := Write(md, in, false)
	if err != nil {
		t.Fatal(err)
	}
	if plot != filepath.Join(dir, "r.svg") {
		t.Errorf("plot path %q", plot)
	}
	svg, err := os.ReadFile(plot)
	if err != nil || !strings.HasPrefix(string(svg), "<?xml") || !strings.Contains(string(svg), "<svg") {
		t.Fatalf("plot: %v %.80q", err, svg)
	}
	for _, want := range []string{"full_iteration w3  #1  (winner)", "te attn w3", "(right is faster)", "Graph memory at the job"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("plot lacks %q", want)
		}
	}
	data, _ := os.ReadFile(md)
	got := string(data)
	for _, want := range []string{
		"# cgtune report: qwen3_30b_a3b on h200 — full_iteration w3",
		"Written by cgtune 0.1.0-test on 2026-12-01 09:30 UTC.",
		"| Layout | 16× h200, bf16: TP 1, PP 1, VP none, CP 1, EP 16;",
		"h200 has no MB perf recipe: h100's layout",
		"| Megatron-Bridge | 0.4 (G2: cuda_graph_scope",
		"| GPU | NVIDIA H200, driver 580.65.06, CUDA 13.0, 143771 MiB |",
		"`model.moe_router_padding_for_fp8=false`",
		"**full_iteration w3**: 850.00 ms per step against 1000.00 ms eager (1.176×)",
		"Why: full_iteration w3 wins: 850.00 ms/step, 6.1% faster than the runner-up te attn w3 (905.00 ms/step), outside the tie band (±9.00 ms",
		"1 faster candidate(s) would not fit the job's GPU and cannot win (te attn,moe_router,moe_preprocess w3 needs 172100 MiB per GPU",
		"Megatron runs these spellings as the same configuration: local full_iteration,attn w3.",
		"```yaml\n# Generated by cgtune",
		"  moe_expert_capacity_factor: 1.0\n",
		"![Speed-up with its p10–p90 band and the winner's tie band, and graph memory, per candidate](r.svg)",
		"| 1 | **full_iteration w3** ★ | 850.00 | 846.00–854.00 | 1.176 | — | 120 | 2000 |",
		"| te attn w3 | 905.00 |",
		"| **no** |",
		"- Tie 1: 2 candidates within ±10.00 ms of the fastest of them, te attn,moe_router w3 (900.00 ms).",
		"### Memory per GPU in the job (MiB)",
		"| te attn,moe_router,moe_preprocess w3 | 7000 | 14000 | 10500 | 50000 | 90000 | 600 | 172100 | 143771 | **no** |",
		"### Where each figure comes from",
		"## Candidates that failed when run",
		"| te whole-layer w3 | capture | capture failed: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED |",
		"| TC-22 | moe cuda graph is only supported with drop-padding MoE. | te moe w3 |",
		"| WILL-FAIL | the whole-layer graph of layer 0 (moe) would hold token_counts_to_host | local whole-layer w3 |",
		"## How the search went\n\n- exhaustive: every valid candidate",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(got, "ESTIMATED") {
		t.Error("a measured report says ESTIMATED")
	}
}

// An estimated search says so up front and shows no spread; a search
// with no finished candidate writes a report without a plot.
func TestReportEstimateAndEmpty(t *testing.T) {
	in := input(t)
	for i := range in.Done.Ranking {
		in.Done.Ranking[i].Result.Source = engine.SourceEstimated
	}
	got := string(Markdown(in, "r.svg"))
	if !strings.Contains(got, "**ESTIMATED: every figure below comes from cgtune's estimate engine") || !strings.Contains(got, "| 850.00 | — |") {
		t.Errorf("estimated report:\n%s", got)
	}
	empty := Input{Model: in.Model, Layout: in.Layout, MBridge: "0.4", Done: search.DoneEvent{Interrupted: true}}
	md := filepath.Join(t.TempDir(), "e.md")
	plot, err := Write(md, empty, true)
	if err != nil || plot != "" {
		t.Fatalf("empty: plot %q, %v", plot, err)
	}
	data, _ := os.ReadFile(md)
	if !strings.Contains(string(data), "No winner: no candidate finished.") || strings.Contains(string(data), "![") {
		t.Errorf("empty report:\n%s", data)
	}
	if _, err := os.Stat(PlotPath(md)); err == nil {
		t.Error("a plot was written without a candidate")
	}
	if _, err := Write(filepath.Join(t.TempDir(), "x.svg"), in, false); err == nil {
		t.Error("a report over the plot's own name was accepted")
	}
}

// A report refuses to replace an existing r.md or r.svg unless asked,
// leaves the existing file as it was and writes nothing beside it.
func TestWriteReportNeverReplacesUnasked(t *testing.T) {
	in := input(t)
	for _, tc := range []struct {
		name, existing string
	}{
		{"the plot exists", "r.svg"},
		{"the report exists", "r.md"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			md := filepath.Join(dir, "r.md")
			old := filepath.Join(dir, tc.existing)
			if err := os.WriteFile(old, []byte("mine\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Write(md, in, false); err == nil || !strings.Contains(err.Error(), old) {
				t.Errorf("write over %s: %v", tc.existing, err)
			}
			if got, _ := os.ReadFile(old); string(got) != "mine\n" {
				t.Errorf("%s holds %q", tc.existing, got)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("the folder holds %d files after a refused report, want only %s", len(entries), tc.existing)
			}
			if _, err := Write(md, in, true); err != nil {
				t.Errorf("replace: %v", err)
			}
			if got, _ := os.ReadFile(old); string(got) == "mine\n" {
				t.Errorf("%s was not replaced when asked", tc.existing)
			}
		})
	}
}

// The memory table lists every ranked candidate the memory model made a
// breakdown for, in ranking order, not only the winner and those that do
// not fit; failed candidates have none to show.
func TestReportMemoryTableListsEveryCandidate(t *testing.T) {
	in := input(t)
	for i := range in.Done.Ranking {
		r := &in.Done.Ranking[i]
		if r.Result.Failed() || r.Result.Memory.Breakdown != nil {
			continue
		}
		g := r.Result.Memory.GraphFullJobMiB
		r.Result.Memory.Breakdown = &stepmodel.MemoryBreakdown{Weights: 7000, Gradients: 14000, Optimizer: 10500, Activations: 30000, Graphs: g, Context: 600,
			Total: 62100 + g, GPUMiB: 143771, Fits: true}
	}
	got := string(Markdown(in, "r.svg"))
	_, table, ok := strings.Cut(got, "### Memory per GPU in the job (MiB)")
	if !ok {
		t.Fatalf("no memory table:\n%s", got)
	}
	table, _, _ = strings.Cut(table, "\n\n###")
	last := -1
	for _, r := range in.Done.Ranking {
		name := r.Result.Candidate.Name()
		at := strings.Index(table, "| "+name+" |")
		switch {
		case r.Result.Failed() && at >= 0:
			t.Errorf("failed %s has a memory row", name)
		case r.Result.Failed():
		case at < 0:
			t.Errorf("memory table lacks %s:\n%s", name, table)
		case at < last:
			t.Errorf("%s is out of ranking order in the memory table:\n%s", name, table)
		default:
			last = at
		}
	}
}

// The plot's x-axis captions are broken over lines that fit their plot's
// data area, where they are centred, with room for a wider substitute
// font, so none runs into the other plot; long candidate names (a wide
// label column) leave the step plot a narrower data area.
func TestPlotCaptionsFitTheirPlots(t *testing.T) {
	for _, tc := range []struct {
		name  string
		long  bool
		eager float64
	}{{"short names", false, 0}, {"long names", true, 0}, {"long names, eager 29690.7 ms", true, 29690.7}} {
		long := tc.long
		t.Run(tc.name, func(t *testing.T) {
			in := input(t)
			if tc.eager > 0 {
				for i := range in.Done.Ranking {
					in.Done.Ranking[i].Result.Eager.Median = tc.eager
				}
			}
			rows := plotted(in.Done.Ranking)
			names := make([]string, len(rows))
			for i, r := range rows {
				names[len(rows)-1-i] = fmt.Sprintf("%s  #%d", r.Result.Candidate.Name(), r.Rank)
				if long {
					names[len(rows)-1-i] = fmt.Sprintf("%s attn,mlp,moe,moe_router,moe_preprocess w3  #%d", r.Result.Candidate.Impl, r.Rank)
				}
			}
			step, err := speedupPlot(in, rows, names, in.Done.Winner.Result.Candidate.Key())
			if err != nil {
				t.Fatal(err)
			}
			mem, err := memoryPlot(rows, "")
			if err != nil {
				t.Fatal(err)
			}
			words := strings.Fields(step.X.Label.Text)
			c := vgsvg.New(11*vg.Inch, vg.Length(2.6+0.22*float64(len(rows)))*vg.Inch)
			canvases := layOut(draw.New(c), step, mem)
			for i, p := range []*plot.Plot{step, mem} {
				area := p.DataCanvas(canvases[i])
				for _, l := range strings.Split(p.X.Label.Text, "\n") {
					// Drawn a sixth wider, the line still fits.
					if w := p.X.Label.TextStyle.Width(l) * 7 / 6; w > area.Max.X-area.Min.X {
						t.Errorf("caption line %q is %.0f pt wide in a wider font, its plot's data area %.0f pt", l, w, area.Max.X-area.Min.X)
					}
				}
			}
			if got := strings.Fields(step.X.Label.Text); strings.Join(got, " ") != strings.Join(words, " ") || !strings.Contains(step.X.Label.Text, "dashed: eager") {
				t.Errorf("caption %q lost words: %q", words, step.X.Label.Text)
			}
		})
	}
}

// The search line says how many runs ran now and how many a resumed search
// read back from the journal.
func TestReportSaysRunsNowAndReadBack(t *testing.T) {
	for _, tc := range []struct {
		name          string
		runs, resumed int
		want          string
	}{
		{"fresh", 6, 0, "| Search | exhaustive; 6 runs; tie band"},
		{"resumed", 1, 5, "| Search | exhaustive; 1 run now, 5 runs read back from the journal (6 in all); tie band"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(t)
			in.Done.Runs, in.Done.Resumed = tc.runs, tc.resumed
			if got := string(Markdown(in, "r.svg")); !strings.Contains(got, tc.want) {
				t.Errorf("report lacks %q", tc.want)
			}
		})
	}
}

// The report names the recipe's own setting, marks its row and gives
// every candidate's speed-up over it.
func TestReportComparesWithTheRecipe(t *testing.T) {
	in := input(t)
	ref := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}, Warmup: 3}
	ranking := search.Rerank(in.Done.Ranking, search.RankOptions{JobGPUMemoryMiB: 143771, ReferenceKey: ref.Key()})
	in.Done.Ranking, in.Done.Winner = ranking, search.Winner(ranking)
	for i := range ranking {
		if ranking[i].Result.Candidate.Key() == ref.Key() {
			r := ranking[i]
			in.Done.Reference = &search.Reference{Candidate: ref, From: search.ReferenceFromRecipe, Ranked: &r}
		}
	}
	md := string(Markdown(in, ""))
	for _, want := range []string{
		"Reference: the recipe ships te attn w3 (905.00 ms/step): the winner is 6.5% faster, measured by cgtune's emulation on this GPU.",
		"| **full_iteration w3** ★ | 850.00 | 846.00–854.00 | 1.176 | 1.065 |",
		"the reference; ",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// Escape sequences and control characters in a preset's display name (or
// a --set value, a job's error) are dropped from the report: a terminal
// showing it would run them (colours, a window title, a hyperlink, text
// reordered by a bidi override).
func TestReportDropsControlCharacters(t *testing.T) {
	in := input(t)
	in.Model.Display = "Qwen\x1b[31m3\x1b[0m\x1b]0;owned\x07 \x1b]8;;https://x.example\x1b\\30B\x1b]8;;\x1b\\\r\x08\x7f\u202eA3B\u0085"
	in.Sets = map[string]string{"model.moe_token_dispatcher_type": "alltoall\x1b[2J"}
	in.Done.Ranking[len(in.Done.Ranking)-1].Result.Err = "boom\x1b[1A\x00 at step 3"
	md := string(Markdown(in, ""))
	for _, r := range md {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) || r == '\u202e' {
			t.Fatalf("the report holds %U:\n%s", r, md)
		}
	}
	for _, want := range []string{"(Qwen3 30BA3B)", "`model.moe_token_dispatcher_type=alltoall`", "boom at step 3"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Contains(md, "owned") || strings.Contains(md, "x.example") {
		t.Error("an OSC sequence's text is left in the report")
	}
}

// A preset's display name holding "<script>" (or a --set value, a job's
// error) must not reach the Markdown as HTML, which a viewer runs. Every
// "<" outside a fenced code block is written "&lt;"; the overrides in
// their code block stay as they are, and a fence a value smuggles in does
// not carry a tag past the escaping.
func TestReportEscapesHTML(t *testing.T) {
	in := input(t)
	in.Model.Display = `<script>alert(1)</script>`
	in.Sets = map[string]string{"model.moe_token_dispatcher_type": "<img src=x onerror=alert(2)>"}
	in.Done.Ranking[len(in.Done.Ranking)-1].Result.Err = "boom\n```\n<b>bold</b>\n```yaml"
	in.Overrides, in.Format = []byte("model:\n  cuda_graph_impl: local # a<b\n"), "yaml"
	md := string(Markdown(in, ""))
	// Outside fenced blocks no "<" is left; inside, the text is as written.
	inFence := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if !inFence && strings.Contains(line, "<") {
			t.Errorf("a \"<\" outside code: %q", line)
		}
	}
	for _, want := range []string{"&lt;script>alert(1)&lt;/script>", "&lt;img src=x onerror=alert(2)>", "cuda_graph_impl: local # a<b"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

func TestFenceOf(t *testing.T) {
	for line, want := range map[string]string{"```yaml\n": "```", "   ~~~~\n": "~~~~", "    ```\n": "", "``\n": "", "text ```": ""} {
		if got, _ := fenceOf(line); got != want {
			t.Errorf("fenceOf(%q) = %q, want %q", line, got, want)
		}
	}
}
