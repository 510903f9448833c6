package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"cgtune/engine"
	"cgtune/engine/cuda"
	"cgtune/engine/job"
	"cgtune/internal/mbimport"
	"cgtune/internal/setup"
	"cgtune/presets"
	"cgtune/probes"
	"cgtune/report"
	"cgtune/search"
	"cgtune/stepmodel"
	"cgtune/tui"
)

// noColor is NO_COLOR (https://no-color.org) or a terminal that cannot
// draw colour.
func noColor() bool {
	return os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb"
}

// runTUI runs the interactive program until the person quits, starting
// from the root command's flags (--model or --preset, --gpu-type, --gpu,
// --engine, --strategy, --budget, --mbridge, --emit, --format); --set,
// --train-iters, --estimate-gpu and --estimate-delay shape its searches.
// A search stopped before it finished (or left running at quit) exits 130,
// as the headless command does on an interrupt.
func runTUI(ctx context.Context, f *rootFlags, stdin io.Reader, stdout, _ io.Writer) error {
	opts, sets, err := f.tuiOptions(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	b := newTUIBackend(f, sets)
	defer b.close(cancel)
	opts.Context = ctx
	final, err := tea.NewProgram(tui.New(b, opts), tea.WithContext(ctx), tea.WithInput(stdin), tea.WithOutput(stdout)).Run()
	switch {
	case errors.Is(err, tea.ErrInterrupted), errors.Is(err, tea.ErrProgramKilled), errors.Is(err, context.Canceled):
		return quiet(exitInterrupted)
	case err != nil:
		return fail(exitBadInput, "%w", err)
	}
	if fm, ok := final.(*tui.App); ok {
		if _, interrupted := fm.Outcome(); interrupted {
			return quiet(exitInterrupted)
		}
	}
	return nil
}

// tuiOptions are the TUI's options from the root command's flags, and the
// --set values that shape every search (those of the layout editor's
// fields go into opts.LayoutSets).
func (f *rootFlags) tuiOptions(ctx context.Context) (tui.Options, map[string]string, error) {
	sets, err := parseSets(f.sets)
	if err != nil {
		return tui.Options{}, nil, err
	}
	// The fields the layout editor shows start from --set and are the
	// person's to change from there: they go into the layout, the rest of
	// --set shapes every search as in headless mode.
	layoutSets, sets := splitLayoutSets(sets)
	if f.emit != "" && f.emit != "-" {
		// Refused now, not when the person presses w after a search; an
		// existing file is asked about then.
		c := f.outputCheck("")
		c.force = true
		if err := c.check(output{"--emit", f.emit}); err != nil {
			return tui.Options{}, nil, err
		}
	}
	opts := tui.Options{
		NoColor:  noColor(),
		Version:  version,
		Model:    f.model,
		GPUType:  f.gpuType,
		MBridge:  f.mbridge,
		Strategy: f.strategy,
		Budget:   f.budget,
		EmitPath: f.emit,
		Format:   f.format,
		Sets:     sets,
		// "v validate top 3" runs jobs with these; the TUI shows the
		// command and asks before anything runs.
		JobLauncher: f.launcher,
		JobCommand:  f.command,
		JobIters:    f.jobIters,
		LayoutSets:  layoutSets,
		// A bad --tie is refused here as in headless mode.
		TrainIters: f.trainIters,
	}
	if opts.Tie, err = search.ParseTie(f.tie); err != nil {
		return tui.Options{}, nil, fail(exitBadInput, "--tie: %w", err)
	}
	// The TUI's winner stays a candidate the recipe allows: accepting
	// changes is headless only.
	if on, accept, err := parseWhatIf(f.whatIf); err != nil {
		return tui.Options{}, nil, err
	} else if len(accept) > 0 {
		return tui.Options{}, nil, fail(exitBadInput, "--what-if=accept is for --headless; the interactive program shows the what-if rows (w on the space screen) and keeps the winner a candidate the recipe allows")
	} else {
		opts.WhatIf = on
	}
	if f.budget <= 0 {
		opts.Budget = tui.NoBudget
	}
	switch f.engine {
	case "", "cuda", "megatron":
	case "estimate":
		opts.Estimate = true
	default:
		return tui.Options{}, nil, fail(exitBadInput, "--engine %q: allowed: megatron, cuda, estimate", f.engine)
	}
	if f.cmd.Flags().Changed("gpu") {
		if opts.GPUs, err = parseGPUs(f.gpus); err != nil {
			return tui.Options{}, nil, err
		}
	}
	if err := f.tuiPreset(ctx, &opts); err != nil {
		return tui.Options{}, nil, err
	}
	return opts, sets, nil
}

// tuiPreset sets the preset the TUI starts from: an imported recipe
// (--mbridge-config, --recipe) or --preset.
func (f *rootFlags) tuiPreset(ctx context.Context, opts *tui.Options) error {
	if err := f.imp.check(); err != nil {
		return err
	}
	if f.imp.given() {
		if f.model != "" || f.preset != "" {
			return fail(exitBadInput, "give one of --model, --preset and --mbridge-config/--recipe")
		}
		p, err := f.imp.load(ctx, f.python, f.importGPUType(), f.mbridge)
		if err != nil {
			return err
		}
		opts.Preset = &p
	}
	if f.preset != "" {
		p, _, err := loadPreset(f.preset)
		if err != nil {
			return err
		}
		// The preset names its MB release; an explicit --mbridge wins.
		if f.cmd.Flags().Changed("mbridge") || p.MBridge == "" {
			p.MBridge = f.mbridge
		}
		opts.Preset = &p
	}
	return nil
}

// splitLayoutSets separates the --set values of the fields the TUI's
// layout editor shows (tui.LayoutSetKeys) from the others.
func splitLayoutSets(sets map[string]string) (layout, rest map[string]string) {
	for k, v := range sets {
		m := &rest
		if slices.Contains(tui.LayoutSetKeys, k) {
			m = &layout
		}
		if *m == nil {
			*m = map[string]string{}
		}
		(*m)[k] = v
	}
	return layout, rest
}

// tuiBackend is the TUI's window on the machine: NVML, the preset store,
// the search runner and its engines, and the file system.
type tuiBackend struct {
	flags *rootFlags
	sets  map[string]string
	store *presets.Store

	mu     sync.Mutex
	nvml   *cuda.NVML
	nvErr  error
	opened bool
	names  map[int]string // NVML device names, for the estimator

	// engineOnce decides, once, which engine measures: --engine, else
	// megatron where Megatron-Core imports, else cuda; engineWhy says why.
	engineOnce sync.Once
	engine     string
	engineWhy  string

	quit  chan struct{}  // closed when the program has ended
	wg    sync.WaitGroup // searches still winding down
	pause *pauser        // the running search's gate (nil before the first)

	jobPoll time.Duration // how often validation jobs are read (0: every second)
}

func newTUIBackend(f *rootFlags, sets map[string]string) *tuiBackend {
	return &tuiBackend{flags: f, sets: sets, store: presetStore(f.preset), quit: make(chan struct{}), names: map[int]string{}}
}

// close ends the program's searches and waits (a little) for their
// workers to be shut down, so no worker process outlives cgtune.
func (b *tuiBackend) close(cancel context.CancelFunc) {
	cancel()
	close(b.quit)
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nvml != nil {
		b.nvml.Close()
	}
}

func (b *tuiBackend) openNVML() (*cuda.NVML, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.opened {
		b.nvml, b.nvErr = cuda.OpenNVML()
		b.opened = true
	}
	return b.nvml, b.nvErr
}

func (b *tuiBackend) GPUs(context.Context) ([]cuda.GPUStatus, tui.DriverInfo, error) {
	n, err := b.openNVML()
	if errors.Is(err, cuda.ErrNoNVML) {
		return nil, tui.DriverInfo{}, fmt.Errorf("%w: libnvidia-ml.so.1 could not be loaded", tui.ErrNoDriver)
	}
	if err != nil {
		return nil, tui.DriverInfo{}, err
	}
	count, err := n.Count()
	if err != nil {
		return nil, tui.DriverInfo{}, err
	}
	var d tui.DriverInfo
	d.Version, d.CUDA = n.Driver()
	d.Engine, d.EngineWhy = b.measuringEngine()
	var out []cuda.GPUStatus
	for i := range count {
		st, err := n.Status(i)
		if err != nil {
			return out, d, err
		}
		out = append(out, st)
		b.mu.Lock()
		b.names[i] = st.Name
		b.mu.Unlock()
	}
	return out, d, nil
}

// measuringEngine is the engine a search on the GPUs uses, and why.
func (b *tuiBackend) measuringEngine() (string, string) {
	b.engineOnce.Do(func() {
		switch b.flags.engine {
		case "megatron", "cuda":
			b.engine, b.engineWhy = b.flags.engine, "chosen with --engine"
		default:
			b.engine, b.engineWhy = setup.DefaultEngine(context.Background(), b.flags.python)
		}
	})
	return b.engine, b.engineWhy
}

func (b *tuiBackend) TeamPresets() ([]presets.PresetInfo, error) { return b.store.List() }

func (b *tuiBackend) LoadPreset(name string) (presets.TeamPreset, error) { return b.store.Load(name) }

// ImportMBConfig reads a Megatron-Bridge ConfigContainer YAML with the
// --num-gpus and --vocab-size the TUI was started with.
func (b *tuiBackend) ImportMBConfig(path, mbridge string) (presets.TeamPreset, error) {
	return mbimport.FromFile(path, mbimport.Options{NumGPUs: b.flags.imp.numGPUs, Vocab: b.flags.imp.vocab, MBridge: mbridge})
}

// estimateGPU is what the estimate engine estimates for: --estimate-gpu,
// else for a measured search the GPU it measures on (cached probes of it,
// or its spec), else what the headless search chooses (setup.EstimateGPU).
func (b *tuiBackend) estimateGPU(req tui.Request) string {
	if b.flags.estimateGPU != "" {
		return b.flags.estimateGPU
	}
	if !req.Estimate && len(req.GPUs) > 0 {
		b.mu.Lock()
		defer b.mu.Unlock()
		if n := b.names[req.GPUs[0]]; n != "" {
			return n
		}
	}
	gpu, _ := setup.EstimateGPU(req.Layout.GPU)
	return gpu
}

// config is the search of req, without engines.
func (b *tuiBackend) config(req tui.Request) search.Config {
	cfg := search.Config{
		Model:      req.Model,
		Layout:     req.Layout,
		MBridge:    req.MBridge,
		Sets:       b.sets,
		Space:      req.Space,
		Strategy:   req.Strategy,
		Budget:     req.Budget,
		TrainIters: b.flags.trainIters,
		Tie:        req.Tie,
		WhatIf:     req.WhatIf,
	}
	if req.TrainIters > 0 {
		cfg.TrainIters = req.TrainIters
	}
	// A --set the recipe refuses was refused when the program started.
	_ = setup.Workload(&cfg)
	return cfg
}

func (b *tuiBackend) Plan(req tui.Request) ([]search.Planned, error) {
	cfg := b.config(req)
	est, err := setup.EstimateEngine(b.estimateGPU(req), b.flags.profile)
	switch {
	case err != nil && req.Estimate:
		return nil, err
	case err == nil:
		cfg.Estimator = est
	}
	// Without an estimator (a GPU the spec table does not know) the plan
	// still checks the rules; the search then goes by measurements alone.
	return search.Plan(cfg)
}

// Start runs the search on its own goroutine: the engines the headless
// search would open (setup.Open: one worker per GPU, or estimate
// engines), an NVML sampler of the GPUs in use merged into the stream as
// MemoryEvents, and the runner's events; then the channel is closed.
func (b *tuiBackend) Start(ctx context.Context, req tui.Request) (<-chan search.Event, error) {
	cfg, closeEngines, err := b.openSearch(ctx, req)
	if err != nil {
		return nil, err
	}
	ch := make(chan search.Event, 64)
	var sendMu sync.Mutex
	send := func(ev search.Event) {
		// The runner and the sampler both send; after the program ended
		// nobody reads, so a send must not block forever.
		sendMu.Lock()
		defer sendMu.Unlock()
		select {
		case ch <- ev:
		case <-b.quit:
		}
	}
	stopSampler := b.startSampler(req, send)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer close(ch)
		defer closeEngines()
		sawDone := false
		d, err := search.Run(ctx, cfg, func(ev search.Event) {
			if _, ok := ev.(search.DoneEvent); ok {
				sawDone = true
				stopSampler() // no readings after the DoneEvent: the stream ends there
			}
			send(ev)
		})
		stopSampler()
		if !sawDone {
			if err != nil && d.Err == "" {
				d.Err = err.Error()
			}
			d.Interrupted = ctx.Err() != nil
			send(d)
		}
	}()
	return ch, nil
}

