package tui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"cgtune/engine"
	"cgtune/engine/job"
	"cgtune/internal/fileio"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/report"
	"cgtune/search"
	"cgtune/stepmodel"
)

// fakeBackend is a scripted Backend: fixed GPUs and presets, a plan made
// with the real rules table over a few candidates, and a search that plays
// back a list of events.
type fakeBackend struct {
	mu       sync.Mutex
	gpus     []engine.GPUStatus
	driver   DriverInfo
	gpuErr   error
	presets  []presets.PresetInfo
	loadable map[string]presets.TeamPreset
	// importable are the Megatron-Bridge config files ImportMBConfig reads, by path.
	importable map[string]presets.TeamPreset
	events     []search.Event
	dir        string // WriteOverrides writes under it (relative paths)
	written    map[string][]byte
	saved      []presets.TeamPreset
	existing   map[string]bool // preset names SavePreset reports as taken
	started    []Request
	planned    []Request
	paused     []bool // Pause calls, in order
	reports    map[string]report.Input
	// validations are the Validate calls; valUpdates is the channel the
	// test feeds the validation's updates through.
	validations []ValidateRequest
	valUpdates  chan ValidationUpdate
	valCtx      context.Context
	// valPlan is what PlanValidation answers (nil: the fake's targets,
	// as many as top asks); valPlans are its calls (their top).
	valPlan  *ValidationPlan
	valPlans []int
}

func newFake(t *testing.T) *fakeBackend {
	return &fakeBackend{
		gpus: []engine.GPUStatus{
			{Index: 0, Name: "NVIDIA H200", UsedMiB: 512, TotalMiB: 143771, UtilGPU: 0},
			{Index: 1, Name: "NVIDIA H200", UsedMiB: 70_112, TotalMiB: 143771, UtilGPU: 97,
				Processes: []engine.ProcessUse{{PID: 4242, Name: "/usr/bin/python3", UsedMiB: 69_600}}},
		},
		driver: DriverInfo{Version: "580.65.06", CUDA: "13.0"},
		presets: []presets.PresetInfo{
			{Name: "team-llama70", Path: "/presets/team-llama70.yaml", Source: presets.SourceEnv, Model: "llama3_70b", GPU: "h100"},
			{Name: "broken", Path: "/presets/broken.yaml", Source: presets.SourceEnv, Problem: "broken.yaml:3: unknown field \"modle\""},
		},
		loadable: map[string]presets.TeamPreset{
			"team-llama70": {
				Version: presets.FileVersion, Name: "team-llama70", Model: "llama3_70b", GPU: "h100",
				Space:   presets.Space{Impls: []string{"transformer_engine"}, Scopes: [][]string{{"attn"}, {"attn", "mlp"}}, Warmups: []int{3}},
				MBridge: "0.4",
			},
		},
		events:   scriptedEvents(),
		dir:      t.TempDir(),
		written:  map[string][]byte{},
		existing: map[string]bool{},
		reports:  map[string]report.Input{},
	}
}

func (f *fakeBackend) GPUs(context.Context) ([]engine.GPUStatus, DriverInfo, error) {
	return f.gpus, f.driver, f.gpuErr
}

func (f *fakeBackend) TeamPresets() ([]presets.PresetInfo, error) { return f.presets, nil }

func (f *fakeBackend) ImportMBConfig(path, mbridge string) (presets.TeamPreset, error) {
	p, ok := f.importable[path]
	if !ok {
		return presets.TeamPreset{}, fmt.Errorf("%s: no such file", path)
	}
	p.MBridge = mbridge
	return p, nil
}

func (f *fakeBackend) LoadPreset(name string) (presets.TeamPreset, error) {
	p, ok := f.loadable[name]
	if !ok {
		return presets.TeamPreset{}, fmt.Errorf("preset %q not found", name)
	}
	return p, nil
}

// planSpace is the space the fake plans, with the real rules and the real
// merging of spellings (search.Plan): rejected rows carry real rule ids,
// merged ones their other spellings, dropless MoE its capture failures.
var planSpace = presets.Space{
	Impls:   []string{"none", "local", "transformer_engine"},
	Scopes:  [][]string{{"attn"}, {"attn", "mlp"}, {"full_iteration"}, {"full_iteration", "attn"}, {}, {"moe"}, {"mamba"}},
	Warmups: []int{3},
}

