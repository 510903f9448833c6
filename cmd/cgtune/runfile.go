package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"cgtune/engine/job"
	"cgtune/internal/fileio"
	"cgtune/internal/setup"
	"cgtune/recipe"
	"cgtune/search"
	"cgtune/stepmodel"
)

// runFile holds, in a run folder, how the search was run (engine, GPUs,
// budget, output), so that --resume RUN continues it the same way; the
// journal's fingerprint holds what was searched and how it was computed.
const runFile = "run.json"

// maxRunFileBytes bounds run.json: a few hundred bytes of settings.
const maxRunFileBytes = 1 << 20

// savedRun is runFile's content. A resume reads it as it reads a preset:
// as input that may have been edited, each value checked as its flag is,
// and nothing in it widens what the resume may do (no --force, no job
// command run without --trust-preset-command, no relative path that would
// mean another file in another working folder).
type savedRun struct {
	Engine      string `json:"engine"`
	EstimateGPU string `json:"estimate_gpu,omitempty"`
	GPUs        string `json:"gpus"`
	Budget      string `json:"budget"`
	TrainIters  int    `json:"train_iters"`
	// Emit is --emit as an absolute path ("-" for stdout).
	Emit   string `json:"emit,omitempty"`
	Format string `json:"format"`
	Tie    string `json:"tie,omitempty"`
	// Force is read from run files of earlier cgtune versions and
	// ignored: a resume replaces an existing file only when its own
	// command line says --force.
	Force bool `json:"force,omitempty"`
	// RunPredictedFailures: the search ran the candidates predicted to
	// fail capture (a resume plans the same candidates).
	RunPredictedFailures bool `json:"run_predicted_failures,omitempty"`
	// WhatIf is --what-if's value: the search's what-if rows and the
	// changes it accepts (a resume plans and ranks the same).
	WhatIf string `json:"what_if,omitempty"`
	// The cost adjustments (--profile-scale, --profile-file as an absolute
	// path): a resume computes with them too, and the journal refuses one
	// that does not (search.CostModel).
	ProfileScale string `json:"profile_scale,omitempty"`
	ProfileFile  string `json:"profile_file,omitempty"`
	// The job engine's launch (a resumed search re-attaches to its jobs).
	Launcher      string `json:"launcher,omitempty"`
	Command       string `json:"command,omitempty"`
	CommandFormat string `json:"command_format,omitempty"`
	JobIters      int    `json:"job_iters,omitempty"`
}

// engines are the --engine values a run file may name.
var engines = []string{setup.EngineMegatron, setup.EngineCUDA, setup.EngineEstimate, setup.EngineJob}

// parseSavedRun reads run.json (at path, for messages): unknown fields and
// values its flag would refuse are errors naming the file and the field.
func parseSavedRun(path string, data []byte) (savedRun, error) {
	var s savedRun
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("%s: %v", path, oneLine(err.Error()))
	}
	if dec.More() {
		return s, fmt.Errorf("%s: more than one JSON object", path)
	}
	bad := func(field, v any, allowed string) error {
		return fmt.Errorf("%s: field %s: %s (allowed: %s)", path, field, quoteShort(fmt.Sprint(v)), allowed)
	}
	switch {
	case !slices.Contains(engines, s.Engine):
		return s, bad("engine", s.Engine, strings.Join(engines, ", "))
	case s.EstimateGPU != "" && !slices.Contains(stepmodel.SpecNames(), s.EstimateGPU):
		return s, bad("estimate_gpu", s.EstimateGPU, strings.Join(stepmodel.SpecNames(), ", "))
	case !slices.Contains(recipe.Formats, s.Format):
		return s, bad("format", s.Format, strings.Join(recipe.Formats, ", "))
	case s.TrainIters < 0 || s.TrainIters > maxTrainIters:
		return s, bad("train_iters", s.TrainIters, fmt.Sprintf("1 to %d", maxTrainIters))
	case s.JobIters < 0 || s.JobIters > maxTrainIters:
		return s, bad("job_iters", s.JobIters, fmt.Sprintf("1 to %d", maxTrainIters))
	case s.Emit != "" && s.Emit != "-" && !filepath.IsAbs(s.Emit):
		return s, bad("emit", s.Emit, "an absolute path, or - for stdout; a relative one would name another file in another working folder: give --emit again")
	case s.ProfileFile != "" && !filepath.IsAbs(s.ProfileFile):
		return s, bad("profile_file", s.ProfileFile, "an absolute path; give --profile-file again")
	case s.Launcher != "" && s.Launcher != "local" && s.Launcher != "slurm":
		return s, bad("launcher", s.Launcher, "local, slurm")
	case s.CommandFormat != "" && !slices.Contains(job.OverrideFormats, s.CommandFormat):
		return s, bad("command_format", s.CommandFormat, strings.Join(job.OverrideFormats, ", "))
	}
	if s.WhatIf != "" {
		if _, _, err := parseWhatIf(s.WhatIf); err != nil {
			return s, bad("what_if", s.WhatIf, "what --what-if takes: on, or accept=NAME[,NAME] with NAME one of "+strings.Join(recipe.ChangeNames(), ", "))
		}
	}
	if s.Budget != "" {
		if _, err := time.ParseDuration(s.Budget); err != nil {
			return s, bad("budget", s.Budget, "a duration such as 30m, or 0s for no limit")
		}
	}
	if s.Tie != "" {
		if _, err := search.ParseTie(s.Tie); err != nil {
			return s, bad("tie", s.Tie, "what --tie takes, such as 1%")
		}
	}
	if s.ProfileScale != "" {
		if _, err := stepmodel.ParseProfileScale(s.ProfileScale, nil); err != nil {
			return s, fmt.Errorf("%s: field profile_scale: %w", path, err)
		}
	}
	return s, nil
}

