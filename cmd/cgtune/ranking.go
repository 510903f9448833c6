package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/report"
	"cgtune/search"
)

// dash stands for a figure a result does not have (an estimate has no
// step-to-step spread, a failure no step time).
const dash = "—"

// spreadText is a result's p10–p90 band, or dash when it has none: an
// estimate computes one step time, with no step-to-step variation.
func spreadText(r engine.Result) string {
	if r.Source == engine.SourceEstimated || r.Step.N < 2 || r.Step.P10 == r.Step.P90 {
		return dash
	}
	return fmt.Sprintf("%.2f–%.2f", r.Step.P10, r.Step.P90)
}

func joinParts(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}

// printRanking is the ranking table (rankingTable: one row per measured
// configuration, its notes by rank under it), the tied groups, the winner
// and why it won.
func printRanking(w io.Writer, d search.DoneEvent, plan []search.Planned, cfg search.Config, wide bool) {
	t := newRankingTable(d, plan, cfg, wide)
	t.print(w)
	if groups := tieGroups(d.Ranking); len(groups) > 0 {
		fmt.Fprintln(w, "\n"+strings.Join(groups, "\n"))
	}
	if line := search.OneTie(d.Ranking); line != "" {
		fmt.Fprintln(w, wrapLine("", line, tableWidth))
	}
	if d.Emulation != nil {
		fmt.Fprintln(w, wrapLine("", "\nemulation: "+d.Emulation.Describe(), tableWidth))
	}
	if opt := frameworkOptimizer(d.Ranking); opt != "" {
		fmt.Fprintln(w, wrapLine("", "\noptimizer (framework runs): "+opt, tableWidth))
	}
	opts := search.RankOptions{Tie: cfg.Tie, JobGPUMemoryMiB: cfg.JobGPUMemoryMiB, ReferenceKey: d.ReferenceKey(), KnownToFitMiB: d.KnownToFitMiB, Emulation: d.Emulation}
	if d.Winner != nil {
		r := d.Winner.Result
		partial := ""
		switch {
		case d.Interrupted:
			partial = " (so far: the search was interrupted)"
		case d.Err != "":
			partial = " (so far: the search stopped on an error)"
		}
		fmt.Fprintln(w, wrapLine("", fmt.Sprintf("\nwinner%s: %s: %.2f ms/step, %s eager, graphs %d MiB [%s]", partial, r.Candidate.Name(), r.Step.Median, speedupText(r.Speedup, "×"), r.Memory.JobGraphMiB(), r.Source), tableWidth))
	}
	fmt.Fprintln(w, wrapLine("why: ", search.Reason(d.Ranking, opts), tableWidth))
	if line := d.Reference.Describe(d.Winner); line != "" {
		fmt.Fprintln(w, wrapLine("reference: ", line, tableWidth))
	}
	if e := search.BestEmulated(d.Ranking); e != nil && d.Winner != nil && e.Result.Candidate.Key() != d.Winner.Result.Candidate.Key() {
		fmt.Fprintln(w, wrapLine("emulated: ", fmt.Sprintf("%s ranks above the winner (%.3f× eager, predicted by the %s engine: %s); the overrides are the framework-measured winner's (--winner-emulated emits it instead)",
			e.Result.Candidate.Name(), e.Result.Speedup, e.Result.Source, e.Result.Delegated), tableWidth))
	}
}

// frameworkOptimizer is the optimizer the framework's runs stepped (the
// job's, or the stand-in the worker put in for it), "" when none ran.
func frameworkOptimizer(rs []search.Ranked) string {
	for _, r := range rs {
		if f := r.Result.Framework; f != nil && f.Optimizer != "" {
			return f.Optimizer
		}
	}
	return ""
}

// vsText is a speed-up over the reference for the table.
func vsText(vs float64) string {
	if vs <= 0 {
		return dash
	}
	return fmt.Sprintf("%.3f×", vs)
}

// referenceMark marks the reference's row.
func referenceMark(d search.DoneEvent, c presets.Candidate) string {
	ref := d.Reference
	if ref == nil || ref.Ranked == nil || ref.Ranked.Result.Candidate.Key() != c.Key() {
		return ""
	}
	if ref.From == search.ReferenceFromPreset {
		return "the preset's reference"
	}
	return "the recipe's own setting"
}

