package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"cgtune/engine"
	"cgtune/recipe"
	"cgtune/search"
)

// whatIfOn is --what-if's value when it is given alone.
const whatIfOn = "on"

// whatIfUsage is --what-if's help.
func whatIfUsage() string {
	return "also run each candidate the recipe rejects with the enabling changes that let it run (at most two), priced over the recipe's own eager step, " +
		"in a table of their own; --what-if=accept=NAME[,NAME] also lets rows of only those changes win (NAME: " + strings.Join(recipe.ChangeNames(), ", ") + ")"
}

// parseWhatIf reads --what-if: "" (off), whatIfOn (--what-if alone), or
// accept=NAME[,NAME...], the enabling changes the user accepts.
func parseWhatIf(v string) (on bool, accept []string, err error) {
	switch {
	case v == "":
		return false, nil, nil
	case v == whatIfOn:
		return true, nil, nil
	}
	list, ok := strings.CutPrefix(v, "accept=")
	if !ok || strings.TrimSpace(list) == "" {
		return false, nil, fail(exitBadInput, "--what-if=%s: allowed: --what-if alone, or --what-if=accept=NAME[,NAME] with NAME one of %s",
			quoteShort(v), strings.Join(recipe.ChangeNames(), ", "))
	}
	cs, err := recipe.ParseChanges(strings.Split(list, ","))
	if err != nil {
		return false, nil, fail(exitBadInput, "--what-if=accept: %w", err)
	}
	for _, c := range cs {
		accept = append(accept, c.Name)
	}
	return true, accept, nil
}

// printWhatIf is the what-if table under the ranking: each row with its
// changes, its speed-up over the recipe's own eager step, and apart, its
// eager step with the changes applied (what the changes alone do) and
// what the graph gains over that; then each change with its keys, its
// cost and how the engine priced it.
func printWhatIf(w io.Writer, d search.DoneEvent) {
	if len(d.WhatIf) == 0 {
		return
	}
	fmt.Fprintf(w, "\nwhat if: %d configuration(s) the recipe rejects, each with the enabling changes that let it run; SPEED-UP is over %s\n",
		len(d.WhatIf), whatIfBaseline(d.WhatIf))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tCANDIDATE\tCHANGES\tSTEP MS\tSPEED-UP\tVS RECIPE\tEAGER WITH CHANGES MS\tCHANGES ALONE\tGRAPH GAIN\tGRAPH MIB\tFITS\tSOURCE\tNOTE")
	for _, r := range d.WhatIf {
		res, wi := r.Result, r.WhatIf
		plain := res.Candidate
		plain.WhatIf = nil
		changes := strings.Join(res.Candidate.WhatIf, ", ")
		if res.Failed() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", dash, plain.Name(), changes, dash, dash, dash, dash, dash, dash, dash, dash,
				res.Source, fmt.Sprintf("failed (%s): %s", res.ErrKind, res.Err))
			continue
		}
		fits := "yes"
		if !r.Fits {
			fits = "NO"
		}
		eager, alone, gain := dash, dash, dash
		if wi != nil {
			eager = fmt.Sprintf("%.2f", wi.ChangedEager.Median)
			alone = speedupText(wi.ChangeSpeedup, "×")
			gain = speedupText(wi.GraphSpeedup, "×")
		}
		note := r.Note
		if wi != nil && wi.Accepted {
			note = joinParts("accepted: ranked above too", note)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Rank, plain.Name(), changes,
			res.Step.Median, speedupText(res.Speedup, "×"), vsText(r.VsReference), eager, alone, gain,
			res.Memory.JobGraphMiB(), fits, res.Source, note)
	}
	tw.Flush()
	fmt.Fprintln(w, "CHANGES ALONE: the recipe's eager step over the eager step with the changes (below 1×: the changes cost time); GRAPH GAIN: that eager step over the row's step; SPEED-UP is their product")
	printChanges(w, d.WhatIf)
	printAccepted(w, d)
}

// whatIfBaseline says what the rows' speed-ups are over, from the first
// row that has the recipe's eager step.
func whatIfBaseline(rs []search.Ranked) string {
	for _, r := range rs {
		if wi := r.WhatIf; wi != nil && wi.RecipeEager.Median > 0 {
			return fmt.Sprintf("the recipe's own eager step as it runs today (%.2f ms/step, %s)", wi.RecipeEager.Median, r.Result.Source)
		}
	}
	return "the eager step with the changes applied (no run of the recipe's own candidates on the same engine)"
}

// printChanges lists each change of the rows once: its keys as the recipe
// spells them, its cost, and how each engine priced it.
func printChanges(w io.Writer, rs []search.Ranked) {
	fmt.Fprintln(w, "changes (cgtune rules ID names the rules each lifts):")
	for _, c := range search.ChangesOf(rs, sourceName) {
		fmt.Fprintf(w, "  %s: %s (%s)\n    cost: %s\n", c.Name, c.Summary, c.Sets, c.Cost)
		for _, p := range c.PricedBy {
			fmt.Fprintf(w, "    %s\n", p)
		}
	}
}

// sourceName names the engine a source's results come from.
func sourceName(s engine.Source) string {
	switch s {
	case engine.SourceFramework:
		return "megatron engine"
	case engine.SourceMeasured:
		return "cuda engine"
	case engine.SourceJob:
		return "job engine"
	case engine.SourceEstimated:
		return "estimate engine"
	}
	return string(s)
}

// printAccepted says which changes the user accepted, and what the
// winner's overrides then carry; or how to accept the best row's.
func printAccepted(w io.Writer, d search.DoneEvent) {
	if len(d.Accepted) > 0 {
		fmt.Fprintf(w, "accepted: %s: what-if rows of only these changes rank in the table above too", strings.Join(d.Accepted, ", "))
		if d.Winner != nil && len(d.Winner.Result.Candidate.WhatIf) > 0 {
			fmt.Fprintf(w, "; the winner needs %s, and its overrides carry them, each with its cost", strings.Join(d.Winner.Result.Candidate.WhatIf, ", "))
		}
		fmt.Fprintln(w)
		return
	}
	for _, r := range d.WhatIf {
		if !r.Result.Failed() && r.Fits {
			fmt.Fprintf(w, "the winner stays a candidate the recipe allows; to let a row win, accept its changes: --what-if=accept=%s\n", strings.Join(r.Result.Candidate.WhatIf, ","))
			return
		}
	}
}

// whatIfCount is how many rows of a plan are what-if rows, by the
// changes they apply.
type whatIfCount struct {
	rows int
	by   map[string]int
}

// whatIfRows counts the what-if rows of plan.
func whatIfRows(plan []search.Planned) whatIfCount {
	n := whatIfCount{by: map[string]int{}}
	for _, p := range plan {
		if len(p.Candidate.WhatIf) > 0 {
			n.rows++
			n.by[strings.Join(p.Candidate.WhatIf, " + ")]++
		}
	}
	return n
}

// text is the plan line's part on the what-if rows: "; what-if: 15
// rows (drop-and-pad ×3, ep-overlap-off + drop-and-pad ×12)".
func (n whatIfCount) text() string {
	if n.rows == 0 {
		return ""
	}
	keys := slices.Sorted(maps.Keys(n.by))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, n.by[k])
	}
	return fmt.Sprintf("; what-if: %d rows rejected today that enabling changes let run (%s)", n.rows, strings.Join(parts, ", "))
}
