package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"cgtune/engine"
	"cgtune/engine/cuda"
	"cgtune/engine/megatron"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
	"cgtune/stepmodel"
)

// megatronDeadline bounds one framework candidate: model build, the eager
// baseline and the measured steps (the estimator's emulated time says
// nothing about the framework's own speed).
const megatronDeadline = 15 * time.Minute

// detectFramework asks the node's Python what it imports (10–15 s).
// megatronWorkerLog is the megatron worker's stderr, kept in the run folder.
const megatronWorkerLog = "megatron-worker.log"

func detectFramework(ctx context.Context, pythonFlag string) (megatron.Framework, error) {
	py, err := megatron.FindPython(pythonFlag)
	if err != nil {
		return megatron.Framework{}, err
	}
	return megatron.Check(ctx, py)
}

// defaultEngine is megatron where a GPU and an importable Megatron-Core
// are, else cuda where a GPU is, else estimate; why says why.
func defaultEngine(ctx context.Context, pythonFlag string) (name, why string) {
	n, err := cuda.DeviceCount()
	if err != nil || n == 0 {
		if err == nil {
			err = fmt.Errorf("no GPU")
		}
		return "estimate", fmt.Sprintf("%v: using the estimate engine (computed, not measured)", err)
	}
	fw, err := detectFramework(ctx, pythonFlag)
	if err != nil {
		return "cuda", fmt.Sprintf("Megatron-Core not checked (%v): using the cuda engine (emulation)", err)
	}
	if ok, miss := fw.Usable(); !ok {
		return "cuda", fmt.Sprintf("Megatron-Core %s: using the cuda engine (emulation)", miss)
	}
	return "megatron", "measuring on the real framework: " + fw.String()
}

// openDefaultMegatron picks the engine when --engine is not given:
// megatron where there is a GPU and its worker starts (the start is the
// check: the worker says what it could not import, and the framework is
// imported once, not twice), else cuda where there is a GPU, else
// estimate. It reports whether it opened the megatron engines; otherwise
// f.engine names the engine to open.
func (f *rootFlags) openDefaultMegatron(s *searchSetup, gpus []int) (bool, error) {
	n, err := cuda.DeviceCount()
	if err != nil || n == 0 {
		if err == nil {
			err = fmt.Errorf("no GPU")
		}
		f.engine = "estimate"
		s.notices = append(s.notices, fmt.Sprintf("engine estimate: %v: using the estimate engine (computed, not measured)", err))
		return false, nil
	}
	if err := f.openMegatron(context.Background(), s, gpus); err != nil {
		// Bad input (e.g. --ranks) is an error; a framework that cannot
		// start here means the emulation measures instead.
		var ee *exitError
		if errors.As(err, &ee) && ee.code != exitNoGPU {
			return false, err
		}
		s.cfg.Engines, s.close = nil, func() {}
		f.engine = "cuda"
		s.notices = append(s.notices, fmt.Sprintf("engine cuda: Megatron-Core could not start (%v): using the cuda engine (emulation)", err))
		return false, nil
	}
	f.engine = "megatron"
	return true, nil
}

