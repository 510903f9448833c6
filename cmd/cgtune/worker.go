package main

import (
	"context"
	"fmt"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"cgtune/engine"
	"cgtune/engine/cuda"
	"cgtune/engine/worker"
	"cgtune/internal/setup"
	"cgtune/probes"
	"cgtune/stepmodel"
)

func newWorkerCmd() *cobra.Command {
	var (
		gpu         int
		engineName  string
		estimateGPU string
		prof        setup.Profile
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
	registerProfileFlags(cmd, &prof)
	return cmd
}

// openLocalEngine opens an engine in this process: the CUDA engine with
// the GPU's probe results (cached, or measured now), or the estimate
// engine for a GPU of the spec table (or cached probes of one); both with
// the framework profiles cached for this GPU and the user's adjustments.
func openLocalEngine(ctx context.Context, name string, gpu int, estimateGPU string, prof setup.Profile, log interface{ Write([]byte) (int, error) }) (engine.Engine, error) {
	switch name {
	case "cuda":
		costs, err := prof.Source("")
		if err != nil {
			return nil, err
		}
		rep, err := probeGPU(ctx, gpu, probes.Options{}, false, "")
		if err != nil {
			return nil, err
		}
		rates := setup.WithMeasuredNCCL(rep.Rates, rep.Device.Name)
		eng, err := cuda.New(cuda.Options{Ordinal: gpu, Rates: rates, Host: rep.Host, Costs: costs})
		if err != nil {
			return nil, gpuError(err)
		}
		costs.GPU = eng.Device().Name
		fmt.Fprintf(log, "worker: GPU %d %s, rates from %s; host costs: a framework profile from %s where one is cached for the model and layout, else %s\n",
			gpu, eng.Device().Name, rates.Source, costs.Dir, prof.Describe(rep.Host.Source))
		return eng, nil
	case "estimate":
		return setup.EstimateEngine(estimateGPU, prof)
	}
	return nil, fail(exitBadInput, "--engine %q: allowed: cuda, estimate", name)
}

// registerProfileFlags gives cmd the flags that scale or override the
// emulation's host and GPU costs (docs/reference.md: "Adjusting the costs").
func registerProfileFlags(cmd *cobra.Command, p *setup.Profile) {
	fl := cmd.Flags()
	fl.StringVar(&p.Scale, "profile-scale", "", "scale the emulation's costs: host=F and/or gpu=F (e.g. host=1.3), F from 0.01 to 100")
	fl.StringVar(&p.File, "profile-file", "", "YAML FILE that scales or overrides the framework profile (host_scale, gpu_scale, per-region values; docs/reference.md)")
}
