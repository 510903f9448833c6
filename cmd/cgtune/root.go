package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"cgtune/engine/megatron"
	"cgtune/internal/fileio"
	"cgtune/internal/setup"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/report"
	"cgtune/search"
	"cgtune/stepmodel"
)

// startTUI runs the interactive program (runTUI); f holds the root
// command's flags (model, preset, GPUs, engine, ...) for the TUI to start
// from, and f.setup builds a search from them.
type startTUI func(ctx context.Context, f *rootFlags, stdin io.Reader, stdout, stderr io.Writer) error

// maxTrainIters bounds --train-iters: a billion iterations is far past any
// training job, and job-level times stay exact in a float64 below it.
const maxTrainIters = 1_000_000_000

// rootFlags are the flags of `cgtune` itself (the search; subcommands have
// their own).
type rootFlags struct {
	headless    bool
	model       string
	gpuType     string
	preset      string
	gpus        string
	engine      string
	estimateGPU string
	strategy    string
	budget      time.Duration
	trainIters  int
	mbridge     string
	sets        []string
	emit        string
	format      string
	json        bool
	resume      string
	runDir      string
	profile     setup.Profile
	skipBad     bool
	tie         string
	report      string
	force       bool // --emit and --report may replace existing files
	wide        bool // the ranking with every column, notes inline
	// estimateDelay slows every estimate-engine run (hidden: tests and
	// demos of an interrupted search need a search that takes time).
	estimateDelay time.Duration
	// python, ranks, maxLayers and maxMicroBatches configure the megatron
	// engine (setup.Megatron).
	python string
	ranks  int
	// launcher, command, commandFormat, jobIters and jobTimeout configure
	// the job engine (setup.Job).
	launcher, command, commandFormat string
	jobIters                         int
	jobTimeout                       time.Duration
	maxLayers                        int
	maxMicroBatches                  int
	// runPredictedFailures runs the candidates predicted to fail capture.
	runPredictedFailures bool
	// winnerEmulated emits the emulated candidate that ranks above the
	// framework-measured winner, when there is one.
	winnerEmulated bool
	// skipProfile: a megatron search does not measure the framework
	// profile first when none is cached.
	skipProfile bool
	// saveWithProfile: the TUI's saved presets carry the framework
	// profile cached for them (presetprofile.go).
	saveWithProfile bool
	// choiceNotes say which GPU type or MB version the search took in
	// place of one the model has no recipe for (recipe.ChooseTarget).
	choiceNotes []string
	// trustCommand lets a resume run the job command its run.json holds;
	// savedCommand names that file when the command came from it.
	trustCommand bool
	savedCommand string
	// imp imports the model and layout from the user's Megatron-Bridge.
	imp mbImportFlags
	// whatIf is --what-if: "", whatIfOn or accept=NAME,... (parseWhatIf).
	whatIf string

	cmd *cobra.Command
}

