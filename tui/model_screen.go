package tui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"cgtune/presets"
)

// Screen (a): the model, its architecture and its layout.

const (
	focusList   = 0
	focusLayout = 1
)

type modelScreen struct {
	focus     int
	filter    string
	filtering bool // "/" was pressed: printable keys go into the filter
	cursor    int  // index into the filtered items
	offset    int  // first list row shown

	row, col int    // layout grid cursor
	editing  bool   // digits are being typed into the field under the cursor
	edit     string // what has been typed
}

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

func (m *Model) listItems() []listItem {
	var out []listItem
	for i := range m.builtins {
		it := listItem{builtin: &m.builtins[i]}
		if it.matches(m.modelScr.filter) {
			out = append(out, it)
		}
	}
	for i := range m.presets {
		// A preset hidden behind an earlier one of the same name cannot be
		// loaded by name; listing it would only confuse.
		if m.presets[i].ShadowedBy != "" {
			continue
		}
		it := listItem{preset: &m.presets[i]}
		if it.matches(m.modelScr.filter) {
			out = append(out, it)
		}
	}
	return out
}

// selectInitial picks the --model (or the first built-in) on start.
func (m *Model) selectInitial() {
	if len(m.builtins) == 0 {
		return
	}
	i := slices.IndexFunc(m.builtins, func(b presets.Model) bool { return b.Name == m.opts.Model })
	if m.opts.Model != "" && i < 0 {
		m.setStatus("unknown model %q; pick one from the list", m.opts.Model)
	}
	i = max(i, 0)
	m.modelScr.cursor = i
	m.applyBuiltin(m.builtins[i], m.opts.GPUType)
}

// followSelection puts the list cursor on the selected preset once the
// list has arrived (a --preset selection is made before it does).
func (m *Model) followSelection() {
	if m.sel.preset == "" {
		return
	}
	for i, it := range m.listItems() {
		if it.preset != nil && it.preset.Name == m.sel.preset {
			m.modelScr.cursor = i
			return
		}
	}
}

// applyBuiltin selects a built-in model with its default layout for gpu
// (or for the GPU type in use, or its first one).
func (m *Model) applyBuiltin(b presets.Model, gpu string) {
	if gpu == "" {
		gpu = m.sel.layout.GPU
	}
	gpus := b.GPUs()
	if !slices.Contains(gpus, gpu) && len(gpus) > 0 {
		gpu = gpus[0]
	}
	fromPreset := m.sel.preset != ""
	m.sel.model, m.sel.preset, m.sel.edited = b.Clone(), "", nil
	l, err := b.Layout(gpu)
	m.sel.layout, m.sel.base, m.sel.err = l, l.Clone(), err
	m.applyOptionSets()
	if fromPreset {
		// The space came with the preset; a built-in starts from the default.
		m.space = newSpaceChoice(presets.DefaultSpace())
	}
	m.validateLayout()
}

// applyPreset selects a loaded team preset: its model, layout, MB version
// and search space.
func (m *Model) applyPreset(p presets.TeamPreset) {
	model, err := p.ResolveModel()
	if err != nil {
		m.setError(fmt.Errorf("preset %s: %w", p.Name, err))
		return
	}
	if err := p.FillLayout(); err != nil {
		m.setError(fmt.Errorf("preset %s: %w", p.Name, err))
		return
	}
	m.sel = selection{model: model, preset: p.Name, layout: p.Layout.Clone(), mbridge: p.MBridge, inline: p.ModelInline != nil}
	if m.sel.mbridge == "" {
		m.sel.mbridge = m.opts.MBridge
	}
	if m.sel.layout.GPU == "" {
		m.sel.layout.GPU = p.GPU
	}
	m.sel.base = m.sel.layout.Clone()
	m.applyOptionSets()
	m.space = newSpaceChoice(p.Space)
	m.validateLayout()
}

