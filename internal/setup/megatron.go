package setup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"cgtune/engine"
	"cgtune/engine/cuda"
	"cgtune/engine/megatron"
	"cgtune/internal/fileio"
	"cgtune/presets"
	"cgtune/search"
	"cgtune/stepmodel"
)

// Megatron configures the megatron engine.
type Megatron struct {
	Python string // the Python to run the worker with ("": found on PATH)
	// Ranks is the GPUs per candidate (0: as many of the GPUs as the
	// layout's TP×EP can use).
	Ranks                      int
	MaxLayers, MaxMicroBatches int
	// SkipProfile: the search does not measure the framework profile
	// first when none is cached.
	SkipProfile bool
	// LogDir is where the worker's log goes when the search has no run
	// folder yet ("": the user cache folder).
	LogDir string
}

// MegatronDeadline bounds one framework candidate: model build, the eager
// baseline and the measured steps (the estimator's emulated time says
// nothing about the framework's own speed).
const MegatronDeadline = 15 * time.Minute

// MegatronWorkerLog is the megatron worker's stderr, kept in the run folder.
const MegatronWorkerLog = "megatron-worker.log"

// DetectFramework asks the node's Python what it imports (10–15 s).
func DetectFramework(ctx context.Context, python string) (megatron.Framework, error) {
	py, err := megatron.FindPython(python)
	if err != nil {
		return megatron.Framework{}, err
	}
	return megatron.Check(ctx, py)
}

// DefaultEngine is megatron where a GPU and an importable Megatron-Core
// are, else cuda where a GPU is, else estimate; why says why.
func DefaultEngine(ctx context.Context, python string) (name, why string) {
	n, err := cuda.DeviceCount()
	if err != nil || n == 0 {
		if err == nil {
			err = fmt.Errorf("no GPU")
		}
		return EngineEstimate, fmt.Sprintf("%v: using the estimate engine (computed, not measured)", err)
	}
	fw, err := DetectFramework(ctx, python)
	if err != nil {
		return EngineCUDA, fmt.Sprintf("Megatron-Core not checked (%v): using the cuda engine (emulation)", err)
	}
	if ok, miss := fw.Usable(); !ok {
		return EngineCUDA, fmt.Sprintf("Megatron-Core %s: using the cuda engine (emulation)", miss)
	}
	return EngineMegatron, "measuring on the real framework: " + fw.String()
}

// openDefault picks the engine when none is named: megatron where there
// is a GPU and its worker starts (the start is the check: the worker says
// what it could not import, and the framework is imported once, not
// twice), else cuda where there is a GPU, else estimate. It reports
// whether it opened the megatron engines; otherwise e.Engine names the
// engine to open.
func (e *Engines) openDefault(ctx context.Context, cfg *search.Config, o Options) (bool, error) {
	n, err := o.deviceCount()
	if err != nil || n == 0 {
		if err == nil {
			err = fmt.Errorf("no GPU")
		}
		e.Engine = EngineEstimate
		e.notice("engine estimate: %v: using the estimate engine (computed, not measured)", err)
		return false, nil
	}
	if err := e.openMegatron(ctx, cfg, o); err != nil {
		// Bad input (e.g. --ranks) is an error, and so is a start the
		// person stopped; a framework that cannot start here means the
		// emulation measures instead.
		if !errors.Is(err, ErrNoGPU) || ctx.Err() != nil {
			return false, err
		}
		cfg.Engines, e.close = nil, func() {}
		e.Engine = EngineCUDA
		e.notice("engine cuda: Megatron-Core could not start (%v): using the cuda engine (emulation)", err)
		return false, nil
	}
	e.Engine = EngineMegatron
	return true, nil
}

