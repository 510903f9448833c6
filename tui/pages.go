package tui

import (
	tea "charm.land/bubbletea/v2"

	"cgtune/search"
)

type screen int

const (
	screenModel screen = iota
	screenGPU
	screenSpace
	screenRun
	screenResults
)

var screenNames = []string{"Model", "GPU", "Space", "Run", "Results"}

// page is a screen as the root model drives it (as Component in
// charmbracelet/soft-serve pkg/ui/common/component.go, db5f041f): it takes
// the messages that are its own, draws its body, and says which keys it
// takes.
type page interface {
	// Update handles a message of the screen's; a handoff asks the root
	// for what is not the screen's to do (another screen).
	Update(msg tea.Msg) (tea.Cmd, handoff)
	// View draws the screen's body, w×h (the root cuts it to that).
	View(w, h int) string
	// enter starts what the screen needs when the person comes to it.
	enter() tea.Cmd
	// helpKeys are the keys of the screen's state now.
	helpKeys() helpKeys
	// typing reports whether a text field has the keyboard, so printable
	// keys (q, ?) are text, not commands.
	typing() bool
}

// handoff is what a screen asks of the root when it is done: the screens
// do not know one another, the root switches between them (the Elm
// architecture's message from a child to its parent).
type handoff interface{ handoff() }

// goTo moves on to a screen: the status line and the full help close, and
// the screen starts what it needs.
type goTo struct{ to screen }

// backTo returns to a screen as it was left.
type backTo struct{ to screen }

// startSearch starts the search of the plan's valid candidates.
type startSearch struct{ plan []search.Planned }

func (goTo) handoff()        {}
func (backTo) handoff()      {}
func (startSearch) handoff() {}
