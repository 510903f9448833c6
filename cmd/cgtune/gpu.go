package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"cgtune/engine/cuda"
	"cgtune/engine/megatron"
	"cgtune/probes"
	"cgtune/search"
)

// gpuError maps driver errors to exit code 3 with the driver's message.
func gpuError(err error) error {
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoNVML) {
		return fail(exitNoGPU, "%w", err)
	}
	return fail(exitNoGPU, "GPU: %w", err)
}

func newGPUsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "gpus",
		Short: "List the NVIDIA GPUs: memory, utilisation, other processes, driver and CUDA version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := cuda.OpenNVML()
			if err != nil {
				return gpuError(err)
			}
			defer n.Close()
			count, err := n.Count()
			if err != nil {
				return gpuError(err)
			}
			driver, cudaVersion := n.Driver()
			var gpus []cuda.GPUStatus
			for i := 0; i < count; i++ {
				st, err := n.Status(i)
				if err != nil {
					return gpuError(err)
				}
				gpus = append(gpus, st)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(map[string]any{"driver": driver, "cuda": cudaVersion, "gpus": gpus})
			}
			fmt.Fprintf(out, "driver %s, CUDA %s, %d GPU(s)\n", driver, cudaVersion, count)
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "INDEX\tNAME\tMEMORY USED/TOTAL\tUTIL\tOTHER PROCESSES")
			for _, g := range gpus {
				fmt.Fprintf(tw, "%d\t%s\t%d / %d MiB\t%d%%\t%s\n", g.Index, g.Name, g.UsedMiB, g.TotalMiB, g.UtilGPU, processList(g.Processes))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func processList(ps []cuda.ProcessUse) string {
	if len(ps) == 0 {
		return "none"
	}
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%d %s (%d MiB)", p.PID, p.Name, p.UsedMiB))
	}
	return strings.Join(parts, ", ")
}

// probeFlags are probe's flags; run measures what they ask for.
type probeFlags struct {
	gpuList                  string
	asJSON, refresh, launch  bool
	python, cublas, cacheDir string
	framework, nccl          bool
	fp                       frameworkProbe
}

func newProbeCmd() *cobra.Command {
	p := &probeFlags{}
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Measure launch and graph costs, bandwidth, matrix rate and framework host cost on a GPU",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return p.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&p.gpuList, "gpu", "0", "GPU index (with --nccl: the GPUs measured together, comma-separated; default every GPU)")
	f.BoolVar(&p.nccl, "nccl", false, "measure NCCL bus bandwidth and latency (all-reduce, all-gather, reduce-scatter, all-to-all, send/recv) over the GPUs; plain probe does it too when more than one GPU is visible")
	f.BoolVar(&p.asJSON, "json", false, "print JSON")
	f.BoolVar(&p.refresh, "refresh", false, "measure again instead of using the cached results")
	f.BoolVar(&p.launch, "launch-only", false, "only the launch and graph-node probes (not cached)")
	f.StringVar(&p.python, "python", "", `Python with PyTorch for the host-cost probe ("-" to skip)`)
	f.StringVar(&p.cublas, "cublas", "", "cuBLAS library for the matrix-rate probe (default: search)")
	f.StringVar(&p.cacheDir, "cache-dir", "", "probe cache folder (default: the user cache folder)")
	f.BoolVar(&p.framework, "framework", false, "measure the framework profile of --model/--preset on the installed Megatron-Core (cached for the cuda and estimate engines); with --gpu 0,1,... also the collective exposure at the layout's rank count")
	f.StringVar(&p.fp.model, "model", "", "with --framework: built-in model")
	f.StringVar(&p.fp.preset, "preset", "", "with --framework: team preset FILE (model and layout)")
	f.StringVar(&p.fp.gpuType, "gpu-type", "h100", "with --framework and --model: whose layout")
	f.StringVar(&p.fp.mbridge, "mbridge", search.DefaultMBridge, "with --framework: Megatron-Bridge version")
	f.StringArrayVar(&p.fp.sets, "set", nil, "with --framework: recipe override KEY=VALUE (e.g. drop-and-pad MoE)")
	f.IntVar(&p.fp.maxLayers, "max-layers", megatron.DefaultMaxLayers, "with --framework: layers built at most; the profile is fitted from runs at 1 and at this many of the stage's layers (the megatron engine's --max-layers)")
	f.IntVar(&p.fp.maxMicroBatches, "max-microbatches", megatron.DefaultMaxMicroBatches, "with --framework: micro-batches per step run")
	return cmd
}

