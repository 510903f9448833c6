package report

import (
	"bytes"
	"fmt"
	"strings"

	"cgtune/engine"
	"cgtune/search"
)

// writeWhatIf is the "What it would take" section: the what-if rows
// (cgtune --what-if), each a candidate the recipe rejects run with the
// enabling changes that let it run, their speed-up over the recipe's own
// eager step and, apart, what the changes alone and the graph alone do;
// then each change with its keys, its cost and how it was priced.
func writeWhatIf(b *bytes.Buffer, in Input) {
	rows := in.Done.WhatIf
	if len(rows) == 0 {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## What it would take\n\n")
	w("Candidates the recipe rejects today, each run with the enabling changes of the rule table that let it run (at most %d). ", search.MaxChanges)
	w("**× recipe's eager** is over %s, so what the changes cost the step is in it; **Changes alone** is the recipe's eager step over the eager step with the changes (below 1: they cost time), **Graph gain** that eager step over the row's step.\n\n", baselineText(rows))
	w("| # | Candidate | Changes | Step ms | × recipe's eager | × recipe | Eager with the changes, ms | Changes alone | Graph gain | Graph MiB | Fits | Source | Note |\n")
	w("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n")
	for _, r := range rows {
		res, wi := r.Result, r.WhatIf
		plain := res.Candidate
		plain.WhatIf = nil
		changes := strings.Join(res.Candidate.WhatIf, ", ")
		if res.Failed() {
			w("| — | %s | %s | — | — | — | — | — | — | — | — | %s | %s |\n", cell(plain.Name()), cell(changes), res.Source, cell(fmt.Sprintf("failed (%s): %s", res.ErrKind, res.Err)))
			continue
		}
		fits := "yes"
		if !r.Fits {
			fits = "**no**"
		}
		eager, alone, gain := "—", "—", "—"
		if wi != nil {
			eager = fmt.Sprintf("%.2f", wi.ChangedEager.Median)
			alone, gain = ratio(wi.ChangeSpeedup, ""), ratio(wi.GraphSpeedup, "")
		}
		vs := "—"
		if r.VsReference > 0 {
			vs = fmt.Sprintf("%.3f", r.VsReference)
		}
		note := r.Note
		if wi != nil && wi.Accepted {
			note = strings.TrimPrefix("accepted: ranked in the main ranking too; "+note, "; ")
		}
		name := cell(plain.Name())
		if d := in.Done.Winner; d != nil && d.Result.Candidate.Key() == res.Candidate.Key() {
			name = "**" + name + "** ★"
		}
		w("| %d | %s | %s | %.2f | %s | %s | %s | %s | %s | %d | %s | %s | %s |\n", r.Rank, name, cell(changes), res.Step.Median, ratio(res.Speedup, ""), vs,
			eager, alone, gain, res.Memory.JobGraphMiB(), fits, res.Source, cell(note))
	}
	w("\n")
	writeChanges(b, rows)
	if len(in.Done.Accepted) > 0 {
		w("Accepted (`--what-if=accept=%s`): rows of only these changes ranked with the candidates the recipe allows; a winner among them carries the changes in its overrides, each with its cost.\n\n", strings.Join(in.Done.Accepted, ","))
	} else {
		w("The winner stays a candidate the recipe allows; `--what-if=accept=NAME[,NAME]` lets rows of only those changes compete for it.\n\n")
	}
}

// baselineText says what the rows' speed-ups are over.
func baselineText(rows []search.Ranked) string {
	for _, r := range rows {
		if wi := r.WhatIf; wi != nil && wi.Baseline != "" {
			return wi.Baseline
		}
	}
	return "the recipe's own eager step as it runs today"
}

// writeChanges lists each change once: its keys as the recipe spells
// them, its cost, and how each engine that ran a row with it priced it.
func writeChanges(b *bytes.Buffer, rows []search.Ranked) {
	fmt.Fprintf(b, "### The changes\n\n`cgtune rules ID` names the rules each one lifts.\n\n")
	for _, c := range search.ChangesOf(rows, func(s engine.Source) string { return string(s) }) {
		fmt.Fprintf(b, "- **%s**: %s (`%s`). Cost: %s. Priced: %s.\n", c.Name, c.Summary, c.Sets, c.Cost, strings.Join(c.PricedBy, "; "))
	}
	fmt.Fprintln(b)
}
