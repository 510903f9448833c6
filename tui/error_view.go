package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
)

// The error view: an error too long for the status line (more than
// statusMaxLines) opens over the screen, whole and scrollable, until the
// person closes it; the status line keeps its start, and ! opens it
// again.

// statusMaxLines is how many lines the status line may take before an
// error moves to the error view.
const statusMaxLines = 2

// statusLinesFor lays a status message out in the status line's width
// (the frame's, less the leading space).
func statusLinesFor(text string, w int) []string {
	return strings.Split(wrapAtSpaces(text, max(w-1, 1)), "\n")
}

// tooLongForStatus reports whether an error needs the error view at
// window width w.
func tooLongForStatus(msg string, w int) bool {
	return len(statusLinesFor("✗ "+msg, w)) > statusMaxLines
}

// errorView is the scrollable view of one long error (bubbles viewport).
type errorView struct {
	text string // the error it was made for
	vp   viewport.Model
}

// show makes the view for text at w×h, scrolled to the top when the
// error is a new one.
func (e *errorView) show(text string, w, h int) {
	if e.text != text {
		e.text = text
		e.vp = viewport.New()
	}
	e.vp.SetWidth(w)
	e.vp.SetHeight(max(h, 1))
	e.vp.SetContent(wrapAtSpaces(text, w))
}

// key scrolls the view; it reports whether the key closes it.
func (e *errorView) key(msg tea.KeyPressMsg, k KeyMap) (closed bool) {
	switch {
	case key.Matches(msg, k.Back), key.Matches(msg, k.Next), msg.String() == "q":
		return true
	case key.Matches(msg, k.Up):
		e.vp.ScrollUp(1)
	case key.Matches(msg, k.Down):
		e.vp.ScrollDown(1)
	case key.Matches(msg, k.PageUp):
		e.vp.PageUp()
	case key.Matches(msg, k.PageDown):
		e.vp.PageDown()
	}
	return false
}

// View is the title (with where the view is in a long error) over the
// error text, w×h.
func (e *errorView) View(st Styles, text string, w, h int) string {
	e.show(text, w, h-2)
	title := st.Err.Render("✗ Error")
	if total, seen := e.vp.TotalLineCount(), e.vp.VisibleLineCount(); total > seen {
		title += "  " + st.Muted.Render(fmt.Sprintf("lines %d–%d of %d · ↑/↓ pgup/pgdn scroll", e.vp.YOffset()+1, e.vp.YOffset()+seen, total))
	}
	return truncate(title, w) + "\n\n" + e.vp.View()
}

func (e *errorView) helpKeys(k KeyMap) helpKeys {
	short := []key.Binding{withHelp(k.Back, "esc/enter", "close")}
	if e.vp.TotalLineCount() > e.vp.VisibleLineCount() {
		short = append(short, withHelp(k.Down, "↑/↓ pgup/pgdn", "scroll"))
	}
	return helpKeys{short: short}
}