// quoteShort quotes v, cut to a length a one-line message can carry.
func quoteShort(v string) string {
	const most = 80
	if len(v) > most {
		return fmt.Sprintf("%q… (%d bytes)", v[:most], len(v))
	}
	return fmt.Sprintf("%q", v)
}

// oneLine joins the lines of a message.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// readSavedRun reads dir's run.json; ok is false when there is none (a
// search the TUI started).
func readSavedRun(dir string) (savedRun, bool, error) {
	path := filepath.Join(dir, runFile)
	data, err := fileio.ReadFileLimited(path, maxRunFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return savedRun{}, false, nil
	}
	if err != nil {
		return savedRun{}, false, err
	}
	s, err := parseSavedRun(path, data)
	return s, err == nil, err
}

// applySaved takes a resumed run's settings for the flags this command
// line does not give. --force is never taken (the resume's own command
// line says whether a file may be replaced), and a job command taken from
// the file runs only with --trust-preset-command (f.savedCommand).
func (f *rootFlags) applySaved(dir string) error {
	s, ok, err := readSavedRun(dir)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	if !ok {
		return nil // a search started by another program (the TUI): flags and defaults
	}
	changed := f.cmd.Flags().Changed
	take := func(flag string, dst *string, v string) {
		if !changed(flag) && v != "" {
			*dst = v
		}
	}
	if !changed("engine") {
		f.engine = s.Engine
	}
	take("estimate-gpu", &f.estimateGPU, s.EstimateGPU)
	take("gpu", &f.gpus, s.GPUs)
	take("format", &f.format, s.Format)
	take("tie", &f.tie, s.Tie)
	take("what-if", &f.whatIf, s.WhatIf)
	take("profile-scale", &f.profile.Scale, s.ProfileScale)
	take("profile-file", &f.profile.File, s.ProfileFile)
	if !changed("emit") {
		f.emit = s.Emit
	}
	if !changed("budget") && s.Budget != "" {
		f.budget, _ = time.ParseDuration(s.Budget) // checked by parseSavedRun
	}
	if !changed("train-iters") && s.TrainIters > 0 {
		f.trainIters = s.TrainIters
	}
	if !changed("run-predicted-failures") {
		f.runPredictedFailures = s.RunPredictedFailures
	}
	s.applyJob(f, changed, filepath.Join(dir, runFile))
	return nil
}

// withJob records the job engine's launch in run.json.
func (s savedRun) withJob(f *rootFlags) savedRun {
	if f.engine == setup.EngineJob {
		s.Launcher, s.Command, s.CommandFormat, s.JobIters = f.launcher, f.command, f.commandFormat, f.jobIters
	}
	return s
}

// applyJob takes the job engine's launch from run.json (at path) unless
// the flags name it again; a command taken from it is remembered as
// needing trust.
func (s savedRun) applyJob(f *rootFlags, changed func(string) bool, path string) {
	if s.Engine != setup.EngineJob {
		return
	}
	if !changed("launcher") && s.Launcher != "" {
		f.launcher = s.Launcher
	}
	if !changed("command") {
		f.command = s.Command
		if s.Command != "" {
			f.savedCommand = path
		}
	}
	if !changed("command-format") {
		f.commandFormat = s.CommandFormat
	}
	if !changed("job-iters") && s.JobIters > 0 {
		f.jobIters = s.JobIters
	}
}

// newSavedRun is what run.json records of f: paths made absolute, never
// --force.
func (f *rootFlags) newSavedRun() savedRun {
	emit := f.emit
	if emit != "" && emit != "-" {
		emit = absPath(emit)
	}
	prof := ""
	if f.profile.File != "" {
		prof = absPath(f.profile.File)
	}
	return savedRun{Engine: f.engine, EstimateGPU: f.estimateGPU, GPUs: f.gpus, Budget: f.budget.String(),
		TrainIters: f.trainIters, Emit: emit, Format: f.format, Tie: f.tie, RunPredictedFailures: f.runPredictedFailures, WhatIf: f.whatIf,
		ProfileScale: f.profile.Scale, ProfileFile: prof}.withJob(f)
}

// isSavedRun reports whether path is a run.json cgtune wrote.
func isSavedRun(path string) bool {
	data, err := fileio.ReadFileLimited(path, maxRunFileBytes)
	if err != nil {
		return false
	}
	_, err = parseSavedRun(path, data)
	return err == nil
}
