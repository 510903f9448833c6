package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"cgtune/engine"
	"cgtune/engine/job"
	"cgtune/engine/megatron"
	"cgtune/internal/fileio"
	"cgtune/internal/setup"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
)

// defaultValidateTimeout bounds each validation job's running time unless
// told otherwise (validate --job-timeout; the TUI's form without
// --job-timeout).
const defaultValidateTimeout = 30 * time.Minute

type validateFlags struct {
	preset, launcher, command, format string
	top, iters, parallel              int
	jobTimeout                        time.Duration
	resume                            bool
	dir                               string
	nodes, gpusPerNode                int
	timeLimit, partition, account     string
	batchTemplate                     string
	printBatch                        bool
	savePreset                        string
	trust                             bool
	mbridge, jobGPU                   string
	json, dryRun, noCalibrate, force  bool
	poll                              time.Duration
	jobPython, jobTE                  string
	teTimeout                         time.Duration
	skipBad                           bool

	cmd *cobra.Command
}

const validateLong = `Runs the best candidates of a finished search (RUN: a run folder, or its
name under the runs folder) or a team preset's result (--preset) as the real
training job, together with the eager baseline (cuda_graph_impl=none), for
--iters iterations each; prints the ranking by the jobs' real iteration time
next to cgtune's prediction and the prediction error; saves the outcome in
the run folder (validate/validation.json) and, with --save-preset NAME, as a
team preset whose result says it came from jobs (job ids, nodes, GPUs). The
jobs' step times also calibrate the emulating engines' host-cost scale for
the model and layout (saved under the user cache folder, cgtune/calibration).

Launchers:
  local   runs the command on this node with bash, in its own process group
          (e.g. torchrun --nproc-per-node 8 ...); Ctrl-C or --job-timeout
          sends SIGTERM to the group, SIGKILL after 10 s.
  slurm   writes a batch script per candidate from a template (the default:
          --print-batch-template; yours: --batch-template FILE) with #SBATCH
          lines from --nodes, --gpus-per-node, --time, --partition and
          --account, submits it with sbatch --parsable, follows it with
          squeue (sacct, scontrol once it left the queue) and its output
          file, and scancels queued and running jobs on Ctrl-C. --parallel N
          keeps up to N jobs in the queue. Job ids are recorded in the
          validation folder (jobs.jsonl): --resume re-attaches to jobs still
          queued or running instead of submitting them again.

The command template (--command) is a shell command line with placeholders,
written bare (never inside quotes: each expands to shell-quoted words):
  {overrides}         the candidate's overrides in the --format rendering
  {dotlist}           Hydra overrides (Megatron-Bridge run_recipe.py):
                      model.cuda_graph_impl=local model.cuda_graph_warmup_steps=3 ...
  {flags}             Megatron-LM pretrain_gpt.py arguments: --cuda-graph-impl local
                      --cuda-graph-modules attn --cuda-graph-warmup-steps 3
                      (--no-check-for-nan-in-loss-and-grad for full iteration)
  {run_script_flags}  Megatron-Bridge scripts/performance/run_script.py arguments:
                      --cuda_graph_impl local --cuda_graph_scope full_iteration ...
  {yaml_file}         a YAML file of the overrides (for --config-file)
  {iters}             the iterations to run (--iters); without it, cgtune stops
                      each job itself once it has logged --iters iterations
  {candidate}         the candidate's name, e.g. 'te attn w3' (shell-quoted)
  {job_dir}           the job's own folder in the validation folder
The job must log every iteration (Megatron-LM --log-interval 1,
Megatron-Bridge logger.log_interval=1): cgtune reads the "iteration N/ M |
... elapsed time per iteration (ms): X" lines and the memory report, and
counts the iterations after the warm-up and capture (from warm-up + 2, never
before iteration 3). A command template from a preset is shown and runs only
with --trust-preset-command. A command that runs Megatron-LM's pretrain_gpt.py
also meets that launcher's own checks (validate_args, the ARG-* rules of
cgtune rules): a candidate they refuse is skipped, with the rule.

Examples:
  cgtune validate RUN --launcher local --command 'torchrun --nproc-per-node 8 \
      pretrain_gpt.py ... --log-interval 1 --train-iters {iters} {flags}'
  cgtune validate RUN --launcher slurm --nodes 4 --gpus-per-node 8 --time 30 \
      --partition batch --parallel 2 --command 'srun python run_recipe.py \
      --recipe llama3_8b_pretrain train.train_iters={iters} logger.log_interval=1 {dotlist}'

Exit status: 0 at least one job succeeded; 1 none did; 2 bad input;
130 interrupted (finished jobs kept: --resume).`