// applyOptionSets applies the --set values of the fields the layout
// editor shows to the selected layout, as edits of it.
func (m *Model) applyOptionSets() {
	for _, label := range applyLayoutSets(&m.sel.layout, m.sel.base, m.opts.LayoutSets) {
		if m.sel.edited == nil {
			m.sel.edited = map[string]bool{}
		}
		m.sel.edited[label] = true
	}
}

func (m *Model) validateLayout() {
	if m.sel.model.Name == "" {
		return
	}
	m.sel.err = m.sel.model.ValidateLayout(m.sel.layout)
	if m.sel.err == nil {
		m.sel.err = checkRecipe(m.sel.model, m.sel.layout, m.sel.mbridge)
	}
	if m.sel.err == nil && m.statusErr && strings.HasPrefix(m.status, fixLayoutFirst) {
		// The message was about this layout, which is fixed now.
		m.status, m.statusErr = "", false
	}
}

// fixLayoutFirst starts the message enter gives on an invalid layout.
const fixLayoutFirst = "fix the layout first"

// onCursor makes the selection follow the list cursor; a team preset is
// loaded (once) through the backend.
func (m *Model) onCursor() tea.Cmd {
	items := m.listItems()
	if len(items) == 0 {
		return nil
	}
	m.modelScr.cursor = min(max(m.modelScr.cursor, 0), len(items)-1)
	it := items[m.modelScr.cursor]
	m.modelScr.editing = false
	if it.builtin != nil {
		if m.sel.preset != "" || m.sel.model.Name != it.builtin.Name {
			m.applyBuiltin(*it.builtin, "")
		}
		return nil
	}
	if it.preset.Problem != "" {
		return nil
	}
	if got, ok := m.loaded[it.preset.Name]; ok {
		if got.err == nil && m.sel.preset != it.preset.Name {
			m.applyPreset(got.preset)
		}
		return nil
	}
	return loadPreset(m.backend, it.preset.Name)
}

func (m *Model) onPresetLoaded(msg presetLoadedMsg) tea.Cmd {
	m.loaded[msg.name] = msg
	if msg.err != nil {
		m.setError(fmt.Errorf("preset %s: %w", msg.name, msg.err))
		return nil
	}
	items := m.listItems()
	if c := m.modelScr.cursor; c < len(items) && items[c].preset != nil && items[c].preset.Name == msg.name {
		m.applyPreset(msg.preset)
	}
	return nil
}

func (m *Model) modelKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	s := &m.modelScr
	if key.Matches(msg, k.Focus) {
		m.commitEdit()
		s.focus = 1 - s.focus
		return nil
	}
	if key.Matches(msg, k.Next) {
		switch {
		case s.editing:
			// enter ends the typing; a second one continues.
			m.commitEdit()
			return nil
		case s.filtering && len(m.listItems()) > 0:
			// enter ends the filter; a second one continues.
			s.filtering = false
			return nil
		case s.focus == focusList && len(m.listItems()) == 0:
			m.setError(fmt.Errorf("no model or preset matches the filter %q: esc clears it", s.filter))
			return nil
		case m.sel.model.Name == "":
			m.setStatus("pick a model first")
			return nil
		case m.sel.err != nil:
			m.setError(fmt.Errorf("%s: %v", fixLayoutFirst, m.sel.err))
			return nil
		}
		return m.goTo(screenGPU)
	}
	if s.focus == focusList {
		return m.modelListKey(msg)
	}
	return m.layoutKey(msg)
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

