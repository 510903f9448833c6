// Package tui is cgtune's interactive program: pick a model and layout,
// the GPUs (or the estimate engine), the search space, watch the search,
// and write the winner's recipe overrides. It renders state and talks to
// the outside only through a Backend, from tea.Cmds: it never blocks on a
// GPU.
package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

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

// Model is the root bubbletea model. It owns what the screens share (the
// common frame and the session: the search as set up and as run) and
// routes each message to the screen it is for.
type Model struct {
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
	resScr   resultsScreen
}

// New builds the program's model. builtins come from the embedded presets.
func New(b Backend, opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.MBridge == "" {
		opts.MBridge = presets.DefaultMBridge
	}
	m := &Model{
		common: &common{backend: b, opts: opts, keys: DefaultKeyMap(), width: 80, height: 24},
		session: &session{
			gpuSel:     map[int]bool{},
			estimate:   opts.Estimate,
			strategy:   Strategies[0],
			budget:     10 * time.Minute,
			tie:        search.DefaultTie,
			space:      newSpaceChoice(presets.DefaultSpace()),
			trainIters: opts.TrainIters,
		},
		help:   help.New(),
		isDark: true, // until the terminal tells us otherwise
	}
	if slices.Contains(Strategies, opts.Strategy) {
		m.strategy = opts.Strategy
	}
	if opts.Budget != 0 {
		m.budget = opts.Budget
	}
	if opts.Tie != 0 {
		m.tie = opts.Tie
	}
	if i := slices.Index(presets.Formats, opts.Format); i >= 0 {
		m.resScr.format = i
	}
	m.gpuScr = newGPUScreen(m.common, m.session)
	m.spaceScr = newSpaceScreen(m.common, m.session)
	m.runScr = newRunScreen(m.common, m.session)
	m.setStyles()
	builtins, err := presets.BuiltinModels()
	if err != nil {
		m.setError(err)
	}
	m.sel.mbridge = opts.MBridge
	m.modelScr = newModelScreen(m.common, m.session, builtins)
	m.layoutSizes()
	return m
}

func (m *Model) setStyles() {
	m.st = NewStyles(m.isDark, m.opts.NoColor)
	m.help.Styles = m.st.Help
	m.runScr.setStyles()
}

// Outcome is how the session ended, for the exit code: whether a search
// was stopped (or left running) before it finished.
func (m *Model) Outcome() (done *search.DoneEvent, interrupted bool) {
	if m.run == nil {
		return nil, false
	}
	return m.done, !m.run.finished || (m.done != nil && m.done.Interrupted)
}

// Init loads what the first screens show, and asks the terminal for its
// background so the palette matches it.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(
		m.modelScr.Init(),
		m.gpuScr.Init(),
		tea.RequestBackgroundColor,
	)
}

// typing reports whether a text field has the keyboard, so printable keys
// (q, ?) are text, not commands.
func (m *Model) typing() bool {
	switch m.screen {
	case screenModel:
		return m.modelScr.typing()
	case screenResults:
		return m.resScr.prompt != promptNone || m.resScr.val.phase == valForm
	}
	return false
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
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
	case gpusMsg:
		return m, m.update(m.gpuScr, msg)
	case presetsMsg, presetLoadedMsg:
		return m, m.update(m.modelScr, msg)
	case planMsg:
		return m, m.update(m.spaceScr, msg)
	case startedMsg, eventMsg, tickMsg:
		return m, m.update(m.runScr, msg)
	case writtenMsg:
		m.onWritten(msg)
		return m, nil
	case reportMsg:
		m.onReport(msg)
		return m, nil
	case savedMsg:
		return m, m.onSaved(msg)
	case validateStartedMsg:
		return m, m.onValidateStarted(msg)
	case validateMsg:
		return m, m.onValidate(msg)
	case tea.PasteMsg:
		if m.screen == screenResults {
			m.onPaste(msg.Content)
		}
		return m, nil
	}
	return m, nil
}

func (m *Model) handleKey(msg tea.KeyPressMsg) tea.Cmd {
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
	prompting := m.screen == screenResults && (m.resScr.prompt != promptNone || m.resScr.val.phase == valForm)
	if key.Matches(msg, m.keys.Help) && !prompting {
		m.help.ShowAll = !m.help.ShowAll
		return nil
	}
	if key.Matches(msg, m.keys.Quit) && !m.typing() && m.screen != screenRun && !m.validating() {
		return tea.Quit
	}
	switch m.screen {
	case screenModel:
		return m.update(m.modelScr, msg)
	case screenGPU:
		return m.update(m.gpuScr, msg)
	case screenSpace:
		return m.update(m.spaceScr, msg)
	case screenRun:
		return m.update(m.runScr, msg)
	case screenResults:
		return m.resultsKey(msg)
	}
	return nil
}

