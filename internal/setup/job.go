package setup

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"cgtune/engine"
	"cgtune/engine/job"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
)

// Job configures the job engine: the launcher (local or slurm), the
// training command template and its format, and the iterations and time
// bound of each job.
type Job struct {
	Launcher, Command, CommandFormat string
	Iters                            int
	Timeout                          time.Duration
}

// openJob makes the real training job the engine: each candidate's
// overrides are rendered into the command and the job is launched by the
// launcher; its log gives the step times. The jobs live in the run folder
// (jobs/), so a resumed search re-attaches to Slurm jobs still running
// instead of submitting them again.
func (e *Engines) openJob(cfg *search.Config, o Options) error {
	jo := o.Job
	if jo.Command == "" {
		return fmt.Errorf("--engine job: give --command TEMPLATE, the training command with {flags}, {dotlist} or {overrides} (cgtune validate --help lists the placeholders)")
	}
	tmpl, err := job.ParseCommand(jo.Command, jo.CommandFormat)
	if err != nil {
		return fmt.Errorf("--command: %w", err)
	}
	l, err := JobLauncher(jo.Launcher)
	if err != nil {
		return err
	}
	jc := job.Config{Launcher: l, Command: tmpl, Iters: jo.Iters, Timeout: jo.Timeout,
		Overrides: func(c presets.Candidate) recipe.Overrides { return recipe.WinnerOverrides(cfg.Target(), c) }}
	je := &lazyEngine{what: "job engine", source: engine.SourceJob, name: "job",
		device: engine.DeviceInfo{Name: "training job (" + l.Name() + ")"},
		open:   func() (engine.Engine, error) { return jobsInRunFolder(jc, cfg.RunDir) }}
	cfg.Engines = []engine.Engine{je}
	e.close = func() { je.Close() }
	if est, err := EstimateEngine(cfg.Layout.GPU, o.Profile); err == nil {
		cfg.Estimator = est
	}
	e.notice("engine job: every candidate runs as a training job through the %s launcher: %s", jo.Launcher, jo.Command)
	return nil
}

// JobLauncher is the launcher --launcher names: local, or slurm (one
// node, the default batch template).
func JobLauncher(name string) (job.Launcher, error) {
	switch name {
	case "local":
		return &job.Local{}, nil
	case "slurm":
		if _, err := exec.LookPath("sbatch"); err != nil {
			return nil, fmt.Errorf("--launcher slurm: sbatch is not on PATH (Slurm's client commands are needed)")
		}
		l, err := job.NewSlurm(job.SlurmOptions{Nodes: 1}, "")
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	return nil, fmt.Errorf("--launcher %q: allowed: local, slurm", name)
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
