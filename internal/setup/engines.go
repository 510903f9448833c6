package setup

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"cgtune/engine"
	"cgtune/engine/cuda"
	"cgtune/engine/estimate"
	"cgtune/engine/worker"
	"cgtune/presets"
	"cgtune/probes"
	"cgtune/search"
	"cgtune/stepmodel"
)

// Engine names, as --engine takes them.
const (
	EngineMegatron = "megatron"
	EngineCUDA     = "cuda"
	EngineEstimate = "estimate"
	EngineJob      = "job"
)

// Options are what a search's engines are opened with.
type Options struct {
	// Engine names the engine (Engine*); "" picks megatron where a GPU
	// and its worker start, else cuda where a GPU is, else estimate.
	Engine string
	// EstimateGPU is what the estimate engine estimates for; "": the
	// layout's GPU type (h100 when the spec table does not know it), or
	// with cuda the GPU the first worker measures on.
	EstimateGPU string
	GPUs        []int
	Profile     Profile
	// EstimateDelay slows every estimate-engine run (tests and demos of
	// an interrupted search need a search that takes time).
	EstimateDelay time.Duration
	Megatron      Megatron
	Job           Job
	// devices counts the node's GPUs (cuda.DeviceCount); tests of the
	// engines' start-up stand in for the driver with it.
	devices func() (int, error)
}

// deviceCount is the number of GPUs the driver sees.
func (o Options) deviceCount() (int, error) {
	if o.devices != nil {
		return o.devices()
	}
	return cuda.DeviceCount()
}

// Engines are a search's opened engines (in its Config) and what opening
// them had to say.
type Engines struct {
	// Engine is the engine opened (Engine*): Options.Engine, or the one
	// picked for it.
	Engine  string
	Notices []string // lines for the person: the engine chosen, estimates, ...
	close   func()
}

// Close stops the engines (worker processes, the megatron workers).
func (e *Engines) Close() {
	if e != nil && e.close != nil {
		e.close()
	}
}

func (e *Engines) notice(format string, args ...any) {
	e.Notices = append(e.Notices, fmt.Sprintf(format, args...))
}