// update passes msg to screen p and does what it hands over.
func (m *Model) update(p page, msg tea.Msg) tea.Cmd {
	cmd, h := p.Update(msg)
	if h == nil {
		return cmd
	}
	return tea.Batch(cmd, m.takeHandoff(h))
}

// takeHandoff does what a screen asked of the root.
func (m *Model) takeHandoff(h handoff) tea.Cmd {
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
func (m *Model) goTo(s screen) tea.Cmd {
	m.screen = s
	m.reached = max(m.reached, s)
	m.clearStatus()
	m.help.ShowAll = false
	switch s {
	case screenGPU:
		return m.gpuScr.enter()
	case screenSpace:
		return m.spaceScr.enter()
	case screenResults:
		return m.enterResults()
	}
	return nil
}

// startSearch starts the search of the plan's valid candidates on the
// run screen; the results of the last one go.
func (m *Model) startSearch(plan []search.Planned) tea.Cmd {
	m.resScr = resultsScreen{}
	cmd := m.goTo(screenRun)
	return tea.Batch(cmd, m.runScr.start(m.request(), plan))
}

// Sizes of the frame around the screens.
const (
	headerLines = 2 // header and rule
	minWidth    = 60
	minHeight   = 16
)

func (m *Model) layoutSizes() {
	m.help.SetWidth(m.width - 1)
}

func (m *Model) helpView() string {
	h := m.screenHelp()
	if m.help.ShowAll {
		// Inside the full help, ? closes it.
		for i := range h.full {
			for j, b := range h.full[i] {
				if key.Matches(tea.KeyPressMsg{Code: '?', Text: "?"}, b) {
					h.full[i][j] = withHelp(b, "?", "fewer keys")
				}
			}
		}
	}
	out := m.help.View(h)
	whole := m.help // a copy without the width limit, which cuts with …
	whole.SetWidth(0)
	if m.help.ShowAll && blockWidth(whole.View(h)) > m.width-1 {
		// The groups side by side do not fit: every key, in as many
		// columns as the width takes, so none is cut.
		return m.flowHelp(h.FullHelp(), m.width-1)
	}
	return out
}

// blockWidth is the width of the widest line of s.
func blockWidth(s string) int {
	w := 0
	for _, l := range strings.Split(s, "\n") {
		w = max(w, ansi.StringWidth(l))
	}
	return w
}

// flowHelp lays the enabled bindings of groups out in columns (down, then
// across), each entry "key description": the fewest rows whose columns,
// each as wide as its widest entry, fit in w.
func (m *Model) flowHelp(groups [][]key.Binding, w int) string {
	st := m.help.Styles
	type entry struct{ k, d string }
	var entries []entry
	for _, g := range groups {
		for _, b := range g {
			if b.Enabled() && b.Help().Key != "" {
				entries = append(entries, entry{b.Help().Key, b.Help().Desc})
			}
		}
	}
	const gap = 3
	n := len(entries)
	for cols := n; cols >= 1; cols-- {
		rows := (n + cols - 1) / cols
		cols = (n + rows - 1) / rows // no empty column
		keyW, descW := make([]int, cols), make([]int, cols)
		total := gap * (cols - 1)
		for c := range cols {
			for _, e := range entries[c*rows : min((c+1)*rows, n)] {
				keyW[c], descW[c] = max(keyW[c], ansi.StringWidth(e.k)), max(descW[c], ansi.StringWidth(e.d))
			}
			total += keyW[c] + 1 + descW[c]
		}
		if total > w && cols > 1 {
			continue
		}
		lines := make([]string, rows)
		for i, e := range entries {
			r, c := i%rows, i/rows
			cell := st.FullKey.Render(padRight(e.k, keyW[c])) + " " + st.FullDesc.Render(e.d)
			if i+rows < n {
				cell = padRight(cell, keyW[c]+1+descW[c]+gap)
			}
			lines[r] += cell
		}
		return strings.Join(lines, "\n")
	}
	return ""
}

func (m *Model) screenHelp() helpKeys {
	switch m.screen {
	case screenModel:
		return m.modelScr.helpKeys()
	case screenGPU:
		return m.gpuScr.helpKeys()
	case screenSpace:
		return m.spaceScr.helpKeys()
	case screenRun:
		return m.runScr.helpKeys()
	case screenResults:
		return m.resultsHelp()
	}
	return helpKeys{}
}

// View draws the frame (header, screen, status line, key help), always
// exactly the window's size so nothing scrolls.
func (m *Model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	v.WindowTitle = "cgtune · " + screenNames[m.screen]
	return v
}

// tooSmall reports whether the window is below the minimum size, when the
// screens are not drawn.
func (m *Model) tooSmall() bool { return m.width < minWidth || m.height < minHeight }

func (m *Model) render() string {
	w, h := m.width, m.height
	if m.tooSmall() {
		// Wrapped, so that the message itself is not cut.
		return fitBlock(wrap(fmt.Sprintf("cgtune needs a window of at least %d×%d (80×24 is comfortable); this one is %d×%d.", minWidth, minHeight, w, h), w), w, h)
	}
	helpLines := strings.Split(m.helpView(), "\n")
	for i, l := range helpLines {
		// help.Model can overshoot its width by one item; cut it here.
		helpLines[i] = ansi.Truncate(" "+l, w, "…")
	}
	bodyH := h - headerLines - 1 - len(helpLines)
	var body string
	switch m.screen {
	case screenModel:
		body = m.modelScr.View(w, bodyH)
	case screenGPU:
		body = m.gpuScr.View(w, bodyH)
	case screenSpace:
		body = m.spaceScr.View(w, bodyH)
	case screenRun:
		body = m.runScr.View(w, bodyH)
	case screenResults:
		body = m.resultsView(w, bodyH)
	}
	parts := []string{
		m.headerView(w),
		m.st.Rule.Render(strings.Repeat("─", w)),
		fitBlock(body, w, bodyH),
		m.statusView(w),
	}
	parts = append(parts, helpLines...)
	return strings.Join(parts, "\n")
}

func (m *Model) headerView(w int) string {
	var steps []string
	for i, n := range screenNames {
		label := n
		switch {
		case screen(i) == m.screen && m.st.Plain:
			steps = append(steps, "["+label+"]")
		case screen(i) == m.screen:
			steps = append(steps, m.st.StepActive.Render(" "+label+" "))
		case screen(i) <= m.reached:
			steps = append(steps, m.st.StepDone.Render(label))
		default:
			steps = append(steps, m.st.Step.Render(label))
		}
	}
	left := " " + m.st.App.Render("cgtune") + "   " + strings.Join(steps, m.st.Faint.Render(" › "))
	var badges []string
	if m.reached >= screenGPU || m.estimate {
		if m.estimate {
			badges = append(badges, m.st.Estimate.Render(" ESTIMATE "))
		} else if len(m.request().GPUs) > 0 {
			badges = append(badges, m.st.Measured.Render(" MEASURED "))
		}
	}
	right := strings.Join(badges, " ")
	return joinEnds(left, right, w)
}

func (m *Model) statusView(w int) string {
	right := m.st.Muted.Render(m.contextLine())
	left := m.status
	style := m.st.Status
	if m.statusErr {
		style = m.st.StatusEr
		left = "✗ " + left
	}
	// The context summary yields to a long message: the message is what the
	// person has to read now.
	avail := w - 1 - ansi.StringWidth(right) - 2
	if ansi.StringWidth(left) > avail {
		right = ""
		avail = w - 1
	}
	left = ansi.Truncate(left, avail, "…")
	return joinEnds(" "+style.Render(left), right, w)
}

// contextLine summarises the selection: model, GPU type × count, MB.
func (m *Model) contextLine() string {
	if m.sel.model.Name == "" {
		return ""
	}
	parts := []string{m.sel.model.Name}
	if m.sel.preset != "" {
		parts[0] = m.sel.preset + " (" + m.sel.model.Name + ")"
	}
	parts = append(parts, fmt.Sprintf("%s×%d", m.sel.layout.GPU, m.sel.layout.NumGPUs), "MB "+m.sel.mbridge)
	return strings.Join(parts, " · ") + " "
}

// joinEnds puts left and right on one line of width w, right-aligned.
func joinEnds(left, right string, w int) string {
	lw, rw := ansi.StringWidth(left), ansi.StringWidth(right)
	if lw+rw+1 > w {
		if rw >= w {
			return ansi.Truncate(left, w, "…")
		}
		left = ansi.Truncate(left, w-rw-1, "…")
		lw = ansi.StringWidth(left)
	}
	if right == "" {
		return left
	}
	return left + strings.Repeat(" ", w-lw-rw) + right
}

// fitBlock makes s exactly h lines, each cut to at most w cells.
func fitBlock(s string, w, h int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		if ansi.StringWidth(l) > w {
			lines[i] = ansi.Truncate(l, w, "")
		}
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// sideBySide joins two blocks with a gap, the left one padded to lw.
func sideBySide(left string, lw int, right string, gap int) string {
	l := lipgloss.NewStyle().Width(lw).Render(left)
	return lipgloss.JoinHorizontal(lipgloss.Top, l, strings.Repeat(" ", gap), right)
}

// nextIn returns the element after cur in list (wrapping); the first when
// cur is not in it.
func nextIn[T comparable](list []T, cur T, step int) T {
	if len(list) == 0 {
		return cur
	}
	i := slices.Index(list, cur)
	if i < 0 {
		return list[0]
	}
	return list[((i+step)%len(list)+len(list))%len(list)]
}
