package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slowPython is a stand-in for the jobs' Python that never answers: it
// starts a child and waits, as an import stuck on a hung file system
// would; the pids of both are written to pids.
func slowPython(t *testing.T) (python, pids string) {
	t.Helper()
	dir := t.TempDir()
	pids = filepath.Join(dir, "pids")
	python = filepath.Join(dir, "python3")
	must(t, os.WriteFile(python, []byte("#!/bin/sh\nsleep 300 &\necho $! >> "+pids+"\necho $$ >> "+pids+"\nwait\n"), 0o755))
	return python, pids
}

// processesGone waits a moment for the processes in pids to end (a
// zombie counts as ended) and reports those still alive.
func processesGone(t *testing.T, pids string) []string {
	t.Helper()
	data, err := os.ReadFile(pids)
	must(t, err)
	var alive []string
	for _, p := range strings.Fields(string(data)) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			stat, err := os.ReadFile("/proc/" + p + "/stat")
			if err != nil || strings.Contains(string(stat), ") Z ") {
				break
			}
			if time.Now().After(deadline) {
				alive = append(alive, p)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return alive
}

// A --job-python that never answers does not hang validate --dry-run:
// the probe has a time limit, after which the transformer_engine
// candidates are skipped saying so, and its whole process group ends.
func TestTEProbeHasATimeLimit(t *testing.T) {
	isolate(t)
	run := searchRun(t)
	python, pids := slowPython(t)
	start := time.Now()
	code, out, errb := cgtuneWithin(t, "validate", run, "--launcher", "local", "--command", fakeJobCommand(t), "--dry-run",
		"--job-python", python, "--job-te-timeout", "1s")
	if code != exitOK || !strings.Contains(errb, "skipped te whole-layer w3") || !strings.Contains(errb, "no answer within 1s") || strings.Contains(out, "# te ") {
		t.Errorf("exit %d\nstdout %q\nstderr %q", code, out, errb)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("took %s", d)
	}
	if alive := processesGone(t, pids); len(alive) > 0 {
		t.Errorf("processes %v of the probe are still running", alive)
	}
}

// The first Ctrl-C stops the probe, its process group with it, and
// validate exits 130 before submitting anything.
func TestTEProbeHonoursTheFirstCtrlC(t *testing.T) {
	cache := isolate(t)
	run := searchRun(t)
	python, pids := slowPython(t)
	cmd := asMain(t, cache, "validate", run, "--launcher", "local", "--command", fakeJobCommand(t), "--dry-run", "--job-python", python)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	deadline := time.Now().Add(10 * time.Second)
	for {
		if data, _ := os.ReadFile(pids); strings.Count(string(data), "\n") == 2 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the probe never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, cmd.Process.Signal(syscall.SIGINT))
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(8 * time.Second):
		cmd.Process.Kill()
		t.Fatal("validate still running 8 s after the first Ctrl-C")
	}
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	if alive := processesGone(t, pids); len(alive) > 0 {
		t.Errorf("processes %v of the probe are still running", alive)
	}
}

// --save-preset ../evil, or the name of an existing preset, is refused
// before any job is submitted, not after every job ran.
func TestValidateChecksSavePresetFirst(t *testing.T) {
	cache := isolate(t)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(cache, "config"))
	run := searchRun(t)
	if code, _, errb := cgtune(t, "preset", "save", "taken", "--model", "llama3_8b"); code != exitOK {
		t.Fatalf("preset save: %s", errb)
	}
	for _, tc := range []struct{ name, want string }{
		{"../evil", `--save-preset "../evil": not a preset name (allowed: [a-z0-9][a-z0-9._-]*)`},
		{"taken", `--save-preset taken: preset "taken" already exists at ` + filepath.Join(cache, "config", "cgtune", "presets", "taken.yaml") + "; give --force to replace it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vd := filepath.Join(t.TempDir(), "vd")
			code, out, errb := cgtune(t, "validate", run, "--dir", vd, "--launcher", "local", "--command", fakeJobCommand(t), "--job-te", "no",
				"--top", "1", "--iters", "12", "--save-preset", tc.name)
			if code != exitBadInput || errb != "cgtune: "+tc.want+"\n" || out != "" {
				t.Errorf("exit %d\nstdout %q\nstderr %q\nwant %q", code, out, errb, tc.want)
			}
			if _, err := os.Stat(vd); err == nil {
				t.Errorf("the validation folder was made: jobs ran")
			}
		})
	}
}

