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

// The model screen's layout editor: a cursor over the layout's fields
// (layout_fields.go), numbers typed into the one under it, and the pane
// that shows the model and its layout.

func (s *modelScreen) field() layoutField { return layoutGrid()[s.row][s.col] }

// markEdited says what the field under the cursor is now against the
// layout it started from.
func (s *modelScreen) markEdited() {
	f := s.field()
	if f.carry == nil {
		return
	}
	now, was := f.value(s.sel.model, s.sel.layout), f.value(s.sel.model, s.sel.base)
	if now == was {
		s.setStatus("layout: %s %s, as %s", f.label, now, s.sel.baseName())
		return
	}
	s.setStatus("layout edited: %s %s (%s: %s)", f.label, now, s.sel.baseName(), was)
}

// commitEdit applies the typed text to the field under the cursor.
func (s *modelScreen) commitEdit() {
	if !s.editing {
		return
	}
	s.editing = false
	text := s.edit
	s.edit = ""
	f := s.field()
	if f.set == nil {
		return
	}
	if err := f.set(s, text); err != nil {
		s.setError(fmt.Errorf("%s: %w", f.label, err))
		return
	}
	s.markEdited()
	s.validateLayout()
}

// stepField moves the field under the cursor by one notch.
func (s *modelScreen) stepField(dir int) {
	f := s.field()
	if f.step == nil {
		return
	}
	if err := f.step(s, dir); err != nil {
		s.setError(fmt.Errorf("%s: %w", f.label, err))
		return
	}
	s.markEdited()
	s.validateLayout()
}

func (s *modelScreen) layoutKey(msg tea.KeyPressMsg) tea.Cmd {
	if s.editing && s.typeKey(msg) {
		return nil
	}
	s.moveKey(msg)
	s.changeKey(msg)
	return nil
}

// typeKey takes a key while a number is typed: backspace, esc and the
// characters the field takes; any other key sets the number and goes on
// as a key of its own (false).
func (s *modelScreen) typeKey(msg tea.KeyPressMsg) bool {
	switch msg.String() {
	case "backspace":
		if len(s.edit) > 0 {
			s.edit = s.edit[:len(s.edit)-1]
		}
		if s.edit == "" {
			s.editing = false
		}
		return true
	case "esc":
		s.editing, s.edit = false, ""
		return true
	}
	if f := s.field(); len(msg.Text) == 1 && f.accepts != nil && f.accepts(msg.Text[0]) {
		if len(s.edit) < 7 {
			s.edit += msg.Text
		}
		return true
	}
	s.commitEdit()
	return false
}

// moveKey moves the cursor over the grid (in reading order when the
// fields stand one per line); esc gives the keyboard back to the list.
func (s *modelScreen) moveKey(msg tea.KeyPressMsg) {
	switch k := msg.String(); {
	case k == "esc":
		s.focus = focusList
	case s.gridOneColumn() && (k == "up" || k == "k" || k == "left" || k == "h"):
		s.moveInColumn(-1)
	case s.gridOneColumn() && (k == "down" || k == "j" || k == "right" || k == "l"):
		s.moveInColumn(1)
	case k == "up" || k == "k":
		s.row = max(s.row-1, 0)
	case k == "down" || k == "j":
		s.row = min(s.row+1, len(layoutGrid())-1)
	case k == "left" || k == "h":
		s.col = 0
	case k == "right" || k == "l":
		s.col = 1
	}
	if layoutGrid()[s.row][s.col].label == "" {
		s.col = 0 // a row with one field
	}
}

// changeKey changes the field under the cursor: +/- step it, a digit
// starts typing a number into it; g and v change the GPU type and MB.
func (s *modelScreen) changeKey(msg tea.KeyPressMsg) {
	k := s.keys
	switch pressed := msg.String(); {
	case pressed == "+" || pressed == "=" || pressed == "space":
		s.stepField(1)
	case pressed == "-":
		s.stepField(-1)
	case key.Matches(msg, k.GPUType):
		s.cycleGPUType(1)
	case key.Matches(msg, k.MBridge):
		s.toggleMBridge()
	case len(msg.Text) == 1 && s.field().accepts != nil && s.field().accepts(msg.Text[0]):
		if s.field().set != nil {
			s.editing, s.edit = true, msg.Text
		}
	}
}

// Cells of the layout grid: "  " or the cursor's mark, the label padded
// to gridLabelW, the value (at most gridValueW in the widest choices).
const (
	gridLabelW = 11
	gridValueW = 9
)