func newValidateCmd() *cobra.Command {
	f := &validateFlags{}
	cmd := &cobra.Command{
		Use:   "validate [RUN | --preset F] --launcher local|slurm --command TEMPLATE",
		Short: "Run the top candidates as the real training job (torchrun or Slurm) and compare with the prediction",
		Long:  validateLong,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.cmd = cmd
			if f.printBatch {
				_, err := io.WriteString(cmd.OutOrStdout(), job.DefaultBatchTemplate)
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			context.AfterFunc(ctx, stop)
			return f.run(ctx, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.preset, "preset", "", "validate a team preset's result (FILE or NAME) instead of a run")
	fl.StringVar(&f.launcher, "launcher", "", "local or slurm (default: the preset's)")
	fl.StringVar(&f.command, "command", "", "the training command template (see above; default: the preset's)")
	fl.StringVar(&f.format, "format", "", "what {overrides} renders: "+strings.Join(job.OverrideFormats, ", ")+" (default dotlist, or the preset's)")
	fl.IntVar(&f.top, "top", 3, "how many of the run's best graphed candidates to validate (each impl and scope once)")
	fl.IntVar(&f.iters, "iters", job.DefaultIters, "training iterations per job")
	fl.IntVar(&f.parallel, "parallel", 1, "jobs queued or running at once")
	fl.DurationVar(&f.jobTimeout, "job-timeout", defaultValidateTimeout, "cancel a job that runs longer (time in the queue not counted; 0: no limit)")
	fl.BoolVar(&f.resume, "resume", false, "continue the validation in the folder: keep finished jobs, re-attach to running ones")
	fl.StringVar(&f.dir, "dir", "", "validation folder (default: RUN/validate; with --preset a new folder under the runs folder)")
	fl.IntVar(&f.nodes, "nodes", 0, "slurm: nodes per job (default: the preset's, else 1)")
	fl.IntVar(&f.gpusPerNode, "gpus-per-node", 0, "slurm: --gpus-per-node (0: none requested); local: GPUs the command uses, for the record")
	fl.StringVar(&f.timeLimit, "time", "", "slurm: --time per job, e.g. 30 or 1:00:00")
	fl.StringVar(&f.partition, "partition", "", "slurm: --partition")
	fl.StringVar(&f.account, "account", "", "slurm: --account")
	fl.StringVar(&f.batchTemplate, "batch-template", "", "slurm: batch script template FILE ({sbatch}, {command}, {candidate}, {job_name})")
	fl.BoolVar(&f.printBatch, "print-batch-template", false, "print the default batch script template and exit")
	fl.StringVar(&f.savePreset, "save-preset", "", "save the validated winner as team preset NAME (result source: job)")
	fl.BoolVar(&f.force, "force", false, "replace an existing preset of the --save-preset name")
	fl.BoolVar(&f.trust, "trust-preset-command", false, "run the command template that comes from the preset (it is shown first)")
	fl.StringVar(&f.mbridge, "mbridge", "", "field names of this Megatron-Bridge / Megatron-LM generation (default: the run's or preset's): "+strings.Join(presets.MBridgeVersions, ", "))
	fl.BoolVar(&f.json, "json", false, "events as JSON lines (stderr), the outcome as JSON (stdout)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print each job's command (and batch script) without running anything")
	fl.BoolVar(&f.noCalibrate, "no-calibrate", false, "do not update the host-cost calibration from the jobs")
	fl.StringVar(&f.jobGPU, "job-gpu", "", "GPU type the jobs run on, whose framework profile and rates the calibration predicts with (default: the layout's GPU type)")
	fl.StringVar(&f.jobTE, "job-te", "auto", "whether the jobs' framework has Transformer Engine, which transformer_engine candidates need: auto (ask --job-python), yes, no")
	fl.StringVar(&f.jobPython, "job-python", "", "the Python the jobs run, asked whether it imports transformer_engine (default: $"+megatron.PythonEnv+", then python3 on PATH)")
	fl.DurationVar(&f.teTimeout, "job-te-timeout", defaultTEProbeTimeout, "how long --job-te auto waits for the jobs' Python to answer")
	fl.BoolVar(&f.skipBad, "skip-bad-lines", false, "with --resume: set the unreadable lines of the validation folder's "+job.ValidationJournal+" and "+job.LedgerFile+" aside (to *-unreadable.txt beside them) and keep the rest")
	fl.DurationVar(&f.poll, "poll", time.Second, "how often job states and logs are read")
	fl.MarkHidden("poll")
	return cmd
}

// validateSource is what is validated: the request without the launcher,
// and the preset it came from (nil for a run).
type validateSource struct {
	req    search.JobValidation
	runDir string
	preset *presets.TeamPreset
}

// buildable is which candidates the jobs' framework can build (--job-te,
// else what --job-python imports, asked once a transformer_engine
// candidate is among the top ones), and a function that says which
// Transformer Engine the jobs' Python imports ("" when it was not asked or
// cannot: the candidates skipped say why).
func (f *validateFlags) buildable(ctx context.Context) (search.Buildable, func() string, error) {
	switch f.jobTE {
	case "yes":
		return nil, func() string { return "" }, nil
	case "no":
		return search.NeedsTE("--job-te no"), func() string { return "" }, nil
	case "auto":
	default:
		return nil, nil, fail(exitBadInput, "--job-te %q: allowed: auto, yes, no", f.jobTE)
	}
	if f.teTimeout <= 0 {
		return nil, nil, fail(exitBadInput, "--job-te-timeout %s: allowed: a positive duration such as 1m", f.teTimeout)
	}
	p := &teProbe{ctx: ctx, python: f.jobPython, timeout: f.teTimeout}
	return p.buildable, func() string { return p.how }, nil
}

// defaultTEProbeTimeout bounds how long --job-te auto waits for the jobs'
// Python: importing transformer_engine loads CUDA libraries, seconds on a
// cold file system, never minutes.
const defaultTEProbeTimeout = time.Minute

// teProbe asks the jobs' Python (python, else $CGTUNE_PYTHON, else
// python3) once whether it imports transformer_engine. A Python that
// cannot be found or asked counts as without it, so that no
// transformer_engine job crashes on it (--job-te yes runs them).
type teProbe struct {
	ctx     context.Context
	python  string
	timeout time.Duration
	once    sync.Once
	why     string // "" when it imports transformer_engine
	how     string // the import that worked, for the user (a failed one shows in why)
}

func (p *teProbe) buildable(c presets.Candidate) (bool, string) {
	if c.Impl != presets.ImplTE {
		return true, ""
	}
	p.once.Do(p.ask)
	if p.why == "" {
		return true, ""
	}
	return search.NeedsTE(p.why)(c)
}

func (p *teProbe) ask() {
	path, err := megatron.FindPython(p.python)
	if err != nil {
		p.why = fmt.Sprintf("%v (--job-python; --job-te yes runs them anyway)", err)
		return
	}
	version, err := importTE(p.ctx, path, cmp.Or(p.timeout, defaultTEProbeTimeout))
	if err != nil {
		p.why = fmt.Sprintf("the jobs' Python %s cannot import it: %v (--job-te yes runs them anyway)", path, err)
		return
	}
	p.how = fmt.Sprintf("the jobs' Python %s imports transformer_engine %s", path, version)
}

// importTE imports transformer_engine with python and returns its version,
// or the last line the import printed when it fails. The Python runs in a
// process group of its own, which is killed as a whole when the import
// takes longer than timeout or ctx ends (Ctrl-C), and once it is done: a
// Python that started children must neither keep cgtune waiting on their
// output nor outlive it.
func importTE(ctx context.Context, python string, timeout time.Duration) (string, error) {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, python, "-c", "import transformer_engine; print(getattr(transformer_engine, '__version__', 'unknown'))")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second // the group is dead: its pipes close
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	switch {
	case ctx.Err() != nil:
		return "", fmt.Errorf("interrupted: %w", ctx.Err())
	case tctx.Err() != nil:
		return "", fmt.Errorf("no answer within %s (--job-te-timeout; --job-te yes or no says it without asking)", timeout)
	case err != nil:
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
			return "", errors.New(last)
		}
		return "", err
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		return "unknown", nil
	}
	return fields[len(fields)-1], nil
}