func (m *Model) modelListKey(msg tea.KeyPressMsg) tea.Cmd {
	s := &m.modelScr
	k := m.keys
	if !s.filtering {
		switch {
		case key.Matches(msg, k.Filter):
			s.filtering = true
			return nil
		case key.Matches(msg, k.GPUType):
			m.cycleGPUType(1)
			return nil
		case key.Matches(msg, k.MBridge):
			m.toggleMBridge()
			return nil
		}
	}
	switch msg.String() {
	case "up":
		s.cursor--
		return m.onCursor()
	case "down":
		s.cursor++
		return m.onCursor()
	case "pgup":
		s.cursor -= 10
		return m.onCursor()
	case "pgdown":
		s.cursor += 10
		return m.onCursor()
	case "left":
		m.cycleGPUType(-1)
		return nil
	case "right":
		m.cycleGPUType(1)
		return nil
	case "backspace":
		if s.filter != "" {
			s.filter = s.filter[:len(s.filter)-1]
			s.cursor = 0
			return m.onCursor()
		}
		return nil
	case "esc":
		s.filtering = false
		if s.filter != "" {
			s.filter, s.cursor = "", 0
			return m.onCursor()
		}
		return nil
	}
	if s.filtering && isFilterRune(msg.Text) {
		s.filter += strings.ToLower(msg.Text)
		s.cursor = 0
		return m.onCursor()
	}
	return nil
}

func (m *Model) field() layoutField { return layoutGrid()[m.modelScr.row][m.modelScr.col] }

// cycleGPUType moves to the next GPU type the model has a layout for: its
// default layout there, with the fields the person edited kept.
func (m *Model) cycleGPUType(dir int) {
	gpus := m.sel.model.GPUs()
	if len(gpus) < 2 {
		m.setStatus("%s has a layout for %s only", m.sel.model.Name, strings.Join(gpus, ", "))
		return
	}
	gpu := nextIn(gpus, m.sel.layout.GPU, dir)
	l, err := m.sel.model.Layout(gpu)
	if err != nil {
		m.setError(err)
		return
	}
	base := l.Clone()
	var kept []string
	for _, row := range layoutGrid() {
		for _, f := range row {
			if f.carry != nil && m.sel.edited[f.label] {
				f.carry(&l, &m.sel.layout)
				kept = append(kept, f.label)
			}
		}
	}
	m.sel.layout, m.sel.base = l, base
	m.validateLayout()
	if len(kept) > 0 {
		m.setStatus("layout: %s's default for %s, with your %s", m.sel.model.Name, gpu, strings.Join(kept, ", "))
		return
	}
	m.setStatus("layout: %s's default for %s", m.sel.model.Name, gpu)
}

// toggleMBridge cycles through the Megatron-Bridge versions cgtune knows.
func (m *Model) toggleMBridge() {
	m.sel.mbridge = nextIn(presets.MBridgeVersions, m.sel.mbridge, 1)
	m.validateLayout() // the recipe's fields depend on the version
}

// markEdited notes that the person changed the field under the cursor and
// says what it is now against the layout it started from.
func (m *Model) markEdited() {
	f := m.field()
	if f.carry == nil {
		return
	}
	if m.sel.edited == nil {
		m.sel.edited = map[string]bool{}
	}
	m.sel.edited[f.label] = true
	now, was := f.value(m.sel.model, m.sel.layout), f.value(m.sel.model, m.sel.base)
	if now == was {
		m.setStatus("layout: %s %s, as %s", f.label, now, m.sel.baseName())
		return
	}
	m.setStatus("layout edited: %s %s (%s: %s)", f.label, now, m.sel.baseName(), was)
}

// commitEdit applies the typed text to the field under the cursor.
func (m *Model) commitEdit() {
	s := &m.modelScr
	if !s.editing {
		return
	}
	s.editing = false
	text := s.edit
	s.edit = ""
	f := m.field()
	if f.set == nil {
		return
	}
	if err := f.set(m, text); err != nil {
		m.setError(fmt.Errorf("%s: %w", f.label, err))
		return
	}
	m.markEdited()
	m.validateLayout()
}

// stepField moves the field under the cursor by one notch.
func (m *Model) stepField(dir int) {
	f := m.field()
	if f.step == nil {
		return
	}
	if err := f.step(m, dir); err != nil {
		m.setError(fmt.Errorf("%s: %w", f.label, err))
		return
	}
	m.markEdited()
	m.validateLayout()
}