// configureRoot gives the root command its own flags and the search as
// its action: headless with --headless, else tui on a terminal.
func configureRoot(root *cobra.Command, tui startTUI) {
	f := &rootFlags{cmd: root}
	root.Use = "cgtune [--headless --model M ...]"
	root.Long = `cgtune finds the fastest CUDA-graph configuration (cuda_graph_impl, scope,
warm-up steps) for a Megatron-Bridge training recipe by measuring the candidates
on this node's GPUs, and emits the winner's recipe overrides.

Run it on a terminal for the interactive program; with --headless it searches
and prints the ranking (stdout), progress (stderr) and writes --emit.

Exit status: 0 ok; 1 no candidate succeeded; 2 bad input; 3 no usable GPU for
--engine cuda; 130 interrupted (the finished candidates are kept: --resume RUN).`
	root.Args = cobra.NoArgs
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := f.checkEngineFlags(); err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		// After the first Ctrl-C the search winds down and prints what it
		// has; a second one kills cgtune as usual.
		context.AfterFunc(ctx, stop)
		if !f.headless {
			return f.interactive(ctx, cmd, tui)
		}
		return f.runHeadless(ctx, cmd)
	}
	fl := root.Flags()
	fl.BoolVar(&f.headless, "headless", false, "search without the interactive program (for scripts)")
	fl.StringVar(&f.model, "model", "", "built-in model name (cgtune models)")
	fl.StringVar(&f.gpuType, "gpu-type", "h100", gpuTypeUsage("GPU type whose default layout the model uses"))
	fl.StringVar(&f.preset, "preset", "", "team preset (model, layout, space and MB version): a NAME saved with cgtune preset save, or a FILE")
	fl.StringVar(&f.gpus, "gpu", "0", "GPUs to measure on, comma-separated (one worker each)")
	fl.StringVar(&f.engine, "engine", "", "megatron (the installed Megatron-Core on this GPU), cuda (emulation measured on this GPU) or estimate (computed, no GPU); default: megatron when a GPU and an importable megatron.core are there, else cuda, else estimate")
	fl.StringVar(&f.python, "python", "", "Python interpreter for the megatron engine and --recipe (default: $"+megatron.PythonEnv+", then python3 on PATH)")
	f.imp.register(fl)
	fl.StringVar(&f.launcher, "launcher", "local", "job engine: local (this node, its own process group) or slurm (sbatch)")
	fl.StringVar(&f.command, "command", "", "job engine: the training command template, with {flags}, {dotlist}, {overrides} or {run_script_flags} and {iters} (cgtune validate --help)")
	fl.StringVar(&f.commandFormat, "command-format", "", "job engine: what {overrides} renders: dotlist (default), flags, run_script_flags")
	fl.IntVar(&f.jobIters, "job-iters", 30, "job engine: iterations each job runs")
	fl.DurationVar(&f.jobTimeout, "job-timeout", 0, "job engine: bound on each job's running time (0: none beyond the scheduler's)")
	fl.BoolVar(&f.trustCommand, "trust-preset-command", false, "job engine, with --resume: run the command template saved in the run folder's "+runFile+" (a resume without --command shows it and runs no job without this)")
	fl.IntVar(&f.ranks, "ranks", 0, "megatron engine: ranks (GPUs) per candidate; default: as many of --gpu as the layout's TP×EP can use")
	fl.IntVar(&f.maxLayers, "max-layers", megatron.DefaultMaxLayers, "megatron engine: build at most this many of a stage's layers (the rest is scaled, and results say so)")
	fl.IntVar(&f.maxMicroBatches, "max-microbatches", megatron.DefaultMaxMicroBatches, "megatron engine: run at most this many micro-batches per step (the rest is scaled)")
	fl.StringVar(&f.estimateGPU, "estimate-gpu", "", "GPU the estimate engine estimates for (default: --gpu-type; with cuda, the measured GPU): "+strings.Join(stepmodel.SpecNames(), ", "))
	fl.StringVar(&f.strategy, "strategy", search.StrategyHalving, "halving (successive halving within --budget) or exhaustive (every candidate)")
	fl.DurationVar(&f.budget, "budget", search.DefaultBudget, "time the halving search may keep the GPUs busy (0 or less: no limit)")
	fl.IntVar(&f.trainIters, "train-iters", search.DefaultTrainIters, "job length the warm-up is chosen for (iterations)")
	fl.StringVar(&f.mbridge, "mbridge", search.DefaultMBridge, "Megatron-Bridge version: "+strings.Join(presets.MBridgeVersions, ", "))
	fl.StringArrayVar(&f.sets, "set", nil, "recipe override KEY=VALUE the rules see (Hydra syntax); repeatable")
	fl.StringVar(&f.emit, "emit", "", "write the winner's overrides to PATH (atomically; an existing file only with --force; - for stdout, the ranking then goes to stderr)")
	fl.StringVar(&f.format, "format", "yaml", "overrides format: "+strings.Join(recipe.Formats, ", "))
	fl.BoolVar(&f.wide, "wide", false, "print the ranking with every column (P10–P90, source) and each row's note in it, however wide the lines")
	fl.BoolVar(&f.json, "json", false, "progress as JSON lines of the search events (stderr), the result as JSON (stdout)")
	fl.StringVar(&f.resume, "resume", "", "continue the interrupted search in run folder RUN (a path, or a name under the runs folder)")
	fl.BoolVar(&f.skipBad, "skip-bad-lines", false, "with --resume: go on past unreadable lines in the middle of the journal (they are moved to "+search.UnreadableFile+" in the run folder)")
	fl.StringVar(&f.runDir, "run-dir", "", "run folder for the journal (default: a new folder under the user cache folder, cgtune/runs)")
	registerProfileFlags(root, &f.profile)
	fl.BoolVar(&f.skipProfile, "skip-profile", false, "megatron engine: do not measure the framework profile (cgtune probe --framework) before the search when none is cached for the model, layout and GPU")
	fl.BoolVar(&f.winnerEmulated, "winner-emulated", false, "emit the overrides of an emulated candidate (one the framework could not run here, e.g. transformer_engine without Transformer Engine) when it ranks above the best framework-measured one; by default the overrides are for what the framework measured")
	fl.BoolVar(&f.runPredictedFailures, "run-predicted-failures", false, "also run the candidates whose capture cgtune predicts will fail (a graph holding a host sync, e.g. the dropless MoE dispatch), so the installed framework confirms or refutes the prediction; each result says which")
	fl.StringVar(&f.tie, "tie", search.FormatTie(search.DefaultTie), "tie band: candidates within this share of the step time (or whose measured p10–p90 ranges overlap) tie, and the one with less graph memory, then the simpler one, ranks first")
	fl.StringVar(&f.whatIf, "what-if", "", whatIfUsage())
	fl.Lookup("what-if").NoOptDefVal = whatIfOn
	fl.StringVar(&f.report, "report", "", "write a Markdown report of the search to FILE.md (and its plot, FILE.svg, beside it)")
	fl.BoolVar(&f.force, "force", false, "let --emit and --report (and its plot) replace existing files")
	fl.BoolVar(&f.saveWithProfile, "save-with-profile", false, "the TUI's s (save preset) puts the framework profile cached for the preset's model, layout and GPU in the preset, as cgtune preset export --with-profile does")
	fl.DurationVar(&f.estimateDelay, "estimate-delay", 0, "slow the estimate engine by this much per candidate")
	fl.MarkHidden("estimate-delay")
}