// validate says when the search it validates was interrupted, or has
// fewer graphed candidates than --top, and says nothing of it when
// neither holds.
func TestValidateSaysTheSearchIsPartial(t *testing.T) {
	isolate(t)
	run := searchRun(t)
	args := []string{"validate", run, "--launcher", "local", "--command", fakeJobCommand(t), "--job-te", "yes", "--dry-run"}
	code, _, errb := cgtune(t, args...)
	if code != exitOK || strings.Contains(errb, "note:") {
		t.Errorf("a finished search with the three candidates --top asks for: exit %d\n%s", code, errb)
	}
	code, _, errb = cgtune(t, append(args, "--top", "5")...)
	if code != exitOK || !strings.Contains(errb, "note: --top 5: the search has 3 graphed candidate(s) that succeeded and fit, each impl and scope once; validating 3") {
		t.Errorf("--top 5: exit %d\n%s", code, errb)
	}
	code, _, errb = cgtune(t, append(args, "--job-te", "no")...)
	if code != exitOK || !strings.Contains(errb, "note: --top 3: the search has 2 graphed candidate(s) that succeeded and fit (1 more the jobs' framework cannot build)") {
		t.Errorf("--job-te no: exit %d\n%s", code, errb)
	}
	unfinish(t, run, 3)
	code, _, errb = cgtune(t, append(args, "--top", "1")...)
	if code != exitOK || !strings.Contains(errb, "note: the search in "+run+" did not finish") || !strings.Contains(errb, "cgtune --headless --resume "+run) {
		t.Errorf("an unfinished search: exit %d\n%s", code, errb)
	}
}

// A --profile-file with a region no profile has (atn) is refused, naming
// the field; values that cannot apply without a cached framework profile
// (optimizer, gpu_scale, --profile-scale gpu=) are said, not dropped
// silently.
func TestProfileFileRegionsAndUnappliedValues(t *testing.T) {
	isolate(t)
	typo := writeFile(t, "typo.yaml", "layers:\n  dense:\n    graphed:\n      atn: {gpu_ms: 1}\n")
	order := writeFile(t, "order.yaml", "layers:\n  dense:\n    graphed:\n      mlp,attn: {gpu_ms: 1}\n")
	args := []string{"--headless", "--model", "llama3_8b", "--engine", "estimate"}
	for _, tc := range []struct{ file, want string }{
		{typo, typo + `:4: field layers.dense.graphed.atn: unknown region "atn" (allowed: layer, moe_postprocess, or cuda-graph modules joined by commas in this order: attn, mlp, moe, moe_router, moe_preprocess, mamba)`},
		{order, order + `:4: field layers.dense.graphed.mlp,attn: region "mlp,attn" is looked up as "attn,mlp"`},
	} {
		code, out, errb := cgtune(t, append(args, "--profile-file", tc.file)...)
		if code != exitBadInput || out != "" || !strings.Contains(errb, tc.want) || strings.Count(errb, "\n") != 1 {
			t.Errorf("exit %d, stderr %q\nwant %q", code, errb, tc.want)
		}
	}
	unused := writeFile(t, "unused.yaml", "host_scale: 1.2\ngpu_scale: 50\noptimizer: {host_ms: 1000000}\n")
	code, _, errb := cgtune(t, append(args, "--profile-file", unused, "--strategy", "exhaustive")...)
	want := unused + ": gpu_scale, optimizer are not used: no framework profile of llama3_8b on this layout is cached for h100"
	if code != exitOK || !strings.Contains(errb, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant %q", code, errb, want)
	}
	code, _, errb = cgtune(t, append(args, "--profile-scale", "gpu=50")...)
	if code != exitOK || !strings.Contains(errb, "--profile-scale gpu=50: gpu_scale are not used") {
		t.Errorf("--profile-scale gpu=50: exit %d\n%s", code, errb)
	}
}

// A graphed job that ran no eager iteration (local per-layer graphs are
// captured in iteration 1) shows no speed-up, never 0.000×, and the
// progress says why.
func TestJobEngineShowsNoZeroSpeedup(t *testing.T) {
	isolate(t)
	// MB 0.4 takes the local whole-layer graph, which Megatron-Core
	// captures in the first iteration.
	preset := writeFile(t, "jt.yaml", strings.Replace(jobPreset, `mbridge: "0.6"`, `mbridge: "0.4"`, 1))
	code, out, errb := cgtune(t, "--headless", "--preset", preset, "--engine", "job", "--launcher", "local",
		"--command", fakeJobCommand(t), "--job-iters", "10", "--strategy", "exhaustive", "--run-dir", filepath.Join(t.TempDir(), "run"))
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errb)
	}
	if strings.Contains(out, "0.000") || strings.Contains(errb, "0.000") {
		t.Errorf("a zero speed-up is shown:\n%s\n%s", out, errb)
	}
	if !strings.Contains(errb, "no speed-up over eager: see the result's notes") {
		t.Errorf("the progress does not say why a job has no speed-up:\n%s", errb)
	}
}

