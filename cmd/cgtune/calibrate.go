package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"cgtune/engine"
	"cgtune/engine/estimate"
	"cgtune/engine/job"
	"cgtune/presets"
	"cgtune/probes"
	"cgtune/search"
)

func init() {
	subcommands = append(subcommands, newCalibrateCmd)
	jobCalibration = savedCalibration
}

// savedCalibration hands the emulating engines the host-cost scale that
// cgtune validate or cgtune calibrate fitted from the real job for a model
// and layout; their costs then name it. A damaged calibration file counts
// as none (cgtune calibrate writes a new one).
func savedCalibration(model, layout string) (float64, string, bool) {
	c, ok, err := engine.LoadCalibration(model, layout)
	if err != nil || !ok {
		return 0, "", false
	}
	return c.HostScale, c.Source, true
}

const calibrateLong = `Reads training logs of the real job (Megatron-LM pretrain_gpt.py or
Megatron-Bridge, one configuration per log, --log-interval 1), takes each
log's median iteration time after its warm-up and capture, and fits the host-
cost scale of the emulating engines (cuda, estimate) for the model and layout
so that their predictions match: with an eager log and graphed logs it fits
the speed-ups, with one kind only the step times. The calibration is saved
under the user cache folder (cgtune/calibration), keyed by model and layout.

Each log must say which CUDA-graph configuration it ran: cgtune finds it in
Megatron-LM's argument list (cuda_graph_impl, cuda_graph_modules,
cuda_graph_warmup_steps), Megatron-Bridge's configuration summary, or the
header of a log cgtune validate wrote; otherwise write it after the file:
--log graphed.log=local/full_iteration/w3 (impl/scopes/wN as cgtune prints
candidates, "layer" for the whole layer, "none" for eager).

Exit status: 0 saved; 2 bad input (a log without iteration times, an unknown
configuration, no model).`

func newCalibrateCmd() *cobra.Command {
	var logs []string
	var model, gpuType, preset, jobGPU string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "calibrate --log FILE[=CANDIDATE] [--log ...] (--model M [--gpu-type G] | --preset F)",
		Short: "Fit the emulation's host-cost scale to the real job's logs",
		Long:  calibrateLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(logs) == 0 {
				return fail(exitBadInput, "give at least one --log FILE")
			}
			m, l, err := calibrationTarget(model, gpuType, preset, cmd.Flags().Changed("gpu-type"))
			if err != nil {
				return err
			}
			var pts []engine.CalibrationPoint
			var names []string
			for _, spec := range logs {
				p, err := logPoint(spec)
				if err != nil {
					return err
				}
				pts = append(pts, p)
				names = append(names, filepath.Base(p.Job))
			}
			cal, err := search.FitCalibration(m, l, engine.WorkloadOptions{}, pts, calibrationEstimator(cmp.Or(jobGPU, l.GPU)), "calibrate "+strings.Join(names, " "))
			if err != nil {
				return fail(exitBadInput, "%v", err)
			}
			cal.Fitted = time.Now().UTC()
			out := cmd.OutOrStdout()
			printCalibration(out, cal)
			if dryRun {
				fmt.Fprintln(out, "not saved (--dry-run)")
				return nil
			}
			path, err := engine.SaveCalibration(cal)
			if err != nil {
				return fail(exitBadInput, "%v", err)
			}
			fmt.Fprintf(out, "saved to %s\n", path)
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
	return cmd
}