func (f *validateFlags) source(args []string, can search.Buildable) (*validateSource, error) {
	s := &validateSource{}
	switch {
	case len(args) == 1 && f.preset != "":
		return nil, fail(exitBadInput, "give a run folder or --preset, not both")
	case len(args) == 1:
		dir, err := findRunDir(args[0])
		if err != nil {
			return nil, err
		}
		if s.req, err = search.JobValidationForRun(dir, f.top, can); err != nil {
			return nil, fail(exitBadInput, "%w", err)
		}
		s.runDir = dir
	case f.preset != "":
		p, _, err := loadPreset(f.preset) // vocab.go: a NAME on the search path or a FILE
		if err != nil {
			return nil, err
		}
		m, err := p.ResolveModel()
		if err != nil {
			return nil, fail(exitBadInput, "%s: %w", f.preset, err)
		}
		targets, err := search.PresetTargets(p, can)
		if err != nil {
			return nil, fail(exitBadInput, "%w", err)
		}
		s.preset = &p
		s.req = search.JobValidation{Source: "preset " + p.Name, Model: m, Layout: p.Layout, MBridge: p.MBridge, Space: p.Space, Targets: targets}
	default:
		return nil, fail(exitBadInput, "give the run folder of a finished search (cgtune validate RUN) or --preset F")
	}
	if f.mbridge != "" {
		s.req.MBridge = f.mbridge
	}
	if _, err := presets.ParseMBridge(s.req.MBridge); err != nil {
		return nil, fail(exitBadInput, "--mbridge: %w", err)
	}
	return s, nil
}

