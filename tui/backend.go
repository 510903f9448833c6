package tui

import (
	"context"
	"errors"
	"time"

	tea "charm.land/bubbletea/v2"

	"cgtune/engine"
	"cgtune/engine/job"
	"cgtune/presets"
	"cgtune/report"
	"cgtune/search"
)

// Backend is everything the TUI needs from the outside world. The TUI calls
// it only from tea.Cmds, so a slow NVML call, a preset folder on a network
// mount or a search that takes an hour never blocks a key press.
type Backend interface {
	// GPUs lists the NVML devices. An error wrapping ErrNoDriver means this
	// machine has no NVIDIA driver: the TUI then offers the estimate engine.
	GPUs(ctx context.Context) ([]engine.GPUStatus, DriverInfo, error)
	// TeamPresets lists the presets on the search path (broken ones too,
	// with their Problem set).
	TeamPresets() ([]presets.PresetInfo, error)
	LoadPreset(name string) (presets.TeamPreset, error)
	// ImportMBConfig reads a Megatron-Bridge ConfigContainer YAML (what
	// MB's to_yaml and run_script.py --dryrun write) as a team preset of
	// MB release mbridge, unsaved.
	ImportMBConfig(path, mbridge string) (presets.TeamPreset, error)
	// Plan expands the request's space and checks every candidate against
	// the rules (search.Plan).
	Plan(req Request) ([]search.Planned, error)
	// Start runs the search (search.Run) on its own goroutine and forwards
	// every event; NVML memory readings of the GPUs in use are merged in as
	// search.MemoryEvent. The channel is closed after the DoneEvent.
	// Cancelling ctx stops the search; the runner then still sends a
	// DoneEvent (Interrupted) with the partial ranking.
	Start(ctx context.Context, req Request) (<-chan search.Event, error)
	// Pause holds the running search's next candidates back (true) or lets
	// them start again (false); candidates already running go on. It
	// returns at once (Update calls it).
	Pause(paused bool)
	// WriteOverrides writes an overrides file atomically and returns the
	// absolute path it wrote (a relative path is where cgtune runs);
	// without overwrite, an existing file is an error wrapping
	// ErrFileExists.
	WriteOverrides(path string, data []byte, overwrite bool) (string, error)
	// WriteReport writes the Markdown report of a search and its plot
	// beside it (report.Write) and returns the absolute paths of both;
	// without overwrite, an existing report is an error wrapping
	// ErrFileExists.
	WriteReport(path string, in report.Input, overwrite bool) (written, plot string, err error)
	// SavePreset saves a team preset in the user folder and returns its
	// path; without overwrite, an existing preset of that name is an error
	// wrapping ErrPresetExists.
	SavePreset(p presets.TeamPreset, overwrite bool) (string, error)
	// PlanValidation says what Validate would run for the search in
	// runDir and its top graphed candidates, as `cgtune validate RUN`
	// picks them (search.JobValidationForRun with the jobs' framework
	// asked what it can build), without starting anything: the targets,
	// the eager baseline first, and the top candidates skipped, with why.
	PlanValidation(ctx context.Context, runDir string, top int) (ValidationPlan, error)
	// Validate runs the top candidates of the finished search in
	// req.RunDir and the eager baseline as real training jobs
	// (search.ValidateOnJobs) with the command and launcher the person
	// confirmed; it returns what runs and a channel of the jobs' states,
	// log tails and results, closed after the update with the outcome (or
	// the error). Cancelling ctx cancels the queued and running jobs.
	Validate(ctx context.Context, req ValidateRequest) (Validation, error)
}

// ValidateRequest is a validation of a finished search on real training
// jobs, as the person confirmed it.
type ValidateRequest struct {
	RunDir   string // the search's run folder
	Top      int    // how many of its best graphed candidates
	Launcher string // local or slurm
	Command  string // the command template, as shown
	Iters    int    // training iterations per job (0: the backend's default)
}

// ValidationPlan is what a validation would run: its targets (the eager
// baseline first) and the top candidates it skips, with why.
type ValidationPlan struct {
	Targets []job.Target
	Skipped []search.Skipped
}

