package tui

import (
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// The frame the root draws around the screen on show: the header with
// the steps, the status line and the key help.

// Sizes of the frame around the screens.
const (
	headerLines = 2 // header and rule
	minWidth    = 60
	minHeight   = 16
)

func (m *App) layoutSizes() {
	m.help.SetWidth(m.width - 1)
}

// tooSmall reports whether the window is below the minimum size, when the
// screens are not drawn.
func (m *App) tooSmall() bool { return m.width < minWidth || m.height < minHeight }

func (m *App) render() string {
	w, h := m.width, m.height
	if m.tooSmall() {
		// Wrapped, so that the message itself is not cut.
		return fitBlock(wrap(fmt.Sprintf("cgtune needs a window of at least %d×%d (80×24 is comfortable); this one is %d×%d.", minWidth, minHeight, w, h), w), w, h)
	}
	status := m.statusLines(w)
	if !m.alertOpen && !m.help.ShowAll {
		// Lay the screen out once first, in the room a one-line help
		// leaves: its keys depend on its layout (a pane that scrolls).
		m.page().View(w, h-headerLines-len(status)-1)
	}
	helpLines := strings.Split(m.helpView(), "\n")
	for i, l := range helpLines {
		helpLines[i] = " " + l
	}
	if most := h - headerLines - len(status) - 1; len(helpLines) > most && most > 0 {
		// The full help of a short window leaves the screen a line; its
		// last line, which says how to close it, stays.
		helpLines = append(helpLines[:most-1], helpLines[len(helpLines)-1])
	}
	bodyH := h - headerLines - len(status) - len(helpLines)
	var body string
	if m.alertOpen {
		body = m.errView.View(m.st, m.alert, w, bodyH)
	} else {
		body = m.page().View(w, bodyH)
	}
	parts := []string{
		m.headerView(w),
		m.st.Rule.Render(strings.Repeat("─", w)),
		fitBlock(body, w, bodyH),
	}
	parts = append(parts, status...)
	parts = append(parts, helpLines...)
	return strings.Join(parts, "\n")
}

// screenHelp is the keys of the screen on show (or of the error view
// over it).
func (m *App) screenHelp() helpKeys {
	if m.alertOpen {
		return m.errView.helpKeys(m.keys)
	}
	return m.page().helpKeys()
}

func (m *App) helpView() string {
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
	whole := m.help // a copy without the width limit, which cuts with …
	whole.SetWidth(0)
	if !m.help.ShowAll {
		return m.shortHelp(h, m.width-1, m.helpOpens())
	}
	if out := whole.View(h); blockWidth(out) <= m.width-1 {
		return out
	}
	// The groups side by side do not fit: every key, in as many columns
	// as the width takes, so none is cut.
	return m.flowHelp(h.FullHelp(), m.width-1)
}

// shortHelp is the one-line help in w cells: the screen's keys in the
// order it gives them (the essential ones first), as many as fit whole,
// then "? more keys" when some were left out or the full help has more
// (and ? opens it: withMore). No key is cut in the middle.
func (m *App) shortHelp(h helpKeys, w int, withMore bool) string {
	line := m.help // no width limit: the keys are chosen to fit
	line.SetWidth(0)
	var more []key.Binding
	if withMore {
		more = []key.Binding{m.keys.Help}
	}
	fits := func(bs []key.Binding) bool { return ansi.StringWidth(line.ShortHelpView(bs)) <= w }
	all := h.short
	if fits(all) && (!h.hasMore() || !withMore) {
		return line.ShortHelpView(all)
	}
	n := 0
	for n < len(all) && fits(append(slices.Clone(all[:n+1]), more...)) {
		n++
	}
	return line.ShortHelpView(append(slices.Clone(all[:n]), more...))
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
func (m *App) flowHelp(groups [][]key.Binding, w int) string {
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

func (m *App) headerView(w int) string {
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

// statusLines are the status line: the message and the context summary
// on one line; a message too long for that takes two lines of its own
// (the summary yields: the message is what the person has to read now).
// An error longer than two lines shows its start and how to read it all
// (the error view, !).
func (m *App) statusLines(w int) []string {
	right := m.st.Muted.Render(m.contextLine())
	left := m.status
	style := m.st.Status
	if m.statusErr {
		style = m.st.StatusEr
		left = "✗ " + left
	}
	if ansi.StringWidth(left) <= w-1-ansi.StringWidth(right)-2 {
		return []string{joinEnds(" "+style.Render(left), right, w)}
	}
	lines := statusLinesFor(left, w)
	if len(lines) <= statusMaxLines {
		for i, l := range lines {
			lines[i] = " " + style.Render(l)
		}
		return lines
	}
	hint := ""
	if m.statusErr && m.alert == m.status {
		hint = m.st.Muted.Render(" · ! reads it all")
	}
	return []string{" " + style.Render(ansi.Truncate(left, w-1-ansi.StringWidth(hint), "…")) + hint}
}

// contextLine summarises the selection: model, GPU type × count, MB.
func (m *App) contextLine() string {
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
	if h <= 0 {
		return ""
	}
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