// openMegatron starts one megatron engine per group of ranks GPUs; each
// runs a candidate's per-rank slice at world size ranks. Candidates the
// framework cannot run go to a cuda (or estimate) engine started on first
// use.
func (e *Engines) openMegatron(ctx context.Context, cfg *search.Config, o Options) error {
	// The worker's own start checks the imports (torch with CUDA,
	// megatron.core) and says what is missing; no separate check costs
	// another 10–15 s import here.
	mo, gpus := o.Megatron, o.GPUs
	py, ranks, err := megatronRanks(cfg, o)
	if err != nil {
		return err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return fmt.Errorf("no user cache folder for the megatron worker: %w", err)
	}
	rates, ok := stepmodel.SpecFor(cfg.Layout.GPU)
	if !ok {
		rates, _ = stepmodel.SpecFor("h100")
	}
	rates = WithMeasuredNCCL(rates, cfg.Layout.GPU)
	var closers []func() error
	log := openWorkerLog(cmp.Or(cfg.RunDir, mo.LogDir, filepath.Join(cache, "cgtune")))
	if log != nil {
		closers = append(closers, log.Close)
	}
	for i := 0; i < len(gpus); i += ranks {
		// Each group's fallback runs on the group's first GPU: engines run
		// candidates at once, and one worker serves one candidate at a time.
		first := gpus[i]
		fallback := &lazyEngine{what: "fallback engine", open: func() (engine.Engine, error) { return fallbackEngine(first, o.Profile) }}
		closers = append(closers, fallback.Close)
		m, err := megatron.New(ctx, megatron.Options{
			Python: py, CacheDir: filepath.Join(cache, "cgtune", "megatron-worker"),
			GPUs: gpus[i : i+ranks], MaxLayers: mo.MaxLayers, MaxMicroBatches: mo.MaxMicroBatches,
			Rates: rates, Fallback: fallback, Log: logWriter(log),
			Deadline: func(*stepmodel.Workload, presets.Candidate) time.Duration { return MegatronDeadline },
		})
		if err != nil {
			for _, c := range closers {
				c()
			}
			return noGPUf("--engine megatron: GPU %v: %w", gpus[i:i+ranks], err)
		}
		closers = append([]func() error{m.Close}, closers...)
		cfg.Engines = append(cfg.Engines, m)
		for _, n := range m.Notes() {
			e.Notices = append(e.Notices, "megatron worker: "+n)
		}
	}
	e.close = func() {
		for _, c := range closers {
			c()
		}
	}
	if first, ok := cfg.Engines[0].(*megatron.Engine); ok && !mo.SkipProfile && first.WorldSize() == 1 {
		cfg.Prepare = ProfileFirst(first)
	}
	if est, err := EstimateEngine(cfg.Layout.GPU, o.Profile); err == nil {
		cfg.Estimator = est
	}
	e.notice("engine megatron: %s; %d rank(s) per candidate on GPU %v", FrameworkString(cfg.Engines[0]), ranks, gpus)
	return nil
}

// megatronRanks finds the Python the megatron workers run on and the
// ranks of one candidate (--ranks, or as many of --gpu as the layout can
// use), checking --gpu against the node's GPUs.
func megatronRanks(cfg *search.Config, o Options) (python string, ranks int, err error) {
	mo, gpus := o.Megatron, o.GPUs
	py, err := megatron.FindPython(mo.Python)
	if err != nil {
		return "", 0, noGPUf("--engine megatron: %w", err)
	}
	if n, err := o.deviceCount(); err != nil {
		return "", 0, noGPUf("--engine megatron: %w", err)
	} else if bad := slices.IndexFunc(gpus, func(g int) bool { return g >= n }); bad >= 0 {
		return "", 0, noGPUf("--gpu %d: this node has %d GPU(s)", gpus[bad], n)
	}
	ranks = mo.Ranks
	if ranks <= 0 {
		ranks = UsableRanks(cfg.Layout, len(gpus))
	}
	if ranks > len(gpus) || len(gpus)%ranks != 0 {
		return "", 0, fmt.Errorf("--ranks %d: give a multiple of it as --gpu (have %d GPUs)", ranks, len(gpus))
	}
	return py, ranks, nil
}

// openWorkerLog opens the megatron workers' log in dir for appending, or
// returns nil where it cannot: the log is for reading afterwards, and
// its absence stops no search.
func openWorkerLog(dir string) *os.File {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil
	}
	log, err := fileio.OpenAppend(filepath.Join(dir, MegatronWorkerLog), 0o600)
	if err != nil {
		return nil
	}
	return log
}

// Profiler measures framework profiles (the megatron engine).
type Profiler interface {
	Device() engine.DeviceInfo
	MeasureProfile(ctx context.Context, w *stepmodel.Workload, emit func(string)) (*stepmodel.FrameworkProfile, error)
}

// ProfileFirst is a megatron search's preparation: where no framework
// profile of the workload's model and layout is cached for this GPU, it
// measures one, as `cgtune probe --framework` does, and saves it before
// the space is planned, so that the estimator orders the candidates with
// it and the emulating fallback is calibrated. Its eager runs at the
// built slice are the search's eager baseline too (the worker keeps the
// eager baseline of a slice), so the profile and the search's speed-ups
// share one eager measurement.
func ProfileFirst(e Profiler) func(context.Context, *stepmodel.Workload, func(string)) error {
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

// FrameworkString describes the framework a megatron engine's worker
// reported when it started.
func FrameworkString(e engine.Engine) string {
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

// UsableRanks is how many of n GPUs a candidate's slice can use: the
// largest count that divides n and the layout's TP×EP (the degrees the
// worker runs for real).
func UsableRanks(l presets.Layout, n int) int {
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
func fallbackEngine(gpu int, prof Profile) (engine.Engine, error) {
	// Opened on a candidate's first use, whose context does not reach
	// here: a cuda worker starts in seconds, not the framework's minutes.
	engines, closeAll, err := WorkerSupervisors(context.Background(), []int{gpu}, prof, search.DeadlineFor(nil))
	if err == nil {
		return closingEngine{engines[0], closeAll}, nil
	}
	return EstimateEngine("h100", prof)
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