// openMegatron starts one megatron engine per group of `ranks` GPUs; each
// runs a candidate's per-rank slice at world size `ranks`. Candidates the
// framework cannot run go to a cuda (or estimate) engine started on first
// use.
func (f *rootFlags) openMegatron(ctx context.Context, s *searchSetup, gpus []int) error {
	// The worker's own start checks the imports (torch with CUDA,
	// megatron.core) and says what is missing; no separate check costs
	// another 10–15 s import here.
	py, err := megatron.FindPython(f.python)
	if err != nil {
		return fail(exitNoGPU, "--engine megatron: %v", err)
	}
	if n, err := cuda.DeviceCount(); err != nil {
		return fail(exitNoGPU, "--engine megatron: %v", err)
	} else if bad := slices.IndexFunc(gpus, func(g int) bool { return g >= n }); bad >= 0 {
		return fail(exitNoGPU, "--gpu %d: this node has %d GPU(s)", gpus[bad], n)
	}
	ranks := f.ranks
	if ranks <= 0 {
		ranks = usableRanks(s.cfg.Layout, len(gpus))
	}
	if ranks > len(gpus) || len(gpus)%ranks != 0 {
		return fail(exitBadInput, "--ranks %d: give a multiple of it as --gpu (have %d GPUs)", ranks, len(gpus))
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return fail(exitBadInput, "no user cache folder for the megatron worker: %v", err)
	}
	rates, ok := stepmodel.SpecFor(s.cfg.Layout.GPU)
	if !ok {
		rates, _ = stepmodel.SpecFor("h100")
	}
	rates = withMeasuredNCCL(rates, s.cfg.Layout.GPU)
	var closers []func() error
	logDir := s.cfg.RunDir
	if logDir == "" {
		logDir = f.runDir
	}
	if logDir == "" {
		logDir = filepath.Join(cache, "cgtune")
	}
	var log *os.File
	if err := os.MkdirAll(logDir, 0o700); err == nil {
		if log, err = os.OpenFile(filepath.Join(logDir, megatronWorkerLog), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
			closers = append(closers, log.Close)
		}
	}
	for i := 0; i < len(gpus); i += ranks {
		// Each group's fallback runs on the group's first GPU: engines run
		// candidates at once, and one worker serves one candidate at a time.
		first := gpus[i]
		fallback := &lazyEngine{what: "fallback engine", open: func() (engine.Engine, error) { return f.fallbackEngine(first) }}
		closers = append(closers, fallback.Close)
		e, err := megatron.New(megatron.Options{
			Python: py, CacheDir: filepath.Join(cache, "cgtune", "megatron-worker"),
			GPUs: gpus[i : i+ranks], MaxLayers: f.maxLayers, MaxMicroBatches: f.maxMicroBatches,
			Rates: rates, Fallback: fallback, Log: logWriter(log),
			Deadline: func(*stepmodel.Workload, presets.Candidate) time.Duration { return megatronDeadline },
		})
		if err != nil {
			for _, c := range closers {
				c()
			}
			return fail(exitNoGPU, "--engine megatron: GPU %v: %v", gpus[i:i+ranks], err)
		}
		closers = append([]func() error{e.Close}, closers...)
		s.cfg.Engines = append(s.cfg.Engines, e)
		for _, n := range e.Notes() {
			s.notices = append(s.notices, "megatron worker: "+n)
		}
	}
	s.close = func() {
		for _, c := range closers {
			c()
		}
	}
	if first, ok := s.cfg.Engines[0].(*megatron.Engine); ok && !f.skipProfile && first.WorldSize() == 1 {
		s.cfg.Prepare = profileFirst(first)
	}
	if est, err := estimateEngine(s.cfg.Layout.GPU, f.profile); err == nil {
		s.cfg.Estimator = est
	}
	s.notices = append(s.notices, fmt.Sprintf("engine megatron: %s; %d rank(s) per candidate on GPU %v", frameworkString(s.cfg.Engines[0]), ranks, gpus))
	return nil
}

// profiler measures framework profiles (the megatron engine).
type profiler interface {
	Device() engine.DeviceInfo
	MeasureProfile(ctx context.Context, w *stepmodel.Workload, emit func(string)) (*stepmodel.FrameworkProfile, error)
}

// profileFirst is a megatron search's preparation: where no framework
// profile of the workload's model and layout is cached for this GPU, it
// measures one, as `cgtune probe --framework` does, and saves it before
// the space is planned, so that the estimator orders the candidates with
// it and the emulating fallback is calibrated. Its eager runs at the
// built slice are the search's eager baseline too (the worker keeps the
// eager baseline of a slice), so the profile and the search's speed-ups
// share one eager measurement.
func profileFirst(e profiler) func(context.Context, *stepmodel.Workload, func(string)) error {
	return func(ctx context.Context, w *stepmodel.Workload, say func(string)) error {
		dir, err := stepmodel.DefaultProfileDir()
		if err != nil {
			return err
		}
		model, layout := stepmodel.ModelKey(w.Spec.Model), stepmodel.LayoutKey(w.Layout)
		if p, path, _ := stepmodel.FindProfile(dir, model, layout, e.Device().Name); p != nil {
			say("framework profile: cached, " + path)
			return nil
		}
		say("framework profile: none cached for this model, layout and GPU; measuring it first (--skip-profile does not)")
		prof, err := e.MeasureProfile(ctx, w, func(line string) { say("framework profile: " + line) })
		if err != nil {
			return fmt.Errorf("framework profile not measured: %w", err)
		}
		path, err := stepmodel.SaveProfile(dir, prof)
		if err != nil {
			return fmt.Errorf("framework profile not saved: %w", err)
		}
		say("framework profile: saved " + path)
		return nil
	}
}

// frameworkString describes the framework a megatron engine's worker
// reported when it started.
func frameworkString(e engine.Engine) string {
	m, ok := e.(*megatron.Engine)
	if !ok || m.Framework() == nil {
		return "megatron-core (versions not reported)"
	}
	return megatron.Describe(m.Framework())
}

// logWriter is f as a writer, or nil when there is no log file (a nil
// *os.File in an io.Writer would not be nil).
func logWriter(f *os.File) io.Writer {
	if f == nil {
		return nil
	}
	return f
}

// usableRanks is how many of n GPUs a candidate's slice can use: the
// largest count that divides n and the layout's TP×EP (the degrees the
// worker runs for real).
func usableRanks(l presets.Layout, n int) int {
	best := 1
	for r := 2; r <= n; r++ {
		if n%r == 0 && (l.TPSize()*l.EPSize())%r == 0 {
			best = r
		}
	}
	return best
}