func (f *fakeBackend) Plan(req Request) ([]search.Planned, error) {
	f.mu.Lock()
	f.planned = append(f.planned, req)
	f.mu.Unlock()
	plan, err := search.Plan(search.Config{Model: req.Model, Layout: req.Layout, MBridge: req.MBridge, Space: planSpace, WhatIf: req.WhatIf})
	if err != nil {
		return nil, err
	}
	for i := range plan {
		if plan[i].Valid() {
			r := result(plan[i].Candidate, 120-float64(i)*8, 0)
			if req.Estimate {
				r = estimatedResult(r)
			}
			plan[i].Estimate = &r
		}
	}
	return plan, nil
}

func (f *fakeBackend) Start(_ context.Context, req Request) (<-chan search.Event, error) {
	f.mu.Lock()
	f.started = append(f.started, req)
	f.mu.Unlock()
	ch := make(chan search.Event, len(f.events))
	for _, e := range f.events {
		ch <- e
	}
	close(ch)
	return ch, nil
}

func (f *fakeBackend) Pause(paused bool) {
	f.mu.Lock()
	f.paused = append(f.paused, paused)
	f.mu.Unlock()
}

func (f *fakeBackend) WriteOverrides(path string, data []byte, overwrite bool) (string, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(f.dir, path)
	}
	if _, err := os.Stat(path); err == nil && !overwrite {
		return "", fmt.Errorf("%w: %s", ErrFileExists, path)
	}
	f.mu.Lock()
	f.written[path] = data
	f.mu.Unlock()
	return path, fileio.WriteFileAtomic(path, data, 0o644)
}

func (f *fakeBackend) WriteReport(path string, in report.Input, overwrite bool) (string, string, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(f.dir, path)
	}
	if _, err := os.Stat(path); err == nil && !overwrite {
		return "", "", fmt.Errorf("%w: %s", ErrFileExists, path)
	}
	f.mu.Lock()
	f.reports[path] = in
	f.mu.Unlock()
	plot, err := report.Write(path, in, overwrite)
	return path, plot, err
}

func (f *fakeBackend) SavePreset(p presets.TeamPreset, overwrite bool) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.existing[p.Name] && !overwrite {
		return "", fmt.Errorf("%w: %s", ErrPresetExists, p.Name)
	}
	f.saved = append(f.saved, p)
	return "/home/u/.config/cgtune/presets/" + p.Name + ".yaml", nil
}

func (f *fakeBackend) Validate(ctx context.Context, req ValidateRequest) (Validation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.validations = append(f.validations, req)
	f.valCtx = ctx
	f.valUpdates = make(chan ValidationUpdate, 16)
	return Validation{Targets: fakeTargets(), Dir: filepath.Join(req.RunDir, "validate"), Updates: f.valUpdates}, nil
}

// PlanValidation is the fake's valPlan, else its targets, as many graphed
// ones as top asks.
func (f *fakeBackend) PlanValidation(_ context.Context, runDir string, top int) (ValidationPlan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.valPlans = append(f.valPlans, top)
	if f.valPlan != nil {
		return *f.valPlan, nil
	}
	ts := fakeTargets()
	return ValidationPlan{Targets: ts[:min(len(ts), 1+top)]}, nil
}

// noTEPlan is what a validation of longRanking's top 3 runs where the
// jobs' Python has no Transformer Engine: its local graphs and eager;
// the transformer_engine candidates skipped with the why search.NeedsTE
// gives.
func noTEPlan() *ValidationPlan {
	c := func(impl string, scopes ...string) presets.Candidate {
		return presets.Candidate{Impl: impl, Scopes: append([]string{}, scopes...), Warmup: 3}
	}
	can := search.NeedsTE("the jobs' Python /usr/bin/python3 cannot import it: No module named 'transformer_engine' (--job-python; --job-te yes runs them anyway)")
	p := &ValidationPlan{Targets: []job.Target{{Candidate: cNone}, {Candidate: c("local", "attn")}, {Candidate: c("local")}}}
	for _, sk := range []presets.Candidate{cTEAttnMLP, cTEAttn} {
		_, why := can(sk)
		p.Skipped = append(p.Skipped, search.Skipped{Candidate: sk, Why: why})
	}
	return p
}

