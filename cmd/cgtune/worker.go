package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"cgtune/engine"
	"cgtune/engine/cuda"
	"cgtune/engine/estimate"
	"cgtune/engine/worker"
	"cgtune/presets"
	"cgtune/probes"
	"cgtune/stepmodel"
)

func init() { subcommands = append(subcommands, newWorkerCmd) }

func newWorkerCmd() *cobra.Command {
	var (
		gpu         int
		engineName  string
		estimateGPU string
		prof        profileFlags
	)
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run candidates sent as JSON lines on stdin (one worker per GPU; used by the search)",
		Long: `worker runs the measuring engine on one GPU and answers JSON-lines requests on
stdin with samples and results on stdout (protocol version ` + strconv.Itoa(worker.Version) + `, described in
engine/worker/protocol.go). The search starts one per GPU and replaces it when it
dies or hangs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
			defer stop()
			eng, err := openLocalEngine(ctx, engineName, gpu, estimateGPU, prof, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			err = worker.Serve(ctx, eng, cmd.InOrStdin(), cmd.OutOrStdout())
			if ctx.Err() != nil {
				// SIGTERM: Serve has given the running candidate its grace;
				// closing the engine under it could block, and exiting
				// frees the GPU as well.
				return quiet(exitInterrupted)
			}
			eng.Close()
			return err
		},
	}
	cmd.Flags().IntVar(&gpu, "gpu", 0, "GPU index")
	cmd.Flags().StringVar(&engineName, "engine", "cuda", "engine: cuda or estimate")
	cmd.Flags().StringVar(&estimateGPU, "estimate-gpu", "h200", "GPU the estimate engine estimates for (spec table: "+strings.Join(stepmodel.SpecNames(), ", ")+")")
	prof.register(cmd)
	return cmd
}

// openLocalEngine opens an engine in this process: the CUDA engine with
// the GPU's probe results (cached, or measured now), or the estimate
// engine for a GPU of the spec table (or cached probes of one); both with
// the framework profiles cached for this GPU and the user's adjustments.
func openLocalEngine(ctx context.Context, name string, gpu int, estimateGPU string, prof profileFlags, log interface{ Write([]byte) (int, error) }) (engine.Engine, error) {
	switch name {
	case "cuda":
		costs, err := prof.source("")
		if err != nil {
			return nil, err
		}
		rep, err := probeGPU(ctx, gpu, probes.Options{}, false, "")
		if err != nil {
			return nil, err
		}
		rates := withMeasuredNCCL(rep.Rates, rep.Device.Name)
		eng, err := cuda.New(cuda.Options{Ordinal: gpu, Rates: rates, Host: rep.Host, Costs: costs})
		if err != nil {
			return nil, gpuError(err)
		}
		costs.GPU = eng.Device().Name
		fmt.Fprintf(log, "worker: GPU %d %s, rates from %s; host costs: a framework profile from %s where one is cached for the model and layout, else %s\n",
			gpu, eng.Device().Name, rates.Source, costs.Dir, prof.describe(rep.Host.Source))
		return eng, nil
	case "estimate":
		return estimateEngine(estimateGPU, prof)
	}
	return nil, fail(exitBadInput, "--engine %q: allowed: cuda, estimate", name)
}

// estimateEngine is the estimate engine for gpu: cached probe results of
// a matching GPU if this machine measured one, else the spec table; with
// the framework profiles cached for that GPU.
func estimateEngine(gpu string, prof profileFlags) (engine.Engine, error) {
	costs, err := prof.source(gpu)
	if err != nil {
		return nil, err
	}
	if dir, err := probes.DefaultCacheDir(); err == nil {
		if rep, ok := probes.FindCached(dir, gpu); ok {
			dev := rep.Device
			dev.Name += " (estimated from cached probes)"
			return engine.SliceWhenTooBig(estimate.New(withMeasuredNCCL(rep.Rates, rep.Device.Name), rep.Host, dev).WithCosts(costs)), nil
		}
	}
	r, ok := stepmodel.SpecFor(gpu)
	if !ok {
		return nil, fail(exitBadInput, "--estimate-gpu %q: allowed: %s", gpu, strings.Join(stepmodel.SpecNames(), ", "))
	}
	name := strings.TrimPrefix(r.Source, "spec table: ") + " (estimated)"
	return engine.SliceWhenTooBig(estimate.New(withMeasuredNCCL(r, gpu), stepmodel.DefaultHostCosts(), engine.DeviceInfo{Name: name}).WithCosts(costs)), nil
}

// profileFlags are the flags that scale or override the emulation's host
// and GPU costs (README: "Adjusting the costs"). They replace the former
// CGTUNE_HOST_COST_SCALE.
type profileFlags struct {
	scale string // --profile-scale host=F[,gpu=F]
	file  string // --profile-file FILE
}

func (p *profileFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&p.scale, "profile-scale", "", "scale the emulation's costs: host=F and/or gpu=F (e.g. host=1.3), F from 0.01 to 100")
	fl.StringVar(&p.file, "profile-file", "", "YAML FILE that scales or overrides the framework profile (host_scale, gpu_scale, per-region values; README)")
}

// args are the flags for a worker process.
func (p profileFlags) args() []string {
	var a []string
	if p.scale != "" {
		a = append(a, "--profile-scale", p.scale)
	}
	if p.file != "" {
		a = append(a, "--profile-file", p.file)
	}
	return a
}

// adjust parses the flags; bad values are usage errors (exit 2).
func (p profileFlags) adjust() (*stepmodel.ProfileAdjust, error) {
	var a *stepmodel.ProfileAdjust
	var err error
	if p.file != "" {
		if a, err = stepmodel.LoadProfileAdjust(p.file); err != nil {
			return nil, fail(exitBadInput, "--profile-file %v", err)
		}
	}
	if p.scale != "" {
		if a, err = stepmodel.ParseProfileScale(p.scale, a); err != nil {
			return nil, fail(exitBadInput, "%v", err)
		}
	}
	return a, nil
}

// jobCalibration is the hook for a host-cost scale fitted from the real
// job's logs (stepmodel.CalibrationFunc); nil until a calibration source is
// wired in.
var jobCalibration stepmodel.CalibrationFunc

// source is the cost source of an emulating engine for gpu: the profiles
// cached under the user cache folder, the adjustments and the calibration.
func (p profileFlags) source(gpu string) (*stepmodel.ProfileSet, error) {
	a, err := p.adjust()
	if err != nil {
		return nil, err
	}
	dir, _ := stepmodel.DefaultProfileDir() // no cache folder: no profiles
	return &stepmodel.ProfileSet{Dir: dir, GPU: gpu, Adjust: a, Calibration: jobCalibration}, nil
}

func (p profileFlags) describe(fallback string) string {
	s := "PyTorch per-op costs (" + fallback + ")"
	if p.scale != "" || p.file != "" {
		s += ", adjusted by " + strings.TrimSpace(strings.Join(p.args(), " "))
	}
	return s
}

// workerSupervisors starts one `cgtune worker` per GPU.
func workerSupervisors(gpus []int, prof profileFlags, deadline func(*stepmodel.Workload, presets.Candidate) time.Duration) ([]engine.Engine, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	var sups []*worker.Supervisor
	closeAll := func() {
		for _, s := range sups {
			s.Close()
		}
	}
	var engines []engine.Engine
	for _, g := range gpus {
		s, err := worker.NewSupervisor(worker.Command{Path: exe, Args: append([]string{"worker", "--gpu", strconv.Itoa(g)}, prof.args()...)}, 2*time.Minute, deadline)
		if err != nil {
			closeAll()
			msg := err.Error()
			if strings.Contains(msg, "no CUDA driver") || strings.Contains(msg, "no NVIDIA driver") || strings.Contains(msg, "exit status 3") {
				return nil, nil, fail(exitNoGPU, "GPU %d: %s", g, msg)
			}
			return nil, nil, fail(exitNoGPU, "GPU %d: worker: %s", g, msg)
		}
		sups = append(sups, s)
		// A stage that does not fit this GPU runs as a slice of its
		// layers, as the megatron engine builds one.
		engines = append(engines, engine.SliceWhenTooBig(s))
	}
	return engines, closeAll, nil
}
