package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/engine/job"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// fakeJobCommand is the CI training job: engine/job's stand-in for
// pretrain_gpt.py, driven by the {flags} cgtune renders.
func fakeJobCommand(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "engine", "job", "testdata", "fakejob.sh"))
	if err != nil {
		t.Fatal(err)
	}
	return "bash " + job.Quote(p) + " --train-iters {iters} {flags}"
}

// searchRun makes a finished estimate-engine search to validate, over a
// space whose graphed arms are exactly the three the validation takes
// (local whole layer, local full iteration, TE whole layer), so that what
// the jobs do, not the estimate's order, decides the rows.
func searchRun(t *testing.T) string {
	t.Helper()
	preset := writeFile(t, "space.yaml", `version: 1
name: space
model: llama3_8b
gpu: h100
space:
  impls: [none, local, transformer_engine]
  scopes: [[], [full_iteration]]
  warmups: [3]
mbridge: "0.4"
`)
	dir := filepath.Join(t.TempDir(), "run")
	code, out, errb := cgtune(t, "--headless", "--preset", preset, "--engine", "estimate", "--strategy", "exhaustive", "--run-dir", dir)
	if code != exitOK {
		t.Fatalf("search: exit %d\n%s%s", code, out, errb)
	}
	return dir
}

// fakePython is a stand-in for the jobs' Python: it imports
// transformer_engine (version 2.8.0) when withTE, else fails as Python does
// without it.
func fakePython(t *testing.T, withTE bool) string {
	t.Helper()
	body := "echo 2.8.0\n"
	if !withTE {
		body = "echo 'Traceback (most recent call last):' >&2\necho \"ModuleNotFoundError: No module named 'transformer_engine'\" >&2\nexit 1\n"
	}
	p := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// tableRows are the candidate labels of validate's table, in order.
func tableRows(out string) []string {
	var rows []string
	re := regexp.MustCompile(`^(\d+|-)\s+(.+?)\s{2,}`)
	for _, l := range strings.Split(out, "\n") {
		if m := re.FindStringSubmatch(l); m != nil {
			rows = append(rows, m[2])
		}
	}
	return rows
}

func TestValidateHelpDocumentsLaunchersAndTemplate(t *testing.T) {
	code, out, _ := cgtune(t, "validate", "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"local ", "slurm ", "process group", "sbatch --parsable", "squeue", "scancel", "--parallel",
		"{overrides}", "{dotlist}", "{flags}", "{run_script_flags}", "{yaml_file}", "{iters}", "--trust-preset-command",
		"--batch-template", "--log-interval 1", "--resume"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate --help lacks %q", want)
		}
	}
}

