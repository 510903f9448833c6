package megatron

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"cgtune/engine"
	"cgtune/engine/worker"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// The slice's defaults: layers built and micro-batches run at most (the
// rest of a stage, and of a step, is scaled). The worker gets them as
// flags, the profile is fitted at the layers built, and the command line
// offers them as its defaults.
const (
	DefaultMaxLayers       = 8
	DefaultMaxMicroBatches = 4
)

// Options configure the engine.
type Options struct {
	Python    string // interpreter (FindPython)
	CacheDir  string // where the worker is installed (private, per user)
	GPUs      []int  // one per rank; len(GPUs) is the world size
	MaxLayers int    // layers built at most (the rest of a stage is scaled); default DefaultMaxLayers
	// MaxMicroBatches run per step at most (the rest is scaled); default DefaultMaxMicroBatches.
	MaxMicroBatches int
	// Rates time the collectives a run does not execute (spec table or probes).
	Rates stepmodel.Rates
	// Fallback measures candidates the installed framework cannot run
	// (transformer_engine without TE, hybrid models); nil: they fail.
	Fallback engine.Engine
	// StartTimeout bounds the worker's start (imports take 10–15 s).
	StartTimeout time.Duration
	Deadline     func(*stepmodel.Workload, presets.Candidate) time.Duration
	Env          []string // extra environment for the worker (e.g. PYTHONPATH)
	// Log receives the worker's stderr (the framework's own output).
	Log io.Writer
}

// Engine runs candidates on the real framework through its worker.
type Engine struct {
	opts   Options
	sup    *worker.Supervisor
	slices sliceFit
}

// WorkerCommand is the command that starts the installed worker.
func WorkerCommand(o Options) (worker.Command, error) {
	entry, err := Install(o.CacheDir)
	if err != nil {
		return worker.Command{}, err
	}
	gpus := make([]string, len(o.GPUs))
	for i, g := range o.GPUs {
		gpus[i] = strconv.Itoa(g)
	}
	if len(gpus) == 0 {
		gpus = []string{"0"}
	}
	args := []string{"-B", entry, "--gpus", strings.Join(gpus, ","), "--world-size", strconv.Itoa(len(gpus)),
		"--max-layers", strconv.Itoa(orDefault(o.MaxLayers, DefaultMaxLayers)),
		"--max-microbatches", strconv.Itoa(orDefault(o.MaxMicroBatches, DefaultMaxMicroBatches))}
	env := append([]string{"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", "NCCL_NVLS_ENABLE=0"}, o.Env...)
	return worker.Command{Path: o.Python, Args: args, Env: env, Log: o.Log}, nil
}

func orDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// New installs the worker (verifying any copy already there) and starts it;
// a cancelled ctx stops the start (the framework's imports) and the worker.
func New(ctx context.Context, o Options) (*Engine, error) {
	cmd, err := WorkerCommand(o)
	if err != nil {
		return nil, err
	}
	e, err := newWithCommand(ctx, o, cmd)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// newWithCommand starts the engine on a given worker command (tests use
// a stand-in worker).
func newWithCommand(ctx context.Context, o Options, cmd worker.Command) (*Engine, error) {
	if o.StartTimeout <= 0 {
		o.StartTimeout = 3 * time.Minute
	}
	e := &Engine{opts: o}
	e.sup = &worker.Supervisor{Cmd: cmd, StartTimeout: o.StartTimeout, DeadlineFor: o.Deadline}
	if o.CacheDir != "" {
		e.sup.BeforeStart = e.reinstall
	}
	if err := e.sup.Start(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// reinstall verifies (and if need be rewrites) the worker before each
// start, so a replaced worker never runs a changed file.
func (e *Engine) reinstall() error {
	_, err := Install(e.opts.CacheDir)
	return err
}

// Notes are what the worker said about itself when it started (e.g. a
// framework that cannot be forked and is imported per candidate).
func (e *Engine) Notes() []string {
	if c := e.sup.Current(); c != nil {
		return c.Hello().Notes
	}
	return nil
}

// Framework is what the worker reported it runs on.
func (e *Engine) Framework() *engine.FrameworkInfo {
	if c := e.sup.Current(); c != nil {
		return c.Hello().Framework
	}
	return nil
}

// Name is "megatron".
func (e *Engine) Name() string { return "megatron" }

// The search asks a megatron engine what it hands on, and to whom.
var _ engine.Delegator = (*Engine)(nil)

// Fallback is the engine that runs what the framework cannot here (nil
// when there is none): the search measures its error on candidates the
// framework ran too.
func (e *Engine) Fallback() engine.Engine { return e.opts.Fallback }

// Device is the first rank's GPU.
func (e *Engine) Device() engine.DeviceInfo { return e.sup.Device() }

// WorldSize is how many ranks each candidate runs on.
func (e *Engine) WorldSize() int { return max(1, len(e.opts.GPUs)) }

// Close stops the worker.
func (e *Engine) Close() error { return e.sup.Close() }

// Restarts counts workers replaced after a crash or hang.
func (e *Engine) Restarts() int { return e.sup.Restarts }

// Delegates says whether c goes to the fallback engine rather than the
// framework: a transformer_engine candidate where the worker reported no
// Transformer Engine. (A model the worker refuses, such as a hybrid one,
// is only known when it answers.)
func (e *Engine) Delegates(c presets.Candidate) bool {
	fw := e.Framework()
	return e.opts.Fallback != nil && fw != nil && fw.TE == "" && c.Impl == presets.ImplTE
}

// Run measures the candidate on the framework, adds the modelled
// collectives of the parallel degrees the run lacks, and hands candidates
// the framework cannot run to the fallback engine, labelled.
func (e *Engine) Run(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	r := e.runFitting(ctx, w, c, opts, emit)
	if r.ErrKind == engine.FailureUnsupported && e.opts.Fallback != nil {
		f := e.opts.Fallback.Run(ctx, w, c, opts, emit)
		f.Delegated = r.Err
		f.Notes = append([]string{fmt.Sprintf("not measured on the framework (%s): %s engine instead", r.Err, e.opts.Fallback.Name())}, f.Notes...)
		return f
	}
	// Everything past the fallback came from the framework's worker, its
	// crashes and time-outs (which the supervisor reports) included.
	r.Source = engine.SourceFramework
	if r.Framework == nil || r.Failed() {
		return r
	}
	addCollectives(&r, w, e.opts.Rates, e.WorldSize())
	hideEPOverlap(&r, w, e.opts.Rates)
	e.addJobMemory(&r, w, c)
	return r
}

// addJobMemory gives a framework result the memory model's breakdown of
// one rank of the real job, with the graph memory the framework measured
// (scaled to the job) where it measured one. The slice's own peak says
// little about the job's rank: it runs at data-parallel size 1 without the
// distributed optimizer's sharding, and fewer layers and micro-batches, so
// it can peak far above what the rank needs (docs/memory-and-verdict-2026-12-02.md,
// Engines). The ranking judges what fits from the breakdown, as it does for
// the emulating engines' results.
func (e *Engine) addJobMemory(r *engine.Result, w *stepmodel.Workload, c presets.Candidate) {
	plan := stepmodel.PlanCapture(w, c, w.Spec.Options.Generation)
	b := stepmodel.PredictMemory(w, plan, nil, stepmodel.JobGPUMiB(w.Layout, e.Device().MemoryMiB), stepmodel.MemoryOptions{})
	how := "memory model"
	switch g := r.Memory.GraphFullJobMiB; {
	case !c.Graphed():
	case w.Layout.NumGPUs <= e.WorldSize() && r.Raw != nil && r.Raw.LayersBuilt >= w.StageLayers && r.Raw.MicroBatchesRun >= w.MicroBatches:
		// The run is the whole job (every rank, layer and micro-batch):
		// its graphed peak less its eager peak is what the job's graphs
		// add.
		b.SetGraphs(g)
		how += "; graphs as measured on the framework (the graphed run's peak reserved memory less eager's)"
	default:
		// A slice is not the job: what its graphs add depends on how its
		// activations compare with its optimizer step's main gradients
		// (the data-parallel size 1 of the run holds them all), which
		// does not scale with the layers it left out.
		how += fmt.Sprintf("; graphs modelled: the slice measured %d MiB over eager (%d MiB scaled to the stage)", r.Memory.GraphMiB, g)
	}
	if mib := r.Memory.OutsideAllocatorMiB; mib > 0 {
		b.SetContext(mib, outsideSource(e.Device().Name, w.Layout.GPU))
	}
	r.Memory.Breakdown = b
	r.Notes = append(r.Notes, b.Describe()+" ("+how+")")
}

// outsideSource says where the framework's measured memory outside the
// allocator comes from, and that it is assumed for the job's GPU where
// that is another type.
func outsideSource(device, jobGPU string) string {
	s := "NVML used − torch reserved measured in the warm worker on this node (" + device + ")"
	if t := stepmodel.GPUType(jobGPU); t != "" && t != stepmodel.GPUType(device) {
		s += ", assumed for " + strings.ToUpper(t)
	}
	return s
}

// addCollectives adds, to every step figure, the time of the collectives
// of the parallel degrees the run did not execute (the worker's Modelled
// list), from the workload model (its op bytes and the link bandwidths in
// rates). Collectives of a degree the ranks ran for real, and those of a
// degree of 1 (the model's zero-byte all-to-all of EP 1, the grad-norm
// all-reduce of a one-GPU job), are left out.
func addCollectives(r *engine.Result, w *stepmodel.Workload, rates stepmodel.Rates, world int) {
	ms := CollectiveMs(w, rates, modelledFamilies(r.Framework))
	if ms <= 0 {
		return
	}
	r.CollectivesMs = ms
	for _, st := range []*stepmodel.Stats{&r.Step, &r.Eager} {
		if st.N > 0 {
			st.Median += ms
			st.P10 += ms
			st.P90 += ms
		}
	}
	if r.Step.Median > 0 && r.Eager.Median > 0 {
		r.Speedup = r.Eager.Median / r.Step.Median
	}
	r.Notes = append(r.Notes, fmt.Sprintf("collectives: modelled, %.2f ms/step from the workload model (%s) for %s, not run at world size %d",
		ms, rates.Source, strings.Join(r.Framework.Modelled, ", "), world))
}

// hideEPOverlap takes off every step figure the EP all-to-all time that
// the recipe's EP communication overlap hides (stepmodel.EPOverlapHiddenMs):
// the worker runs Megatron-Core's plain schedule, not the combined 1F1B
// one the overlap switches to, whether its ranks ran the all-to-alls or
// they were modelled. Nothing changes without the overlap.
func hideEPOverlap(r *engine.Result, w *stepmodel.Workload, rates stepmodel.Rates) {
	ms := stepmodel.EPOverlapHiddenMs(w, rates)
	if ms <= 0 {
		return
	}
	for _, st := range []*stepmodel.Stats{&r.Step, &r.Eager} {
		if st.N > 0 && st.Median > ms {
			st.Median -= ms
			st.P10 = max(0, st.P10-ms)
			st.P90 -= ms
		}
	}
	if r.Step.Median > 0 && r.Eager.Median > 0 {
		r.Speedup = r.Eager.Median / r.Step.Median
	}
	r.Notes = append(r.Notes, fmt.Sprintf("EP communication overlap: modelled, %.2f ms/step of EP all-to-all hidden under the other micro-batch's computation "+
		"as Megatron-Core's combined 1F1B schedule hides it (the worker runs the plain schedule)", ms))
}

// executed says which of the layers' collective families the ranks ran
// for real: TP's ("sp_") and EP's ("ep_"), the degrees the worker runs,
// where the layout has them and the worker did not list them as modelled
// (a degree it ran only in part, "EP 4 (2 run)", is modelled whole).
func executed(f *engine.FrameworkInfo, l presets.Layout) map[string]bool {
	modelled := modelledFamilies(f)
	ran := map[string]bool{}
	if l.TPSize() > 1 && !modelled["sp_"] {
		ran["sp_"] = true
	}
	if l.EPSize() > 1 && !modelled["ep_"] {
		ran["ep_"] = true
	}
	return ran
}

// modelledFamilies are the collective families (op-name prefixes, "dp_"
// for the data-parallel ones such as the grad-norm all-reduce) of the
// degrees the worker says it did not run.
func modelledFamilies(f *engine.FrameworkInfo) map[string]bool {
	of := map[string]string{"TP": "sp_", "EP": "ep_", "CP": "cp_", "PP": "pp_", "DP": "dp_"}
	out := map[string]bool{}
	for _, m := range f.Modelled {
		name, _, _ := strings.Cut(m, " ")
		if fam, ok := of[name]; ok {
			out[fam] = true
		}
	}
	return out
}

// counted says whether an op's collective belongs to a family in only:
// its name's prefix for the TP ("sp_"), EP, CP and PP collectives; the
// grad-norm all-reduce spans the model-parallel and data-parallel groups,
// so any of TP, PP and DP counts it; "dp_" for the rest.
func counted(name string, only map[string]bool) bool {
	switch p := prefix(name); {
	case p == "sp_" || p == "ep_" || p == "cp_" || p == "pp_":
		return only[p]
	case strings.HasPrefix(name, "grad_norm"):
		return only["sp_"] || only["pp_"] || only["dp_"]
	}
	return only["dp_"]
}

// CollectiveMs is one step's collective time in the workload model: every
// micro-batch's layer, embedding and head collectives plus the optimizer's,
// of the families in only (all of them when only is nil).
func CollectiveMs(w *stepmodel.Workload, rates stepmodel.Rates, only map[string]bool) float64 {
	keep := func(o stepmodel.Op) bool { return only == nil || counted(o.Name, only) }
	sum := func(ops []stepmodel.Op) float64 { return collectiveUs(ops, rates, keep) }
	perMB := sum(w.Pre) + sum(w.Head) + sum(w.PreBwd)
	for _, l := range w.Layers {
		perMB += sum(l.Fwd) + sum(l.Bwd)
	}
	return (perMB*float64(w.MicroBatches) + sum(w.Optimizer)) / 1e3
}

// collectiveUs is the modelled GPU time of the collectives among ops that
// keep accepts, in microseconds.
func collectiveUs(ops []stepmodel.Op, rates stepmodel.Rates, keep func(stepmodel.Op) bool) float64 {
	var us float64
	for _, o := range ops {
		if o.Kind == stepmodel.KindCollective && keep(o) {
			us += rates.OpGPUUs(o)
		}
	}
	return us
}

func prefix(name string) string {
	if i := strings.IndexByte(name, '_'); i >= 0 {
		return name[:i+1]
	}
	return name
}