func (m *Model) layoutKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	s := &m.modelScr
	if s.editing {
		switch msg.String() {
		case "backspace":
			if len(s.edit) > 0 {
				s.edit = s.edit[:len(s.edit)-1]
			}
			if s.edit == "" {
				s.editing = false
			}
			return nil
		case "esc":
			s.editing, s.edit = false, ""
			return nil
		}
		if f := m.field(); len(msg.Text) == 1 && f.accepts != nil && f.accepts(msg.Text[0]) {
			if len(s.edit) < 7 {
				s.edit += msg.Text
			}
			return nil
		}
		m.commitEdit()
	}
	switch {
	case msg.String() == "esc":
		s.focus = focusList
	case m.gridOneColumn() && (msg.String() == "up" || msg.String() == "k" || msg.String() == "left" || msg.String() == "h"):
		m.moveInColumn(-1)
	case m.gridOneColumn() && (msg.String() == "down" || msg.String() == "j" || msg.String() == "right" || msg.String() == "l"):
		m.moveInColumn(1)
	case msg.String() == "up" || msg.String() == "k":
		s.row = max(s.row-1, 0)
	case msg.String() == "down" || msg.String() == "j":
		s.row = min(s.row+1, len(layoutGrid())-1)
	case msg.String() == "left" || msg.String() == "h":
		s.col = 0
	case msg.String() == "right" || msg.String() == "l":
		s.col = 1
	}
	if layoutGrid()[s.row][s.col].label == "" {
		s.col = 0 // a row with one field
	}
	switch {
	case msg.String() == "+" || msg.String() == "=" || msg.String() == "space":
		m.stepField(1)
	case msg.String() == "-":
		m.stepField(-1)
	case key.Matches(msg, k.GPUType):
		m.cycleGPUType(1)
	case key.Matches(msg, k.MBridge):
		m.toggleMBridge()
	case len(msg.Text) == 1 && m.field().accepts != nil && m.field().accepts(msg.Text[0]):
		if m.field().set != nil {
			s.editing, s.edit = true, msg.Text
		}
	}
	return nil
}

func (m *Model) modelHelp() helpKeys {
	k := m.keys
	if m.modelScr.focus == focusList && m.modelScr.filtering {
		return helpKeys{short: []key.Binding{
			withHelp(k.Filter, "a-z 0-9", "filter"), withHelp(k.Next, "enter", "done"), withHelp(k.ClearFilter, "esc", "clear"),
			withHelp(k.Up, "↑/↓", "model"), withHelp(k.Quit, "ctrl+c", "quit"),
		}}
	}
	if m.modelScr.focus == focusList {
		short := []key.Binding{
			withHelp(k.Up, "↑/↓", "model"),
			k.Filter,
			withHelp(k.GPUType, "g/←/→", "gpu type"),
			withHelp(k.MBridge, "v", "MB version"),
			withHelp(k.Focus, "tab", "edit layout"),
			k.Next,
			k.Quit,
		}
		return helpKeys{short: short, full: [][]key.Binding{
			{withHelp(k.Up, "↑/↓", "move"), withHelp(k.PageDown, "pgup/pgdn", "page"), k.Filter, withHelp(k.ClearFilter, "esc", "clear filter")},
			{withHelp(k.GPUType, "g/←/→", "gpu type"), withHelp(k.MBridge, "v", "MB version"), withHelp(k.Focus, "tab", "edit layout")},
			{k.Next, k.Quit, k.Help},
		}}
	}
	if m.modelScr.editing {
		return helpKeys{short: []key.Binding{
			withHelp(k.Next, "0-9", "type"), withHelp(k.Next, "enter", "set"), withHelp(k.Back, "esc", "cancel"),
		}}
	}
	short := []key.Binding{
		withHelp(k.Up, "arrows", "field"),
		withHelp(k.Inc, "+/-", "change"),
		withHelp(k.Inc, "0-9", "type"),
		k.Next,
		withHelp(k.Focus, "tab", "list"),
		k.GPUType, withHelp(k.MBridge, "v", "MB version"),
		k.Quit,
	}
	return helpKeys{short: short, full: [][]key.Binding{
		{withHelp(k.Up, "↑/↓/←/→", "field"), withHelp(k.Inc, "+/-", "change"), withHelp(k.Inc, "0-9", "type a number")},
		{k.GPUType, k.MBridge, withHelp(k.Focus, "tab/esc", "model list")},
		{k.Next, k.Quit, k.Help},
	}}
}