func TestValidateLocalEndToEnd(t *testing.T) {
	cache := isolate(t)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(cache, "config"))
	run := searchRun(t)
	// The fake job stands in for a framework with Transformer Engine.
	args := []string{"validate", run, "--launcher", "local", "--command", fakeJobCommand(t), "--iters", "12", "--poll", "100ms", "--job-python", fakePython(t, true)}
	code, out, errb := cgtune(t, append(args, "--save-preset", "llama-validated")...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errb)
	}
	// The fake job's iteration times: full iteration 22, local whole layer
	// 30, TE whole layer 32, eager 40 ms.
	want := []string{"full_iteration w3", "local whole-layer w3", "te whole-layer w3", "none"}
	if got := tableRows(out); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("rows %q, want %q\n%s", got, want, out)
	}
	for _, w := range []string{"PREDICTED MS", "ERROR", "REAL SPEED-UP", "22.30", "1.807x", "winner on the real job: full_iteration w3",
		"predictions: estimated", "calibration: host-cost scale", "saved the validated result as preset"} {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
	if !strings.Contains(errb, "[4/4]") || !strings.Contains(errb, "RUNNING") {
		t.Errorf("stderr:\n%s", errb)
	}
	v, err := job.ReadValidation(filepath.Join(run, "validate"))
	if err != nil || len(v.Rows) != 4 || v.Rows[0].Real.Source != engine.SourceJob {
		t.Fatalf("validation.json: %v %+v", err, v)
	}
	cals, _ := filepath.Glob(filepath.Join(cache, "cgtune", "calibration", "llama3_8b-*.json"))
	if len(cals) != 1 {
		t.Errorf("calibration files %v", cals)
	}
	p, err := presets.NewStore("", "", filepath.Join(cache, "config")).Load("llama-validated")
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Result; r == nil || r.Engine != "job" || r.Job == nil || r.Job.Launcher != "local" || len(r.Job.IDs) != 2 ||
		!r.Winner.FullIteration() || r.StepMS != v.Rows[0].Real.Step.Median || r.EagerStepMS != v.Rows[3].Real.Step.Median {
		t.Errorf("preset result %+v job %+v", p.Result, p.Result.Job)
	}
	if p.Job == nil || p.Job.Command != fakeJobCommand(t) || p.Job.Launcher != "local" {
		t.Errorf("preset job %+v", p.Job)
	}

	// The folder holds a validation now: again only with --resume, which
	// takes every job from the journal.
	code, _, errb = cgtune(t, args...)
	if code != exitBadInput || !strings.Contains(errb, "--resume") {
		t.Errorf("second run: exit %d %s", code, errb)
	}
	code, out, errb = cgtune(t, append(args, "--resume")...)
	if code != exitOK || strings.Count(errb, "(from the journal)") != 4 || strings.Contains(errb, "RUNNING") {
		t.Errorf("resume: exit %d\n%s%s", code, out, errb)
	}
}

func TestValidatePresetCommandNeedsTrust(t *testing.T) {
	cache := isolate(t)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(cache, "config"))
	marker := filepath.Join(t.TempDir(), "ran")
	preset := writeFile(t, "team.yaml", `version: 1
name: team
model: llama3_8b
gpu: h100
space: {impls: [none, local], warmups: [3]}
mbridge: "0.4"
result:
  winner: {impl: local, scopes: [full_iteration], warmup: 3}
  step_ms: 20
  eager_step_ms: 30
  speedup: 1.5
  memory_mib: 1000
  engine: estimated
job:
  launcher: local
  command: touch `+job.Quote(marker)+` && `+fakeJobCommand(t)+`
`)
	code, out, errb := cgtune(t, "validate", "--preset", preset, "--iters", "8", "--poll", "100ms")
	if code != exitBadInput || !strings.Contains(errb, "touch "+marker) || !strings.Contains(errb, "--trust-preset-command") {
		t.Fatalf("exit %d\n%s%s", code, out, errb)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the preset's command ran without --trust-preset-command")
	}
	code, out, errb = cgtune(t, "validate", "--preset", preset, "--iters", "8", "--poll", "100ms", "--trust-preset-command")
	if code != exitOK {
		t.Fatalf("trusted: exit %d\n%s%s", code, out, errb)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Error("the trusted command did not run")
	}
	if got := tableRows(out); len(got) != 2 || got[0] != "full_iteration w3" {
		t.Errorf("rows %q\n%s", got, out)
	}
	// A command given on the command line needs no trust.
	code, _, errb = cgtune(t, "validate", "--preset", preset, "--iters", "8", "--poll", "100ms", "--command", fakeJobCommand(t))
	if code != exitOK || strings.Contains(errb, "comes from preset") {
		t.Errorf("own command: exit %d %s", code, errb)
	}
}

