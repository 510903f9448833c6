// Package tui is cgtune's interactive program: pick a model and layout,
// the GPUs (or the estimate engine), the search space, watch the search,
// and write the winner's recipe overrides. It renders state and talks to
// the outside only through a Backend, from tea.Cmds: it never blocks on a
// GPU.
//
// The root App routes each message to the screen it is for; every
// screen is a model of its own (model_screen.go, gpu_screen.go,
// space_screen.go, run_screen.go, results_screen.go), as the stash and the
// pager are in charmbracelet/glow (ui/stash.go, ui/pager.go, 5378827):
// they share the common frame (common.go) and the session, the search
// they set up and run (session.go), and hand the root what is not theirs
// to do (pages.go).
package tui

import (
	"context"
	"slices"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"cgtune/presets"
	"cgtune/search"
)

// Options configure the program. The zero value works.
type Options struct {
	// NoColor gives plain styles (NO_COLOR set, or output not a colour
	// terminal).
	NoColor bool
	// Version is cgtune's version, stored with saved presets.
	Version string
	// Context is the parent of every search's context: cancelling it
	// stops a running search.
	Context context.Context
	// Model and GPUType pick the first selection (--model, --gpu-type);
	// MBridge the Megatron-Bridge version (default presets.DefaultMBridge).
	Model   string
	GPUType string
	MBridge string
	// Preset starts with a team preset selected (--preset FILE).
	Preset *presets.TeamPreset
	// LayoutSets are the --set values of the fields the layout editor
	// shows (LayoutSetKeys): every layout selected starts with them, as
	// edits the person sees and can change.
	LayoutSets map[string]string
	// Estimate starts with the estimate engine chosen (--engine estimate);
	// GPUs are the GPUs selected at first (--gpu), instead of the idle ones.
	Estimate bool
	GPUs     []int
	// Strategy, Budget and Tie start the space screen (--strategy,
	// --budget, --tie).
	Strategy string
	Budget   time.Duration
	Tie      float64
	// WhatIf starts the space screen with the what-if rows on (--what-if).
	WhatIf bool
	// TrainIters is the job length job-level times are for (--train-iters;
	// 0: search.DefaultTrainIters).
	TrainIters int
	// EmitPath and Format are the write prompt's default path and the
	// overrides format shown first (--emit, --format).
	EmitPath string
	Format   string
	// Sets are the --set recipe overrides the searches run with; the
	// overrides a candidate needs of them are emitted with it.
	Sets map[string]string
	// JobLauncher, JobCommand and JobIters prefill the results screen's
	// validation form, which runs the top candidates as real training jobs
	// (--launcher, --command, --job-iters).
	JobLauncher string
	JobCommand  string
	JobIters    int
	// Now is the clock (tests pin it).
	Now func() time.Time
}

// App is the root bubbletea model. It owns what the screens share (the
// common frame and the session: the search as set up and as run), draws
// the frame around the current screen, and routes each message to the
// screen it is for.
type App struct {
	*common
	*session

	help   help.Model
	isDark bool

	screen  screen
	reached screen // furthest screen reached, for the breadcrumb

	modelScr *modelScreen
	gpuScr   *gpuScreen
	spaceScr *spaceScreen
	runScr   *runScreen
	resScr   *resultsScreen

	errView errorView // over the screen while alertOpen
}

// New builds the program's model. builtins come from the embedded presets.
func New(b Backend, opts Options) *App {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.MBridge == "" {
		opts.MBridge = presets.DefaultMBridge
	}
	m := &App{
		common:  &common{backend: b, opts: opts, keys: DefaultKeyMap(), width: 80, height: 24},
		session: newSession(opts),
		help:    help.New(),
		isDark:  true, // until the terminal tells us otherwise
	}
	m.gpuScr = newGPUScreen(m.common, m.session)
	m.spaceScr = newSpaceScreen(m.common, m.session)
	m.runScr = newRunScreen(m.common, m.session)
	m.resScr = newResultsScreen(m.common, m.session)
	m.setStyles()
	builtins, err := presets.BuiltinModels()
	if err != nil {
		m.setError(err)
	}
	m.modelScr = newModelScreen(m.common, m.session, builtins)
	m.layoutSizes()
	return m
}

// newSession is the search as the options set it up, before the model
// screen selects the recipe.
func newSession(opts Options) *session {
	s := &session{
		gpuSel:     map[int]bool{},
		estimate:   opts.Estimate,
		strategy:   Strategies[0],
		budget:     10 * time.Minute,
		tie:        search.DefaultTie,
		space:      newSpaceChoice(presets.DefaultSpace()),
		trainIters: opts.TrainIters,
		whatIf:     opts.WhatIf,
	}
	s.sel.mbridge = opts.MBridge
	if slices.Contains(Strategies, opts.Strategy) {
		s.strategy = opts.Strategy
	}
	if opts.Budget != 0 {
		s.budget = opts.Budget
	}
	if opts.Tie != 0 {
		s.tie = opts.Tie
	}
	return s
}

func (m *App) setStyles() {
	m.st = NewStyles(m.isDark, m.opts.NoColor)
	m.help.Styles = m.st.Help
	m.runScr.setStyles()
}