// openSearch opens the engines of req's search (a measuring engine where
// GPUs are seen, estimate engines when asked), each behind the pause
// gate, and claims its run folder; closeEngines closes them.
func (b *tuiBackend) openSearch(ctx context.Context, req tui.Request) (_ search.Config, closeEngines func(), _ error) {
	o := b.flags.engineOptions(req.GPUs)
	o.Engine, _ = b.measuringEngine()
	if o.Engine == setup.EngineEstimate {
		o.Engine = setup.EngineCUDA // NVML sees GPUs: measure on them
	}
	o.EstimateGPU = b.estimateGPU(req)
	if req.Estimate {
		o.Engine, o.GPUs = setup.EngineEstimate, []int{0}
	}
	cfg := b.config(req)
	engines, err := setup.Open(ctx, &cfg, o)
	if err != nil {
		return search.Config{}, nil, err
	}
	// The stop question holds new candidates back (Pause).
	gate := newPauser()
	for i, e := range cfg.Engines {
		cfg.Engines[i] = gated{e, gate}
	}
	b.mu.Lock()
	b.pause = gate
	b.mu.Unlock()
	dir, err := setup.NewRunDir()
	if err != nil {
		engines.Close()
		return search.Config{}, nil, err
	}
	cfg.RunDir = dir
	return cfg, engines.Close, nil
}

