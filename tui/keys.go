package tui

import "charm.land/bubbles/v2/key"

// KeyMap is every key binding of the TUI. Screens match against these
// (never against literal strings), so the help line and the behaviour
// cannot drift apart.
type KeyMap struct {
	Quit     key.Binding
	Help     key.Binding
	Next     key.Binding // continue to the next step
	Back     key.Binding
	Focus    key.Binding // switch pane
	Up       key.Binding
	Down     key.Binding
	Left     key.Binding
	Right    key.Binding
	PageUp   key.Binding
	PageDown key.Binding

	// Model screen.
	Filter      key.Binding
	ClearFilter key.Binding
	Import      key.Binding
	GPUType     key.Binding
	MBridge     key.Binding
	Inc         key.Binding
	Dec         key.Binding

	// GPU screen.
	Toggle   key.Binding
	All      key.Binding
	Refresh  key.Binding
	Estimate key.Binding

	// Space screen.
	Tie        key.Binding
	Strategy   key.Binding
	BudgetUp   key.Binding
	BudgetDown key.Binding
	Start      key.Binding
	// WhatIf adds the what-if rows: rejected candidates with the
	// enabling changes that let them run (search.Config.WhatIf).
	WhatIf key.Binding

	// Run screen.
	Stop    key.Binding
	Confirm key.Binding
	Deny    key.Binding
	Chart   key.Binding

	// Results screen.
	Format key.Binding
	Write  key.Binding
	Report key.Binding
	Save   key.Binding
	New    key.Binding
	// Details shows why the winner won and the candidate's details in
	// the pane, in place of its overrides.
	Details key.Binding
	// Validate runs the top candidates as real training jobs.
	Validate key.Binding
}

// DefaultKeyMap is the key map the program uses.
func DefaultKeyMap() KeyMap {
	b := func(keys []string, k, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, desc))
	}
	return KeyMap{
		Quit:     b([]string{"ctrl+c", "q"}, "q", "quit"),
		Help:     b([]string{"?"}, "?", "more keys"),
		Next:     b([]string{"enter"}, "enter", "continue"),
		Back:     b([]string{"esc"}, "esc", "back"),
		Focus:    b([]string{"tab", "shift+tab"}, "tab", "switch pane"),
		Up:       b([]string{"up", "k"}, "↑/k", "up"),
		Down:     b([]string{"down", "j"}, "↓/j", "down"),
		Left:     b([]string{"left", "h"}, "←/h", "left"),
		Right:    b([]string{"right", "l"}, "→/l", "right"),
		PageUp:   b([]string{"pgup", "ctrl+u"}, "pgup", "page up"),
		PageDown: b([]string{"pgdown", "ctrl+d"}, "pgdn", "page down"),

		Filter:      b([]string{"/"}, "/", "filter"),
		ClearFilter: b([]string{"esc"}, "esc", "clear filter"),
		Import:      b([]string{"i"}, "i", "import MB config"),
		GPUType:     b([]string{"g"}, "g", "gpu type"),
		MBridge:     b([]string{"v"}, "v", "MB version"),
		Inc:         b([]string{"+", "=", "right", "l"}, "+/→", "more"),
		Dec:         b([]string{"-", "left", "h"}, "-/←", "less"),

		Toggle:   b([]string{"space"}, "space", "toggle"),
		All:      b([]string{"a"}, "a", "all/none"),
		Refresh:  b([]string{"r"}, "r", "refresh"),
		Estimate: b([]string{"e"}, "e", "estimate engine"),

		Tie:        b([]string{"t"}, "t", "tie band"),
		Strategy:   b([]string{"s"}, "s", "strategy"),
		BudgetUp:   b([]string{"+", "="}, "+", "budget"),
		BudgetDown: b([]string{"-"}, "-", "budget"),
		Start:      b([]string{"enter"}, "enter", "start search"),
		WhatIf:     b([]string{"w"}, "w", "what-if rows"),

		Stop:    b([]string{"ctrl+c", "q"}, "q", "stop search"),
		Confirm: b([]string{"y", "enter", "ctrl+c"}, "y", "yes"),
		Deny:    b([]string{"n", "esc"}, "n", "no"),
		Chart:   b([]string{"c"}, "c", "chart GPU"),

		Format: b([]string{"f"}, "f", "format"),
		Write:  b([]string{"w"}, "w", "write file"),
		Report: b([]string{"r"}, "r", "report"),
		Save:   b([]string{"p"}, "p", "save preset"),
		New:    b([]string{"n"}, "n", "new search"),

		Details: b([]string{"d"}, "d", "details"),

		Validate: b([]string{"v"}, "v", "validate on jobs"),
	}
}

// helpKeys is the help of one screen state: the short line at the bottom
// and the full table behind "?".
type helpKeys struct {
	short []key.Binding
	full  [][]key.Binding
}

func (h helpKeys) ShortHelp() []key.Binding { return h.short }

// hasMore reports whether the full help (behind "?") lists keys the
// short line does not.
func (h helpKeys) hasMore() bool {
	short := map[string]bool{"?": true}
	for _, b := range h.short {
		short[b.Help().Key] = true
	}
	for _, g := range h.full {
		for _, b := range g {
			if b.Enabled() && !short[b.Help().Key] {
				return true
			}
		}
	}
	return false
}

func (h helpKeys) FullHelp() [][]key.Binding {
	if h.full == nil {
		return [][]key.Binding{h.short}
	}
	return h.full
}

// withHelp relabels a binding for one screen ("←/→" means "gpu type" in
// the model list but "less/more" in the layout editor).
func withHelp(b key.Binding, k, desc string) key.Binding {
	b.SetHelp(k, desc)
	return b
}
