package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"cgtune/engine"
	"cgtune/engine/estimate"
	"cgtune/engine/job"
	"cgtune/internal/fileio"
	"cgtune/presets"
	"cgtune/probes"
	"cgtune/search"
	"cgtune/stepmodel"
)

const calibrateLong = `Reads training logs of the real job (Megatron-LM pretrain_gpt.py or
Megatron-Bridge, one configuration per log, --log-interval 1), takes each
log's median iteration time after its warm-up and capture, and fits the host-
cost scale of the emulating engines (cuda, estimate) for the model and layout
so that their predictions match: with an eager log and graphed logs it fits
the speed-ups, with graphed logs only the step times. The calibration is saved
under the user cache folder (cgtune/calibration), keyed by model and layout;
every emulated result it changes says so, and a search prints it.

Each log must say which CUDA-graph configuration it ran: cgtune finds it in
Megatron-LM's argument list (cuda_graph_impl, cuda_graph_modules,
cuda_graph_warmup_steps), Megatron-Bridge's configuration summary, or the
header of a log cgtune validate wrote; otherwise write it after the file:
--log graphed.log=local/full_iteration/w3 (impl/scopes/wN as cgtune prints
candidates, "layer" for the whole layer, "none" for eager).

It refuses, saving nothing:
  - a log whose model or layout (the argument list's num_layers, hidden_size,
    heads, experts, sequence, batch sizes and parallel sizes) is not the one
    of --model/--preset; a log that prints none of them is not checked;
  - eager logs alone: a fit needs at least one graphed run;
  - a fit that ends at a bound of the scale (0.05 or 50): no host cost
    explains the logs.

  cgtune calibrate --list       lists the saved calibrations with their IDs
  cgtune calibrate --rm ID      removes one

Exit status: 0 saved (listed, removed); 2 bad input (a log without
iteration times, of another model or layout, an unknown configuration, no
model, a fit refused as above).`

func newCalibrateCmd() *cobra.Command {
	var logs []string
	var model, gpuType, preset, jobGPU, rm string
	var dryRun, list bool
	cmd := &cobra.Command{
		Use:   "calibrate --log FILE[=CANDIDATE] [--log ...] (--model M [--gpu-type G] | --preset F) | --list | --rm ID",
		Short: "Fit the emulation's host-cost scale to the real job's logs",
		Long:  calibrateLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			switch {
			case list && rm != "":
				return fail(exitBadInput, "give --list or --rm, not both")
			case (list || rm != "") && len(logs) > 0:
				return fail(exitBadInput, "--list and --rm take no --log")
			case list:
				return listCalibrations(out)
			case rm != "":
				return removeCalibration(out, rm)
			case len(logs) == 0:
				return fail(exitBadInput, "give at least one --log FILE (or --list, --rm ID)")
			}
			m, l, err := calibrationTarget(model, gpuType, preset, cmd.Flags().Changed("gpu-type"))
			if err != nil {
				return err
			}
			var pts []stepmodel.CalibrationPoint
			var names, notes []string
			for _, spec := range logs {
				p, note, err := logPoint(spec, m, l)
				if err != nil {
					return err
				}
				if note != "" {
					notes = append(notes, note)
				}
				pts = append(pts, p)
				names = append(names, filepath.Base(p.Job))
			}
			cal, err := search.FitCalibration(m, l, stepmodel.WorkloadOptions{}, pts, calibrationEstimator(cmp.Or(jobGPU, l.GPU)), "calibrate "+strings.Join(names, " "))
			if err != nil {
				return fail(exitBadInput, "%w", err)
			}
			// After the fit, so that a refusal is one line.
			for _, n := range notes {
				fmt.Fprintln(cmd.ErrOrStderr(), "note: "+n)
			}
			cal.Fitted = time.Now().UTC()
			printCalibration(out, cal)
			if dryRun {
				fmt.Fprintln(out, "not saved (--dry-run)")
				return nil
			}
			path, err := stepmodel.SaveCalibration(cal)
			if err != nil {
				return fail(exitBadInput, "%w", err)
			}
			fmt.Fprintf(out, "saved to %s (ID %s: cgtune calibrate --rm %[2]s removes it)\n", path, stepmodel.CalibrationID(cal.Model, cal.Layout))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&logs, "log", nil, "a training log, optionally =CANDIDATE (impl/scopes/wN); repeatable")
	f.StringVar(&model, "model", "", "built-in model the logs are of (cgtune models)")
	f.StringVar(&gpuType, "gpu-type", "h100", "GPU whose default layout of --model the job used")
	f.StringVar(&preset, "preset", "", "team preset (FILE or NAME) whose model and layout the logs are of")
	f.StringVar(&jobGPU, "job-gpu", "", "GPU type the jobs ran on, whose framework profile and rates the fit predicts with (default: the layout's GPU type)")
	f.BoolVar(&dryRun, "dry-run", false, "fit and print, do not save")
	f.BoolVar(&list, "list", false, "list the saved calibrations (ID, model, GPU, scale, when, from what, layout)")
	f.StringVar(&rm, "rm", "", "remove the saved calibration ID (as --list prints it)")
	return cmd
}