// fakeTargets are what the fake validates: the search's results as the
// predictions, eager first.
func fakeTargets() []job.Target {
	pNone, pAttnMLP, pAttn := result(cNone, 130, 0), result(cTEAttnMLP, 104, 0), result(cTEAttn, 112, 0)
	return []job.Target{{Candidate: cNone, Predicted: &pNone}, {Candidate: cTEAttnMLP, Predicted: &pAttnMLP}, {Candidate: cTEAttn, Predicted: &pAttn}}
}

var (
	cTEAttn    = presets.Candidate{Impl: "transformer_engine", Scopes: []string{"attn"}, Warmup: 3}
	cTEAttnMLP = presets.Candidate{Impl: "transformer_engine", Scopes: []string{"attn", "mlp"}, Warmup: 3}
	cLocalFull = presets.Candidate{Impl: "local", Scopes: []string{"full_iteration"}, Warmup: 3}
	cNone      = presets.Candidate{Impl: "none", Scopes: []string{}, Warmup: 3}
)

// result is a finished measurement of c: step ms, 130 ms eager.
func result(c presets.Candidate, step float64, graph int64) engine.Result {
	return engine.Result{
		Candidate: c, Source: engine.SourceMeasured,
		Device:    engine.DeviceInfo{Index: 0, Name: "NVIDIA H200", Driver: "580.65.06", MemoryMiB: 143771},
		Step:      stepmodel.Stats{Median: step, P10: step * 0.98, P90: step * 1.02, N: 8},
		Eager:     stepmodel.Stats{Median: 130, N: 5},
		Speedup:   130 / step,
		CaptureMs: 850, Graphs: 160, Nodes: 9000,
		Memory: engine.Memory{GraphMiB: graph, GraphFullJobMiB: graph * 2},
	}
}

func samples(c presets.Candidate) []search.Event {
	var evs []search.Event
	phases := []struct {
		phase engine.Phase
		n     int
		ms    float64
	}{{engine.PhaseEager, 5, 130}, {engine.PhaseWarmup, 3, 128}, {engine.PhaseCapture, 1, 260}, {engine.PhaseMeasure, 8, 104}}
	step := 0
	for _, p := range phases {
		for i := range p.n {
			evs = append(evs, search.SampleEvent{GPU: 0, Sample: engine.StepSample{
				Candidate: c.Key(), Phase: p.phase, Step: step, StepMs: p.ms + float64(i%3),
			}})
			step++
		}
	}
	return evs
}

// scriptedEvents is a small search: plan, two candidates measured, one
// OOM, memory readings, and the ranking.
func scriptedEvents() []search.Event {
	space := []search.Planned{
		{Candidate: cNone},
		{Candidate: cTEAttn},
		{Candidate: cTEAttnMLP},
		{Candidate: cLocalFull},
		{Candidate: presets.Candidate{Impl: "transformer_engine", Scopes: []string{"moe"}, Warmup: 3},
			Violations: []recipe.Violation{{ID: "TC-18", Message: "moe scope needs MoE layers"}}},
	}
	rAttn := result(cTEAttn, 112, 900)
	rAttnMLP := result(cTEAttnMLP, 104, 1400)
	rNone := result(cNone, 130, 0)
	rFull := engine.Result{Candidate: cLocalFull, Source: engine.SourceMeasured, Err: "CUDA_ERROR_OUT_OF_MEMORY during capture", ErrKind: engine.FailureOOM}
	evs := []search.Event{
		search.PlanEvent{Space: space, Total: 4},
		search.MemoryEvent{GPU: 0, UsedMiB: 2048, TotalMiB: 143771, UtilGPU: 3},
		search.StartEvent{Candidate: cNone, GPU: 0, Round: 1, Steps: 8},
		search.ResultEvent{GPU: 0, Round: 1, Result: rNone, Done: 1, Total: 4, ETA: 90 * time.Second},
		search.StartEvent{Candidate: cTEAttn, GPU: 0, Round: 1, Steps: 8},
		search.ResultEvent{GPU: 0, Round: 1, Result: rAttn, Done: 2, Total: 4, ETA: 60 * time.Second},
		search.StartEvent{Candidate: cLocalFull, GPU: 0, Round: 1, Steps: 8},
		search.ResultEvent{GPU: 0, Round: 1, Result: rFull, Done: 3, Total: 4, ETA: 30 * time.Second},
		search.StartEvent{Candidate: cTEAttnMLP, GPU: 0, Round: 1, Steps: 8},
	}
	evs = append(evs, samples(cTEAttnMLP)...)
	evs = append(evs,
		search.MemoryEvent{GPU: 0, UsedMiB: 61_234, TotalMiB: 143771, UtilGPU: 96},
		search.ResultEvent{GPU: 0, Round: 1, Result: rAttnMLP, Done: 4, Total: 4, ETA: 0},
	)
	// te attn is the recipe's own setting: every row's speed-up over it.
	ranking := []search.Ranked{
		{Rank: 1, Result: rAttnMLP, JobMs: 5_400, Fits: true, VsReference: 112.0 / 104},
		{Rank: 2, Result: rAttn, JobMs: 5_800, Fits: true, VsReference: 1},
		{Rank: 3, Result: rNone, JobMs: 6_500, Fits: true, Derived: true, Note: "eager baseline of the runs", VsReference: 112.0 / 130},
		{Rank: 4, Result: rFull, Fits: false},
	}
	w, ref := ranking[0], ranking[1]
	return append(evs, search.DoneEvent{Ranking: ranking, Winner: &w, RunDir: "/tmp/cgtune-run", Strategy: "halving",
		Runs: 4, GPUTimeMs: 95_000, Notes: []string{"round 1: 4 candidates, 8 measured steps each", "none derived from the eager baselines of 3 runs"},
		Reference: &search.Reference{Candidate: cTEAttn, From: search.ReferenceFromRecipe, Ranked: &ref}})
}