// gridOneColumn reports whether the layout editor shows its fields one
// per line: the detail pane of a window this wide has no room for two
// columns of them.
func (s *modelScreen) gridOneColumn() bool {
	w := s.width - modelListWidth(s.width) - 3
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
func (s *modelScreen) moveInColumn(dir int) {
	cells := gridCells()
	i := slices.Index(cells, [2]int{s.row, s.col})
	i = min(max(i+dir, 0), len(cells)-1)
	s.row, s.col = cells[i][0], cells[i][1]
}

func (s *modelScreen) detailView(w, h int) string {
	if s.sel.model.Name == "" {
		return s.st.Faint.Render("no model selected")
	}
	// The lines that must show: the titles, the grid and the error. The
	// architecture gets its full lines when they fit, one line else; then
	// what was edited, a gap, the MB note and the layout's source, as far
	// as the height allows; in a window too short for the grid the grid
	// scrolls with the cursor.
	grid := s.layoutGridLines(w)
	errLines := s.layoutErrLines(w)
	rest := h - 2 - len(grid) - len(errLines)
	arch := s.archText(w, rest)
	rest -= len(arch)
	more := s.moreLines(w, rest)
	rest -= more.count()
	if rest < 0 {
		grid = windowLines(grid, s.gridCursorLine(), max(len(grid)+rest, 1))
	}
	lines := []string{s.modelTitle(w)}
	lines = append(lines, arch...)
	lines = append(lines, more.gap...)
	lines = append(lines, s.layoutTitle(w))
	lines = append(lines, grid...)
	lines = append(lines, more.note...)
	lines = append(lines, errLines...)
	lines = append(lines, more.edited...)
	lines = append(lines, more.source...)
	return strings.Join(lines, "\n") + "\n"
}

// modelTitle names the model, its kind and family, and its preset.
func (s *modelScreen) modelTitle(w int) string {
	mod := s.sel.model
	title := mod.Display
	if title == "" {
		title = mod.Name
	}
	sub := mod.Name + " · " + mod.Kind()
	if mod.Family != "" {
		sub += " · " + mod.Family
	}
	if s.sel.preset != "" {
		sub = "preset " + s.sel.preset + " · " + sub
	}
	return truncate(s.st.Title.Render(title)+"  "+s.st.Muted.Render(sub), w)
}

// layoutTitle is the editor's title with the layout's shape.
func (s *modelScreen) layoutTitle(w int) string {
	st := s.st
	title := "Layout"
	if s.focus == focusLayout {
		title = st.Focused.Render(title)
	} else {
		title = st.Title.Render(title)
	}
	l := s.sel.layout
	shape := fmt.Sprintf("for %s · DP %d · %d micro-batches", l.GPU, l.DP(), l.MicroBatches())
	if s.sel.err != nil {
		// An invalid layout has no data-parallel size to speak of.
		shape = fmt.Sprintf("for %s · DP — · micro-batches —", l.GPU)
	}
	return truncate(title+"  "+st.Muted.Render(shape), w)
}

// layoutErrLines say why the layout is not valid.
func (s *modelScreen) layoutErrLines(w int) []string {
	if s.sel.err == nil {
		return nil
	}
	return strings.Split(s.st.Err.Render(wrap("✗ "+s.sel.err.Error(), w)), "\n")
}

// archText is the architecture in its full lines when they fit in room,
// else in one.
func (s *modelScreen) archText(w, room int) []string {
	arch := archLines(s.sel.model.Arch, w)
	text := make([]string, len(arch))
	for i, a := range arch {
		text[i] = a.render(s.st)
	}
	if len(text) > room {
		return []string{s.st.Muted.Render(truncate(archSummary(s.sel.model.Arch), w))}
	}
	return text
}

// detailMore are the detail's lines that show as far as the height
// allows.
type detailMore struct{ edited, gap, note, source []string }

func (d detailMore) count() int { return len(d.edited) + len(d.gap) + len(d.note) + len(d.source) }

// moreLines are what was edited, a gap, the MB note and the layout's
// source, in that order, as many as rest lines take.
func (s *modelScreen) moreLines(w, rest int) detailMore {
	st := s.st
	var d detailMore
	if edits := s.sel.layoutEdits(); len(edits) > 0 && s.sel.err == nil && rest > 0 {
		d.edited = []string{st.Warn.Render(truncate("edited: "+strings.Join(edits, ", "), w))}
		rest--
	}
	if rest > 0 {
		d.gap = []string{""}
		rest--
	}
	if rest > 0 {
		d.note = []string{st.Faint.Render(truncate(mbridgeNote(s.sel.mbridge), w))}
		rest--
	}
	if src := s.sel.base.Source; src != "" && s.sel.err == nil && rest > 0 {
		d.source = []string{st.Faint.Render(truncate("from "+src, w))}
	}
	return d
}

// gridCursorLine is the line of the grid the cursor is on.
func (s *modelScreen) gridCursorLine() int {
	if s.gridOneColumn() {
		return slices.Index(gridCells(), [2]int{s.row, s.col})
	}
	return s.row
}

// layoutGridLines are the grid's rows: a label and value per cell, the
// cursor's cell marked; one field per line where two columns do not fit.
func (s *modelScreen) layoutGridLines(w int) []string {
	st := s.st
	colW := max(min((w-2)/2, 24), 2+gridLabelW+gridValueW)
	oneColumn := s.gridOneColumn()
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
			cur := s.focus == focusLayout && s.row == r && s.col == c
			val := f.get(s)
			if cur && s.editing {
				val = s.edit + "▏"
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