// --- view ---------------------------------------------------------------

func (m *Model) modelView(w, h int) string {
	listW := modelListWidth(w)
	right := m.modelDetail(w-listW-3, h)
	return sideBySide(m.modelList(listW, h), listW, right, 3)
}

// modelListWidth is the model list's width in a window w wide; the
// detail (and the layout editor) gets the rest less a gap of 3.
func modelListWidth(w int) int {
	switch {
	case w >= 120:
		return 50
	case w < 80:
		// A small window: the layout editor needs the room more.
		return 24
	}
	return 30
}

// Cells of the layout grid: "  " or the cursor's mark, the label padded
// to gridLabelW, the value (at most gridValueW in the widest choices).
const (
	gridLabelW = 11
	gridValueW = 9
)

// gridOneColumn reports whether the layout editor shows its fields one
// per line: the detail pane of a window m.width wide has no room for two
// columns of them.
func (m *Model) gridOneColumn() bool {
	w := m.width - modelListWidth(m.width) - 3
	return w < 2*(2+gridLabelW+gridValueW)
}

// gridCells are the layout grid's cells in reading order (row by row).
func gridCells() [][2]int {
	var out [][2]int
	for r, row := range layoutGrid() {
		for c, f := range row {
			if f.label != "" {
				out = append(out, [2]int{r, c})
			}
		}
	}
	return out
}

// moveInColumn moves the cursor by dir cells in reading order, as the
// fields stand one per line.
func (m *Model) moveInColumn(dir int) {
	cells := gridCells()
	i := slices.Index(cells, [2]int{m.modelScr.row, m.modelScr.col})
	i = min(max(i+dir, 0), len(cells)-1)
	m.modelScr.row, m.modelScr.col = cells[i][0], cells[i][1]
}

