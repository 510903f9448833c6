package main

import (
	"fmt"
	"os/exec"
	"path/filepath"

	"cgtune/engine"
	"cgtune/engine/job"
	"cgtune/presets"
	"cgtune/recipe"
)

// openJobEngine makes the real training job the engine (--engine job):
// each candidate's overrides are rendered into --command and the job is
// launched by --launcher; its log gives the step times. The jobs live in
// the run folder (jobs/), so --resume re-attaches to Slurm jobs still
// running instead of submitting them again.
func (f *rootFlags) openJobEngine(s *searchSetup) error {
	if f.command == "" {
		return fail(exitBadInput, "--engine job: give --command TEMPLATE, the training command with {flags}, {dotlist} or {overrides} (cgtune validate --help lists the placeholders)")
	}
	tmpl, err := job.ParseCommand(f.command, f.commandFormat)
	if err != nil {
		return fail(exitBadInput, "--command: %v", err)
	}
	l, err := jobLauncher(f.launcher)
	if err != nil {
		return err
	}
	cfg := job.Config{Launcher: l, Command: tmpl, Iters: f.jobIters, Timeout: f.jobTimeout,
		Overrides: func(c presets.Candidate) recipe.Overrides { return recipe.WinnerOverrides(s.cfg.Target(), c) }}
	e := &lazyEngine{what: "job engine", source: engine.SourceJob, name: "job",
		device: engine.DeviceInfo{Name: "training job (" + l.Name() + ")"},
		open:   func() (engine.Engine, error) { return jobsInRunFolder(cfg, s.cfg.RunDir) }}
	s.cfg.Engines = []engine.Engine{e}
	s.close = func() { e.Close() }
	if est, err := estimateEngine(s.cfg.Layout.GPU, f.profile); err == nil {
		s.cfg.Estimator = est
	}
	s.notices = append(s.notices, fmt.Sprintf("engine job: every candidate runs as a training job through the %s launcher: %s", f.launcher, f.command))
	return nil
}

// jobLauncher is the launcher --launcher names: local, or slurm (one
// node, the default batch template).
func jobLauncher(name string) (job.Launcher, error) {
	switch name {
	case "local":
		return &job.Local{}, nil
	case "slurm":
		if _, err := exec.LookPath("sbatch"); err != nil {
			return nil, fail(exitBadInput, "--launcher slurm: sbatch is not on PATH (Slurm's client commands are needed)")
		}
		l, err := job.NewSlurm(job.SlurmOptions{Nodes: 1}, "")
		if err != nil {
			return nil, fail(exitBadInput, "%v", err)
		}
		return l, nil
	}
	return nil, fail(exitBadInput, "--launcher %q: allowed: local, slurm", name)
}

// jobsInRunFolder opens the job engine with its jobs in the run folder.
func jobsInRunFolder(cfg job.Config, runDir string) (engine.Engine, error) {
	if runDir == "" {
		return nil, fmt.Errorf("no run folder for the jobs")
	}
	cfg.Dir = filepath.Join(runDir, "jobs")
	e, err := job.New(cfg)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// withJob records the job engine's launch in run.json.
func (s savedRun) withJob(f *rootFlags) savedRun {
	if f.engine == "job" {
		s.Launcher, s.Command, s.CommandFormat, s.JobIters = f.launcher, f.command, f.commandFormat, f.jobIters
	}
	return s
}

// applyJob takes the job engine's launch from run.json unless the flags
// name it again.
func (s savedRun) applyJob(f *rootFlags, changed func(string) bool) {
	if s.Engine != "job" {
		return
	}
	if !changed("launcher") && s.Launcher != "" {
		f.launcher = s.Launcher
	}
	if !changed("command") {
		f.command = s.Command
	}
	if !changed("command-format") {
		f.commandFormat = s.CommandFormat
	}
	if !changed("job-iters") && s.JobIters > 0 {
		f.jobIters = s.JobIters
	}
}