// listCalibrations prints the saved calibrations, one a line.
func listCalibrations(w io.Writer) error {
	dir, err := stepmodel.CalibrationDir()
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	cals, err := stepmodel.ListCalibrations(dir)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	if len(cals) == 0 {
		fmt.Fprintf(w, "no saved calibration (in %s)\n", dir)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMODEL\tGPU\tHOST SCALE\tFITTED\tFROM\tLAYOUT")
	for _, c := range cals {
		if c.Err != nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\tunreadable: %v\t-\n", c.ID, c.Err)
			continue
		}
		fitted := "-"
		if !c.Fitted.IsZero() {
			fitted = c.Fitted.Format("2006-01-02")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.3g\t%s\t%s\t%s\n", c.ID, c.Model, cmp.Or(c.GPU, "-"), c.HostScale, fitted, c.Source, c.Layout)
	}
	tw.Flush()
	fmt.Fprintf(w, "in %s; cgtune calibrate --rm ID removes one\n", dir)
	return nil
}

func removeCalibration(w io.Writer, id string) error {
	dir, err := stepmodel.CalibrationDir()
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	path, err := stepmodel.RemoveCalibration(dir, id)
	if err != nil {
		return fail(exitBadInput, "--rm %w", err)
	}
	fmt.Fprintf(w, "removed %s\n", path)
	return nil
}

// calibrationTarget is the model and layout the logs belong to.
func calibrationTarget(model, gpuType, preset string, gpuChanged bool) (presets.Model, presets.Layout, error) {
	switch {
	case model != "" && preset != "":
		return presets.Model{}, presets.Layout{}, fail(exitBadInput, "give --model or --preset, not both")
	case model != "":
		m, err := presets.LookupModel(model)
		if err != nil {
			return m, presets.Layout{}, fail(exitBadInput, "--model: %w", err)
		}
		l, err := m.Layout(gpuType)
		if err != nil {
			return m, l, fail(exitBadInput, "--gpu-type: %w", err)
		}
		return m, l, nil
	case preset != "":
		p, _, err := loadPreset(preset)
		if err != nil {
			return presets.Model{}, presets.Layout{}, err
		}
		m, err := p.ResolveModel()
		if err != nil {
			return m, presets.Layout{}, fail(exitBadInput, "%s: %w", preset, err)
		}
		l := p.Layout
		if gpuChanged {
			if l, err = m.Layout(gpuType); err != nil {
				return m, l, fail(exitBadInput, "--gpu-type: %w", err)
			}
		}
		return m, l, nil
	}
	return presets.Model{}, presets.Layout{}, fail(exitBadInput, "give --model M or --preset F: the model and layout the logs are of")
}

// maxLogBytes is the most cgtune reads of a training log: the logs of
// the short jobs a calibration takes are a few MiB.
const maxLogBytes = 1 << 30

// logPoint reads one --log FILE[=CANDIDATE] of a job of model m on layout
// l; note says what could not be checked.
func logPoint(spec string, m presets.Model, l presets.Layout) (stepmodel.CalibrationPoint, string, error) {
	path, key, explicit := spec, "", false
	if _, err := os.Stat(spec); err != nil {
		if i := strings.LastIndex(spec, "="); i > 0 {
			path, key, explicit = spec[:i], spec[i+1:], true
		}
	}
	rep, args, err := readLog(path)
	if err != nil {
		return stepmodel.CalibrationPoint{}, "", fail(exitBadInput, "--log %w", err)
	}
	note, err := checkLogTarget(path, args, m, l)
	if err != nil {
		return stepmodel.CalibrationPoint{}, "", err
	}
	var c presets.Candidate
	switch {
	case explicit:
		if c, err = job.ParseCandidateKey(key); err != nil {
			return stepmodel.CalibrationPoint{}, "", fail(exitBadInput, "--log %s: %w", spec, err)
		}
	case rep.Candidate != nil:
		c = *rep.Candidate
	default:
		return stepmodel.CalibrationPoint{}, "", fail(exitBadInput, "--log %s: the log does not say which configuration it ran (no cuda_graph_impl in its arguments); write it after the file: --log %s=local/full_iteration/w3", path, path)
	}
	res := job.FromLog(c, rep, path)
	if res.Failed() {
		return stepmodel.CalibrationPoint{}, "", fail(exitBadInput, "--log %s: %s", path, res.Err)
	}
	return stepmodel.CalibrationPoint{Candidate: c, RealMs: res.Step.Median, Job: path}, note, nil
}

// readLog reads a training log as a stream: a regular file of at most
// maxLogBytes (a FIFO or a device is refused before it is read), lines of
// any length (job.ReadLines cuts an over-long one); errors name the file
// and the line.
func readLog(path string) (job.Report, job.RunArgs, error) {
	f, err := fileio.OpenFileLimited(path, maxLogBytes)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return job.Report{}, nil, fmt.Errorf("%s: %w", path, pe.Err)
	}
	if err != nil {
		return job.Report{}, nil, err // names path
	}
	defer f.Close()
	var p job.Parser
	args := job.RunArgs{}
	err = job.ReadLines(io.LimitReader(f, maxLogBytes), func(_ int, line string) {
		p.Line(line)
		args.Line(line)
	})
	if err != nil {
		return job.Report{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return p.Report(), args, nil
}

// checkLogTarget compares what the log says of its model and layout with
// model m on layout l: a mismatch is bad input naming every field that
// differs; a log that says nothing of them is a note.
func checkLogTarget(path string, args job.RunArgs, m presets.Model, l presets.Layout) (string, error) {
	a := m.Arch
	experts := 0
	if a.MoE != nil {
		experts = a.MoE.Experts
	}
	want := []struct {
		names []string
		v     int
	}{
		{[]string{"num_layers"}, a.Layers},
		{[]string{"hidden_size"}, a.Hidden},
		{[]string{"ffn_hidden_size"}, a.FFNHidden},
		{[]string{"num_attention_heads"}, a.Heads},
		{[]string{"num_experts", "num_moe_experts"}, experts},
		{[]string{"seq_length"}, l.Seq},
		{[]string{"micro_batch_size"}, l.MBS},
		{[]string{"global_batch_size"}, l.GBS},
		{[]string{"world_size"}, l.NumGPUs},
		{[]string{"tensor_model_parallel_size"}, l.TPSize()},
		{[]string{"pipeline_model_parallel_size"}, l.PPSize()},
		{[]string{"context_parallel_size"}, l.CPSize()},
		{[]string{"expert_model_parallel_size"}, l.EPSize()},
	}
	var diff []string
	checked := 0
	for _, w := range want {
		for _, name := range w.names {
			if !args.Printed(name) {
				continue
			}
			checked++
			got, isInt := args.Int(name)
			if !isInt {
				got = 0 // None: no experts
			}
			if w.v > 0 && got != w.v || w.v == 0 && got > 1 {
				diff = append(diff, fmt.Sprintf("%s %s in the log, %d in %s", name, args[name], w.v, m.Name))
			}
			break
		}
	}
	switch {
	case len(diff) > 0:
		return "", fail(exitBadInput, "--log %s ran another model or layout than %s (%s layout): %s; a calibration from it would skew every estimate (give the --model or --preset it ran)",
			path, m.Name, cmp.Or(l.GPU, "the preset's"), strings.Join(diff, ", "))
	case checked == 0:
		return fmt.Sprintf("%s does not say which model or layout it ran (no argument list): not checked against %s", path, m.Name), nil
	}
	return "", nil
}

// calibrationEstimator predicts with the estimate engine for gpu with the
// cost source the emulating engines use (the framework profile cached for
// the model and layout, else this machine's probed or the default per-op
// host costs) and the calibration hook set to the scale being tried, so a
// fitted scale means what the engines will do with it.
func calibrationEstimator(gpu string) search.EstimatorAt {
	rates, ok := stepmodel.SpecFor(gpu)
	host := stepmodel.DefaultHostCosts()
	dev := engine.DeviceInfo{Name: gpu + " (estimated)"}
	if dir, err := probes.DefaultCacheDir(); err == nil {
		if rep, found := probes.FindCached(dir, gpu); found {
			rates, host, dev, ok = rep.Rates, rep.Host, rep.Device, true
		}
	}
	profiles, _ := stepmodel.DefaultProfileDir()
	return func(scale float64) (engine.Engine, error) {
		if !ok {
			return nil, fmt.Errorf("no estimate for GPU %q (allowed: %s)", gpu, strings.Join(stepmodel.SpecNames(), ", "))
		}
		set := &stepmodel.ProfileSet{Dir: profiles, GPU: gpu, Calibration: func(string, string) (float64, string, bool) {
			return scale, "the fit", true
		}}
		return estimate.New(rates, host, dev).WithCosts(set), nil
	}
}

func printCalibration(w io.Writer, c stepmodel.Calibration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "LOG/JOB\tCANDIDATE\tREAL MS\tPREDICTED MS (scale 1)\tCALIBRATED MS (scale %.3g)\n", c.HostScale)
	for _, p := range c.Points {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\n", p.Job, p.Candidate.Name(), p.RealMs, p.PredictedMs, p.FittedMs)
	}
	tw.Flush()
	fmt.Fprintf(w, "host-cost scale %.3g for %s, layout %s\n", c.HostScale, c.Model, c.Layout)
	for _, n := range c.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
