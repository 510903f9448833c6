package tui

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"cgtune/engine"
)

// Screen (b): the NVML devices to measure on, or the estimate engine.

// gpuScreen lists the GPUs NVML sees and selects those the search measures
// on, or takes the estimate engine. The listing and the selection are the
// session's: the search's request and the results read them.
type gpuScreen struct {
	*common
	*session

	cursor   int
	err      error // what NVML said, shown above the list
	noDriver bool  // no NVIDIA driver here: only the estimate engine is offered
	loaded   bool  // NVML has answered
	chosen   bool  // the GPU selection was made (by --gpu or by the person)
}

func newGPUScreen(c *common, s *session) *gpuScreen {
	return &gpuScreen{common: c, session: s}
}

// Init reads the GPUs.
func (s *gpuScreen) Init() tea.Cmd { return fetchGPUs(s.opts.Context, s.backend) }

// enter reads the GPUs unless NVML has answered already.
func (s *gpuScreen) enter() tea.Cmd {
	if !s.loaded {
		return s.Init()
	}
	return nil
}

func (s *gpuScreen) typing() bool { return false }

func (s *gpuScreen) Update(msg tea.Msg) (tea.Cmd, handoff) {
	switch msg := msg.(type) {
	case gpusMsg:
		s.onGPUs(msg)
	case tea.KeyPressMsg:
		return s.key(msg)
	}
	return nil, nil
}

func (s *gpuScreen) onGPUs(msg gpusMsg) {
	s.loaded = true
	s.gpus, s.driver, s.err = msg.gpus, msg.driver, msg.err
	s.noDriver = errors.Is(msg.err, ErrNoDriver)
	if s.noDriver {
		s.gpuSel = map[int]bool{}
		return
	}
	// Keep the choice across a refresh; on the first listing select the
	// --gpu ones, or else the idle GPUs, which a measurement can have alone.
	if !s.chosen {
		s.chosen = true
		for _, g := range s.gpus {
			if len(s.opts.GPUs) > 0 {
				s.gpuSel[g.Index] = slices.Contains(s.opts.GPUs, g.Index)
			} else {
				s.gpuSel[g.Index] = len(g.Processes) == 0
			}
		}
	}
	for i := range s.gpuSel {
		if !s.hasGPU(i) {
			delete(s.gpuSel, i)
		}
	}
	s.cursor = min(s.cursor, max(len(s.gpus)-1, 0))
}

func (s *gpuScreen) hasGPU(i int) bool {
	for _, g := range s.gpus {
		if g.Index == i {
			return true
		}
	}
	return false
}

func (s *gpuScreen) selectedGPUs() int {
	n := 0
	for _, g := range s.gpus {
		if s.gpuSel[g.Index] {
			n++
		}
	}
	return n
}

func (s *gpuScreen) key(msg tea.KeyPressMsg) (tea.Cmd, handoff) {
	k := s.keys
	switch {
	case key.Matches(msg, k.Back):
		return nil, backTo{screenModel}
	case key.Matches(msg, k.Up):
		s.cursor = max(s.cursor-1, 0)
	case key.Matches(msg, k.Down):
		s.cursor = min(s.cursor+1, max(len(s.gpus)-1, 0))
	case key.Matches(msg, k.Toggle):
		if len(s.gpus) > 0 && !s.estimate {
			i := s.gpus[s.cursor].Index
			s.gpuSel[i] = !s.gpuSel[i]
		}
	case key.Matches(msg, k.All):
		if !s.estimate {
			all := s.selectedGPUs() < len(s.gpus)
			for _, g := range s.gpus {
				s.gpuSel[g.Index] = all
			}
		}
	case key.Matches(msg, k.Refresh):
		s.setStatus("reading NVML…")
		return s.Init(), nil
	case key.Matches(msg, k.Estimate):
		s.toggleEstimate()
	case key.Matches(msg, k.Next):
		return nil, s.next()
	}
	return nil, nil
}

func (s *gpuScreen) toggleEstimate() {
	s.estimate = !s.estimate
	switch {
	case s.estimate:
		s.setStatus("estimate engine chosen: results are computed, not measured")
	case s.noDriver:
		s.setStatus("no engine chosen: e uses the estimate engine (nothing to measure on here)")
	default:
		s.setStatus("measuring on the selected GPUs")
	}
}