// --report .md is refused (the name has nothing before its extension),
// and nothing is written: it would write the hidden files .md and .svg.
func TestReportNeedsAName(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, ".md"), filepath.Join(dir, ".markdown")} {
		code, _, errb := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--report", p)
		if code != exitBadInput || !strings.Contains(errb, "--report "+p+": the file name has nothing before") {
			t.Errorf("--report %s: exit %d %q", p, code, errb)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("%d files written", len(entries))
	}
}

// A --set value nested thousands deep is echoed once, cut short, in an
// error line under 1000 bytes.
func TestDeepSetValueEchoedOnceAndCut(t *testing.T) {
	isolate(t)
	deep := strings.Repeat("[", 60000) + strings.Repeat("]", 60000)
	for _, args := range [][]string{
		{"--headless", "--model", "llama3_8b", "--engine", "estimate"},
		{"check", "--model", "llama3_8b"},
	} {
		code, out, errb := cgtune(t, append(args, "--set", "model.cuda_graph_scope="+deep)...)
		if code != exitBadInput || out != "" || len(errb) > 1000 || strings.Count(errb, strings.Repeat("[", 200)) != 1 || !strings.Contains(errb, "<a value of 120000 bytes>") {
			t.Errorf("%v: exit %d, %d bytes: %.300q", args, code, len(errb), errb)
		}
	}
}

// --launcher and --command are refused with --engine estimate: they only
// mean something to the job engine, and a search that ignored them would
// answer another question than the one asked.
func TestJobFlagsNeedTheJobEngine(t *testing.T) {
	isolate(t)
	for _, args := range [][]string{
		{"--engine", "estimate", "--command", "torchrun x.py {flags}"},
		{"--engine", "estimate", "--launcher", "slurm"},
		{"--command", "torchrun x.py {flags}"},
	} {
		t.Run(argsName(args), func(t *testing.T) {
			code, out, errb := cgtune(t, append([]string{"--headless", "--model", "llama3_8b"}, args...)...)
			if code != exitBadInput || out != "" || !strings.Contains(errb, "is for --engine job") || strings.Count(errb, "\n") != 1 {
				t.Errorf("exit %d, %q", code, errb)
			}
		})
	}
}

// A relative $XDG_CONFIG_HOME is named as such by preset save (not "set
// $XDG_CONFIG_HOME or $HOME"), and no folder is made for it.
func TestRelativeConfigHomeIsNamed(t *testing.T) {
	cache := isolate(t)
	t.Setenv("XDG_CONFIG_HOME", "relative/config")
	code, _, errb := cgtune(t, "preset", "save", "mine", "--model", "llama3_8b")
	if code != exitBadInput || !strings.Contains(errb, `$XDG_CONFIG_HOME is "relative/config", a relative path`) || strings.Contains(errb, "set $XDG_CONFIG_HOME or $HOME") {
		t.Errorf("exit %d %q", code, errb)
	}
	if _, err := os.Stat(filepath.Join(cache, "relative")); err == nil {
		t.Error("a folder was made for the relative path")
	}
}

// The .NAME.yaml.tmp-* a preset save killed with SIGKILL leaves behind
// is removed by the next command that uses the presets: the old ones
// cgtune named, and nothing else.
func TestStalePresetTempsAreRemoved(t *testing.T) {
	cache := isolate(t)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(cache, "config"))
	dir := filepath.Join(cache, "config", "cgtune", "presets")
	must(t, os.MkdirAll(dir, 0o755))
	old := time.Now().Add(-2 * time.Hour)
	for _, n := range []string{".team.yaml.tmp-" + strconv.Itoa(123456), "keep.txt", ".other.yaml.tmp-77"} {
		must(t, os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644))
		if n != ".other.yaml.tmp-77" {
			must(t, os.Chtimes(filepath.Join(dir, n), old, old))
		}
	}
	if code, _, errb := cgtune(t, "preset", "list"); code != exitOK {
		t.Fatalf("preset list: %s", errb)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".other.yaml.tmp-77 keep.txt" {
		t.Errorf("the presets folder holds %v; want the fresh temporary file and keep.txt", names)
	}
}