// fallbackEngine measures what the framework cannot run: the cuda engine
// on the GPU where there is a driver, else the estimate engine.
func (f *rootFlags) fallbackEngine(gpu int) (engine.Engine, error) {
	engines, closeAll, err := workerSupervisors([]int{gpu}, f.profile, search.DeadlineFor(nil))
	if err == nil {
		return closingEngine{engines[0], closeAll}, nil
	}
	return estimateEngine("h100", f.profile)
}

type closingEngine struct {
	engine.Engine
	close func()
}

func (c closingEngine) Close() error { c.close(); return nil }

// lazyEngine opens its engine on first use: most searches never need a
// fallback, and the job engine's folder is known only once the search has
// claimed its run folder. what names it in errors; a name or device set
// here is reported without opening it.
type lazyEngine struct {
	open   func() (engine.Engine, error)
	what   string        // "fallback engine", "job engine"
	source engine.Source // the source of the result when it cannot open
	name   string
	device engine.DeviceInfo
	once   sync.Once
	e      engine.Engine
	err    error
}

func (l *lazyEngine) get() (engine.Engine, error) {
	l.once.Do(func() { l.e, l.err = l.open() })
	return l.e, l.err
}

func (l *lazyEngine) Name() string {
	if l.name != "" {
		return l.name
	}
	if e, err := l.get(); err == nil {
		return e.Name()
	}
	return l.what
}

func (l *lazyEngine) Device() engine.DeviceInfo {
	if l.device.Name != "" {
		return l.device
	}
	if e, err := l.get(); err == nil {
		return e.Device()
	}
	return engine.DeviceInfo{}
}

func (l *lazyEngine) Run(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, o engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	e, err := l.get()
	if err != nil {
		return engine.Result{Candidate: c, Source: l.source, Err: l.what + ": " + err.Error(), ErrKind: engine.FailureCrash}
	}
	return e.Run(ctx, w, c, o, emit)
}

func (l *lazyEngine) Close() error {
	if l.e != nil {
		return l.e.Close()
	}
	return nil
}

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
		return fail(exitBadInput, "%v", err)
	}
	w, err := stepmodel.BuildWorkload(m, l, wopts)
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	py, err := megatron.FindPython(p.python)
	if err != nil {
		return fail(exitNoGPU, "probe --framework: %v", err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return fail(exitBadInput, "no user cache folder: %v", err)
	}
	gpus := p.gpus
	if len(gpus) == 0 {
		gpus = []int{0}
	}
	open := func(ranks []int) (*megatron.Engine, error) {
		return megatron.New(megatron.Options{Python: py, CacheDir: filepath.Join(cache, "cgtune", "megatron-worker"),
			GPUs: ranks, MaxLayers: p.maxLayers, MaxMicroBatches: p.maxMicroBatches,
			Deadline: func(*stepmodel.Workload, presets.Candidate) time.Duration { return megatronDeadline }})
	}
	e, err := open(gpus[:1])
	if err != nil {
		return fail(exitNoGPU, "probe --framework: %v", err)
	}
	defer e.Close()
	fmt.Fprintf(out, "framework profile of %s (%s), %s\n", m.Name, stepmodel.LayoutKey(l), frameworkString(e))
	progress := func(line string) { fmt.Fprintln(out, "  "+line) }
	prof, err := e.MeasureProfile(ctx, w, progress)
	if err != nil {
		return fail(exitInvalid, "probe --framework: %v", err)
	}
	if ranks := usableRanks(l, len(gpus)); len(gpus) > 1 && ranks < 2 {
		fmt.Fprintf(out, "collective exposure: not measured (the layout's TP×EP = %d has no rank count that %d GPUs can run)\n", l.TPSize()*l.EPSize(), len(gpus))
	} else if ranks > 1 {
		p.measureExposure(ctx, out, e, open, gpus[:ranks], w, l, prof, progress)
	}
	dir, err := stepmodel.DefaultProfileDir()
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	path, err := stepmodel.SaveProfile(dir, prof)
	if err != nil {
		return fail(exitBadInput, "%v", err)
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
	rates = withMeasuredNCCL(rates, one.Device().Name)
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
			return presets.Model{}, presets.Layout{}, "", fail(exitBadInput, "%v", err)
		}
		m, err := tp.ResolveModel()
		if err != nil {
			return presets.Model{}, presets.Layout{}, "", fail(exitBadInput, "%s: %v", p.preset, err)
		}
		if tp.MBridge != "" {
			mb = tp.MBridge
		}
		return m, tp.Layout, mb, nil
	case p.model != "":
		m, err := presets.LookupModel(p.model)
		if err != nil {
			return presets.Model{}, presets.Layout{}, "", fail(exitBadInput, "%v", err)
		}
		l, err := m.Layout(p.gpuType)
		if err != nil {
			return presets.Model{}, presets.Layout{}, "", fail(exitBadInput, "%v", err)
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
