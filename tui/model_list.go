package tui

import (
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"cgtune/presets"
)

// The model screen's list: the built-in models and the team presets,
// filtered as the person types after "/".

// listItem is a built-in model or a team preset.
type listItem struct {
	builtin *presets.Model
	preset  *presets.PresetInfo
}

func (it listItem) name() string {
	if it.builtin != nil {
		return it.builtin.Name
	}
	return it.preset.Name
}

// matches is the type-to-filter test: a substring of the name, display
// name, family or (for a preset) the model it uses.
func (it listItem) matches(f string) bool {
	if f == "" {
		return true
	}
	f = strings.ToLower(f)
	var hay []string
	if it.builtin != nil {
		hay = []string{it.builtin.Name, it.builtin.Display, it.builtin.Family, it.builtin.Kind()}
	} else {
		hay = []string{it.preset.Name, it.preset.Model, it.preset.GPU}
	}
	for _, h := range hay {
		if strings.Contains(strings.ToLower(h), f) {
			return true
		}
	}
	return false
}

func (s *modelScreen) listItems() []listItem {
	var out []listItem
	for i := range s.builtins {
		it := listItem{builtin: &s.builtins[i]}
		if it.matches(s.filter) {
			out = append(out, it)
		}
	}
	for i := range s.presets {
		// A preset hidden behind an earlier one of the same name cannot be
		// loaded by name; listing it would only confuse.
		if s.presets[i].ShadowedBy != "" || s.isImported(s.presets[i].Name) {
			continue
		}
		it := listItem{preset: &s.presets[i]}
		if it.matches(s.filter) {
			out = append(out, it)
		}
	}
	for i := range s.imported {
		it := listItem{preset: &s.imported[i]}
		if it.matches(s.filter) {
			out = append(out, it)
		}
	}
	return out
}

func (s *modelScreen) isImported(name string) bool {
	return slices.ContainsFunc(s.imported, func(p presets.PresetInfo) bool { return p.Name == name })
}

// isFilterRune reports whether r may be typed into the filter: the
// characters of model and preset names, so other keys stay commands.
func isFilterRune(s string) bool {
	if len(s) != 1 {
		return false
	}
	c := s[0]
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

func (s *modelScreen) listKey(msg tea.KeyPressMsg) tea.Cmd {
	if !s.filtering && s.listCommand(msg) {
		return nil
	}
	if step, ok := cursorStep(msg.String()); ok {
		s.cursor += step
		return s.onCursor()
	}
	switch msg.String() {
	case "left":
		s.cycleGPUType(-1)
	case "right":
		s.cycleGPUType(1)
	case "backspace":
		if s.filter != "" {
			s.filter = s.filter[:len(s.filter)-1]
			s.cursor = 0
			return s.onCursor()
		}
	case "esc":
		s.filtering = false
		if s.filter != "" {
			s.filter, s.cursor = "", 0
			return s.onCursor()
		}
	default:
		if s.filtering && isFilterRune(msg.Text) {
			s.filter += strings.ToLower(msg.Text)
			s.cursor = 0
			return s.onCursor()
		}
	}
	return nil
}

// listCommand takes the list's letter keys, which are commands outside
// the filter: / filters, g and v change the GPU type and MB version.
func (s *modelScreen) listCommand(msg tea.KeyPressMsg) bool {
	k := s.keys
	switch {
	case key.Matches(msg, k.Filter):
		s.filtering = true
	case key.Matches(msg, k.Import):
		s.importing, s.importPath = true, ""
	case key.Matches(msg, k.GPUType):
		s.cycleGPUType(1)
	case key.Matches(msg, k.MBridge):
		s.toggleMBridge()
	default:
		return false
	}
	return true
}

// cursorStep is how far a key moves the list's cursor.
func cursorStep(key string) (int, bool) {
	switch key {
	case "up":
		return -1, true
	case "down":
		return 1, true
	case "pgup":
		return -10, true
	case "pgdown":
		return 10, true
	}
	return 0, false
}

func (s *modelScreen) listView(w, h int) string {
	st := s.st
	title := "Models"
	if s.focus == focusList {
		title = st.Focused.Render(title)
	} else {
		title = st.Title.Render(title)
	}
	filter := st.Faint.Render("/ to filter")
	if s.filter != "" {
		filter = st.Value.Render(s.filter)
	}
	if s.focus == focusList && s.filtering {
		filter += st.Accent.Render("▏")
	}
	var b strings.Builder
	b.WriteString(title + "\n")
	if s.importing {
		b.WriteString(st.Label.Render("Import › ") + st.Value.Render(truncateLeft(s.importPath, max(w-10, 1))) + st.Accent.Render("▏") + "\n")
	} else {
		b.WriteString(st.Label.Render("Filter › ") + filter + "\n")
	}
	rows, cursorRow := s.listRows(w)
	listH := max(h-2, 1)
	// Keep the cursor row in view; the first rows (a section header) stay
	// visible when the cursor is near the top.
	if cursorRow < s.offset {
		s.offset = max(cursorRow-1, 0)
	}
	if cursorRow >= s.offset+listH {
		s.offset = cursorRow - listH + 1
	}
	s.offset = min(s.offset, max(len(rows)-listH, 0))
	for i := s.offset; i < len(rows) && i < s.offset+listH; i++ {
		b.WriteString(rows[i] + "\n")
	}
	return b.String()
}

// listRows are the list's lines, w wide: the items under the header of
// their kind; cursorRow is the line of the item under the cursor.
func (s *modelScreen) listRows(w int) (rows []string, cursorRow int) {
	items := s.listItems()
	lastKind := ""
	for i, it := range items {
		kind := "BUILT-IN"
		if it.preset != nil {
			kind = "TEAM PRESETS"
		}
		if kind != lastKind {
			rows = append(rows, s.st.Header.Render(kind))
			lastKind = kind
		}
		if i == s.cursor {
			cursorRow = len(rows)
		}
		rows = append(rows, s.itemLine(it, i == s.cursor, w))
	}
	if len(items) == 0 {
		rows = append(rows, s.st.Faint.Render("no model or preset matches"))
	}
	return rows, cursorRow
}

// itemLine is an item's name and kind (a built-in's architecture, a
// preset's GPU); a wide list has room for the display name too.
func (s *modelScreen) itemLine(it listItem, cur bool, w int) string {
	st := s.st
	nameW := 18
	if w < 30 {
		nameW = 15
	}
	wide := w >= 48
	mark := "  "
	if cur {
		mark = st.Cursor.Render("› ")
	}
	if b := it.builtin; b != nil {
		name := padRight(truncate(b.Name, nameW), nameW)
		if cur {
			name = st.Cursor.Render(name)
		}
		line := mark + name + " " + st.Muted.Render(padRight(b.Kind(), 7))
		if wide {
			line += st.Faint.Render(truncate(b.Display, w-nameW-11))
		}
		return line
	}
	p := it.preset
	name := padRight(truncate(p.Name, nameW), nameW)
	var line string
	switch {
	case p.Problem != "":
		return mark + st.Faint.Render(name+" ! broken")
	case cur:
		line = mark + st.Cursor.Render(name) + " " + st.Muted.Render(padRight(p.GPU, 7))
	default:
		line = mark + name + " " + st.Muted.Render(padRight(p.GPU, 7))
	}
	if wide {
		line += st.Faint.Render(truncate(p.Model, w-nameW-11))
	}
	return line
}