// Validation is a validation on its way: the candidates it runs (the
// eager baseline among them), its folder and its updates.
type Validation struct {
	Targets []job.Target
	// Skipped are top candidates the jobs' framework cannot build.
	Skipped []search.Skipped
	Dir     string
	Updates <-chan ValidationUpdate
}

// ValidationUpdate is one report of a running validation: a job's event,
// or (the last one) the outcome or the error that ended it.
type ValidationUpdate struct {
	Event   job.ValidateEvent
	Outcome *search.JobOutcome
	Err     error
}

// ErrNoDriver is what Backend.GPUs wraps when there is no NVIDIA driver.
var ErrNoDriver = errors.New("no NVIDIA driver")

// ErrPresetExists is what Backend.SavePreset wraps when the name is taken.
var ErrPresetExists = errors.New("preset exists")

// ErrFileExists is what Backend.WriteOverrides and WriteReport wrap when
// the file is there and overwriting was not asked for.
var ErrFileExists = errors.New("file exists")

// DriverInfo is the driver of the machine's GPUs.
type DriverInfo struct {
	Version string // e.g. 580.65.06
	CUDA    string // CUDA version the driver supports, e.g. 13.0
	// Engine measures the candidates on these GPUs (megatron or cuda) and
	// EngineWhy says why it was chosen.
	Engine    string
	EngineWhy string
}

// Strategies are the search strategies the TUI offers.
var Strategies = []string{"halving", "exhaustive"}

// NoBudget is the budget without a limit (search.Config reads a negative
// Budget so).
const NoBudget time.Duration = -1

// Budgets are the time budgets the TUI cycles through, NoBudget last.
var Budgets = []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute, time.Hour, NoBudget}

// Request is one search as the person set it up. The cmd side turns it into
// the runner's configuration (engines, run folder, defaults the TUI does not
// expose), so the TUI does not depend on how the runner is wired.
type Request struct {
	Model   presets.Model
	Layout  presets.Layout // Layout.GPU is the GPU type (h100, b200, ...)
	MBridge string
	Space   presets.Space
	// Strategy is one of Strategies; Budget bounds the halving search's
	// time (NoBudget: no limit).
	Strategy string
	Budget   time.Duration
	// Tie is the ranking's tie band (search.RankOptions.Tie).
	Tie float64
	// TrainIters is the job length job-level times are for (0: the
	// search's default).
	TrainIters int
	// GPUs are the NVML indices to measure on; empty with Estimate.
	GPUs []int
	// Estimate selects the estimate engine (no GPU, labelled ESTIMATE): it
	// estimates for Layout.GPU.
	Estimate bool
	// WhatIf adds the what-if rows (search.Config.WhatIf): they run and
	// rank in a table of their own (the report's "What it would take");
	// the winner stays a candidate the recipe allows.
	WhatIf bool
}

// Messages the Cmds deliver back to Update.

type gpusMsg struct {
	gpus   []engine.GPUStatus
	driver DriverInfo
	err    error
}

type presetsMsg struct {
	list []presets.PresetInfo
	err  error
}

type presetLoadedMsg struct {
	name   string
	preset presets.TeamPreset
	err    error
}

// presetImportedMsg answers an import of a Megatron-Bridge config file.
type presetImportedMsg struct {
	path   string
	preset presets.TeamPreset
	err    error
}

type planMsg struct {
	seq  int // drops answers to a space that has changed since
	plan []search.Planned
	err  error
}

type startedMsg struct {
	events <-chan search.Event
	err    error
}

// eventMsg is one event of the running search; closed says the channel is
// done (after the DoneEvent, or without one if the backend failed).
type eventMsg struct {
	ev     search.Event
	closed bool
}

type writtenMsg struct {
	path, format string
	written      string // the absolute path written
	lines        int
	data         []byte // what was (to be) written, for the overwrite question
	err          error
}

type reportMsg struct {
	path, plot string
	written    string // the absolute path of the report written
	in         report.Input
	err        error
	// again: a report written before, rewritten to the ranking on screen
	// after it was ranked again (t).
	again bool
}

type savedMsg struct {
	name, path string
	err        error
}

type tickMsg time.Time