// startSampler sends NVML readings of req's GPUs as MemoryEvents until
// the returned stop is called (more than once is fine); an estimate, or
// a node without NVML, has none.
func (b *tuiBackend) startSampler(req tui.Request, send func(search.Event)) (stop func()) {
	n, err := b.openNVML()
	if err != nil || req.Estimate {
		return func() {}
	}
	sampler := probes.NewSampler(n, req.GPUs, 250*time.Millisecond)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for s := range sampler.C {
			send(search.MemoryEvent{GPU: s.Index, UsedMiB: s.UsedMiB, TotalMiB: s.TotalMiB, UtilGPU: s.UtilGPU})
		}
	}()
	return func() {
		sampler.Stop()
		<-done
	}
}

// Pause holds the running search's next candidates back, or lets them go.
func (b *tuiBackend) Pause(paused bool) {
	b.mu.Lock()
	g := b.pause
	b.mu.Unlock()
	if g != nil {
		g.set(paused)
	}
}

// expandHome reads a leading ~/ as the home folder, as a shell would.
func expandHome(path string) (string, error) {
	rest, ok := strings.CutPrefix(path, "~/")
	if !ok {
		return path, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, rest), nil
}

// outputCheck is the check headless mode makes of --emit and --report, for
// a file the person asked to write (w, r): the program's inputs include
// every preset it lists. An existing file passes: the write itself refuses
// it unless overwrite is set (fileExists), and the TUI asks.
func (b *tuiBackend) outputCheck() outputCheck {
	c := b.flags.outputCheck("")
	c.force = true
	if list, err := b.store.List(); err == nil {
		for _, p := range list {
			c.inputs = append(c.inputs, input{"the preset " + p.Name, p.Path})
		}
	}
	return c
}