func TestValidateBadInput(t *testing.T) {
	isolate(t)
	run := searchRun(t)
	cmdOK := fakeJobCommand(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"validate", "--launcher", "local", "--command", cmdOK}, "give the run folder"},
		{[]string{"validate", filepath.Join(run, "nope"), "--launcher", "local", "--command", cmdOK}, "no such run folder"},
		{[]string{"validate", run, "--command", cmdOK}, "--launcher: give local or slurm"},
		{[]string{"validate", run, "--launcher", "ssh", "--command", cmdOK}, `--launcher "ssh": allowed: local, slurm`},
		{[]string{"validate", run, "--launcher", "local"}, "--command: give the training command template"},
		{[]string{"validate", run, "--launcher", "local", "--command", "torchrun x.py"}, "no placeholder for the candidate's settings"},
		{[]string{"validate", run, "--launcher", "local", "--command", "x.py {flagz}"}, "unknown placeholder {flagz}"},
		{[]string{"validate", run, "--launcher", "local", "--command", `x.py "{flags}"`}, "inside quotes"},
		{[]string{"validate", run, "--launcher", "local", "--command", cmdOK, "--format", "yaml"}, "allowed: dotlist, flags, run_script_flags"},
		{[]string{"validate", run, "--launcher", "local", "--command", cmdOK, "--iters", "3"}, "is measured from iteration 5"},
		{[]string{"validate", run, "--launcher", "local", "--command", cmdOK, "--nodes", "2"}, "local launcher runs on this node only"},
		{[]string{"validate", run, "--launcher", "slurm", "--dry-run", "--command", cmdOK, "--partition", "a\n#SBATCH --wrap=x"}, "--partition"},
		{[]string{"validate", run, "--launcher", "slurm", "--dry-run", "--command", cmdOK, "--time", "soon"}, "--time \"soon\""},
		{[]string{"validate", run, "--launcher", "local", "--command", cmdOK, "--mbridge", "9"}, "--mbridge"},
	} {
		t.Run(argsName(tc.args), func(t *testing.T) {
			code, out, errb := cgtune(t, tc.args...)
			lines := strings.Split(strings.TrimSpace(errb), "\n")
			if code != exitBadInput || !strings.Contains(lines[len(lines)-1], tc.want) {
				t.Errorf("%q: exit %d, stderr %q, want %q (stdout %q)", tc.args[1:], code, errb, tc.want, out)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(run, "validate", job.ValidationJournal)); err == nil {
		t.Error("bad input left a validation journal")
	}
}

func TestValidateDryRunShowsQuotedCommandsAndScripts(t *testing.T) {
	isolate(t)
	run := searchRun(t)
	code, out, errb := cgtune(t, "validate", run, "--launcher", "slurm", "--dry-run", "--nodes", "2", "--gpus-per-node", "8",
		"--time", "30", "--partition", "batch", "--command", "srun python run_recipe.py train.train_iters={iters} {dotlist}")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errb)
	}
	for _, want := range []string{"# full_iteration w3\n#!/bin/bash", "#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n#SBATCH --time=30\n#SBATCH --partition=batch",
		"srun python run_recipe.py train.train_iters=30 model.cuda_graph_impl=local 'model.cuda_graph_scope=[full_iteration]'"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(run, "validate", job.LedgerFile)); err == nil {
		t.Error("a dry run submitted something")
	}
}

