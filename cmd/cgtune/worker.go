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
)

func init() { subcommands = append(subcommands, newWorkerCmd) }

func newWorkerCmd() *cobra.Command {
	var (
		gpu         int
		engineName  string
		estimateGPU string
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
			eng, err := openLocalEngine(ctx, engineName, gpu, estimateGPU, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer eng.Close()
			return worker.Serve(ctx, eng, os.Stdin, cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&gpu, "gpu", 0, "GPU index")
	cmd.Flags().StringVar(&engineName, "engine", "cuda", "engine: cuda or estimate")
	cmd.Flags().StringVar(&estimateGPU, "estimate-gpu", "h200", "GPU the estimate engine estimates for (spec table: "+strings.Join(engine.SpecNames(), ", ")+")")
	return cmd
}

// openLocalEngine opens an engine in this process: the CUDA engine with
// the GPU's probe results (cached, or measured now), or the estimate
// engine for a GPU of the spec table (or cached probes of one).
func openLocalEngine(ctx context.Context, name string, gpu int, estimateGPU string, log interface{ Write([]byte) (int, error) }) (engine.Engine, error) {
	switch name {
	case "cuda":
		rep, err := probeGPU(ctx, gpu, probes.Options{}, false, "")
		if err != nil {
			return nil, err
		}
		host, err := hostScale(rep.Host)
		if err != nil {
			return nil, err
		}
		eng, err := cuda.New(cuda.Options{Ordinal: gpu, Rates: rep.Rates, Host: host})
		if err != nil {
			return nil, gpuError(err)
		}
		fmt.Fprintf(log, "worker: GPU %d %s, rates from %s, host costs %s\n", gpu, eng.Device().Name, rep.Rates.Source, host.Source)
		return eng, nil
	case "estimate":
		return estimateEngine(estimateGPU)
	}
	return nil, fail(exitBadInput, "--engine %q: allowed: cuda, estimate", name)
}

// estimateEngine is the estimate engine for gpu: cached probe results of
// a matching GPU if this machine measured one, else the spec table.
func estimateEngine(gpu string) (engine.Engine, error) {
	if dir, err := probes.DefaultCacheDir(); err == nil {
		if rep, ok := probes.FindCached(dir, gpu); ok {
			dev := rep.Device
			dev.Name += " (estimated from cached probes)"
			host, err := hostScale(rep.Host)
			if err != nil {
				return nil, err
			}
			return estimate.New(rep.Rates, host, dev), nil
		}
	}
	r, ok := engine.SpecFor(gpu)
	if !ok {
		return nil, fail(exitBadInput, "--estimate-gpu %q: allowed: %s", gpu, strings.Join(engine.SpecNames(), ", "))
	}
	host, err := hostScale(engine.DefaultHostCosts())
	if err != nil {
		return nil, err
	}
	return estimate.New(r, host, engine.DeviceInfo{Name: strings.TrimPrefix(r.Source, "spec table: ") + " (estimated)"}), nil
}

// HostScaleEnv multiplies the emulated framework host costs (both
// engines; worker processes inherit it).
const HostScaleEnv = "CGTUNE_HOST_COST_SCALE"

func hostScale(h engine.HostCosts) (engine.HostCosts, error) {
	v := os.Getenv(HostScaleEnv)
	if v == "" {
		return h, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		return h, fail(exitBadInput, "$%s=%q: want a positive number such as 1.5", HostScaleEnv, v)
	}
	return h.Scaled(f), nil
}

// workerSupervisors starts one `cgtune worker` per GPU.
func workerSupervisors(gpus []int, deadline func(*engine.Workload, presets.Candidate) time.Duration) ([]engine.Engine, func(), error) {
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
		s, err := worker.NewSupervisor(worker.Command{Path: exe, Args: []string{"worker", "--gpu", strconv.Itoa(g)}}, 2*time.Minute, deadline)
		if err != nil {
			closeAll()
			msg := err.Error()
			if strings.Contains(msg, "no CUDA driver") || strings.Contains(msg, "no NVIDIA driver") || strings.Contains(msg, "exit status 3") {
				return nil, nil, fail(exitNoGPU, "GPU %d: %s", g, msg)
			}
			return nil, nil, fail(exitNoGPU, "GPU %d: worker: %s", g, msg)
		}
		sups = append(sups, s)
		engines = append(engines, s)
	}
	return engines, closeAll, nil
}
