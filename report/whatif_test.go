package report

import (
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/search"
	"cgtune/stepmodel"
)

// The report's "What it would take" lists each what-if row with its
// changes, its speed-up over the recipe's eager step and, apart, its
// eager step with the changes, what the changes alone and the graph alone
// do, then each change with its keys, cost and how it was priced; a
// search without what-if rows has no such section.
func TestReportSaysWhatItWouldTake(t *testing.T) {
	in := input(t)
	if strings.Contains(string(Markdown(in, "")), "What it would take") {
		t.Fatal("a search without what-if rows has a what-if section")
	}
	res := result(presets.ImplTE, []string{"attn", "moe"}, 3, 800, 4, 5000, engine.SourceMeasured)
	res.Candidate.WhatIf = []string{"ep-overlap-off", "drop-and-pad"}
	res.Speedup = 1000.0 / 800 // over the recipe's eager step of 1000 ms
	row := search.Ranked{Rank: 1, Result: res, Fits: true, VsReference: 1.0625, WhatIf: &search.WhatIf{
		RecipeEager: stepmodel.Stats{Median: 1000}, ChangedEager: stepmodel.Stats{Median: 1200},
		ChangeSpeedup: 1000.0 / 1200, GraphSpeedup: 1200.0 / 800, Baseline: "the recipe's eager step as it runs today (1000.00 ms)",
		Changes: []search.PricedChange{
			{Name: "ep-overlap-off", Summary: "EP communication overlap off", Sets: "comm_overlap.overlap_moe_expert_parallel_comm=false",
				Cost: "EP all-to-all exposed", Priced: "modelled: the all-to-all exposed"},
			{Name: "drop-and-pad", Summary: "drop-and-pad experts", Sets: "model.moe_expert_capacity_factor=1.0",
				Cost: "tokens over capacity are dropped", Priced: "run: the framework ran drop-and-pad"},
		}}}
	in.Done.WhatIf = []search.Ranked{row}
	md := string(Markdown(in, ""))
	_, section, ok := strings.Cut(md, "## What it would take\n")
	if !ok {
		t.Fatalf("no what-if section:\n%s", md)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, want := range []string{
		"| 1 | te attn,moe w3 | ep-overlap-off, drop-and-pad | 800.00 | 1.250 | 1.062 | 1200.00 | 0.833 | 1.500 | 5000 | yes | measured |",
		"over the recipe's eager step as it runs today (1000.00 ms)",
		"- **ep-overlap-off**: EP communication overlap off (`comm_overlap.overlap_moe_expert_parallel_comm=false`). Cost: EP all-to-all exposed. Priced: measured: modelled: the all-to-all exposed.",
		"- **drop-and-pad**: drop-and-pad experts (`model.moe_expert_capacity_factor=1.0`). Cost: tokens over capacity are dropped. Priced: measured: run: the framework ran drop-and-pad.",
		"`--what-if=accept=NAME[,NAME]`",
	} {
		if !strings.Contains(section, want) {
			t.Errorf("the section lacks %q:\n%s", want, section)
		}
	}
	in.Done.Accepted = []string{"drop-and-pad", "ep-overlap-off"}
	in.Done.WhatIf[0].WhatIf.Accepted = true
	if md := string(Markdown(in, "")); !strings.Contains(md, "Accepted (`--what-if=accept=drop-and-pad,ep-overlap-off`)") || !strings.Contains(md, "accepted: ranked in the main ranking too") {
		t.Errorf("the accepted changes are not said:\n%s", md)
	}
}