// estimatedResult is r as the estimate engine reports it: no spread, the
// spec's GPU, and the memory it computes.
func estimatedResult(r engine.Result) engine.Result {
	r.Source = engine.SourceEstimated
	r.Device = engine.DeviceInfo{Name: "H100 SXM (estimated)", MemoryMiB: 81559}
	r.Step.P10, r.Step.P90 = r.Step.Median, r.Step.Median
	if !r.Failed() {
		r.Memory.DevicePeakMiB = 9000 + r.Memory.GraphMiB
		// The memory model's per-GPU figures, as the estimate engine
		// reports them.
		graphs := r.Memory.GraphFullJobMiB
		b := &stepmodel.MemoryBreakdown{Weights: 8600, Gradients: 17200, Optimizer: 12900, Activations: 21500, Graphs: graphs, Context: 600, GPUMiB: 81559}
		b.Total = b.Weights + b.Gradients + b.Optimizer + b.Activations + b.Graphs + b.Context
		b.Fits = b.Total <= b.GPUMiB
		r.Memory.Breakdown = b
	}
	return r
}

// estimated is the scripted search as the estimate engine would report it.
func estimated(evs []search.Event) []search.Event {
	out := make([]search.Event, len(evs))
	for i, e := range evs {
		switch x := e.(type) {
		case search.ResultEvent:
			x.Result = estimatedResult(x.Result)
			out[i] = x
		case search.DoneEvent:
			x.Ranking = slices.Clone(x.Ranking)
			for j := range x.Ranking {
				x.Ranking[j].Result = estimatedResult(x.Ranking[j].Result)
			}
			w := x.Ranking[0]
			x.Winner = &w
			x.GPUTimeMs = 0
			out[i] = x
		default:
			out[i] = e
		}
	}
	return out
}

// clock is a settable time source for Options.Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newTestModel(t *testing.T, f *fakeBackend, w, h int) (*App, *clock) {
	t.Helper()
	clk := &clock{t: t0}
	m := New(f, Options{NoColor: true, Version: "0.1.0-test", Now: clk.now, Model: "llama3_70b", GPUType: "h100"})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	// What Init's Cmds would deliver.
	g, d, err := f.GPUs(context.Background())
	m.Update(gpusMsg{gpus: g, driver: d, err: err})
	l, _ := f.TeamPresets()
	m.Update(presetsMsg{list: l})
	return m, clk
}

// send delivers a message and returns the Cmd Update gave back.
func send(m *App, msg tea.Msg) tea.Cmd {
	_, cmd := m.Update(msg)
	return cmd
}

func press(m *App, keys ...string) tea.Cmd {
	var cmd tea.Cmd
	for _, k := range keys {
		cmd = send(m, keyMsg(k))
	}
	return cmd
}