// findRunDir finds a run folder: a path, or a name under the runs folder.
func findRunDir(name string) (string, error) {
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		return name, nil
	}
	if !strings.ContainsRune(name, os.PathSeparator) {
		if root, err := setup.RunsRoot(); err == nil {
			if st, err := os.Stat(filepath.Join(root, name)); err == nil && st.IsDir() {
				return filepath.Join(root, name), nil
			}
		}
	}
	return "", fail(exitBadInput, "%s: no such run folder", name)
}

// jobSetup merges the preset's job section with the flags (flags win).
func (f *validateFlags) jobSetup(s *validateSource) (presets.JobSetup, bool, error) {
	var js presets.JobSetup
	if s.preset != nil && s.preset.Job != nil {
		js = *s.preset.Job
	}
	fromPreset := js.Command != "" && f.command == ""
	changed := f.cmd.Flags().Changed
	set := func(name string, dst *string, v string) {
		if changed(name) {
			*dst = v
		}
	}
	set("launcher", &js.Launcher, f.launcher)
	set("command", &js.Command, f.command)
	set("format", &js.Format, f.format)
	set("time", &js.Time, f.timeLimit)
	set("partition", &js.Partition, f.partition)
	set("account", &js.Account, f.account)
	if changed("nodes") {
		js.Nodes = f.nodes
	}
	if changed("gpus-per-node") {
		js.GPUsPerNode = f.gpusPerNode
	}
	if js.Nodes == 0 {
		js.Nodes = 1
	}
	switch {
	case js.Launcher == "":
		return js, false, fail(exitBadInput, "--launcher: give local or slurm")
	case js.Launcher != "local" && js.Launcher != "slurm":
		return js, false, fail(exitBadInput, "--launcher %q: allowed: local, slurm", js.Launcher)
	case js.Command == "":
		return js, false, fail(exitBadInput, "--command: give the training command template (cgtune validate --help)")
	}
	return js, fromPreset, nil
}