// run measures the framework profile (--framework), the collectives
// (--nccl), or the GPU's own costs.
func (p *probeFlags) run(cmd *cobra.Command) error {
	var gpus []int // nil: the default (GPU 0; every GPU for NCCL)
	if cmd.Flags().Changed("gpu") {
		var err error
		if gpus, err = parseGPUs(p.gpuList); err != nil {
			return err
		}
	}
	out := cmd.OutOrStdout()
	np := ncclProbe{gpus: gpus, python: p.python, refresh: p.refresh, cacheDir: p.cacheDir}
	switch {
	case p.framework:
		if err := checkMegatronLimits(p.fp.maxLayers, p.fp.maxMicroBatches); err != nil {
			return err
		}
		p.fp.gpus, p.fp.python = gpus, p.python
		return p.fp.run(cmd.Context(), out)
	case p.nccl:
		rep, err := np.run(cmd.Context())
		if err != nil {
			return err
		}
		if p.asJSON {
			return json.NewEncoder(out).Encode(rep)
		}
		printNCCL(out, rep)
		return nil
	}
	first := 0
	if len(gpus) > 0 {
		first = gpus[0]
	}
	return p.probeDevice(cmd.Context(), out, first, np)
}

// probeDevice measures GPU first's costs (launch-only with --launch-only)
// and, with more than one GPU visible, the collectives too: a failure
// there leaves the spec table's figures and says why.
func (p *probeFlags) probeDevice(ctx context.Context, out io.Writer, first int, np ncclProbe) error {
	rep, err := probeGPU(ctx, first, probes.Options{Python: p.python, CuBLAS: p.cublas, LaunchOnly: p.launch}, p.refresh, p.cacheDir)
	if err != nil {
		return err
	}
	if p.asJSON && p.launch {
		return json.NewEncoder(out).Encode(map[string]float64{
			"launch_us": rep.Rates.LaunchUs, "graph_node_us": rep.Rates.GraphNodeUs, "graph_launch_us": rep.Rates.GraphLaunchUs,
			"kernel_us": rep.Rates.KernelUs})
	}
	var nr *probes.NCCLReport
	var nerr error
	if !p.launch && p.python != "-" && np.several() {
		if r, err := np.run(ctx); err == nil {
			nr = &r
		} else {
			nerr = err
		}
	}
	if p.asJSON {
		return json.NewEncoder(out).Encode(struct {
			probes.Report
			NCCL *probes.NCCLReport `json:"nccl,omitempty"`
		}{rep, nr})
	}
	printProbe(out, rep)
	switch {
	case nr != nil:
		fmt.Fprintln(out)
		printNCCL(out, *nr)
	case nerr != nil:
		fmt.Fprintf(out, "\nNCCL probe failed (%v): collectives keep the spec table's NVLink figure\n", nerr)
	}
	return nil
}

// probeGPU opens the CUDA engine on gpu and returns cached or fresh probes.
func probeGPU(ctx context.Context, gpu int, opts probes.Options, refresh bool, cacheDir string) (probes.Report, error) {
	eng, err := cuda.New(cuda.Options{Ordinal: gpu})
	if err != nil {
		return probes.Report{}, gpuError(err)
	}
	defer eng.Close()
	if cacheDir == "" {
		cacheDir, _ = probes.DefaultCacheDir()
	}
	if !refresh && !opts.LaunchOnly && cacheDir != "" {
		if rep, ok := probes.LoadCached(cacheDir, eng.Device()); ok {
			return rep, nil
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	rep, err := probes.Run(ctx, eng, opts)
	if err != nil {
		return rep, gpuError(err)
	}
	if !opts.LaunchOnly && cacheDir != "" {
		_ = probes.SaveCached(cacheDir, rep) // a read-only cache only costs a re-measure
	}
	return rep, nil
}

func printProbe(out io.Writer, rep probes.Report) {
	d := rep.Device
	fmt.Fprintf(out, "GPU %d: %s, %d SMs, %d MiB, driver %s, CUDA %s\n", d.Index, d.Name, d.SMs, d.MemoryMiB, d.Driver, d.CUDA)
	when := "measured " + rep.MeasuredAt.Format("2006-01-02 15:04 MST")
	if rep.Cached {
		when += " (cached; --refresh to measure again)"
	}
	fmt.Fprintln(out, when)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROBE\tVALUE\tSOURCE")
	for _, it := range rep.Items {
		fmt.Fprintf(tw, "%s\t%.2f %s\t%s\n", it.Name, it.Value, it.Unit, it.Source)
	}
	tw.Flush()
}
