package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const jobPreset = `version: 1
name: jt
model: llama3_8b
gpu: h100
layout: {gpu: h100, num_gpus: 8, precision: bf16, tp: 1, pp: 1, cp: 2, ep: 1, gbs: 128, mbs: 1, seq: 8192}
space:
  impls: [none, local]
  scopes: [[], [full_iteration]]
  warmups: [3]
mbridge: "0.6"
`

// --engine job: the real training job (here the stand-in for
// pretrain_gpt.py, driven only through the flags cgtune renders) ranks
// the candidates; a resume takes every run from the journal and needs no
// --command again (run.json keeps it).
func TestHeadlessOnTheJobEngine(t *testing.T) {
	isolate(t)
	preset := writeFile(t, "jt.yaml", jobPreset)
	fake, _ := filepath.Abs(filepath.Join("..", "..", "engine", "job", "testdata", "fakejob.sh"))
	runDir := filepath.Join(t.TempDir(), "run")
	code, out, errb := cgtune(t, "--headless", "--preset", preset, "--engine", "job", "--launcher", "local",
		"--command", "bash "+fake+" --train-iters {iters} {flags}", "--job-iters", "10", "--strategy", "exhaustive", "--run-dir", runDir)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errb)
	}
	if !strings.Contains(out, "winner: full_iteration w3: 22.30 ms/step") || !strings.Contains(out, "[job]") {
		t.Fatalf("ranking:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(runDir, "jobs", "cgtune-none")); err != nil {
		t.Fatalf("the jobs are not in the run folder: %v", err)
	}
	code, out, errb = cgtune(t, "--headless", "--resume", runDir)
	if code != 0 || !strings.Contains(errb, "done: 0 runs now, 2 runs read back from the journal (2 in all)") || !strings.Contains(out, "winner: full_iteration w3") {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errb)
	}
}

func TestJobEngineNeedsACommandAndALauncher(t *testing.T) {
	isolate(t)
	preset := writeFile(t, "jt.yaml", jobPreset)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--engine", "job"}, "--engine job: give --command"},
		{[]string{"--engine", "job", "--command", "train.sh {flags}", "--launcher", "pbs"}, `--launcher "pbs": allowed: local, slurm`},
		{[]string{"--engine", "job", "--command", "train.sh --no-settings"}, "--command:"},
	} {
		t.Run(argsName(c.args), func(t *testing.T) {
			code, _, errb := cgtune(t, append([]string{"--headless", "--preset", preset}, c.args...)...)
			if code != exitBadInput || !strings.Contains(errb, c.want) {
				t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb, c.want)
			}
		})
	}
}
