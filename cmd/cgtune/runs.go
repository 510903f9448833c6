package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"cgtune/internal/fileio"
	"cgtune/internal/setup"
	"cgtune/search"
)

// savedRunFile is run.json as the run folder commands tell it from
// another program's file of that name.
var savedRunFile = search.RunFile{Name: runFile, Ours: isSavedRun}

func newRunsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List, show and remove the run folders searches leave (a journal each, for --resume and validate)",
		Long: `Every search keeps its journal in a run folder, by default a new folder under
` + runsRootHint() + `. runs list shows them (date, state, model, size), runs show one's
ranking, runs rm removes some and runs prune the old ones. Only folders cgtune made
are removed (a journal or run file of its own, nothing else in them), and never one
a running search holds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fail(exitBadInput, "runs needs a subcommand: list, show, rm, prune")
		},
	}
	cmd.AddCommand(newRunsListCmd(), newRunsShowCmd(), newRunsRmCmd(), newRunsPruneCmd())
	return cmd
}

func runsRootHint() string {
	if root, err := setup.RunsRoot(); err == nil {
		return root
	}
	return "<user cache folder>/cgtune/runs"
}

// runsUnderRoot describes every run folder under the runs folder, oldest
// first; each entry that is no cgtune run is told to warn.
func runsUnderRoot(warn func(string)) ([]search.RunInfo, error) {
	root, err := setup.RunsRoot()
	if err != nil {
		return nil, fail(exitBadInput, "no user cache folder, so no runs folder: %w", err)
	}
	entries, err := fileio.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fail(exitBadInput, "%w", err)
	}
	var out []search.RunInfo
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		info, err := search.SummarizeRun(filepath.Join(root, e.Name()), savedRunFile)
		if err != nil {
			warn(fmt.Sprintf("skipped: %v", err))
			continue
		}
		out = append(out, info)
	}
	slices.SortStableFunc(out, func(a, b search.RunInfo) int { return a.Created.Compare(b.Created) })
	return out, nil
}

func newRunsListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the run folders, oldest first: date, state, model, GPU type, results, size",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			runs, err := runsUnderRoot(func(msg string) { fmt.Fprintln(cmd.ErrOrStderr(), "cgtune: warning: "+msg) })
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if runs == nil {
					runs = []search.RunInfo{}
				}
				return writeIndentedJSON(out, runs)
			}
			if len(runs) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "no runs in %s\n", runsRootHint())
				return nil
			}
			return printRunList(out, runs)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printRunList(w io.Writer, runs []search.RunInfo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDATE\tSTATE\tMODEL\tGPU\tRESULTS\tSIZE")
	var total int64
	for _, r := range runs {
		model, gpu := "-", "-"
		if fp := r.Fingerprint; fp != nil {
			model, gpu = fp.Model.Name, fmt.Sprintf("%d× %s", fp.Layout.NumGPUs, fp.Layout.GPU)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Name, r.Created.Local().Format("2006-01-02 15:04"), runState(r), model, gpu, r.Results, byteSize(r.Bytes))
		total += r.Bytes
	}
	fmt.Fprintf(tw, "\t\t\t\t\t\t%s in %d runs\n", byteSize(total), len(runs))
	return tw.Flush()
}

// runState is a run's state, with the pid of a running one.
func runState(r search.RunInfo) string {
	if r.State == search.RunRunning && r.PID > 0 {
		return fmt.Sprintf("running (pid %d)", r.PID)
	}
	return r.State
}

// byteSize is n bytes in the unit that reads best.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", (n+1023)/1024)
}

// resolveRunArg is the run folder a command names: a path, or a name
// under the runs folder.
func resolveRunArg(name string) (string, error) {
	dir, err := setup.ResolveRun(name)
	if err != nil {
		return "", fail(exitBadInput, "no run folder %q (give a path, or a name cgtune runs list shows)", name)
	}
	return dir, nil
}

func newRunsShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Print a run's summary: what was searched, its state, the ranking of its results and what to do next",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := resolveRunArg(args[0])
			if err != nil {
				return err
			}
			view, err := runView(dir)
			if err != nil {
				return err
			}
			info, err := search.ReadRun(dir, savedRunFile, view)
			if err != nil {
				return fail(exitBadInput, "%w", err)
			}
			if asJSON {
				return writeIndentedJSON(cmd.OutOrStdout(), info)
			}
			printRun(cmd.OutOrStdout(), info, args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// runView is how the search in dir ranked its results, from its run
// file; a search the TUI started keeps none and ranked with the defaults.
func runView(dir string) (search.RunView, error) {
	s, ok, err := readSavedRun(dir)
	if err != nil {
		return search.RunView{}, fail(exitBadInput, "%w", err)
	}
	if !ok {
		return search.RunView{}, nil
	}
	v := search.RunView{TrainIters: s.TrainIters}
	if s.Tie != "" {
		v.Tie, _ = search.ParseTie(s.Tie) // checked by parseSavedRun
	}
	_, v.Accept, _ = parseWhatIf(s.WhatIf) // checked by parseSavedRun
	return v, nil
}

// runShowRows is how many ranked results runs show prints.
const runShowRows = 10

func printRun(w io.Writer, r search.RunInfo, name string) {
	fmt.Fprintf(w, "run %s (%s)\n", r.Name, r.Dir)
	fmt.Fprintf(w, "started %s; %s; %d runs in its journal; %s\n", r.Created.Local().Format("2006-01-02 15:04:05"), runState(r), r.Results, byteSize(r.Bytes))
	if r.Problem != "" {
		fmt.Fprintf(w, "journal: %s\n", r.Problem)
	}
	fp := r.Fingerprint
	if fp == nil {
		fmt.Fprintln(w, "the search never began: nothing to show")
		return
	}
	l := fp.Layout
	fmt.Fprintf(w, "searched: %s on %d× %s (TP%d PP%d CP%d EP%d), MB %s, strategy %s\n",
		fp.Model.Name, l.NumGPUs, l.GPU, l.TPSize(), l.PPSize(), l.CPSize(), l.EPSize(), fp.MBridge, fp.Strategy)
	// The journal holds the runs; the search's own output adds the
	// warm-ups derived from them and its tie rule with the recipe.
	if w0 := r.Winner; w0 != nil {
		fmt.Fprintf(w, "best run: %s, %.2f ms/step, %.3f× eager (%s)\n", w0.Result.Candidate.Name(), w0.Result.Step.Median, w0.Result.Speedup, w0.Result.Source)
	} else {
		fmt.Fprintln(w, "best run: none (no result fits the job's GPU memory, or none finished)")
	}
	if line := r.Reference.Describe(r.Winner); line != "" {
		fmt.Fprintln(w, "reference: "+line)
	}
	if r.FromJournal {
		fmt.Fprintln(w, "ranked from the journal's runs (the search kept no ranking of its own): warm-ups derived from a run, and none from the eager baselines, are not rows here")
	}
	printRunRows(w, r.Ranking, "RANK")
	if len(r.WhatIf) > 0 {
		fmt.Fprintln(w, "what-if rows (candidates the recipe rejects, run with the changes that let them run; ranked on their own):")
		printRunRows(w, r.WhatIf, "WHAT-IF")
	}
	switch r.State {
	case search.RunInterrupted:
		fmt.Fprintf(w, "continue it: cgtune --headless --resume %s\n", name)
	case search.RunComplete:
		fmt.Fprintf(w, "check the top candidates on the real job: cgtune validate %s --launcher local|slurm --command '...'\n", name)
	}
}

// printRunRows is a table of the first runShowRows of rs, headed by
// rankHead (a what-if row's name carries its changes).
func printRunRows(w io.Writer, rs []search.Ranked, rankHead string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tCANDIDATE\tSTEP MS\tSPEED-UP\tFITS\tSOURCE\n", rankHead)
	for i, rk := range rs {
		if i == runShowRows {
			fmt.Fprintf(tw, "…\t%d more\t\t\t\t\n", len(rs)-runShowRows)
			break
		}
		res := rk.Result
		step, speed := fmt.Sprintf("%.2f", res.Step.Median), fmt.Sprintf("%.3f×", res.Speedup)
		if res.Failed() {
			step, speed = "failed", string(res.ErrKind)
		}
		fits := "yes"
		if !rk.Fits {
			fits = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", rankText(rk), res.Candidate.Name(), step, speed, fits, res.Source)
	}
	tw.Flush()
}

// rankText is a ranked result's rank, a dash for one that failed.
func rankText(r search.Ranked) string {
	if r.Rank <= 0 || r.Result.Failed() {
		return dash
	}
	return strconv.Itoa(r.Rank)
}

func newRunsRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm RUN...",
		Aliases: []string{"remove"},
		Short:   "Remove run folders (only cgtune's, never one a running search holds)",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Every name is resolved and checked before anything goes.
			var dirs []string
			for _, a := range args {
				dir, err := resolveRunArg(a)
				if err != nil {
					return err
				}
				if _, err := search.SummarizeRun(dir, savedRunFile); err != nil {
					return fail(exitBadInput, "%w; cgtune removes only its own run folders", err)
				}
				dirs = append(dirs, dir)
			}
			for _, dir := range dirs {
				if err := removeRun(cmd.OutOrStdout(), dir); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// removeRun removes one run folder and says so.
func removeRun(w io.Writer, dir string) error {
	info, err := search.SummarizeRun(dir, savedRunFile)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	if err := search.RemoveRun(dir, savedRunFile, setup.MegatronWorkerLog); err != nil {
		return fail(exitBadInput, "%w", err)
	}
	fmt.Fprintf(w, "removed %s (%s, %s)\n", dir, info.State, byteSize(info.Bytes))
	return nil
}

func newRunsPruneCmd() *cobra.Command {
	var olderThan string
	var keep int
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "prune (--older-than AGE | --keep N) [--dry-run]",
		Short: "Remove the run folders older than AGE (30d, 12h) or all but the N newest, or both; running ones stay",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			changed := cmd.Flags().Changed
			if !changed("older-than") && !changed("keep") {
				return fail(exitBadInput, "runs prune: give --older-than AGE (e.g. 30d) or --keep N, or both")
			}
			var age time.Duration
			if changed("older-than") {
				var err error
				if age, err = parseAge(olderThan); err != nil {
					return fail(exitBadInput, "--older-than %q: %w", olderThan, err)
				}
			}
			if changed("keep") && keep < 0 {
				return fail(exitBadInput, "--keep %d: allowed: 0 or more", keep)
			}
			stderr := cmd.ErrOrStderr()
			runs, err := runsUnderRoot(func(msg string) { fmt.Fprintln(stderr, "cgtune: "+msg+"; left alone") })
			if err != nil {
				return err
			}
			return prune(cmd.OutOrStdout(), stderr, pruneSet(runs, changed("older-than"), age, changed("keep"), keep, time.Now()), dryRun)
		},
	}
	f := cmd.Flags()
	f.StringVar(&olderThan, "older-than", "", "remove runs started longer ago than AGE: days (30d), weeks (2w) or a Go duration (12h)")
	f.IntVar(&keep, "keep", 0, "keep the N newest runs, remove the others")
	f.BoolVar(&dryRun, "dry-run", false, "say what would be removed, remove nothing")
	return cmd
}

// pruneSet are the runs prune removes: older than age (when byAge) and
// not among the keep newest (when byKeep); runs is oldest first.
func pruneSet(runs []search.RunInfo, byAge bool, age time.Duration, byKeep bool, keep int, now time.Time) []search.RunInfo {
	var out []search.RunInfo
	for i, r := range runs {
		if byAge && now.Sub(r.Created) <= age {
			continue
		}
		if byKeep && i >= len(runs)-keep {
			continue
		}
		out = append(out, r)
	}
	return out
}

func prune(stdout, stderr io.Writer, runs []search.RunInfo, dryRun bool) error {
	var freed int64
	n := 0
	for _, r := range runs {
		if r.State == search.RunRunning {
			fmt.Fprintf(stderr, "cgtune: %s is running (%s); left alone\n", r.Dir, runState(r))
			continue
		}
		if dryRun {
			fmt.Fprintf(stdout, "would remove %s (%s, %s)\n", r.Dir, r.State, byteSize(r.Bytes))
		} else if err := search.RemoveRun(r.Dir, savedRunFile, setup.MegatronWorkerLog); err != nil {
			fmt.Fprintf(stderr, "cgtune: %v; left alone\n", err)
			continue
		} else {
			fmt.Fprintf(stdout, "removed %s (%s, %s)\n", r.Dir, r.State, byteSize(r.Bytes))
		}
		freed += r.Bytes
		n++
	}
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	fmt.Fprintf(stderr, "%s %d runs, %s\n", verb, n, byteSize(freed))
	return nil
}

// parseAge reads an age such as 30d, 2w or 12h.
func parseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if num, ok := strings.CutSuffix(s, suffix); ok {
			n, err := strconv.Atoi(num)
			if err != nil || n < 0 {
				return 0, errors.New("want a number of days (30d), weeks (2w) or a duration such as 12h")
			}
			return time.Duration(n) * unit, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, errors.New("want a number of days (30d), weeks (2w) or a duration such as 12h")
	}
	return d, nil
}