// calibrationTarget is the model and layout the logs belong to.
func calibrationTarget(model, gpuType, preset string, gpuChanged bool) (presets.Model, presets.Layout, error) {
	switch {
	case model != "" && preset != "":
		return presets.Model{}, presets.Layout{}, fail(exitBadInput, "give --model or --preset, not both")
	case model != "":
		m, err := presets.LookupModel(model)
		if err != nil {
			return m, presets.Layout{}, fail(exitBadInput, "--model: %v", err)
		}
		l, err := m.Layout(gpuType)
		if err != nil {
			return m, l, fail(exitBadInput, "--gpu-type: %v", err)
		}
		return m, l, nil
	case preset != "":
		p, _, err := loadPreset(preset)
		if err != nil {
			return presets.Model{}, presets.Layout{}, err
		}
		m, err := p.ResolveModel()
		if err != nil {
			return m, presets.Layout{}, fail(exitBadInput, "%s: %v", preset, err)
		}
		l := p.Layout
		if gpuChanged {
			if l, err = m.Layout(gpuType); err != nil {
				return m, l, fail(exitBadInput, "--gpu-type: %v", err)
			}
		}
		return m, l, nil
	}
	return presets.Model{}, presets.Layout{}, fail(exitBadInput, "give --model M or --preset F: the model and layout the logs are of")
}

// logPoint reads one --log FILE[=CANDIDATE].
func logPoint(spec string) (engine.CalibrationPoint, error) {
	path, key, explicit := spec, "", false
	if _, err := os.Stat(spec); err != nil {
		if i := strings.LastIndex(spec, "="); i > 0 {
			path, key, explicit = spec[:i], spec[i+1:], true
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return engine.CalibrationPoint{}, fail(exitBadInput, "--log %s: %v", spec, err)
	}
	defer f.Close()
	rep, err := job.ParseLog(f)
	if err != nil {
		return engine.CalibrationPoint{}, fail(exitBadInput, "--log %s: %v", path, err)
	}
	var c presets.Candidate
	switch {
	case explicit:
		if c, err = job.ParseCandidateKey(key); err != nil {
			return engine.CalibrationPoint{}, fail(exitBadInput, "--log %s: %v", spec, err)
		}
	case rep.Candidate != nil:
		c = *rep.Candidate
	default:
		return engine.CalibrationPoint{}, fail(exitBadInput, "--log %s: the log does not say which configuration it ran (no cuda_graph_impl in its arguments); write it after the file: --log %s=local/full_iteration/w3", path, path)
	}
	res := job.FromLog(c, rep, path)
	if res.Failed() {
		return engine.CalibrationPoint{}, fail(exitBadInput, "--log %s: %s", path, res.Err)
	}
	return engine.CalibrationPoint{Candidate: c, RealMs: res.Step.Median, Job: path}, nil
}

// calibrationEstimator predicts with the estimate engine for gpu with the
// cost source the emulating engines use (the framework profile cached for
// the model and layout, else this machine's probed or the default per-op
// host costs) and the calibration hook set to the scale being tried, so a
// fitted scale means what the engines will do with it.
func calibrationEstimator(gpu string) search.EstimatorAt {
	rates, ok := engine.SpecFor(gpu)
	host := engine.DefaultHostCosts()
	dev := engine.DeviceInfo{Name: gpu + " (estimated)"}
	if dir, err := probes.DefaultCacheDir(); err == nil {
		if rep, found := probes.FindCached(dir, gpu); found {
			rates, host, dev, ok = rep.Rates, rep.Host, rep.Device, true
		}
	}
	profiles, _ := engine.DefaultProfileDir()
	return func(scale float64) (engine.Engine, error) {
		if !ok {
			return nil, fmt.Errorf("no estimate for GPU %q (allowed: %s)", gpu, strings.Join(engine.SpecNames(), ", "))
		}
		set := &engine.ProfileSet{Dir: profiles, GPU: gpu, Calibration: func(string, string) (float64, string, bool) {
			return scale, "the fit", true
		}}
		return estimate.New(rates, host, dev).WithCosts(set), nil
	}
}

func printCalibration(w io.Writer, c engine.Calibration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "LOG/JOB\tCANDIDATE\tREAL MS\tPREDICTED MS (scale 1)\tCALIBRATED MS (scale %.3g)\n", c.HostScale)
	for _, p := range c.Points {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\n", p.Job, candLabel(p.Candidate), p.RealMs, p.PredictedMs, p.FittedMs)
	}
	tw.Flush()
	fmt.Fprintf(w, "host-cost scale %.3g for %s, layout %s\n", c.HostScale, c.Model, c.Layout)
	for _, n := range c.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