func (f *validateFlags) launcherFor(js presets.JobSetup) (job.Launcher, error) {
	if js.Launcher == "local" {
		if js.Nodes > 1 {
			return nil, fail(exitBadInput, "--nodes %d: the local launcher runs on this node only", js.Nodes)
		}
		return &job.Local{NodeGPUs: js.GPUsPerNode}, nil
	}
	if _, err := exec.LookPath("sbatch"); err != nil && !f.dryRun {
		return nil, fail(exitBadInput, "--launcher slurm: sbatch is not on PATH (Slurm's client commands are needed)")
	}
	tmpl := ""
	if f.batchTemplate != "" {
		b, err := fileio.ReadFileLimited(f.batchTemplate, presets.MaxYAMLBytes) // a FIFO or /dev/zero must not hang
		if err != nil {
			return nil, fail(exitBadInput, "--batch-template: %w", err)
		}
		tmpl = string(b)
	}
	s, err := job.NewSlurm(job.SlurmOptions{Nodes: js.Nodes, GPUsPerNode: js.GPUsPerNode, Time: js.Time, Partition: js.Partition, Account: js.Account}, tmpl)
	if err != nil {
		if f.batchTemplate != "" && errors.Is(err, job.ErrBatchTemplate) {
			return nil, fail(exitBadInput, "%s: %w", f.batchTemplate, err)
		}
		return nil, fail(exitBadInput, "%w", err)
	}
	return s, nil
}

// validationDir is the folder the jobs and their journal go to.
func (f *validateFlags) validationDir(s *validateSource) (string, error) {
	switch {
	case f.dir != "":
		return f.dir, nil
	case s.req.Dir != "":
		return s.req.Dir, nil
	case f.resume:
		return "", fail(exitBadInput, "--resume with --preset: give the validation folder with --dir")
	}
	dir, err := setup.NewRunDir()
	if err != nil {
		return "", err
	}
	return dir, nil
}

// checkDir refuses, before a job is rendered (a dry run writes {yaml_file}
// files too), a new validation's folder that holds files of anyone else's.
func (f *validateFlags) checkDir(dir string) error {
	if f.resume {
		return nil
	}
	if err := search.CheckValidationDir(dir); err != nil {
		if f.dir != "" {
			return fail(exitBadInput, "--dir %w", err)
		}
		return fail(exitBadInput, "%w", err)
	}
	return nil
}

func (f *validateFlags) run(ctx context.Context, args []string) error {
	stdout, stderr := f.cmd.OutOrStdout(), f.cmd.ErrOrStderr()
	s, how, err := f.checkedSource(ctx, args)
	if err != nil {
		return err
	}
	js, err := f.request(s)
	if err != nil {
		return err
	}
	req := &s.req
	// What the jobs' framework was found to lack, once the input is known
	// to be good (a refusal stays one line).
	if h := how(); h != "" {
		fmt.Fprintln(stderr, "note: "+h)
	}
	for _, sk := range req.Skipped {
		fmt.Fprintf(stderr, "skipped %s: %s\n", sk.Candidate.Name(), sk.Why)
	}
	for _, n := range req.Notes {
		fmt.Fprintln(stderr, "note: "+n)
	}
	if !f.noCalibrate {
		req.Estimator = calibrationEstimator(cmp.Or(f.jobGPU, req.Layout.GPU))
	}
	if f.dryRun {
		return f.printDryRun(stdout, *req)
	}
	return f.runJobs(ctx, s, js)
}