// Open opens the engines o names for the search cfg describes and sets
// cfg.Engines and cfg.Estimator: one cuda worker per GPU, one in-process
// estimate engine per GPU, the megatron engine per group of ranks, or the
// job engine. cfg is kept: the job engine reads its run folder when its
// first job starts. On an error nothing is left open. Cancelling ctx stops
// the workers' start (a megatron worker's imports can take minutes) with
// an error that wraps ctx's cause.
func Open(ctx context.Context, cfg *search.Config, o Options) (*Engines, error) {
	if _, err := o.Profile.Adjust(); err != nil { // before any worker starts: bad input, not a worker failure
		return nil, err
	}
	e := &Engines{Engine: o.Engine, close: func() {}}
	if e.Engine == "" {
		opened, err := e.openDefault(ctx, cfg, o)
		if err != nil {
			e.Close()
			return nil, err
		}
		if opened {
			if cfg.Costs, err = o.Profile.costModel(e.Engine, cfg); err != nil {
				e.Close()
				return nil, err
			}
			return e, nil
		}
	}
	estGPU := o.EstimateGPU
	if estGPU == "" {
		var note string
		if estGPU, note = EstimateGPU(cfg.Layout.GPU); note != "" {
			e.Notices = append(e.Notices, note)
		}
	}
	if why := stepmodel.SpecStandIn(estGPU); why != "" && e.Engine == EngineEstimate {
		e.Notices = append(e.Notices, why)
	}
	costs, err := o.Profile.costModel(e.Engine, cfg)
	if err != nil {
		return nil, err
	}
	if e.Engine == EngineEstimate || o.EstimateGPU != "" {
		costs.EstimateGPU = estGPU
	}
	cfg.Costs = costs
	switch e.Engine {
	case EngineEstimate:
		if err = e.openEstimate(cfg, o, estGPU); err == nil {
			// The first line says what every figure is: an estimate, on
			// a framework profile or a lower bound without one.
			e.Notices = append([]string{fmt.Sprintf("results are ESTIMATED for %s by the estimate engine, not measured on a GPU; %s",
				estGPU, ProfileNotice(cfg.Model, cfg.Layout, estGPU))}, e.Notices...)
		}
	case EngineCUDA:
		err = e.openCUDA(ctx, cfg, o, estGPU)
	case EngineMegatron:
		err = e.openMegatron(ctx, cfg, o)
	case EngineJob:
		err = e.openJob(cfg, o)
	default:
		err = fmt.Errorf("--engine %q: allowed: megatron, cuda, estimate, job", e.Engine)
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	if e.Engine == EngineEstimate || e.Engine == EngineCUDA {
		e.Notices = append(e.Notices, o.Profile.Unapplied(cfg.Model, cfg.Layout, estGPU)...)
	}
	return e, nil
}

// EstimateGPU is what the estimate engine estimates for when nothing
// names it: the layout's GPU type, or h100 with a notice where the spec
// table does not know it.
func EstimateGPU(layoutGPU string) (gpu, notice string) {
	if _, ok := stepmodel.SpecFor(layoutGPU); ok {
		return layoutGPU, ""
	}
	return "h100", fmt.Sprintf("no spec for GPU type %q: estimates use the h100 rates (give --estimate-gpu %s)", layoutGPU, strings.Join(stepmodel.SpecNames(), "|"))
}

// openEstimate opens one in-process estimate engine per GPU, and one more
// as the estimator.
func (e *Engines) openEstimate(cfg *search.Config, o Options, estGPU string) error {
	for range o.GPUs {
		eng, err := EstimateEngine(estGPU, o.Profile)
		if err != nil {
			return err
		}
		if o.EstimateDelay > 0 {
			eng = delayed{eng, o.EstimateDelay}
		}
		cfg.Engines = append(cfg.Engines, eng)
	}
	est, err := EstimateEngine(estGPU, o.Profile)
	if err != nil {
		return err
	}
	cfg.Estimator = est
	return nil
}

// openCUDA starts one cuda worker per GPU; the estimator is for the GPU
// the first worker reports unless o names one.
func (e *Engines) openCUDA(ctx context.Context, cfg *search.Config, o Options, estGPU string) error {
	if n, err := o.deviceCount(); err != nil {
		return noGPUf("%w (--engine estimate estimates without a GPU)", err)
	} else if bad := slices.IndexFunc(o.GPUs, func(g int) bool { return g >= n }); bad >= 0 {
		return noGPUf("--gpu %d: this node has %d GPU(s)", o.GPUs[bad], n)
	}
	// The workers' deadlines come from the estimator, which is for the
	// GPU the first worker reports; it is set before any run starts.
	var est engine.Engine
	engines, closeAll, err := WorkerSupervisors(ctx, o.GPUs, o.Profile, func(w *stepmodel.Workload, c presets.Candidate) time.Duration {
		return search.DeadlineFor(est)(w, c)
	})
	if err != nil {
		return err
	}
	e.close = closeAll
	if o.EstimateGPU == "" {
		estGPU = engines[0].Device().Name
	}
	if eng, err := EstimateEngine(estGPU, o.Profile); err == nil {
		est = eng
		cfg.Estimator = eng
	} else {
		e.notice("no estimate for %s (%v): candidates run in plan order, deadlines are 10 minutes", estGPU, err)
	}
	cfg.Engines = engines
	return nil
}

// delayed slows an engine by a fixed time per candidate (EstimateDelay)
// and honours cancellation while it waits.
type delayed struct {
	engine.Engine
	d time.Duration
}

func (e delayed) Run(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	select {
	case <-time.After(e.d):
	case <-ctx.Done():
		return engine.Result{Candidate: c, Source: engine.SourceEstimated, Device: e.Device(), Err: ctx.Err().Error(), ErrKind: engine.FailureCancel}
	}
	r := e.Engine.Run(ctx, w, c, opts, emit)
	r.WallMs += float64(e.d.Milliseconds())
	return r
}

// EstimateEngine is the estimate engine for gpu: cached probe results of
// a matching GPU if this machine measured one, else the spec table; with
// the framework profiles cached for that GPU.
func EstimateEngine(gpu string, prof Profile) (engine.Engine, error) {
	costs, err := prof.Source(gpu)
	if err != nil {
		return nil, err
	}
	if dir, err := probes.DefaultCacheDir(); err == nil {
		if rep, ok := probes.FindCached(dir, gpu); ok {
			dev := rep.Device
			dev.Name += " (estimated from cached probes)"
			return Estimate(WithMeasuredNCCL(rep.Rates, rep.Device.Name), rep.Host, dev, costs), nil
		}
	}
	r, ok := stepmodel.SpecFor(gpu)
	if !ok {
		return nil, fmt.Errorf("--estimate-gpu %q: allowed: %s", gpu, strings.Join(stepmodel.SpecNames(), ", "))
	}
	name := strings.TrimPrefix(r.Source, "spec table: ") + " (estimated)"
	return Estimate(WithMeasuredNCCL(r, gpu), stepmodel.DefaultHostCosts(), engine.DeviceInfo{Name: name}, costs), nil
}

// Estimate is the estimate engine with these rates, host costs and cost
// source, for the device dev names; a stage that does not fit the GPU
// runs as a slice of its layers, as the megatron engine builds one
// (engine.SliceWhenTooBig).
func Estimate(rates stepmodel.Rates, host stepmodel.HostCosts, dev engine.DeviceInfo, costs stepmodel.CostSource) engine.Engine {
	return engine.SliceWhenTooBig(estimate.New(rates, host, dev).WithCosts(costs))
}

// WithMeasuredNCCL is rates with the NVLink bandwidth and collective
// latency of the NCCL probe cached for a GPU named like gpu, where there
// is one (the source says so); else rates as they are.
func WithMeasuredNCCL(rates stepmodel.Rates, gpu string) stepmodel.Rates {
	dir, err := probes.DefaultCacheDir()
	if err != nil {
		return rates
	}
	if r, ok := probes.FindNCCL(dir, gpu); ok {
		return probes.WithNCCL(rates, r)
	}
	return rates
}

// WorkerSupervisors starts one `cgtune worker` per GPU: this executable,
// whose worker subcommand runs the cuda engine on one GPU.
func WorkerSupervisors(ctx context.Context, gpus []int, prof Profile, deadline func(*stepmodel.Workload, presets.Candidate) time.Duration) ([]engine.Engine, func(), error) {
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
		s, err := worker.NewSupervisor(ctx, worker.Command{Path: exe, Args: append([]string{"worker", "--gpu", strconv.Itoa(g)}, prof.Args()...)}, 2*time.Minute, deadline)
		if err != nil {
			closeAll()
			msg := err.Error()
			if strings.Contains(msg, "no CUDA driver") || strings.Contains(msg, "no NVIDIA driver") || strings.Contains(msg, "exit status 3") {
				return nil, nil, noGPUf("GPU %d: %w", g, err)
			}
			return nil, nil, noGPUf("GPU %d: worker: %w", g, err)
		}
		sups = append(sups, s)
		// A stage that does not fit this GPU runs as a slice of its
		// layers, as the megatron engine builds one.
		engines = append(engines, engine.SliceWhenTooBig(s))
	}
	return engines, closeAll, nil
}