// next goes on to the space when there is something to run the search on.
func (s *gpuScreen) next() handoff {
	switch {
	case s.estimate:
	case s.noDriver:
		s.setError(errors.New("no NVIDIA driver here: press e to use the estimate engine"))
		return nil
	case s.selectedGPUs() == 0:
		s.setError(errors.New("select at least one GPU (space), or press e for the estimate engine"))
		return nil
	}
	return goTo{screenSpace}
}

// canContinue reports whether enter goes on to the space: the estimate
// engine is chosen, or a GPU to measure on is selected.
func (s *gpuScreen) canContinue() bool {
	return s.estimate || (!s.noDriver && s.selectedGPUs() > 0)
}

// helpKeys offer enter only when it goes on (the estimate engine or a
// selected GPU); without a driver, e is what makes it work.
func (s *gpuScreen) helpKeys() helpKeys {
	k := s.keys
	var next []key.Binding
	if s.canContinue() {
		next = []key.Binding{k.Next}
	}
	// e says what it does now: choose the estimate engine, or give it up.
	estimate := withHelp(k.Estimate, "e", "estimate")
	if s.estimate {
		estimate = withHelp(k.Estimate, "e", "measure instead")
	}
	if s.noDriver {
		estimate = withHelp(k.Estimate, "e", "use estimate engine")
		if s.estimate {
			estimate = withHelp(k.Estimate, "e", "undo estimate engine")
		}
		return helpKeys{short: append(next, estimate, k.Back, k.Quit)}
	}
	short := append(next, k.Toggle, estimate, withHelp(k.Up, "↑/↓", "move"), withHelp(k.All, "a", "all"), k.Refresh, k.Back, k.Quit)
	return helpKeys{short: short, full: [][]key.Binding{
		{k.Up, k.Down, k.Toggle, k.All},
		{estimate, k.Refresh},
		append(next, k.Back, k.Quit, k.Help),
	}}
}

// --- view ---------------------------------------------------------------

func (s *gpuScreen) View(w, h int) string {
	st := s.st
	switch {
	case !s.loaded:
		return st.Title.Render("GPUs") + "\n\n" + st.Muted.Render("reading NVML…") + "\n"
	case s.noDriver:
		return s.noDriverView(w, h)
	}
	var b strings.Builder
	b.WriteString(s.headView(w))
	b.WriteString("\n")
	b.WriteString(s.tableView(w))
	b.WriteString("\n")
	if !s.estimate {
		n := s.selectedGPUs()
		b.WriteString(st.Muted.Render(fmt.Sprintf("%d of %d selected: one measuring worker per GPU; candidates are spread over them.", n, len(s.gpus))) + "\n")
		if busy := s.busySelected(); busy != "" {
			b.WriteString(st.Warn.Render(wrap("! "+busy, w)) + "\n")
		}
	}
	return b.String()
}

// headView is the title with the driver, NVML's error, and the engine
// that will measure (or the estimate engine's label).
func (s *gpuScreen) headView(w int) string {
	st := s.st
	var b strings.Builder
	head := st.Title.Render("GPUs")
	if s.driver.Version != "" {
		head += "  " + st.Muted.Render(fmt.Sprintf("driver %s · CUDA %s · %d device(s)", s.driver.Version, s.driver.CUDA, len(s.gpus)))
	}
	b.WriteString(head + "\n")
	if s.err != nil {
		b.WriteString(st.Err.Render(wrap("✗ NVML: "+s.err.Error(), w)) + "\n")
	}
	if !s.estimate && s.driver.Engine != "" {
		b.WriteString(st.Label.Render("engine "+s.driver.Engine) + " " + st.Muted.Render(wrap(s.driver.EngineWhy, max(w-len(s.driver.Engine)-8, 20))) + "\n")
	}
	if s.estimate {
		b.WriteString(st.Estimate.Render(" ESTIMATE ") + " " + st.Warn.Render("the estimate engine computes the results; nothing runs on these GPUs (e: measure instead)") + "\n")
	}
	return b.String()
}

// tableView is a row per GPU: selected, memory, load, other processes.
func (s *gpuScreen) tableView(w int) string {
	st := s.st
	nameW := 16
	if w >= 120 {
		nameW = 28
	}
	t := newTable(w,
		column{title: "", width: 5},
		column{title: "#", width: 2, right: true},
		column{title: "NAME", width: nameW},
		column{title: "MEMORY USED / TOTAL", width: 28},
		column{title: "UTIL", width: 4, right: true},
		column{title: "OTHER PROCESSES", width: 16, flex: true},
	)
	var b strings.Builder
	b.WriteString(t.header(st) + "\n")
	for i, g := range s.gpus {
		b.WriteString(s.gpuRow(t, i, g) + "\n")
	}
	if len(s.gpus) == 0 && s.err == nil {
		b.WriteString(st.Faint.Render("NVML reports no devices.") + "\n")
	}
	return b.String()
}