// Outcome is how the session ended, for the exit code: whether a search
// was stopped (or left running) before it finished.
func (m *App) Outcome() (done *search.DoneEvent, interrupted bool) {
	if m.run == nil {
		return nil, false
	}
	return m.done, !m.run.finished || (m.done != nil && m.done.Interrupted)
}

// Init loads what the first screens show, and asks the terminal for its
// background so the palette matches it.
func (m *App) Init() tea.Cmd {
	return tea.Batch(
		m.modelScr.Init(),
		m.gpuScr.Init(),
		tea.RequestBackgroundColor,
	)
}

// page is the screen on show.
func (m *App) page() page {
	switch m.screen {
	case screenGPU:
		return m.gpuScr
	case screenSpace:
		return m.spaceScr
	case screenRun:
		return m.runScr
	case screenResults:
		return m.resScr
	}
	return m.modelScr
}

// Update handles one message: the frame's own (size, background, the
// keys every screen shares) here, the others in the screen they are for.
func (m *App) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.layoutSizes()
		return m, nil
	case tea.BackgroundColorMsg:
		m.isDark = msg.IsDark()
		m.setStyles()
		return m, nil
	case tea.KeyPressMsg:
		return m, m.handleKey(msg)
	case presetsMsg, presetLoadedMsg, presetImportedMsg:
		return m, m.update(m.modelScr, msg)
	case gpusMsg:
		return m, m.update(m.gpuScr, msg)
	case planMsg:
		return m, m.update(m.spaceScr, msg)
	case startedMsg, eventMsg, tickMsg:
		return m, m.update(m.runScr, msg)
	case writtenMsg, reportMsg, savedMsg, validatePlanMsg, validateStartedMsg, validateMsg:
		return m, m.update(m.resScr, msg)
	case tea.PasteMsg:
		if m.screen == screenResults {
			return m, m.update(m.resScr, msg)
		}
	}
	return m, nil
}

// typing reports whether a text field has the keyboard, so printable keys
// (q, ?) are text, not commands.
func (m *App) typing() bool { return m.page().typing() }

// helpOpens reports whether ? opens the full help: not while a prompt
// or the validation form takes it as text.
func (m *App) helpOpens() bool {
	return !m.alertOpen && (m.screen != screenResults || !m.resScr.typing())
}

// validating reports whether jobs are being started or run: then q and
// ctrl+c cancel them instead of quitting.
func (m *App) validating() bool {
	return m.screen == screenResults && m.resScr.validating()
}

func (m *App) handleKey(msg tea.KeyPressMsg) tea.Cmd {
	// ctrl+c always means "get me out": on the run screen it asks to stop
	// the search (partial results are kept); elsewhere it quits.
	if msg.String() == "ctrl+c" && m.screen != screenRun && !m.validating() {
		return tea.Quit
	}
	if m.tooSmall() {
		// Nothing of the screen is visible: a key would act blind. Only
		// ctrl+c (above, or on the run screen) and q get through.
		if m.screen == screenRun {
			return m.update(m.runScr, msg)
		}
		if key.Matches(msg, m.keys.Quit) {
			return tea.Quit
		}
		return nil
	}
	if m.alertOpen {
		if m.errView.key(msg, m.keys) {
			m.alertOpen = false
		}
		return nil
	}
	if msg.String() == "!" && m.alert != "" && !m.typing() {
		m.alertOpen = true
		return nil
	}
	if key.Matches(msg, m.keys.Help) && m.helpOpens() {
		m.help.ShowAll = !m.help.ShowAll
		return nil
	}
	if key.Matches(msg, m.keys.Quit) && !m.typing() && m.screen != screenRun && !m.validating() {
		return tea.Quit
	}
	return m.update(m.page(), msg)
}

// update passes msg to screen p and does what it hands over.
func (m *App) update(p page, msg tea.Msg) tea.Cmd {
	cmd, h := p.Update(msg)
	if h == nil {
		return cmd
	}
	return tea.Batch(cmd, m.takeHandoff(h))
}

// takeHandoff does what a screen asked of the root.
func (m *App) takeHandoff(h handoff) tea.Cmd {
	switch h := h.(type) {
	case goTo:
		return m.goTo(h.to)
	case backTo:
		m.screen = h.to
	case startSearch:
		return m.startSearch(h.plan)
	}
	return nil
}

// goTo switches screens and starts what the new screen needs.
func (m *App) goTo(s screen) tea.Cmd {
	m.screen = s
	m.reached = max(m.reached, s)
	m.clearStatus()
	m.help.ShowAll = false
	return m.page().enter()
}

// startSearch starts the search of the plan's valid candidates on the
// run screen; the results of the last one go.
func (m *App) startSearch(plan []search.Planned) tea.Cmd {
	m.resScr.reset()
	cmd := m.goTo(screenRun)
	return tea.Batch(cmd, m.runScr.start(m.request(), plan))
}

// View draws the frame (header, screen, status line, key help), always
// exactly the window's size so nothing scrolls.
func (m *App) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	v.WindowTitle = "cgtune · " + screenNames[m.screen]
	return v
}