// tieGroups describes each group of tied candidates in one line (their
// ranks, the band, the fastest of them), then the rule that orders them.
func tieGroups(rs []search.Ranked) []string {
	var out []string
	for i := 0; i < len(rs); {
		tie := rs[i].Tie
		if tie == 0 {
			i++
			continue
		}
		j := i
		for j < len(rs) && rs[j].Tie == tie {
			j++
		}
		lead, _ := search.TieLeader(rs, tie)
		out = append(out, wrapLine("", fmt.Sprintf("tie %d: ranks %d–%d are within ±%.2f ms of the fastest of them, %s (%.2f ms/step)",
			tie, rs[i].Rank, rs[j-1].Rank, rs[i].TieBandMs, lead.Result.Candidate.Name(), lead.Result.Step.Median), tableWidth))
		i = j
	}
	if len(out) > 0 {
		out = append(out, search.TieRule)
	}
	return out
}

// spentText says what the search cost: wall time, and the GPU time when
// engines measured; an estimate spends no GPU time, and says what its runs
// would have taken.
func spentText(d search.DoneEvent, cfg search.Config, wall time.Duration) string {
	runs := fmt.Sprintf("%s in %s", runsText(d), fmtWall(wall))
	gpu := time.Duration(d.GPUTimeMs * float64(time.Millisecond)).Round(time.Second)
	if len(cfg.Engines) > 0 && cfg.Engines[0].Name() == "estimate" {
		return runs + fmt.Sprintf(" of computation (estimated: no GPU ran; measured on a GPU, these runs would take about %s)", gpu)
	}
	return runs + fmt.Sprintf("; GPU time %s", gpu)
}

// runsText counts the runs of a search: those it ran now and, for a
// resumed one, those it read back from the journal instead of running.
func runsText(d search.DoneEvent) string {
	if d.Resumed == 0 {
		return plural(d.Runs, "run")
	}
	return fmt.Sprintf("%s now, %s read back from the journal (%d in all)", plural(d.Runs, "run"), plural(d.Resumed, "run"), d.Runs+d.Resumed)
}

// speedupText is a speed-up over eager as the tables show it, with unit
// ("×"); a result without one (a job that ran no eager iteration says so
// in its notes) shows a dash, never 0.000×.
func speedupText(s float64, unit string) string {
	if s <= 0 {
		return dash
	}
	return fmt.Sprintf("%.3f%s", s, unit)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// fmtWall is a wall time with the precision it deserves.
func fmtWall(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// checkReportPath refuses a --report path the report cannot be written to
// before the search starts: not Markdown, or in a folder that is not there.
func checkReportPath(path string) error {
	if path == "" {
		return nil
	}
	if ext := filepath.Ext(path); ext != ".md" && ext != ".markdown" {
		return fail(exitBadInput, "--report %s: want a Markdown file (FILE.md); the plot is written beside it as FILE.svg", path)
	}
	if base := filepath.Base(path); strings.TrimSuffix(base, filepath.Ext(base)) == "" {
		// ".md" would be a hidden report and a hidden ".svg" plot.
		return fail(exitBadInput, "--report %s: the file name has nothing before %s; name it FILE%s (the plot is written beside it as FILE.svg)", path, filepath.Ext(base), filepath.Ext(base))
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return fail(exitBadInput, "--report %s: folder %s does not exist", path, filepath.Dir(path))
	}
	return nil
}

// writeReport writes --report (and its plot) for a finished or interrupted
// search.
func (f *rootFlags) writeReport(p *progress, cfg search.Config, plan []search.Planned, d search.DoneEvent, overrides []byte, o *recipe.Overrides) error {
	if f.report == "" {
		return nil
	}
	in := report.Input{
		Version: version, Now: time.Now(), Model: cfg.Model, Layout: cfg.Layout, MBridge: cfg.MBridge,
		Engine: f.engine, Strategy: cfg.Strategy, TrainIters: cfg.TrainIters, Tie: cfg.Tie,
		JobGPUMemoryMiB: cfg.JobGPUMemoryMiB, Sets: cfg.Sets, Plan: plan, Done: d,
		Overrides: overrides, Format: f.format,
	}
	if o != nil {
		in.DropsTokens = o.DropsTokens
	}
	plot, err := report.Write(f.report, in, f.force)
	if err != nil {
		return fail(exitBadInput, "--report: %w", err)
	}
	e := wroteEvent{What: "report", Path: absPath(f.report)}
	if plot != "" {
		e.Plot = absPath(plot)
	}
	p.wrote(e)
	return nil
}