func TestCalibrateFromLogs(t *testing.T) {
	cache := isolate(t)
	dir := t.TempDir()
	fake := filepath.Join("..", "..", "engine", "job", "testdata", "fakejob.sh")
	logOf := func(name string, args ...string) string {
		out, err := exec.Command("bash", append([]string{fake, "--train-iters", "10"}, args...)...).Output()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		os.WriteFile(p, out, 0o644)
		return p
	}
	eager := logOf("eager.log", "--cuda-graph-impl", "none")
	full := logOf("full.log", "--cuda-graph-impl", "full_iteration", "--no-check-for-nan-in-loss-and-grad")
	code, out, errb := cgtune(t, "calibrate", "--log", eager, "--log", full, "--model", "llama3_8b")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errb)
	}
	for _, want := range []string{"REAL MS", "CALIBRATED MS", "none", "full_iteration w3", "40.30", "22.30", "host-cost scale", "saved to "} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	cals, _ := filepath.Glob(filepath.Join(cache, "cgtune", "calibration", "llama3_8b-*.json"))
	if len(cals) != 1 {
		t.Fatalf("calibration files %v", cals)
	}
	var c stepmodel.Calibration
	b, _ := os.ReadFile(cals[0])
	if err := json.Unmarshal(b, &c); err != nil || !(c.HostScale > 0) || len(c.Points) != 2 || !strings.HasPrefix(c.Source, "calibrate eager.log full.log") {
		t.Errorf("calibration %+v %v", c, err)
	}

	// Later estimates of the same model and layout use it and say so.
	code, out, errb = cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--json")
	if code != exitOK || !strings.Contains(out, "calibrated from calibrate eager.log full.log") {
		t.Errorf("a later search does not name the calibration: exit %d\n%s", code, errb)
	}

	// A log that does not say its configuration needs one written after it.
	bare := filepath.Join(dir, "bare.log")
	var lines []string
	for _, l := range strings.Split(string(mustRead(os.ReadFile(full))), "\n") {
		if strings.Contains(l, "iteration ") && strings.Contains(l, "elapsed") {
			lines = append(lines, l)
		}
	}
	os.WriteFile(bare, []byte(strings.Join(lines, "\n")), 0o644)
	code, _, errb = cgtune(t, "calibrate", "--log", bare, "--model", "llama3_8b", "--dry-run")
	if code != exitBadInput || !strings.Contains(errb, "--log "+bare+"=local/full_iteration/w3") {
		t.Errorf("bare log: exit %d %s", code, errb)
	}
	code, out, errb = cgtune(t, "calibrate", "--log", bare+"=local/full_iteration/w3", "--log", eager, "--model", "llama3_8b", "--dry-run")
	if code != exitOK || !strings.Contains(out, "not saved") {
		t.Errorf("explicit candidate: exit %d\n%s%s", code, out, errb)
	}
	// --job-gpu: the jobs ran on another GPU than the layout names; the
	// prediction is for that GPU (H200's rates, not H100's).
	_, h100, _ := cgtune(t, "calibrate", "--log", eager, "--log", full, "--model", "llama3_8b", "--dry-run")
	code, h200, errb := cgtune(t, "calibrate", "--log", eager, "--log", full, "--model", "llama3_8b", "--dry-run", "--job-gpu", "h200")
	if code != exitOK || h200 == h100 {
		t.Errorf("--job-gpu h200: exit %d %s, same table as h100's: %v", code, errb, h200 == h100)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"calibrate", "--log", eager, "--log", full, "--model", "llama3_8b", "--job-gpu", "nope"}, "allowed: h100"},
		{[]string{"calibrate", "--model", "llama3_8b"}, "at least one --log"},
		{[]string{"calibrate", "--log", eager}, "give --model M or --preset F"},
		{[]string{"calibrate", "--log", filepath.Join(dir, "missing.log"), "--model", "llama3_8b"}, "missing.log"},
		{[]string{"calibrate", "--log", bare + "=local/bogus/w3", "--model", "llama3_8b"}, "want impl/scopes/wN"},
		{[]string{"calibrate", "--log", eager, "--model", "nope"}, "--model"},
	} {
		t.Run(argsName(tc.args), func(t *testing.T) {
			code, _, errb := cgtune(t, tc.args...)
			if code != exitBadInput || !strings.Contains(errb, tc.want) {
				t.Errorf("%q: exit %d %q, want %q", tc.args, code, errb, tc.want)
			}
		})
	}
}

