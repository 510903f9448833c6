package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"cgtune/engine"
	"cgtune/engine/cuda"
	"cgtune/engine/megatron"
	"cgtune/probes"
)

// ncclProbe is `cgtune probe --nccl` (and the NCCL part of a plain probe
// on a node with several GPUs): bus bandwidth and latency of the
// collectives over the GPUs, cached next to the per-GPU probes.
type ncclProbe struct {
	gpus     []int // nil: every visible GPU
	python   string
	refresh  bool
	cacheDir string
}

// several reports whether the probe has two or more GPUs to measure.
func (p ncclProbe) several() bool {
	if len(p.gpus) > 0 {
		return len(p.gpus) > 1
	}
	n, err := cuda.DeviceCount()
	return err == nil && n > 1
}

func (p ncclProbe) run(ctx context.Context) (probes.NCCLReport, error) {
	if len(p.gpus) == 1 {
		return probes.NCCLReport{}, fail(exitBadInput, "--nccl --gpu %d: give two or more GPUs (e.g. --gpu 0,1), or none for every GPU", p.gpus[0])
	}
	nv, err := cuda.OpenNVML()
	if err != nil {
		return probes.NCCLReport{}, gpuError(err)
	}
	defer nv.Close()
	count, err := nv.Count()
	if err != nil {
		return probes.NCCLReport{}, gpuError(err)
	}
	gpus := p.gpus
	if gpus == nil {
		for i := range count {
			gpus = append(gpus, i)
		}
	}
	if bad := slices.IndexFunc(gpus, func(g int) bool { return g >= count }); bad >= 0 {
		return probes.NCCLReport{}, fail(exitNoGPU, "--gpu %d: this node has %d GPU(s)", gpus[bad], count)
	}
	if len(gpus) < 2 {
		return probes.NCCLReport{}, fail(exitNoGPU, "--nccl: this node has %d GPU(s); the NCCL probe needs two or more", count)
	}
	st, err := nv.Status(gpus[0])
	if err != nil {
		return probes.NCCLReport{}, gpuError(err)
	}
	driver, _ := nv.Driver()
	dev := engine.DeviceInfo{Index: gpus[0], Name: st.Name, Driver: driver, MemoryMiB: st.TotalMiB}
	dir := p.cacheDir
	if dir == "" {
		dir, _ = probes.DefaultCacheDir()
	}
	if !p.refresh && dir != "" {
		if r, ok := probes.LoadNCCL(dir, dev, gpus); ok {
			return r, nil
		}
	}
	py, err := megatron.FindPython(p.python)
	if err != nil {
		return probes.NCCLReport{}, fail(exitNoGPU, "--nccl: %w", err)
	}
	r, err := probes.RunNCCL(ctx, py, gpus, dev)
	if err != nil {
		return probes.NCCLReport{}, fail(exitNoGPU, "%w", err)
	}
	if dir != "" {
		_ = probes.SaveNCCL(dir, r) // a read-only cache only costs a re-measure
	}
	return r, nil
}

// printNCCL is the NCCL report: the source, each collective's bus
// bandwidth per message size and its latency, and what the engines take.
func printNCCL(out io.Writer, r probes.NCCLReport) {
	list := make([]string, len(r.GPUs))
	for i, g := range r.GPUs {
		list[i] = strconv.Itoa(g)
	}
	when := "measured " + r.MeasuredAt.Format("2006-01-02 15:04 MST")
	if r.Cached {
		when += " (cached; --refresh to measure again)"
	}
	fmt.Fprintf(out, "NCCL over GPUs %s (%s, driver %s), %s\nsource: %s (nccl-tests bus bandwidth, %s, slowest rank)\n",
		strings.Join(list, ","), r.Device.Name, r.Device.Driver, when, r.Source(), r.DType)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	var sizes []int64
	if len(r.Ops) > 0 {
		for _, p := range r.Ops[0].Points {
			sizes = append(sizes, p.Bytes)
		}
	}
	head := []string{"COLLECTIVE"}
	for _, b := range sizes {
		head = append(head, "BUS GB/s @"+fmtBytes(b))
	}
	fmt.Fprintln(tw, strings.Join(append(head, "LATENCY"), "\t"))
	for _, o := range r.Ops {
		row := []string{o.Op}
		for i := range sizes {
			if i < len(o.Points) {
				row = append(row, fmt.Sprintf("%.1f", o.Points[i].BusGBps))
			} else {
				row = append(row, "-")
			}
		}
		fmt.Fprintln(tw, strings.Join(append(row, fmt.Sprintf("%.1f us", o.LatencyUs)), "\t"))
	}
	tw.Flush()
	fmt.Fprintf(out, "engines take: NVLink bandwidth %.1f GB/s, collective latency %.1f us (all-gather and reduce-scatter) instead of the spec table's\n",
		r.LinkGBps(), r.LatencyUs())
}

func fmtBytes(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dG", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dM", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%dK", b>>10)
	}
	return fmt.Sprintf("%dB", b)
}