// request completes s.req from the flags and the job set-up (the
// command, launcher, iterations and folder of the jobs), refusing bad
// input before any job is rendered; a preset's command template is shown
// and runs only when trusted.
func (f *validateFlags) request(s *validateSource) (presets.JobSetup, error) {
	js, fromPreset, err := f.jobSetup(s)
	if err != nil {
		return js, err
	}
	if fromPreset {
		fmt.Fprintf(f.cmd.ErrOrStderr(), "the command template comes from %s:\n  %s\n", s.req.Source, strings.ReplaceAll(js.Command, "\n", "\n  "))
		if !f.trust && !f.dryRun {
			return js, fail(exitBadInput, "a preset's command template is shared input and runs only with --trust-preset-command: read it above first")
		}
	}
	req := &s.req
	if req.Command, err = job.ParseCommand(js.Command, js.Format); err != nil {
		return js, fail(exitBadInput, "--command: %w", err)
	}
	if err := req.SkipRefusedBy(recipe.LauncherOf(js.Command)); err != nil {
		return js, fail(exitBadInput, "%w", err)
	}
	for _, t := range req.Targets {
		if first := job.FirstMeasured(t.Candidate); f.iters < first {
			return js, fail(exitBadInput, "--iters %d: %s is measured from iteration %d; give --iters %d or more",
				f.iters, t.Candidate.Name(), first, first+4)
		}
	}
	if req.Launcher, err = f.launcherFor(js); err != nil {
		return js, err
	}
	if req.Dir, err = f.validationDir(s); err != nil {
		return js, err
	}
	if err := f.checkDir(req.Dir); err != nil {
		return js, err
	}
	req.Iters, req.Parallel, req.Timeout, req.Poll, req.Resume, req.SkipBadLines = f.iters, f.parallel, f.jobTimeout, f.poll, f.resume, f.skipBad
	return js, nil
}

// runJobs runs the validation's jobs, prints the comparison (and saves
// the winner as a preset with --save-preset) and ends with its exit code.
func (f *validateFlags) runJobs(ctx context.Context, s *validateSource, js presets.JobSetup) error {
	stdout, stderr := f.cmd.OutOrStdout(), f.cmd.ErrOrStderr()
	req := &s.req
	if !req.Command.Has(job.PhIters) {
		fmt.Fprintf(stderr, "note: the command has no {iters}: cgtune stops each job once it has logged %d iterations\n", f.iters)
	}
	fmt.Fprintf(stderr, "validate %s: %d jobs (%s launcher, %d iterations each, %d at a time) in %s\n",
		req.Source, len(req.Targets), req.Launcher.Name(), f.iters, f.parallel, req.Dir)

	p := &validateProgress{w: stderr, json: f.json}
	out, err := search.ValidateOnJobs(ctx, *req, p.event)
	if err != nil && len(out.Rows) == 0 {
		var bad *fileio.BadLinesError
		if errors.As(err, &bad) {
			return fail(exitBadInput, "%w; continue without the unreadable lines: add --resume --skip-bad-lines", err)
		}
		return fail(exitBadInput, "%w", err)
	}
	v := out.Validation
	res := validateOutput{JobOutcome: out}
	if f.savePreset != "" && !v.Interrupted && v.Winner() != nil {
		pr, err := search.ValidatedPreset(f.savePreset, s.preset, *req, v, js, version)
		if err == nil {
			res.Preset, err = presetStore("").Save(pr, f.force)
		}
		if err != nil {
			return fail(exitBadInput, "--save-preset: %w", err)
		}
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		printValidation(stdout, res)
	}
	switch {
	case err != nil:
		return fail(exitInvalid, "validation journal: %w", err)
	case v.Interrupted:
		return fail(exitInterrupted, "interrupted: the jobs were cancelled; %d finished are kept in %s; continue with --resume", len(v.Rows), req.Dir)
	case v.Winner() == nil:
		return fail(exitInvalid, "no job succeeded (logs in %s)", req.Dir)
	}
	return nil
}