func (s *gpuScreen) gpuRow(t table, i int, g engine.GPUStatus) string {
	st := s.st
	cur := i == s.cursor
	box := "[ ]"
	if s.gpuSel[g.Index] && !s.estimate {
		box = "[x]"
	}
	mark := "  "
	if cur {
		mark = "› "
	}
	frac := 0.0
	if g.TotalMiB > 0 {
		frac = float64(g.UsedMiB) / float64(g.TotalMiB)
	}
	mem := gauge(frac, 8, st.Gauge(frac), st.GaugeEmpty()) + " " +
		fmt.Sprintf("%s / %s GiB", fmtGiB(g.UsedMiB), fmtGiB(g.TotalMiB))
	line := t.row(mark+box, strconv.Itoa(g.Index), g.Name, mem, fmt.Sprintf("%d%%", g.UtilGPU), processList(g.Processes))
	switch {
	case s.estimate:
		return st.Faint.Render(line)
	case cur:
		return st.Cursor.Render(line)
	}
	return line
}

// busySelected warns when a selected GPU runs someone else's processes:
// they would share the GPU with the measurement and skew it.
func (s *gpuScreen) busySelected() string {
	var busy []string
	for _, g := range s.gpus {
		if s.gpuSel[g.Index] && len(g.Processes) > 0 {
			busy = append(busy, strconv.Itoa(g.Index))
		}
	}
	if len(busy) == 0 {
		return ""
	}
	return fmt.Sprintf("GPU %s run other processes; their work will slow the measurements down", strings.Join(busy, ", "))
}

// noDriverView says there is no driver and offers the estimate engine;
// in a short window the box keeps the choice and gives up the
// explanation of the engine.
func (s *gpuScreen) noDriverView(w, h int) string {
	st := s.st
	reason := "libnvidia-ml.so.1 could not be loaded"
	if s.err != nil && s.err.Error() != ErrNoDriver.Error() {
		reason = strings.TrimPrefix(s.err.Error(), ErrNoDriver.Error()+": ")
	}
	lines := []string{st.Title.Render("GPUs"), ""}
	lines = append(lines, styleLines(st.Err, wrapAtSpaces("No NVIDIA driver on this machine ("+reason+")", w))...)
	lines = append(lines, "cgtune cannot measure here.", "")
	// The backend picks the GPU it estimates for (--estimate-gpu, the
	// layout's GPU type when the spec table has it); the results name it.
	body := "The estimate engine computes every candidate from a GPU spec table (or probes cached on this machine) with the same timing model the measuring engine uses. Its numbers are for planning: every result it gives is labelled ESTIMATE, with the GPU it was estimated for. Its host costs come from a framework profile measured on a GPU node where one is cached (or imported with a preset); without one, what graphs gain is a LOWER BOUND."
	boxW := min(w-2, 76)
	var choice string
	if s.estimate {
		choice = st.Estimate.Render(" ESTIMATE ") + " " + st.OK.Render("estimate engine chosen") + st.Muted.Render(" · enter to continue · e to undo")
	} else {
		choice = st.Accent.Render("Press e to use the estimate engine") + st.Muted.Render(", or q to quit.")
	}
	choice = wrap(choice, boxW-4)
	text := wrap(body, boxW-4) + "\n\n" + choice
	if len(lines)+len(strings.Split(text, "\n"))+2 > h {
		text = choice
	}
	return strings.Join(lines, "\n") + "\n" + st.Box.Width(boxW).Render(text) + "\n"
}

func processList(ps []engine.ProcessUse) string {
	if len(ps) == 0 {
		return "none"
	}
	var parts []string
	for _, p := range ps {
		name := p.Name
		if i := strings.LastIndex(name, "/"); i >= 0 {
			name = name[i+1:]
		}
		parts = append(parts, fmt.Sprintf("%d %s %s GiB", p.PID, name, fmtGiB(p.UsedMiB)))
	}
	return strings.Join(parts, ", ")
}