// fileExists turns a refusal to replace path into tui.ErrFileExists.
func fileExists(path string, err error) error {
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %s", tui.ErrFileExists, path)
	}
	return err
}

func (b *tuiBackend) WriteOverrides(path string, data []byte, overwrite bool) (string, error) {
	path, err := expandHome(path)
	if err != nil {
		return "", err
	}
	if err := b.outputCheck().check(output{"the overrides file", path}); err != nil {
		return "", err
	}
	if err := fileExists(path, writeOutput(path, data, overwrite)); err != nil {
		return "", err
	}
	return absPath(path), nil
}

func (b *tuiBackend) WriteReport(path string, in report.Input, overwrite bool) (string, string, error) {
	path, err := expandHome(path)
	if err != nil {
		return "", "", err
	}
	if err := checkReportPath(path); err != nil {
		return "", "", err
	}
	if err := b.outputCheck().check(output{"the report", path}, output{"the report's plot", report.PlotPath(path)}); err != nil {
		return "", "", err
	}
	if in.Sets == nil {
		in.Sets = b.sets
	}
	plot, err := report.Write(path, in, overwrite)
	if plot != "" {
		plot = absPath(plot)
	}
	return absPath(path), plot, fileExists(path, err)
}

func (b *tuiBackend) SavePreset(p presets.TeamPreset, overwrite bool) (string, error) {
	if b.flags.saveWithProfile {
		if _, err := attachCachedProfile(&p, "--save-with-profile"); err != nil {
			return "", err
		}
	}
	path, err := b.store.Save(p, overwrite)
	if errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("%w: %s", tui.ErrPresetExists, filepath.Join(b.store.UserDir(), p.Name+".yaml"))
	}
	if err != nil {
		return "", err
	}
	if sh, ok := b.store.Shadowing(p.Name); ok {
		return path, fmt.Errorf("saved to %s, but %s (%s) has the same name and is found first", path, sh.Path, sh.Source)
	}
	return path, nil
}

