package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"cgtune/engine/megatron"
	"cgtune/internal/setup"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/stepmodel"
)

// frameworkProbe is `cgtune probe --framework`: the framework profile of a
// model and layout, measured by the megatron engine on one GPU and cached
// for the emulating engines.
type frameworkProbe struct {
	model, preset, gpuType, mbridge, python string
	sets                                    []string
	maxLayers, maxMicroBatches              int
	// gpus: the profile is measured on the first; with more, the
	// collective exposure at the layout's usable rank count too.
	gpus []int
}

func (p frameworkProbe) run(ctx context.Context, out io.Writer) error {
	m, l, mb, err := p.modelLayout()
	if err != nil {
		return err
	}
	sets, err := parseSets(p.sets)
	if err != nil {
		return err
	}
	wopts, err := recipe.MoEWorkload(stepmodel.WorkloadOptions{}, m, l, mb, sets)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	w, err := stepmodel.BuildWorkload(m, l, wopts)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	py, err := megatron.FindPython(p.python)
	if err != nil {
		return fail(exitNoGPU, "probe --framework: %w", err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return fail(exitBadInput, "no user cache folder: %w", err)
	}
	gpus := p.gpus
	if len(gpus) == 0 {
		gpus = []int{0}
	}
	open := func(ranks []int) (*megatron.Engine, error) {
		return megatron.New(ctx, megatron.Options{Python: py, CacheDir: filepath.Join(cache, "cgtune", "megatron-worker"),
			GPUs: ranks, MaxLayers: p.maxLayers, MaxMicroBatches: p.maxMicroBatches,
			Deadline: func(*stepmodel.Workload, presets.Candidate) time.Duration { return setup.MegatronDeadline }})
	}
	e, err := open(gpus[:1])
	if err != nil && ctx.Err() != nil {
		return fail(exitInterrupted, "probe --framework: interrupted while the megatron worker started")
	} else if err != nil {
		return fail(exitNoGPU, "probe --framework: %w", err)
	}
	defer e.Close()
	fmt.Fprintf(out, "framework profile of %s (%s), %s\n", m.Name, stepmodel.LayoutKey(l), setup.FrameworkString(e))
	progress := func(line string) { fmt.Fprintln(out, "  "+line) }
	prof, err := e.MeasureProfile(ctx, w, progress)
	if err != nil {
		return fail(exitInvalid, "probe --framework: %w", err)
	}
	if ranks := setup.UsableRanks(l, len(gpus)); len(gpus) > 1 && ranks < 2 {
		fmt.Fprintf(out, "collective exposure: not measured (the layout's TP×EP = %d has no rank count that %d GPUs can run)\n", l.TPSize()*l.EPSize(), len(gpus))
	} else if ranks > 1 {
		p.measureExposure(ctx, out, e, open, gpus[:ranks], w, l, prof, progress)
	}
	dir, err := stepmodel.DefaultProfileDir()
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	path, err := stepmodel.SaveProfile(dir, prof)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	printProfile(out, prof)
	fmt.Fprintf(out, "saved %s\n", path)
	return nil
}

// measureExposure measures the collective exposure at world size
// len(ranks) and adds it to the profile; a failure is said and leaves the
// world-size-1 profile as it is.
func (p frameworkProbe) measureExposure(ctx context.Context, out io.Writer, one *megatron.Engine, open func([]int) (*megatron.Engine, error),
	ranks []int, w *stepmodel.Workload, l presets.Layout, prof *stepmodel.FrameworkProfile, progress func(string)) {
	many, err := open(ranks)
	if err != nil {
		fmt.Fprintf(out, "collective exposure at world size %d: not measured: %v\n", len(ranks), err)
		return
	}
	defer many.Close()
	// The ranks ran their collectives on this node's GPUs.
	rates, ok := stepmodel.SpecFor(one.Device().Name)
	if !ok {
		rates, _ = stepmodel.SpecFor(l.GPU)
	}
	rates = setup.WithMeasuredNCCL(rates, one.Device().Name)
	x, err := megatron.MeasureCollectives(ctx, one, many, w, rates, progress)
	if err != nil {
		fmt.Fprintf(out, "collective exposure at world size %d: not measured: %v\n", len(ranks), err)
		return
	}
	x.Source += " (rates: " + rates.Source + ")"
	megatron.AddExposure(prof, x)
}

func (p frameworkProbe) modelLayout() (presets.Model, presets.Layout, string, error) {
	mb := p.mbridge
	switch {
	case p.preset != "":
		tp, err := presets.NewStore(p.preset, "", "").LoadFile(p.preset)
		if err != nil {
			return presets.Model{}, presets.Layout{}, "", fail(exitBadInput, "%w", err)
		}
		m, err := tp.ResolveModel()
		if err != nil {
			return presets.Model{}, presets.Layout{}, "", fail(exitBadInput, "%s: %w", p.preset, err)
		}
		if tp.MBridge != "" {
			mb = tp.MBridge
		}
		return m, tp.Layout, mb, nil
	case p.model != "":
		m, err := presets.LookupModel(p.model)
		if err != nil {
			return presets.Model{}, presets.Layout{}, "", fail(exitBadInput, "%w", err)
		}
		l, err := m.Layout(p.gpuType)
		if err != nil {
			return presets.Model{}, presets.Layout{}, "", fail(exitBadInput, "%w", err)
		}
		return m, l, mb, nil
	}
	return presets.Model{}, presets.Layout{}, "", fail(exitBadInput, "probe --framework: give --model M or --preset FILE")
}

func printProfile(out io.Writer, p *stepmodel.FrameworkProfile) {
	fmt.Fprintf(out, "source: %s\nmeasured: %s\n", p.Source, p.MeasuredAt)
	for kind, l := range p.Layers {
		fmt.Fprintf(out, "%s layer, per layer and micro-batch: forward host %.3f ms GPU %.3f ms; backward host %.3f ms GPU %.3f ms\n",
			kind, l.EagerFwd.HostMs, l.EagerFwd.GPUMs, l.EagerBwd.HostMs, l.EagerBwd.GPUMs)
		for region, g := range l.Graphed {
			if g.CaptureError != "" {
				fmt.Fprintf(out, "  graphed %s: capture fails: %s\n", region, g.CaptureError)
				continue
			}
			fmt.Fprintf(out, "  graphed %s: replay host %.3f ms (the step's first %.3f ms more), GPU %.3f ms, graph %.0f MiB per layer\n",
				region, g.ReplayHostMs, g.FirstReplayHostMs, g.GPUMs, g.GraphMiB)
		}
	}
	fmt.Fprintf(out, "outside the layers, per micro-batch: forward host %.3f GPU %.3f ms, backward host %.3f GPU %.3f ms\n",
		p.OtherFwd.HostMs, p.OtherFwd.GPUMs, p.OtherBwd.HostMs, p.OtherBwd.GPUMs)
	if p.PreFwdHostMs > 0 || p.StepStart.HostMs > 0 {
		fmt.Fprintf(out, "  of the forward's host, before the first layer (lead-in): %.3f ms; step start (zeroing gradients): %.3f ms + %.3f ms per layer\n",
			p.PreFwdHostMs, p.StepStart.HostMs, p.StepStartPerLayer.HostMs)
	}
	fmt.Fprintf(out, "optimizer per step: %.3f ms + %.3f ms per layer; full iteration replay host %.3f ms/step, graph %.0f MiB per micro-batch\n",
		p.Optimizer.HostMs, p.OptimizerPerLayer.HostMs, p.FullIteration.ReplayHostMs, p.FullIteration.GraphMiBPerMicroBatch)
	if line := spreadLine(p.Spread); line != "" {
		fmt.Fprintln(out, line)
	}
	for _, c := range p.Collectives {
		fmt.Fprintf(out, "collective exposure at world size %d, per layer and micro-batch: eager %.3f ms, graphed %.3f ms (%s)\n",
			c.WorldSize, c.EagerExposedHostMsPerLayer, c.GraphedExposedHostMsPerLayer, c.Source)
	}
	for _, n := range p.Notes {
		fmt.Fprintln(out, "note: "+n)
	}
}

// spreadLine gives the framework's step spreads, in a fixed order; empty
// for a profile measured before they were kept.
func spreadLine(sp map[string]stepmodel.StepSpread) string {
	var parts []string
	for _, mode := range stepmodel.ProfileModes() {
		if s, ok := sp[mode]; ok {
			parts = append(parts, fmt.Sprintf("%s −%.1f%%/+%.1f%%", mode, 100*s.Below, 100*s.Above))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "step spread (p10/p90 around the median, the emulated runs' p10–p90 at least this): " + strings.Join(parts, ", ")
}