// checkedSource checks the flags that need no file and finds what to
// validate (asking the jobs' Python about Transformer Engine, which an
// interruption stops); how is buildable's.
func (f *validateFlags) checkedSource(ctx context.Context, args []string) (_ *validateSource, how func() string, err error) {
	switch {
	case f.top < 1 || f.iters < 1 || f.parallel < 1 || f.jobTimeout < 0:
		return nil, nil, fail(exitBadInput, "--top, --iters and --parallel must be positive, --job-timeout 0 or more")
	case f.skipBad && !f.resume:
		return nil, nil, fail(exitBadInput, "--skip-bad-lines is for --resume")
	}
	if err := f.checkSavePreset(); err != nil {
		return nil, nil, err
	}
	can, how, err := f.buildable(ctx)
	if err != nil {
		return nil, nil, err
	}
	s, err := f.source(args, can)
	if ctx.Err() != nil {
		return nil, nil, fail(exitInterrupted, "interrupted before any job was submitted")
	}
	return s, how, err
}

// checkSavePreset refuses, before any job is submitted, a --save-preset
// the outcome could not be saved as: a name a preset cannot have, one
// taken (without --force), no user folder to save it in. Finding that out
// after the jobs ran would lose their comparison.
func (f *validateFlags) checkSavePreset() error {
	name := f.savePreset
	if name == "" {
		return nil
	}
	if !presets.ValidName(name) {
		return fail(exitBadInput, "--save-preset %q: not a preset name (allowed: [a-z0-9][a-z0-9._-]*)", name)
	}
	store := presetStore("")
	if store.UserDir() == "" {
		return fail(exitBadInput, "--save-preset %s: %w", name, store.NoUserDir())
	}
	if info, err := store.Find(name); err == nil && info.Source == presets.SourceUser && !f.force {
		return fail(exitBadInput, "--save-preset %s: preset %q already exists at %s; give --force to replace it", name, name, info.Path)
	}
	return nil
}

func (f *validateFlags) printDryRun(w io.Writer, req search.JobValidation) error {
	e, err := req.Engine()
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	for _, t := range req.Targets {
		cmd, err := e.Command(t.Candidate, e.JobDir(t.Candidate))
		if err != nil {
			return fail(exitBadInput, "%w", err)
		}
		fmt.Fprintf(w, "# %s\n", t.Candidate.Name())
		if s, ok := req.Launcher.(*job.Slurm); ok {
			fmt.Fprintln(w, s.Script(job.Request{Name: job.JobName(t.Candidate), Command: cmd, Candidate: t.Candidate.Name()}))
		} else {
			fmt.Fprintln(w, cmd)
		}
	}
	return nil
}

// validateOutput is what validate prints (--json: as is).
type validateOutput struct {
	search.JobOutcome
	Preset string `json:"preset,omitempty"`
}

// validateProgress prints job states and results to stderr.
type validateProgress struct {
	w    io.Writer
	json bool
	mu   sync.Mutex
	last map[string]string
}

func (p *validateProgress) event(ev job.ValidateEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = map[string]string{}
	}
	if p.json {
		name := "job"
		if _, ok := ev.(job.JobDone); ok {
			name = "done"
		}
		b, err := json.Marshal(ev)
		if err == nil {
			fmt.Fprintf(p.w, "{\"event\":%q,%s\n", name, b[1:])
		}
		return
	}
	switch x := ev.(type) {
	case job.JobEvent:
		u := x.Update
		key := u.Candidate.Key()
		if p.last[key] == u.State {
			return
		}
		p.last[key] = u.State
		what := u.State
		if u.Reason != "" && u.Reason != "None" {
			what += " (" + u.Reason + ")"
		}
		if u.Reattached && u.State != "" {
			what += ", re-attached"
		}
		id := ""
		if u.JobID != "" {
			id = " job " + u.JobID
		}
		fmt.Fprintf(p.w, "%s%s: %s\n", u.Candidate.Name(), id, what)
	case job.JobDone:
		r := x.Result
		from := ""
		if x.Resumed {
			from = " (from the journal)"
		}
		what := fmt.Sprintf("%.2f ms/iteration (p10-p90 %.2f-%.2f, %d iterations)", r.Step.Median, r.Step.P10, r.Step.P90, r.Step.N)
		if r.Failed() {
			what = fmt.Sprintf("failed (%s): %s", r.ErrKind, r.Err)
		}
		fmt.Fprintf(p.w, "[%d/%d] %s: %s%s\n", x.Done, x.Total, r.Candidate.Name(), what, from)
	}
}

