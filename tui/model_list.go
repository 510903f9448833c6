package tui

import (
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
		if s.presets[i].ShadowedBy != "" {
			continue
		}
		it := listItem{preset: &s.presets[i]}
		if it.matches(s.filter) {
			out = append(out, it)
		}
	}
	return out
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
	k := s.keys
	if !s.filtering {
		switch {
		case key.Matches(msg, k.Filter):
			s.filtering = true
			return nil
		case key.Matches(msg, k.GPUType):
			s.cycleGPUType(1)
			return nil
		case key.Matches(msg, k.MBridge):
			s.toggleMBridge()
			return nil
		}
	}
	switch msg.String() {
	case "up":
		s.cursor--
		return s.onCursor()
	case "down":
		s.cursor++
		return s.onCursor()
	case "pgup":
		s.cursor -= 10
		return s.onCursor()
	case "pgdown":
		s.cursor += 10
		return s.onCursor()
	case "left":
		s.cycleGPUType(-1)
		return nil
	case "right":
		s.cycleGPUType(1)
		return nil
	case "backspace":
		if s.filter != "" {
			s.filter = s.filter[:len(s.filter)-1]
			s.cursor = 0
			return s.onCursor()
		}
		return nil
	case "esc":
		s.filtering = false
		if s.filter != "" {
			s.filter, s.cursor = "", 0
			return s.onCursor()
		}
		return nil
	}
	if s.filtering && isFilterRune(msg.Text) {
		s.filter += strings.ToLower(msg.Text)
		s.cursor = 0
		return s.onCursor()
	}
	return nil
}

func (s *modelScreen) listView(w, h int) string {
	st := s.st
	var b strings.Builder
	title := "Models"
	if s.focus == focusList {
		title = st.Focused.Render(title)
	} else {
		title = st.Title.Render(title)
	}
	b.WriteString(title + "\n")
	filter := st.Faint.Render("/ to filter")
	if s.filter != "" {
		filter = st.Value.Render(s.filter)
	}
	if s.focus == focusList && s.filtering {
		filter += st.Accent.Render("▏")
	}
	b.WriteString(st.Label.Render("Filter › ") + filter + "\n")

	items := s.listItems()
	type row struct {
		text   string
		cursor bool
	}
	var rows []row
	cursorRow := 0
	lastKind := ""
	nameW := 18
	if w < 30 {
		nameW = 15
	}
	// A wide list has room for the display name too.
	wide := w >= 48
	for i, it := range items {
		kind := "BUILT-IN"
		if it.preset != nil {
			kind = "TEAM PRESETS"
		}
		if kind != lastKind {
			rows = append(rows, row{text: st.Header.Render(kind)})
			lastKind = kind
		}
		mark := "  "
		cur := i == s.cursor
		if cur {
			mark = st.Cursor.Render("› ")
			cursorRow = len(rows)
		}
		var line string
		if it.builtin != nil {
			name := padRight(truncate(it.builtin.Name, nameW), nameW)
			if cur {
				name = st.Cursor.Render(name)
			}
			line = mark + name + " " + st.Muted.Render(padRight(it.builtin.Kind(), 7))
			if wide {
				line += st.Faint.Render(truncate(it.builtin.Display, w-nameW-11))
			}
		} else {
			p := it.preset
			name := padRight(truncate(p.Name, nameW), nameW)
			switch {
			case p.Problem != "":
				line = mark + st.Faint.Render(name+" ! broken")
			case cur:
				line = mark + st.Cursor.Render(name) + " " + st.Muted.Render(padRight(p.GPU, 7))
			default:
				line = mark + name + " " + st.Muted.Render(padRight(p.GPU, 7))
			}
			if wide && p.Problem == "" {
				line += st.Faint.Render(truncate(p.Model, w-nameW-11))
			}
		}
		rows = append(rows, row{text: line, cursor: cur})
	}
	if len(items) == 0 {
		rows = append(rows, row{text: st.Faint.Render("no model or preset matches")})
	}
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
		b.WriteString(rows[i].text + "\n")
	}
	return b.String()
}
