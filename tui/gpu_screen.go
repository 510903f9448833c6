package tui

import (
	"cgtune/engine"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

// Screen (b): the NVML devices to measure on, or the estimate engine.

type gpuScreen struct {
	cursor int
}

func (m *Model) onGPUs(msg gpusMsg) {
	m.gpuLoaded = true
	m.gpus, m.driver, m.gpuErr = msg.gpus, msg.driver, msg.err
	m.noDriver = errors.Is(msg.err, ErrNoDriver)
	if m.noDriver {
		m.gpuSel = map[int]bool{}
		return
	}
	// Keep the choice across a refresh; on the first listing select the
	// --gpu ones, or else the idle GPUs, which a measurement can have alone.
	if !m.gpuChosen {
		m.gpuChosen = true
		for _, g := range m.gpus {
			if len(m.opts.GPUs) > 0 {
				m.gpuSel[g.Index] = slices.Contains(m.opts.GPUs, g.Index)
			} else {
				m.gpuSel[g.Index] = len(g.Processes) == 0
			}
		}
	}
	for i := range m.gpuSel {
		if !m.hasGPU(i) {
			delete(m.gpuSel, i)
		}
	}
	m.gpuScr.cursor = min(m.gpuScr.cursor, max(len(m.gpus)-1, 0))
}

func (m *Model) hasGPU(i int) bool {
	for _, g := range m.gpus {
		if g.Index == i {
			return true
		}
	}
	return false
}

func (m *Model) selectedGPUs() int {
	n := 0
	for _, g := range m.gpus {
		if m.gpuSel[g.Index] {
			n++
		}
	}
	return n
}

func (m *Model) gpuKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	s := &m.gpuScr
	switch {
	case key.Matches(msg, k.Back):
		m.screen = screenModel
		return nil
	case key.Matches(msg, k.Up):
		s.cursor = max(s.cursor-1, 0)
	case key.Matches(msg, k.Down):
		s.cursor = min(s.cursor+1, max(len(m.gpus)-1, 0))
	case key.Matches(msg, k.Toggle):
		if len(m.gpus) > 0 && !m.estimate {
			i := m.gpus[s.cursor].Index
			m.gpuSel[i] = !m.gpuSel[i]
		}
	case key.Matches(msg, k.All):
		if !m.estimate {
			all := m.selectedGPUs() < len(m.gpus)
			for _, g := range m.gpus {
				m.gpuSel[g.Index] = all
			}
		}
	case key.Matches(msg, k.Refresh):
		m.setStatus("reading NVML…")
		return fetchGPUs(m.opts.Context, m.backend)
	case key.Matches(msg, k.Estimate):
		m.estimate = !m.estimate
		if m.estimate {
			m.setStatus("estimate engine chosen: results are computed, not measured")
		} else {
			m.setStatus("measuring on the selected GPUs")
		}
	case key.Matches(msg, k.Next):
		if m.estimate {
			return m.goTo(screenSpace)
		}
		if m.noDriver {
			m.setError(errors.New("no NVIDIA driver here: press e to use the estimate engine"))
			return nil
		}
		if m.selectedGPUs() == 0 {
			m.setError(errors.New("select at least one GPU (space), or press e for the estimate engine"))
			return nil
		}
		return m.goTo(screenSpace)
	}
	return nil
}

func (m *Model) gpuHelp() helpKeys {
	k := m.keys
	// e says what it does now: choose the estimate engine, or give it up.
	estimate := withHelp(k.Estimate, "e", "estimate")
	if m.estimate {
		estimate = withHelp(k.Estimate, "e", "measure instead")
	}
	if m.noDriver {
		estimate = withHelp(k.Estimate, "e", "use estimate engine")
		if m.estimate {
			estimate = withHelp(k.Estimate, "e", "undo estimate engine")
		}
		return helpKeys{short: []key.Binding{estimate, k.Next, k.Back, k.Quit}}
	}
	short := []key.Binding{k.Toggle, k.Next, estimate, withHelp(k.Up, "↑/↓", "move"), withHelp(k.All, "a", "all"), k.Refresh, k.Back, k.Quit}
	return helpKeys{short: short, full: [][]key.Binding{
		{k.Up, k.Down, k.Toggle, k.All},
		{estimate, k.Refresh},
		{k.Next, k.Back, k.Quit, k.Help},
	}}
}