func (m *Model) modelList(w, h int) string {
	st := m.st
	s := &m.modelScr
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

	items := m.listItems()
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

func (m *Model) modelDetail(w, h int) string {
	st := m.st
	mod := m.sel.model
	if mod.Name == "" {
		return st.Faint.Render("no model selected")
	}
	title := mod.Display
	if title == "" {
		title = mod.Name
	}
	sub := mod.Name + " · " + mod.Kind()
	if mod.Family != "" {
		sub += " · " + mod.Family
	}
	if m.sel.preset != "" {
		sub = "preset " + m.sel.preset + " · " + sub
	}
	head := truncate(st.Title.Render(title)+"  "+st.Muted.Render(sub), w)
	title = "Layout"
	if m.modelScr.focus == focusLayout {
		title = st.Focused.Render(title)
	} else {
		title = st.Title.Render(title)
	}
	l := m.sel.layout
	shape := fmt.Sprintf("for %s · DP %d · %d micro-batches", l.GPU, l.DP(), l.MicroBatches())
	if m.sel.err != nil {
		// An invalid layout has no data-parallel size to speak of.
		shape = fmt.Sprintf("for %s · DP — · micro-batches —", l.GPU)
	}
	layoutTitle := truncate(title+"  "+st.Muted.Render(shape), w)
	grid := m.layoutGridLines(w)
	var errLines []string
	if m.sel.err != nil {
		errLines = strings.Split(st.Err.Render(wrap("✗ "+m.sel.err.Error(), w)), "\n")
	}
	// The lines that must show: the titles, the grid and the error. The
	// architecture gets its full lines when they fit, one line else; then
	// what was edited, a gap, the MB note and the layout's source, as far
	// as the height allows; in a window too short for the grid the grid
	// scrolls with the cursor.
	arch := archLines(mod.Arch, w)
	archText := make([]string, len(arch))
	for i, a := range arch {
		archText[i] = a.render(st)
	}
	rest := h - 2 - len(grid) - len(errLines)
	if len(archText) > rest {
		archText = []string{st.Muted.Render(truncate(archSummary(mod.Arch), w))}
	}
	rest -= len(archText)
	var edited, gap, note, source []string
	if edits := m.sel.layoutEdits(); len(edits) > 0 && m.sel.err == nil && rest > 0 {
		edited = []string{st.Warn.Render(truncate("edited: "+strings.Join(edits, ", "), w))}
		rest--
	}
	if rest > 0 {
		gap = []string{""}
		rest--
	}
	if rest > 0 {
		note = []string{st.Faint.Render(truncate(mbridgeNote(m.sel.mbridge), w))}
		rest--
	}
	if src := m.sel.base.Source; src != "" && m.sel.err == nil && rest > 0 {
		source = []string{st.Faint.Render(truncate("from "+src, w))}
		rest--
	}
	if rest < 0 {
		cur := m.modelScr.row
		if m.gridOneColumn() {
			cur = slices.Index(gridCells(), [2]int{m.modelScr.row, m.modelScr.col})
		}
		grid = windowLines(grid, cur, max(len(grid)+rest, 1))
	}
	lines := []string{head}
	lines = append(lines, archText...)
	lines = append(lines, gap...)
	lines = append(lines, layoutTitle)
	lines = append(lines, grid...)
	lines = append(lines, note...)
	lines = append(lines, errLines...)
	lines = append(lines, edited...)
	lines = append(lines, source...)
	return strings.Join(lines, "\n") + "\n"
}

// layoutGridLines are the grid's rows: a label and value per cell, the
// cursor's cell marked; one field per line where two columns do not fit.
func (m *Model) layoutGridLines(w int) []string {
	st := m.st
	colW := max(min((w-2)/2, 24), 2+gridLabelW+gridValueW)
	oneColumn := m.gridOneColumn()
	var out []string
	for r, cells := range layoutGrid() {
		var line strings.Builder
		for c, f := range cells {
			if oneColumn && line.Len() > 0 {
				out = append(out, line.String())
				line.Reset()
			}
			if f.label == "" {
				continue
			}
			cur := m.modelScr.focus == focusLayout && m.modelScr.row == r && m.modelScr.col == c
			val := f.get(m)
			if cur && m.modelScr.editing {
				val = m.modelScr.edit + "▏"
			}
			label := padRight(f.label, gridLabelW)
			cell := "  " + st.Label.Render(label) + st.Value.Render(val)
			if cur {
				mark := "› "
				if !st.Plain {
					mark = "▸ "
				}
				cell = st.Cursor.Render(mark) + st.Cursor.Render(label) + st.Cursor.Render(val)
				if st.Plain {
					cell = "› " + label + "[" + val + "]"
				}
			}
			if c == 0 && !oneColumn {
				cell = padRight(cell, colW)
			}
			line.WriteString(cell)
		}
		out = append(out, line.String())
	}
	return out
}

// windowLines keeps h of lines, with line cur among them.
func windowLines(lines []string, cur, h int) []string {
	off := scrollWindow(0, cur, len(lines), h)
	return lines[off:min(off+h, len(lines))]
}

// archSummary is the architecture in one line, for a short window.
func archSummary(a presets.Arch) string {
	s := fmt.Sprintf("%d layers · hidden %d · %d heads", a.Layers, a.Hidden, a.Heads)
	switch {
	case a.MoE != nil:
		s += fmt.Sprintf(" · MoE %d experts, top-%d", a.MoE.Experts, a.MoE.TopK)
	default:
		s += " · dense"
	}
	if a.HybridPattern != "" {
		s += " · hybrid"
	}
	return s
}

// mbridgeNote says what the MB version changes in the overrides, so the
// toggle is not a mystery.
func mbridgeNote(mb string) string {
	switch gen, err := presets.ParseMBridge(mb); {
	case err != nil:
		return err.Error()
	case gen == presets.G2:
		return "MB " + mb + " (G2): overrides use cuda_graph_scope; full iteration is local + full_iteration"
	default:
		return "MB " + mb + " (G3): overrides use cuda_graph_modules; full iteration is its own impl"
	}
}

// archLine is one "label value  label value" line of the architecture.
type archLine [][2]string

func (l archLine) render(st Styles) string {
	var parts []string
	for _, kv := range l {
		parts = append(parts, st.Label.Render(kv[0])+" "+st.Value.Render(kv[1]))
	}
	return strings.Join(parts, "   ")
}

// archLines lays out the architecture in as few lines as the width allows.
func archLines(a presets.Arch, w int) []archLine {
	pairs := [][2]string{
		{"Layers", strconv.Itoa(a.Layers)},
		{"Hidden", strconv.Itoa(a.Hidden)},
		{"FFN", strconv.Itoa(a.FFNHidden)},
		{"Heads", strconv.Itoa(a.Heads)},
	}
	if a.KVGroups > 0 {
		pairs = append(pairs, [2]string{"KV groups", strconv.Itoa(a.KVGroups)})
	} else if a.MLA != nil {
		pairs = append(pairs, [2]string{"Attention", fmt.Sprintf("MLA (kv rank %d)", a.MLA.KVLoraRank)})
	}
	pairs = append(pairs, [2]string{"Head dim", strconv.Itoa(a.HeadDim)}, [2]string{"Vocab", strconv.Itoa(a.Vocab)})
	var lines []archLine
	var cur archLine
	width := 0
	for _, p := range pairs {
		pw := len(p[0]) + 1 + len(p[1]) + 3
		if width+pw > w && len(cur) > 0 {
			lines = append(lines, cur)
			cur, width = nil, 0
		}
		cur = append(cur, p)
		width += pw
	}
	if len(cur) > 0 {
		lines = append(lines, cur)
	}
	if a.MoE != nil {
		moe := fmt.Sprintf("%d experts · top-%d · ffn %d", a.MoE.Experts, a.MoE.TopK, a.MoE.FFNHidden)
		if a.MoE.SharedExpertFFN > 0 {
			moe += fmt.Sprintf(" · shared %d", a.MoE.SharedExpertFFN)
		}
		if a.MoE.FirstDenseLayers > 0 {
			moe += fmt.Sprintf(" · %d dense first", a.MoE.FirstDenseLayers)
		}
		lines = append(lines, archLine{{"MoE", truncate(moe, w-4)}})
	} else {
		lines = append(lines, archLine{{"MoE", "none (dense)"}})
	}
	if a.HybridPattern != "" {
		lines = append(lines, archLine{{"Hybrid", truncate(patternSummary(a.HybridPattern), w-7)}})
	}
	return lines
}

// patternSummary counts the layer kinds of a hybrid pattern and shows its
// start: "M×27 *×4 -×0 E×23 · MEMEM*EM…".
func patternSummary(p string) string {
	names := map[rune]string{'M': "mamba", '*': "attn", '-': "mlp", 'E': "moe"}
	var parts []string
	for _, r := range presets.HybridPatternChars {
		if n := strings.Count(p, string(r)); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, names[r]))
		}
	}
	return strings.Join(parts, " · ") + "  " + p
}