func mustRead[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestValidateSlurmKilledThenResumed kills cgtune (SIGKILL: no chance to
// cancel) while its Slurm job runs; validate --resume re-attaches to that
// job instead of submitting it again.
func TestValidateSlurmKilledThenResumed(t *testing.T) {
	if _, err := exec.LookPath("sbatch"); err != nil {
		t.Skip("sbatch not found: the Slurm tests need a cluster (as root: .ci/slurm-up.sh)")
	}
	cache := isolate(t)
	run := searchRun(t)
	tmpl := writeFile(t, "shared.sbatch", "#!/bin/bash\n{sbatch}\n#SBATCH --cpus-per-task=1\necho \"[cgtune] candidate\" {candidate}\n{command}\n")
	args := []string{"validate", run, "--launcher", "slurm", "--batch-template", tmpl, "--top", "1", "--iters", "150", "--poll", "200ms",
		"--command", fakeJobCommand(t)}
	cmd := exec.Command(os.Args[0], append(args, "--json")...)
	cmd.Env = append(os.Environ(), "CGTUNE_TEST_AS_MAIN=1", "XDG_CACHE_HOME="+cache, "HOME="+cache)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var firstID string
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	deadline := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	for sc.Scan() {
		var ev struct {
			Event  string
			Update job.Update
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Event != "job" {
			continue
		}
		if ev.Update.State == job.StateRunning && len(ev.Update.Samples) > 0 {
			firstID = ev.Update.JobID
			cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	deadline.Stop()
	cmd.Wait()
	if firstID == "" {
		t.Fatal("never saw a running job")
	}
	t.Cleanup(func() { exec.Command("scancel", firstID).Run() })
	out, _ := exec.Command("squeue", "-h", "-j", firstID, "-o", "%T").Output()
	if strings.TrimSpace(string(out)) != job.StateRunning {
		t.Fatalf("job %s after cgtune died: %q, want RUNNING", firstID, out)
	}
	code, stdout, errb := cgtune(t, append(args, "--resume")...)
	if code != exitOK {
		t.Fatalf("resume: exit %d\n%s%s", code, stdout, errb)
	}
	if !strings.Contains(errb, "job "+firstID+": RUNNING, re-attached") {
		t.Errorf("resume did not re-attach to job %s:\n%s", firstID, errb)
	}
	v, err := job.ReadValidation(filepath.Join(run, "validate"))
	if err != nil || len(v.Rows) != 2 {
		t.Fatalf("%v %+v", err, v)
	}
	ids := map[string]bool{}
	for _, r := range v.Rows {
		if r.Real.Failed() {
			t.Errorf("%s failed: %s", r.Candidate.Key(), r.Real.Err)
		}
		ids[r.Real.Job.ID] = true
	}
	if !ids[firstID] || len(ids) != 2 {
		t.Errorf("job ids %v, want %s among two", ids, firstID)
	}
}

// validate --top N takes the top N candidates the jobs' framework can
// build: without Transformer Engine in the jobs' Python, the
// transformer_engine candidates are skipped, each with why, and run
// nowhere; with it (or --job-te yes) they run.
func TestValidateSkipsWhatTheFrameworkCannotBuild(t *testing.T) {
	isolate(t)
	run := searchRun(t)
	base := []string{"validate", run, "--launcher", "local", "--command", fakeJobCommand(t), "--dry-run"}
	code, out, errb := cgtune(t, append(base, "--job-python", fakePython(t, false))...)
	if code != exitOK || strings.Contains(out, "# te ") || !strings.Contains(out, "# full_iteration w3") ||
		!strings.Contains(errb, "skipped te whole-layer w3: a transformer_engine graph needs Transformer Engine: the jobs' Python ") ||
		!strings.Contains(errb, "ModuleNotFoundError: No module named 'transformer_engine'") {
		t.Errorf("without TE: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errb)
	}
	for _, args := range [][]string{{"--job-python", fakePython(t, true)}, {"--job-te", "yes", "--job-python", fakePython(t, false)}} {
		t.Run(argsName(args), func(t *testing.T) {
			code, out, errb = cgtune(t, append(base, args...)...)
			if code != exitOK || !strings.Contains(out, "# te whole-layer w3") || strings.Contains(errb, "skipped") {
				t.Errorf("%v: exit %d\n%s%s", args, code, out, errb)
			}
		})
	}
	// The transformer_engine whole-layer candidate ranks above local full
	// iteration (tied, less graph memory): --top 1 skips it, saying why,
	// and runs the local one in its place.
	code, out, errb = cgtune(t, append(base, "--job-te", "no", "--top", "1")...)
	if code != exitOK || strings.Contains(out, "# te ") || !strings.Contains(out, "# full_iteration w3") ||
		!strings.Contains(errb, "skipped te whole-layer w3: a transformer_engine graph needs Transformer Engine: --job-te no") {
		t.Errorf("--job-te no --top 1: exit %d\n%s%s", code, out, errb)
	}
	if code, _, errb = cgtune(t, append(base, "--job-te", "maybe")...); code != exitBadInput || !strings.Contains(errb, "allowed: auto, yes, no") {
		t.Errorf("--job-te maybe: exit %d %q", code, errb)
	}
}

// A --batch-template that is a FIFO or a character device (/dev/zero) is
// refused, naming it, instead of blocking or reading until memory runs
// out.
func TestValidateBatchTemplateNeverHangs(t *testing.T) {
	isolate(t)
	run := searchRun(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.sbatch")
	zero := filepath.Join(dir, "zero.sbatch")
	big := filepath.Join(dir, "big.sbatch")
	must(t, syscall.Mkfifo(fifo, 0o644))
	must(t, syscall.Mknod(zero, syscall.S_IFCHR|0o644, 1<<8|5)) // a private /dev/zero
	must(t, os.WriteFile(big, []byte(strings.Repeat("#", presets.MaxYAMLBytes+1)), 0o644))
	for _, tc := range []struct{ name, path, want string }{
		{"fifo", fifo, "not a regular file"},
		{"device", zero, "not a regular file"},
		{"too big", big, "larger than 4 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errb := cgtuneWithin(t, "validate", run, "--launcher", "slurm", "--dry-run", "--command", fakeJobCommand(t), "--batch-template", tc.path)
			if code != exitBadInput || !strings.Contains(errb, "--batch-template: "+tc.path) || !strings.Contains(errb, tc.want) || strings.Count(errb, "\n") != 1 {
				t.Errorf("exit %d, stderr %q", code, errb)
			}
		})
	}
}

// A pretrain_gpt.py command is Megatron-LM's launcher, whose validate_args
// refuses what an MB job runs: qwen3_30b_a3b's h100 recipe with delayed
// wgrad at TE 2.11 captures attention under MB 0.4 (whose own check never
// matches a scope name), but ARG-08 needs TE 2.12 for it.
func TestValidateSkipsWhatMegatronLMRefuses(t *testing.T) {
	isolate(t)
	preset := writeFile(t, "space.yaml", `version: 1
name: space
model: qwen3_30b_a3b
gpu: h100
space:
  impls: [none, transformer_engine]
  scopes: [[attn], [moe_router]]
  warmups: [3]
mbridge: "0.4"
`)
	run := filepath.Join(t.TempDir(), "run")
	code, out, errb := cgtune(t, "--headless", "--preset", preset, "--engine", "estimate", "--strategy", "exhaustive", "--run-dir", run,
		"--set", "comm_overlap.delay_wgrad_compute=true", "--set", "te_version=2.11")
	if code != exitOK {
		t.Fatalf("search: exit %d\n%s%s", code, out, errb)
	}
	base := []string{"validate", run, "--launcher", "local", "--dry-run", "--job-te", "yes"}
	code, out, errb = cgtune(t, append(base, "--command", "torchrun pretrain_gpt.py --train-iters {iters} {flags}")...)
	want := "skipped te attn w3: Megatron-LM's pretrain_gpt.py refuses it: ARG-08: CUDA graph with delay_wgrad_compute requires TE version >= 2.12.0.\n"
	if code != exitOK || !strings.Contains(errb, want) || strings.Contains(out, "# te attn") || !strings.Contains(out, "# te moe_router w3") {
		t.Errorf("pretrain_gpt.py: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errb)
	}
	code, out, errb = cgtune(t, append(base, "--command", "python run_recipe.py train.train_iters={iters} {dotlist}")...)
	if code != exitOK || strings.Contains(errb, "skipped") || !strings.Contains(out, "# te attn w3") {
		t.Errorf("run_recipe.py: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errb)
	}
}