// keyMsg builds the key press bubbletea would deliver for a key name.
func keyMsg(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "left":
		return tea.KeyPressMsg{Code: tea.KeyLeft}
	case "right":
		return tea.KeyPressMsg{Code: tea.KeyRight}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "pgup":
		return tea.KeyPressMsg{Code: tea.KeyPgUp}
	case "pgdown":
		return tea.KeyPressMsg{Code: tea.KeyPgDown}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	case "ctrl+u":
		return tea.KeyPressMsg{Code: 'u', Mod: tea.ModCtrl}
	}
	r := []rune(k)
	return tea.KeyPressMsg{Code: r[0], Text: k}
}

// planNow runs the plan the space screen asked for, synchronously.
func planNow(t *testing.T, m *App, f *fakeBackend) {
	t.Helper()
	p, err := f.Plan(m.request())
	send(m, planMsg{seq: m.spaceScr.planSeq, plan: p, err: err})
}

// playEvents feeds the fake's events to the run screen, n of them (all
// when n < 0), as the waitForEvent Cmds would.
func playEvents(m *App, f *fakeBackend, n int) {
	ch := make(chan search.Event)
	send(m, startedMsg{events: ch})
	for i, e := range f.events {
		if n >= 0 && i >= n {
			return
		}
		send(m, eventMsg{ev: e})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// winnerOverrides are candidate c's overrides as the results screen
// writes them for the search of req.
func winnerOverrides(req Request, c presets.Candidate) recipe.Overrides {
	return recipe.WinnerOverrides(recipe.Target{Model: req.Model, Layout: req.Layout, MBridge: req.MBridge}, c)
}

// longRanking is the scripted search ending in a ranking of eight rows:
// six that ran (the winner, its w1 twin, the recipe's setting, two local
// graphs, eager derived from the runs) and two failures, one with the
// longest name of the space.
func longRanking(evs []search.Event) []search.Event {
	out := slices.Clone(evs)
	done := out[len(out)-1].(search.DoneEvent)
	c := func(impl string, w int, scopes ...string) presets.Candidate {
		return presets.Candidate{Impl: impl, Scopes: append([]string{}, scopes...), Warmup: w}
	}
	rFullAttn := engine.Result{Candidate: c("local", 3, "full_iteration", "attn"), Source: engine.SourceMeasured,
		Err: "cudaStreamEndCapture: operation not permitted when stream is capturing", ErrKind: engine.FailureCapture}
	ranked := func(rank int, r engine.Result, job float64) search.Ranked {
		return search.Ranked{Rank: rank, Result: r, JobMs: job, Fits: true, VsReference: 112 / r.Step.Median}
	}
	ranking := []search.Ranked{
		ranked(1, result(cTEAttnMLP, 104, 1400), 5_400),
		ranked(2, result(c("transformer_engine", 1, "attn", "mlp"), 106.5, 1400), 5_500),
		ranked(3, result(cTEAttn, 112, 900), 5_800),
		ranked(4, result(c("local", 3, "attn"), 115, 700), 6_000),
		ranked(5, result(c("local", 3), 118, 2600), 6_100),
		ranked(6, result(cNone, 130, 0), 6_500),
		{Result: engine.Result{Candidate: cLocalFull, Source: engine.SourceMeasured, Err: "CUDA_ERROR_OUT_OF_MEMORY during capture", ErrKind: engine.FailureOOM}},
		{Result: rFullAttn},
	}
	ranking[5].Derived, ranking[5].Note = true, "eager baseline of the runs"
	w, ref := ranking[0], ranking[2]
	done.Ranking, done.Winner, done.Runs = ranking, &w, 7
	done.Reference = &search.Reference{Candidate: cTEAttn, From: search.ReferenceFromRecipe, Ranked: &ref}
	out[len(out)-1] = done
	return out
}

// winnerFile is the winner's overrides of search d as the TUI writes them
// (search.Recommendation, in YAML).
func winnerFile(t *testing.T, req Request, d *search.DoneEvent) string {
	t.Helper()
	if d == nil || d.Winner == nil {
		t.Fatal("no winner")
	}
	data, err := search.Recommendation(recipe.Target{Model: req.Model, Layout: req.Layout, MBridge: req.MBridge}, d, *d.Winner).Render("yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