// validatePlanMsg is what a validation of the top candidates would run;
// top says for which Top it was asked.
type validatePlanMsg struct {
	top  int
	plan ValidationPlan
	err  error
}

type validateStartedMsg struct {
	v   Validation
	err error
}

// validateMsg is one update of the running validation; closed says the
// channel is done.
type validateMsg struct {
	u      ValidationUpdate
	closed bool
}

func fetchGPUs(ctx context.Context, b Backend) tea.Cmd {
	return func() tea.Msg {
		g, d, err := b.GPUs(ctx)
		return gpusMsg{gpus: g, driver: d, err: err}
	}
}

func fetchPresets(b Backend) tea.Cmd {
	return func() tea.Msg {
		l, err := b.TeamPresets()
		return presetsMsg{list: l, err: err}
	}
}

func importMBConfig(b Backend, path, mbridge string) tea.Cmd {
	return func() tea.Msg {
		p, err := b.ImportMBConfig(path, mbridge)
		return presetImportedMsg{path: path, preset: p, err: err}
	}
}

func loadPreset(b Backend, name string) tea.Cmd {
	return func() tea.Msg {
		p, err := b.LoadPreset(name)
		return presetLoadedMsg{name: name, preset: p, err: err}
	}
}

func planCmd(b Backend, seq int, req Request) tea.Cmd {
	return func() tea.Msg {
		p, err := b.Plan(req)
		return planMsg{seq: seq, plan: p, err: err}
	}
}

func startCmd(ctx context.Context, b Backend, req Request) tea.Cmd {
	return func() tea.Msg {
		ch, err := b.Start(ctx, req)
		return startedMsg{events: ch, err: err}
	}
}

// waitForEvent reads one event; Update asks for the next one after handling
// it, so the channel is drained at the pace the TUI can draw.
func waitForEvent(ch <-chan search.Event) tea.Cmd {
	return func() tea.Msg {
		ev, ok := <-ch
		if !ok {
			return eventMsg{closed: true}
		}
		return eventMsg{ev: ev}
	}
}

func writeCmd(b Backend, path, format string, data []byte, overwrite bool) tea.Cmd {
	return func() tea.Msg {
		written, err := b.WriteOverrides(path, data, overwrite)
		lines := 0
		for _, c := range data {
			if c == '\n' {
				lines++
			}
		}
		return writtenMsg{path: path, written: written, format: format, lines: lines, data: data, err: err}
	}
}

func reportCmd(b Backend, path string, in report.Input, overwrite bool) tea.Cmd {
	return func() tea.Msg {
		written, plot, err := b.WriteReport(path, in, overwrite)
		return reportMsg{path: path, written: written, plot: plot, in: in, err: err}
	}
}

// rewriteReportCmd writes the report at path, which this screen wrote,
// again for the ranking now on screen.
func rewriteReportCmd(b Backend, path string, in report.Input) tea.Cmd {
	return func() tea.Msg {
		written, plot, err := b.WriteReport(path, in, true)
		return reportMsg{path: path, written: written, plot: plot, in: in, err: err, again: true}
	}
}

func saveCmd(b Backend, p presets.TeamPreset, overwrite bool) tea.Cmd {
	return func() tea.Msg {
		path, err := b.SavePreset(p, overwrite)
		return savedMsg{name: p.Name, path: path, err: err}
	}
}

func planValidationCmd(ctx context.Context, b Backend, runDir string, top int) tea.Cmd {
	return func() tea.Msg {
		p, err := b.PlanValidation(ctx, runDir, top)
		return validatePlanMsg{top: top, plan: p, err: err}
	}
}

func validateCmd(ctx context.Context, b Backend, req ValidateRequest) tea.Cmd {
	return func() tea.Msg {
		v, err := b.Validate(ctx, req)
		return validateStartedMsg{v: v, err: err}
	}
}

// waitForValidation reads one update; Update asks for the next one after
// handling it.
func waitForValidation(ch <-chan ValidationUpdate) tea.Cmd {
	return func() tea.Msg {
		u, ok := <-ch
		if !ok {
			return validateMsg{closed: true}
		}
		return validateMsg{u: u}
	}
}

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}