// printValidation is the comparison table, the winner and the calibration.
func printValidation(w io.Writer, out validateOutput) {
	v := out.Validation
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tCANDIDATE\tREAL MS\tP10-P90\tPREDICTED MS\tERROR\tREAL SPEED-UP\tPREDICTED SPEED-UP\tPEAK MIB\tJOB")
	for _, r := range v.Rows {
		res := r.Real
		jobID := "-"
		if res.Job != nil {
			jobID = res.Job.Launcher + " " + res.Job.ID
		}
		pred, perr, pspeed, rspeed := "-", "-", "-", "-"
		if r.PredictedMs > 0 {
			pred = fmt.Sprintf("%.2f", r.PredictedMs)
		}
		if r.HasError {
			perr = fmt.Sprintf("%+.1f%%", r.ErrorPct)
		}
		if r.PredictedSpeedup > 0 {
			pspeed = fmt.Sprintf("%.3fx", r.PredictedSpeedup)
		}
		if r.RealSpeedup > 0 {
			rspeed = fmt.Sprintf("%.3fx", r.RealSpeedup)
		}
		if res.Failed() {
			fmt.Fprintf(tw, "-\t%s\t-\t-\t%s\t-\t-\t%s\t-\t%s\tfailed (%s): %s\n", r.Candidate.Name(), pred, pspeed, jobID, res.ErrKind, res.Err)
			continue
		}
		peak := "-"
		if res.Memory.ProcessPeakMiB > 0 {
			peak = fmt.Sprint(res.Memory.ProcessPeakMiB)
		}
		fmt.Fprintf(tw, "%d\t%s\t%.2f\t%.2f-%.2f\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Rank, r.Candidate.Name(), res.Step.Median,
			res.Step.P10, res.Step.P90, pred, perr, rspeed, pspeed, peak, jobID)
	}
	tw.Flush()
	if src := predictionSource(v); src != "" {
		fmt.Fprintf(w, "\npredictions: %s; error = (predicted - real) / real\n", src)
	}
	if win := v.Winner(); win != nil {
		fmt.Fprintf(w, "winner on the real job: %s: %.2f ms/iteration", win.Candidate.Name(), win.Real.Step.Median)
		if win.RealSpeedup > 0 {
			fmt.Fprintf(w, ", %.3fx eager", win.RealSpeedup)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "saved in %s\n", filepath.Join(out.Dir, job.ValidationFile))
	switch {
	case out.CalibrationErr != "":
		fmt.Fprintf(w, "calibration: not updated: %s\n", out.CalibrationErr)
	case out.Calibration != nil:
		c := out.Calibration
		fmt.Fprintf(w, "calibration: host-cost scale %.3g for %s (fitted on jobs %s) saved to %s\n", c.HostScale, c.Model, strings.Join(c.Jobs, ", "), out.CalibrationFile)
		for _, n := range c.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
	if out.Preset != "" {
		fmt.Fprintf(w, "saved the validated result as preset %s\n", out.Preset)
	}
}

func predictionSource(v job.Validation) string {
	seen := map[engine.Source]bool{}
	var srcs []string
	for _, r := range v.Rows {
		if r.PredictedSource != "" && !seen[r.PredictedSource] {
			seen[r.PredictedSource] = true
			srcs = append(srcs, string(r.PredictedSource))
		}
	}
	return strings.Join(srcs, ", ")
}