// PlanValidation is what Validate would run for the top candidates of the
// search in runDir, picked as Validate and `cgtune validate RUN` pick
// them (search.JobValidationForRun, the jobs' Python asked whether it has
// Transformer Engine): the targets and the candidates skipped, with why.
func (b *tuiBackend) PlanValidation(ctx context.Context, runDir string, top int) (tui.ValidationPlan, error) {
	te := &teProbe{ctx: ctx, python: b.flags.python}
	v, err := search.JobValidationForRun(runDir, top, te.buildable)
	if err != nil {
		return tui.ValidationPlan{}, err
	}
	return tui.ValidationPlan{Targets: v.Targets, Skipped: v.Skipped}, nil
}

// Validate runs the top candidates of the search in req.RunDir and the
// eager baseline as jobs, as `cgtune validate RUN` does, with the form's
// launcher, command, top and iterations (req.Iters, else --job-iters), the
// root command's --command-format and --job-timeout (else validate's
// default): in RUN/validate, resumed when that folder holds a validation
// already (its finished jobs are kept, running ones re-attached), with the
// host-cost calibration fitted from the jobs.
func (b *tuiBackend) Validate(ctx context.Context, req tui.ValidateRequest) (tui.Validation, error) {
	// The jobs run on this node (local launcher) or one like it: the
	// Python of the megatron engine says whether they have Transformer
	// Engine, which transformer_engine candidates need.
	te := &teProbe{ctx: ctx, python: b.flags.python}
	v, err := search.JobValidationForRun(req.RunDir, req.Top, te.buildable)
	if err != nil {
		return tui.Validation{}, err
	}
	if v.Command, err = job.ParseCommand(req.Command, b.flags.commandFormat); err != nil {
		return tui.Validation{}, fmt.Errorf("--command: %w", err)
	}
	iters, what := req.Iters, "iters"
	if iters <= 0 {
		iters, what = b.flags.jobIters, "--job-iters"
	}
	for _, t := range v.Targets {
		if first := job.FirstMeasured(t.Candidate); iters < first {
			return tui.Validation{}, fmt.Errorf("%s %d: %s is measured from iteration %d; give %d or more",
				what, iters, t.Candidate.Name(), first, first+4)
		}
	}
	if v.Launcher, err = setup.JobLauncher(req.Launcher); err != nil {
		return tui.Validation{}, err
	}
	v.Iters, v.Timeout, v.Poll = iters, cmp.Or(b.flags.jobTimeout, defaultValidateTimeout), b.jobPoll
	_, statErr := os.Stat(filepath.Join(v.Dir, job.ValidationJournal))
	v.Resume = statErr == nil
	v.Estimator = calibrationEstimator(v.Layout.GPU)

	ch := make(chan tui.ValidationUpdate, 64)
	send := func(u tui.ValidationUpdate) {
		select {
		case ch <- u:
		case <-b.quit: // the program ended: nobody reads
		}
	}
	b.wg.Add(1) // close waits for the jobs to be cancelled
	go func() {
		defer b.wg.Done()
		defer close(ch)
		out, err := search.ValidateOnJobs(ctx, v, func(ev job.ValidateEvent) { send(tui.ValidationUpdate{Event: ev}) })
		if err != nil && len(out.Rows) == 0 {
			send(tui.ValidationUpdate{Err: err})
			return
		}
		send(tui.ValidationUpdate{Outcome: &out, Err: err})
	}()
	return tui.Validation{Targets: v.Targets, Skipped: v.Skipped, Dir: v.Dir, Updates: ch}, nil
}

var _ tui.Backend = (*tuiBackend)(nil)

// pauser is a gate engines wait at before each candidate while the TUI
// asks whether to stop.
type pauser struct {
	mu     sync.Mutex
	paused bool
	open   chan struct{} // closed while not paused
}

func newPauser() *pauser {
	p := &pauser{open: make(chan struct{})}
	close(p.open)
	return p
}

func (p *pauser) set(paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case paused && !p.paused:
		p.open = make(chan struct{})
	case !paused && p.paused:
		close(p.open)
	}
	p.paused = paused
}

// wait returns when the gate is open or ctx is done.
func (p *pauser) wait(ctx context.Context) {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
	}
}

// gated is an engine that waits at a pauser before running a candidate.
type gated struct {
	engine.Engine
	gate *pauser
}

func (g gated) Run(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	g.gate.wait(ctx)
	return g.Engine.Run(ctx, w, c, opts, emit)
}