// interactive starts the TUI on a terminal; without one it says how to run
// headless instead of failing on the terminal.
func (f *rootFlags) interactive(ctx context.Context, cmd *cobra.Command, tui startTUI) error {
	for _, end := range []struct {
		name string
		f    any
	}{{"stdin", cmd.InOrStdin()}, {"stdout", cmd.OutOrStdout()}} {
		if !isTerminal(end.f) {
			return fail(exitBadInput, "no terminal on %s: use --headless (cgtune --headless --model M [--emit PATH]; cgtune --help)", end.name)
		}
	}
	return tui(ctx, f, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
}

// isTerminal reports whether v is a terminal: a file the terminal answers
// on (term.IsTerminal asks for its settings). Being a character device is
// not enough: /dev/null is one, and the TUI's input reader then fails on it.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// parseSets turns --set KEY=VALUE flags into the map the search takes.
func parseSets(sets []string) (map[string]string, error) {
	if len(sets) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fail(exitBadInput, "--set %q: want KEY=VALUE", s)
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

func parseGPUs(s string) ([]int, error) {
	if err := typeForIndex(s); err != nil {
		return nil, err
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 {
			return nil, fail(exitBadInput, "--gpu %q: want GPU indices such as 0 or 0,1", s)
		}
		if slices.Contains(out, n) {
			return nil, fail(exitBadInput, "--gpu %q: GPU %d listed twice", s, n)
		}
		out = append(out, n)
	}
	return out, nil
}

// searchSetup is everything a search needs from the flags: the search's
// config with its engines, and a function that releases the engines.
// notices are lines for the user (the estimate engine standing in for a
// missing GPU, ...).
type searchSetup struct {
	cfg     search.Config
	close   func()
	notices []string
	lock    *search.RunLock // the run folder, held from before run.json is read or written
}

// release closes the engines and gives the run folder up.
func (s *searchSetup) release() {
	s.close()
	s.lock.Release()
}

// what resolves the model, layout, MB release, space and sets from
// --model/--preset/an imported recipe (or, on --resume without them, from
// the journal).
func (f *rootFlags) what(ctx context.Context, cfg *search.Config) error {
	sets, err := parseSets(f.sets)
	if err != nil {
		return err
	}
	cfg.Sets, cfg.MBridge = sets, f.mbridge
	if err := f.imp.check(); err != nil {
		return err
	}
	given := 0
	for _, g := range []bool{f.model != "", f.preset != "", f.imp.given()} {
		if g {
			given++
		}
	}
	switch {
	case f.model != "" && f.preset != "":
		return fail(exitBadInput, "give --model or --preset, not both")
	case given > 1:
		return fail(exitBadInput, "give one of --model, --preset and --mbridge-config/--recipe")
	case f.imp.given():
		err = f.whatImported(ctx, cfg)
	case f.model != "":
		err = f.whatModel(cfg)
	case f.preset != "":
		err = f.whatPreset(cfg)
	case f.resume != "":
		err = f.whatJournal(cfg)
	default:
		return fail(exitBadInput, "give --model M or --preset NAME|FILE, or import a recipe with --mbridge-config FILE or --recipe R (cgtune models lists the models, cgtune preset list the presets)")
	}
	if err != nil {
		return err
	}
	if _, err := presets.ParseMBridge(cfg.MBridge); err != nil {
		return fail(exitBadInput, "--mbridge: %w", err)
	}
	if err := setup.Workload(cfg); err != nil {
		return fail(exitBadInput, "%w", err)
	}
	return nil
}

// whatImported takes the model, layout and space of the user's recipe
// (--mbridge-config, --recipe).
func (f *rootFlags) whatImported(ctx context.Context, cfg *search.Config) error {
	p, err := f.imp.load(ctx, f.python, f.importGPUType(), f.mbridge)
	if err != nil {
		return err
	}
	cfg.Model, cfg.Layout, cfg.Space = *p.ModelInline, p.Layout, p.Space
	return nil
}

// importGPUType is the GPU type an imported recipe is read for: the one
// --gpu-type names, else none (the recipe's own).
func (f *rootFlags) importGPUType() string {
	if f.cmd.Flags().Changed("gpu-type") {
		return f.gpuType
	}
	return ""
}

// whatModel takes a built-in model: as the TUI does, a GPU type or MB
// version not asked for gives way to one the model's recipe has.
func (f *rootFlags) whatModel(cfg *search.Config) error {
	changed := f.cmd.Flags().Changed
	m, err := presets.LookupModel(f.model)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	ch, err := recipe.ChooseTarget(m, f.gpuType, changed("gpu-type"), f.mbridge, changed("mbridge"))
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	cfg.Model, cfg.Layout, cfg.MBridge = m, ch.Layout, ch.MBridge
	f.choiceNotes = ch.Notes
	return nil
}

// whatPreset takes a team preset: it names its GPU and MB release, and
// explicit flags win.
func (f *rootFlags) whatPreset(cfg *search.Config) error {
	changed := f.cmd.Flags().Changed
	p, where, err := loadPreset(f.preset)
	if err != nil {
		return err
	}
	m, err := p.ResolveModel()
	if err != nil {
		return fail(exitBadInput, "%s: %w", where, err)
	}
	cfg.Model, cfg.Layout, cfg.Space, cfg.Reference = m, p.Layout, p.Space, p.Reference
	if changed("gpu-type") {
		if cfg.Layout, err = m.Layout(f.gpuType); err != nil {
			return fail(exitBadInput, "%w", err)
		}
	} else if n := carriedProfileNote(p, where); n != "" {
		f.choiceNotes = append(f.choiceNotes, n)
	}
	if !changed("mbridge") && p.MBridge != "" {
		cfg.MBridge = p.MBridge
	}
	return nil
}

// whatJournal takes what was searched from the journal of the run
// --resume continues; flags given again win where they may differ.
func (f *rootFlags) whatJournal(cfg *search.Config) error {
	changed := f.cmd.Flags().Changed
	fp, _, err := search.ReadJournal(cfg.RunDir, f.skipBad)
	if err != nil {
		return journalError(err, cfg.RunDir)
	}
	if changed("gpu-type") && f.gpuType != fp.Layout.GPU {
		return fail(exitBadInput, "--gpu-type %s: the search in %s is for %s (its journal says); leave --gpu-type out to resume it, or start a new search", f.gpuType, cfg.RunDir, fp.Layout.GPU)
	}
	cfg.Model, cfg.Layout, cfg.Space, cfg.Workload, cfg.Measured, cfg.Reference = fp.Model, fp.Layout, fp.Space, fp.Workload, fp.Measured, fp.Reference
	if !changed("mbridge") {
		cfg.MBridge = fp.MBridge
	}
	if !changed("strategy") {
		f.strategy = fp.Strategy
	}
	if !changed("set") {
		cfg.Sets = fp.Sets
	}
	cfg.WhatIf = fp.WhatIf
	return nil
}

// setup builds the search from the flags: what to search, the run
// folder, and the engines (cuda workers, or in-process estimate engines).
func (f *rootFlags) setup(ctx context.Context) (_ *searchSetup, err error) {
	s := &searchSetup{close: func() {}}
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	cfg := &s.cfg
	if f.skipBad && f.resume == "" {
		return nil, fail(exitBadInput, "--skip-bad-lines is for --resume RUN")
	}
	if f.resume != "" {
		if err := f.resumeRun(s); err != nil {
			return nil, err
		}
	}
	if err := f.checkJobFlags(); err != nil {
		return nil, err
	}
	if err := f.what(ctx, cfg); err != nil {
		return nil, err
	}
	if f.strategy != search.StrategyHalving && f.strategy != search.StrategyExhaustive {
		return nil, fail(exitBadInput, "--strategy %q: allowed: %s", f.strategy, strings.Join(search.Strategies(), ", "))
	}
	if !slices.Contains(recipe.Formats, f.format) {
		return nil, fail(exitBadInput, "--format %q: allowed: %s", f.format, strings.Join(recipe.Formats, ", "))
	}
	if err := checkReportPath(f.report); err != nil {
		return nil, err
	}
	if f.trainIters <= 0 || f.trainIters > maxTrainIters {
		return nil, fail(exitBadInput, "--train-iters %d: out of range (allowed: 1 to %d)", f.trainIters, maxTrainIters)
	}
	cfg.Strategy, cfg.TrainIters = f.strategy, f.trainIters
	tie, err := search.ParseTie(f.tie)
	if err != nil {
		return nil, fail(exitBadInput, "--tie: %w", err)
	}
	cfg.Tie = tie
	cfg.RunPredictedFailures = f.runPredictedFailures
	if on, accept, err := parseWhatIf(f.whatIf); err != nil {
		return nil, err
	} else if on {
		cfg.WhatIf, cfg.Accept = true, accept
	}
	cfg.Budget = f.budget
	if f.budget <= 0 {
		cfg.Budget = -1 // the flag's "no limit"; search.Config reads 0 as the default
	}
	gpus, err := parseGPUs(f.gpus)
	if err != nil {
		return nil, err
	}
	if err := f.checkOutputs(cmp.Or(cfg.RunDir, f.runDir)); err != nil {
		return nil, err
	}
	if err := f.openEngines(ctx, s, gpus); err != nil {
		return nil, err
	}
	// After the engine's lines, whose first says what every figure is.
	s.notices = append(s.notices, f.choiceNotes...)
	if cfg.Resume {
		// Before run.json is rewritten or a notice printed: a resume of
		// another search, or computed another way, changes nothing.
		if err := search.CheckResumable(*cfg); err != nil {
			return nil, journalError(err, cfg.RunDir)
		}
	}
	if n := setup.CalibrationNotice(cfg.Model, cfg.Layout); n != "" && f.engine != setup.EngineJob {
		s.notices = append(s.notices, n)
	}
	// Last, so that a search that cannot start leaves no run folder.
	if !cfg.Resume {
		if err := f.claimRunDir(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// resumeRun finds and locks the run folder --resume names and takes its
// run.json's settings (applySaved) into f.
func (f *rootFlags) resumeRun(s *searchSetup) error {
	dir, err := setup.ResolveRun(f.resume)
	if err != nil {
		return err
	}
	if f.runDir != "" && !sameDir(f.runDir, dir) {
		return fail(exitBadInput, "--run-dir %s: --resume %s continues the search in %s; leave --run-dir out", f.runDir, f.resume, dir)
	}
	// Locked before run.json is read: another process resuming the same
	// run would run every remaining candidate a second time.
	if s.lock, err = lockRun(dir); err != nil {
		return err
	}
	s.cfg.RunDir, s.cfg.Resume, s.cfg.Lock, s.cfg.SkipBadLines = dir, true, s.lock, f.skipBad
	return f.applySaved(dir)
}

// checkEngineFlags refuses engine settings that are no size or time (the
// engines would take them for their defaults): each is one line naming
// the flag and what it allows.
func (f *rootFlags) checkEngineFlags() error {
	if err := checkMegatronLimits(f.maxLayers, f.maxMicroBatches); err != nil {
		return err
	}
	switch {
	case f.ranks < 0:
		return fail(exitBadInput, "--ranks %d: allowed: 0 (as many of --gpu as the layout's TP×EP can use) or 1 or more GPUs per candidate", f.ranks)
	case f.jobIters < 1 || f.jobIters > maxTrainIters:
		return fail(exitBadInput, "--job-iters %d: out of range (allowed: 1 to %d)", f.jobIters, maxTrainIters)
	case f.jobTimeout < 0:
		return fail(exitBadInput, "--job-timeout %s: allowed: 0 (no bound beyond the scheduler's) or a positive duration such as 30m", f.jobTimeout)
	}
	return nil
}

// jobFlags are the flags only the job engine reads.
var jobFlags = []string{"launcher", "command", "command-format", "job-iters", "job-timeout", "trust-preset-command"}

// checkJobFlags refuses a job engine's flag given to a search on another
// engine: it would be ignored, and a person who gave --command meant the
// candidates to run as that command. Refused rather than warned, because
// the search that follows would answer a question they did not ask.
func (f *rootFlags) checkJobFlags() error {
	if f.engine == setup.EngineJob {
		return nil
	}
	for _, name := range jobFlags {
		if f.cmd.Flags().Changed(name) {
			engine := f.engine
			if engine == "" {
				engine = "chosen by default (never job)"
			}
			return fail(exitBadInput, "--%s is for --engine job (each candidate run as the training job); the engine here is %s and runs no command: leave --%s out, or give --engine job", name, engine, name)
		}
	}
	return nil
}

// checkMegatronLimits refuses a --max-layers or --max-microbatches the
// megatron engine would replace by its default.
func checkMegatronLimits(maxLayers, maxMicroBatches int) error {
	switch {
	case maxLayers < 1 || maxLayers > presets.MaxLayers:
		return fail(exitBadInput, "--max-layers %d: out of range (allowed: 1 to %d)", maxLayers, presets.MaxLayers)
	case maxMicroBatches < 1 || maxMicroBatches > presets.MaxGBS:
		return fail(exitBadInput, "--max-microbatches %d: out of range (allowed: 1 to %d)", maxMicroBatches, presets.MaxGBS)
	}
	return nil
}

// sameDir reports whether paths a and b name one folder.
func sameDir(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(sa, sb)
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// journalError is a search that could not start, as bad input; for a
// journal with unreadable lines it says how to go on without them.
func journalError(err error, dir string) error {
	var bad *search.BadLinesError
	if errors.As(err, &bad) {
		return fail(exitBadInput, "%w; continue without the unreadable lines: cgtune --headless --resume %s --skip-bad-lines", err, dir)
	}
	return fail(exitBadInput, "%w", err)
}

// lockRun takes the lock on a run folder; one held by another process is
// bad input (exit 2), with that process's pid.
func lockRun(dir string) (*search.RunLock, error) {
	l, err := search.LockRunDir(dir)
	if err != nil {
		return nil, fail(exitBadInput, "%w", err)
	}
	return l, nil
}

// claimRunDir finds and locks the folder of a new search: --run-dir, which
// must be new, empty or a cgtune run that never started (nothing of
// anyone else's is overwritten), or a fresh folder under the runs folder.
func (f *rootFlags) claimRunDir(s *searchSetup) error {
	dir := f.runDir
	if dir == "" {
		var err error
		if dir, err = setup.NewRunDir(); err != nil {
			return err
		}
	} else if err := checkRunDir(dir); err != nil {
		return err
	}
	l, err := lockRun(dir)
	if err != nil {
		return err
	}
	s.lock = l
	// Checked again under the lock: another search may have started there
	// between the first look and the lock.
	if err := checkRunDir(dir); err != nil {
		return err
	}
	s.cfg.RunDir, s.cfg.Lock = dir, l
	return nil
}

// checkRunDir refuses a --run-dir that holds a search already (that is
// --resume) or anything that is not a cgtune run.
func checkRunDir(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, search.JournalFile)); err == nil {
		return fail(exitBadInput, "--run-dir %s holds a search already: continue it with --resume %s", dir, dir)
	}
	if err := search.CheckRunDir(dir, runFile, setup.MegatronWorkerLog); err != nil {
		return fail(exitBadInput, "--run-dir %w", err)
	}
	path := filepath.Join(dir, runFile)
	if _, err := os.Lstat(path); err == nil && !isSavedRun(path) {
		return fail(exitBadInput, "--run-dir %s: %s is not a cgtune run file; give an empty or new folder", dir, path)
	}
	return nil
}

// engineOptions maps the engine flags to the set-up's options, for the
// engines on gpus.
func (f *rootFlags) engineOptions(gpus []int) setup.Options {
	return setup.Options{
		Engine: f.engine, EstimateGPU: f.estimateGPU, GPUs: gpus, Profile: f.profile, EstimateDelay: f.estimateDelay,
		Megatron: setup.Megatron{Python: f.python, Ranks: f.ranks, MaxLayers: f.maxLayers, MaxMicroBatches: f.maxMicroBatches,
			SkipProfile: f.skipProfile, LogDir: f.runDir},
		Job: setup.Job{Launcher: f.launcher, Command: f.command, CommandFormat: f.commandFormat, Iters: f.jobIters, Timeout: f.jobTimeout},
	}
}

// openEngines opens the search's engines (setup.Open) and records the
// engine opened in f.engine (run.json names it). An interrupt while the
// workers start ends cgtune as one during the search does (exit 130).
func (f *rootFlags) openEngines(ctx context.Context, s *searchSetup, gpus []int) error {
	e, err := setup.Open(ctx, &s.cfg, f.engineOptions(gpus))
	if err != nil && ctx.Err() != nil {
		return fail(exitInterrupted, "interrupted while the engines started: nothing was run")
	} else if err != nil {
		return err
	}
	f.engine, s.close = e.Engine, e.Close
	s.notices = append(s.notices, e.Notices...)
	return nil
}

func (f *rootFlags) runHeadless(ctx context.Context, cmd *cobra.Command) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	s, err := f.setup(ctx)
	if err != nil {
		return err
	}
	defer s.release()
	cfg := s.cfg
	p := &progress{w: stderr, json: f.json, cfg: cfg, start: time.Now()}
	for _, n := range s.notices {
		p.notice(n)
	}
	saved, _ := json.MarshalIndent(f.newSavedRun(), "", "  ")
	if err := fileio.WriteOwnFileAtomic(filepath.Join(cfg.RunDir, runFile), append(saved, '\n'), 0o644); err != nil {
		return fail(exitBadInput, "%w", err)
	}

	ctx, release, untrusted := f.gateSavedCommand(ctx, &cfg)
	defer release()
	p.start = time.Now()
	d, err := search.Run(ctx, cfg, p.event)
	if errors.Is(context.Cause(ctx), errUntrustedCommand) {
		return untrusted()
	}
	if err != nil && d.Err == "" {
		if ctx.Err() != nil {
			return fail(exitInterrupted, "interrupted before the search started")
		}
		// The search did not start (another search's folder, a bad --set).
		return journalError(err, cfg.RunDir)
	}
	return f.finishHeadless(stdout, stderr, p, cfg, d)
}

// recommendation is the overrides the search recommends, rendered: none
// for a search stopped by an error (the journal could not be written) or
// an interrupt, whose winner is of a part.
func (f *rootFlags) recommendation(cfg search.Config, d *search.DoneEvent) ([]byte, *recipe.Overrides, error) {
	if e := search.BestEmulated(d.Ranking); f.winnerEmulated && e != nil {
		d.Winner = e
	}
	if d.Winner == nil || d.Interrupted || d.Err != "" {
		return nil, nil, nil
	}
	o := search.Recommendation(cfg.Target(), d, *d.Winner)
	overrides, err := o.Render(f.format)
	if err != nil {
		return nil, nil, fail(exitBadInput, "%w", err)
	}
	return overrides, &o, nil
}

// finishHeadless writes what a search that ran leaves (--emit, the
// ranking, --report) and ends with its exit code.
func (f *rootFlags) finishHeadless(stdout, stderr io.Writer, p *progress, cfg search.Config, d search.DoneEvent) error {
	overrides, o, err := f.recommendation(cfg, &d)
	if err != nil {
		return err
	}
	// The file first: whatever happens to stdout (a reader that quits
	// early), the overrides are on disk before the ranking is printed.
	var emitErr error
	toFile := overrides != nil && f.emit != "" && f.emit != "-"
	if toFile {
		emitErr = writeOutput(f.emit, overrides, f.force)
	}
	table := stdout
	if f.emit == "-" {
		table = stderr // stdout carries the overrides alone
	}
	if err := f.printOutcome(stdout, table, d, overrides, o, toFile && emitErr == nil, p.plan, cfg); err != nil {
		return err
	}
	if emitErr != nil {
		return fail(exitBadInput, "--emit %w", emitErr)
	}
	if toFile {
		p.wrote(wroteEvent{What: "overrides", Path: absPath(f.emit), Format: f.format, MBridge: cfg.MBridge})
	}
	if d.Err != "" {
		// An I/O error, not a verdict on the candidates: bad input's exit.
		return fail(exitBadInput, "the search stopped: %s; nothing was written%s; %s; continue with: cgtune --headless --resume %s",
			d.Err, f.unwritten(), keptText(d.Kept, cfg.RunDir), cfg.RunDir)
	}
	if err := f.writeReport(p, cfg, p.plan, d, overrides, o); err != nil {
		return err
	}
	switch {
	case d.Interrupted:
		return fail(exitInterrupted, "interrupted%s: %d finished candidates are kept in %s; continue with: cgtune --headless --resume %s",
			f.unwritten(), d.Runs+d.Resumed, cfg.RunDir, cfg.RunDir)
	case d.Winner == nil && slices.ContainsFunc(d.Ranking, func(r search.Ranked) bool { return !r.Result.Failed() }):
		return fail(exitInvalid, "no candidate fits the job's GPU memory (%d MiB)", cfg.JobGPUMemoryMiB)
	case d.Winner == nil:
		return fail(exitInvalid, "no candidate succeeded")
	}
	return nil
}

// unwritten says which file a search that stopped early did not write.
func (f *rootFlags) unwritten() string {
	if f.emit == "" || f.emit == "-" {
		return ""
	}
	return " (" + f.emit + " not written)"
}

// checkOutputs refuses, before the search starts, an --emit or --report
// target the files could not be written to (a missing or read-only folder,
// a device, a FIFO) or must not be (an input of the run, a file in a run
// folder, each other, an existing file without --force; outputCheck):
// finding that out after the search would lose it. runDir is the run
// folder ("" for a new one under the cache folder).
func (f *rootFlags) checkOutputs(runDir string) error {
	if f.emit == "-" && f.json {
		return fail(exitBadInput, "--emit - and --json both write to stdout; the JSON object carries the overrides")
	}
	var outs []output
	if f.emit != "" && f.emit != "-" {
		outs = append(outs, output{"--emit", f.emit})
	}
	if f.report != "" {
		outs = append(outs, output{"--report", f.report}, output{"--report's plot", report.PlotPath(f.report)})
	}
	return f.outputCheck(runDir).check(outs...)
}

// printOutcome writes the result to stdout: the JSON object, or the
// ranking (to table) followed by the overrides when they went to no file.
// A reader that went away is no error: the file is written already.
func (f *rootFlags) printOutcome(stdout, table io.Writer, d search.DoneEvent, overrides []byte, o *recipe.Overrides, emitted bool, plan []search.Planned, cfg search.Config) error {
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return stdoutErr(enc.Encode(f.newHeadlessResult(d, cfg, overrides, o, emitted)))
	}
	printRanking(table, d, plan, cfg, f.wide)
	printWhatIf(table, d)
	if overrides == nil || (f.emit != "" && f.emit != "-") {
		return nil
	}
	if f.emit == "" {
		fmt.Fprintln(stdout)
	}
	_, err := stdout.Write(overrides)
	return stdoutErr(err)
}

// progress prints the search's events to stderr: one line per result (or
// the events as JSON lines).
type progress struct {
	w     io.Writer
	json  bool
	cfg   search.Config
	start time.Time
	plan  []search.Planned // from the PlanEvent: the aliases of each row
}

func eventName(e search.Event) string {
	switch e.(type) {
	case search.PlanEvent:
		return "plan"
	case search.StartEvent:
		return "start"
	case search.SampleEvent:
		return "sample"
	case search.ResultEvent:
		return "result"
	case search.MemoryEvent:
		return "memory"
	case search.WorkerEvent:
		return "worker"
	case search.PrepareEvent:
		return "prepare"
	case search.DoneEvent:
		return "done"
	}
	return "unknown"
}

func (p *progress) event(e search.Event) {
	if x, ok := e.(search.PlanEvent); ok {
		p.plan = x.Space
	}
	if p.json {
		p.w.Write(jsonLine(eventName(e), e))
		return
	}
	switch x := e.(type) {
	case search.PlanEvent:
		valid, aliases := 0, 0
		rejected := map[string]int{}
		whatIf := whatIfRows(x.Space)
		for _, c := range x.Space {
			if len(c.Candidate.WhatIf) > 0 {
				continue // counted by whatIfRows
			}
			aliases += len(c.Also)
			if c.Valid() {
				valid++
			} else {
				rejected[c.Violations[0].ID]++
			}
		}
		l := p.cfg.Layout
		fmt.Fprintf(p.w, "plan: %s on %d× %s (TP%d PP%d CP%d EP%d, %d micro-batches), MB %s: %d configurations (%d other spellings run as one of them), %d valid, %d rejected%s%s\n",
			p.cfg.Model.Name, l.NumGPUs, l.GPU, l.TPSize(), l.PPSize(), l.CPSize(), l.EPSize(), l.MicroBatches(), p.cfg.MBridge,
			len(x.Space)-whatIf.rows, aliases, valid, len(x.Space)-whatIf.rows-valid, rejectedText(rejected), whatIf.text())
		var names []string
		for _, e := range p.cfg.Engines {
			names = append(names, e.Device().Name)
		}
		fmt.Fprintf(p.w, "search: %s, %d runs planned on %s; run folder %s\n", p.cfg.Strategy, x.Total, strings.Join(names, ", "), p.cfg.RunDir)
	case search.ResultEvent:
		r := x.Result
		eager := "eager"
		if len(r.Candidate.WhatIf) > 0 {
			eager = "its eager step with the changes" // the ranking puts it on the recipe's
		}
		what := fmt.Sprintf("%.2f ms/step (%s %s), capture %.0f ms, graphs %d MiB", r.Step.Median, speedupText(r.Speedup, "x"), eager, r.CaptureMs, r.Memory.JobGraphMiB())
		if r.Speedup <= 0 {
			what = fmt.Sprintf("%.2f ms/step (no speed-up over eager: see the result's notes), capture %.0f ms, graphs %d MiB", r.Step.Median, r.CaptureMs, r.Memory.JobGraphMiB())
		}
		if r.Failed() {
			what = fmt.Sprintf("failed (%s): %s", r.ErrKind, r.Err)
		}
		from := ""
		if x.Resumed {
			from = " (from the journal)"
		}
		fmt.Fprintf(p.w, "[%d/%d] round %d GPU %d %s: %s [%s]%s, ETA %s\n", x.Done, x.Total, x.Round, x.GPU, r.Candidate.Name(), what, r.Source, from, x.ETA)
	case search.WorkerEvent:
		fmt.Fprintf(p.w, "GPU %d: %s\n", x.GPU, x.Message)
	case search.PrepareEvent:
		fmt.Fprintln(p.w, "prepare: "+x.Message)
	case search.DoneEvent:
		for _, n := range x.Notes {
			fmt.Fprintln(p.w, "note: "+n)
		}
		fmt.Fprintln(p.w, "done: "+spentText(x, p.cfg, time.Since(p.start)))
	}
}

// rejectedText says what the plan's rejections were, most first, each rule
// with what it checks (cgtune rules ID explains it): ": TC-18 (not moe
// and moe_router in one graph) ×120, ...".
func rejectedText(counts map[string]int) string {
	ids := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		return cmp.Or(counts[b]-counts[a], strings.Compare(a, b))
	})
	parts := make([]string, len(ids))
	for i, id := range ids {
		what := recipe.Describe(id)
		if id == search.SpaceID {
			what = "captures nothing on the model"
		}
		parts[i] = fmt.Sprintf("%s (%s) ×%d", id, what, counts[id])
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}