func (m *Model) gpuView(w, h int) string {
	st := m.st
	var b strings.Builder
	switch {
	case !m.gpuLoaded:
		b.WriteString(st.Title.Render("GPUs") + "\n\n" + st.Muted.Render("reading NVML…") + "\n")
		return b.String()
	case m.noDriver:
		return m.noDriverView(w)
	}
	head := st.Title.Render("GPUs")
	if m.driver.Version != "" {
		head += "  " + st.Muted.Render(fmt.Sprintf("driver %s · CUDA %s · %d device(s)", m.driver.Version, m.driver.CUDA, len(m.gpus)))
	}
	b.WriteString(head + "\n")
	if m.gpuErr != nil {
		b.WriteString(st.Err.Render(wrap("✗ NVML: "+m.gpuErr.Error(), w)) + "\n")
	}
	if !m.estimate && m.driver.Engine != "" {
		b.WriteString(st.Label.Render("engine "+m.driver.Engine) + " " + st.Muted.Render(wrap(m.driver.EngineWhy, max(w-len(m.driver.Engine)-8, 20))) + "\n")
	}
	if m.estimate {
		b.WriteString(st.Estimate.Render(" ESTIMATE ") + " " + st.Warn.Render("the estimate engine computes the results; nothing runs on these GPUs (e: measure instead)") + "\n")
	}
	b.WriteString("\n")
	memW := 28
	nameW := 16
	if w >= 120 {
		nameW = 28
	}
	t := newTable(w,
		column{title: "", width: 5},
		column{title: "#", width: 2, right: true},
		column{title: "NAME", width: nameW},
		column{title: "MEMORY USED / TOTAL", width: memW},
		column{title: "UTIL", width: 4, right: true},
		column{title: "OTHER PROCESSES", width: 16, flex: true},
	)
	b.WriteString(t.header(st) + "\n")
	for i, g := range m.gpus {
		cur := i == m.gpuScr.cursor
		box := "[ ]"
		if m.gpuSel[g.Index] && !m.estimate {
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
		mem := gauge(frac, 8, m.gaugeStyle(frac), lipgloss.NewStyle().Foreground(st.BarEmpty)) + " " +
			fmt.Sprintf("%s / %s GiB", fmtGiB(g.UsedMiB), fmtGiB(g.TotalMiB))
		line := t.row(mark+box, strconv.Itoa(g.Index), g.Name, mem, fmt.Sprintf("%d%%", g.UtilGPU), processList(g.Processes))
		switch {
		case m.estimate:
			line = st.Faint.Render(line)
		case cur:
			line = st.Cursor.Render(line)
		}
		b.WriteString(line + "\n")
	}
	if len(m.gpus) == 0 && m.gpuErr == nil {
		b.WriteString(st.Faint.Render("NVML reports no devices.") + "\n")
	}
	b.WriteString("\n")
	if !m.estimate {
		n := m.selectedGPUs()
		b.WriteString(st.Muted.Render(fmt.Sprintf("%d of %d selected: one measuring worker per GPU; candidates are spread over them.", n, len(m.gpus))) + "\n")
		if busy := m.busySelected(); busy != "" {
			b.WriteString(st.Warn.Render(wrap("! "+busy, w)) + "\n")
		}
	}
	return b.String()
}

// busySelected warns when a selected GPU runs someone else's processes:
// they would share the GPU with the measurement and skew it.
func (m *Model) busySelected() string {
	var busy []string
	for _, g := range m.gpus {
		if m.gpuSel[g.Index] && len(g.Processes) > 0 {
			busy = append(busy, strconv.Itoa(g.Index))
		}
	}
	if len(busy) == 0 {
		return ""
	}
	return fmt.Sprintf("GPU %s run other processes; their work will slow the measurements down", strings.Join(busy, ", "))
}

func (m *Model) gaugeStyle(frac float64) lipgloss.Style {
	switch {
	case m.st.Plain:
		return lipgloss.NewStyle()
	case frac >= 0.9:
		return m.st.Err
	case frac >= 0.7:
		return m.st.Warn
	}
	return lipgloss.NewStyle().Foreground(m.st.BarFull)
}

func (m *Model) noDriverView(w int) string {
	st := m.st
	reason := "libnvidia-ml.so.1 could not be loaded"
	if m.gpuErr != nil && m.gpuErr.Error() != ErrNoDriver.Error() {
		reason = strings.TrimPrefix(m.gpuErr.Error(), ErrNoDriver.Error()+": ")
	}
	var b strings.Builder
	b.WriteString(st.Title.Render("GPUs") + "\n\n")
	b.WriteString(st.Err.Render("No NVIDIA driver on this machine") + st.Muted.Render(" ("+reason+")") + "\n")
	b.WriteString("cgtune cannot measure here.\n\n")
	// The backend picks the GPU it estimates for (--estimate-gpu, the
	// layout's GPU type when the spec table has it); the results name it.
	body := "The estimate engine computes every candidate from a GPU spec table (or probes cached on this machine) with the same timing model the measuring engine uses. Its numbers are for planning: every result it gives is labelled ESTIMATE, with the GPU it was estimated for."
	boxW := min(w-2, 76)
	var choice string
	if m.estimate {
		choice = st.Estimate.Render(" ESTIMATE ") + " " + st.OK.Render("estimate engine chosen") + st.Muted.Render(" · enter to continue · e to undo")
	} else {
		choice = st.Accent.Render("Press e to use the estimate engine") + st.Muted.Render(", or q to quit.")
	}
	b.WriteString(st.Box.Width(boxW).Render(wrap(body, boxW-4)+"\n\n"+choice) + "\n")
	return b.String()
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
