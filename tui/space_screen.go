package tui

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"cgtune/presets"
	"cgtune/search"
)

// Screen (c): the search space, the candidates the rules leave, strategy
// and budget.

// spaceChoice is the space as toggles.
type spaceChoice struct {
	impls   []bool // per presets.Impls
	whole   bool   // the whole layer (an empty scope list)
	scopes  []bool // per presets.Scopes
	warmups []int  // the warm-up values offered
	warmOn  []bool
	// explicit holds a preset's own scope sets; they are kept as they are
	// until the person toggles a scope, since toggles cannot show them.
	explicit [][]string
}

// warmupChoices are the warm-up counts offered besides a preset's own:
// MCore's default 3, and the values around it worth comparing.
var warmupChoices = []int{1, 2, 3, 5, 10}

func newSpaceChoice(s presets.Space) spaceChoice {
	c := spaceChoice{impls: make([]bool, len(presets.Impls)), scopes: make([]bool, len(presets.Scopes))}
	for i, im := range presets.Impls {
		c.impls[i] = slices.Contains(s.Impls, im)
	}
	if len(s.Scopes) == 0 {
		c.whole = true
		for i := range c.scopes {
			c.scopes[i] = true
		}
	} else {
		c.explicit = cloneSets(s.Scopes)
		for _, set := range s.Scopes {
			if len(set) == 0 {
				c.whole = true
			}
			for _, sc := range set {
				if i := slices.Index(presets.Scopes, sc); i >= 0 {
					c.scopes[i] = true
				}
			}
		}
	}
	c.warmups = slices.Clone(warmupChoices)
	for _, w := range s.Warmups {
		if !slices.Contains(c.warmups, w) {
			c.warmups = append(c.warmups, w)
		}
	}
	slices.Sort(c.warmups)
	c.warmOn = make([]bool, len(c.warmups))
	for i, w := range c.warmups {
		c.warmOn[i] = slices.Contains(s.Warmups, w)
	}
	return c
}

func cloneSets(s [][]string) [][]string {
	out := make([][]string, len(s))
	for i := range s {
		out[i] = slices.Clone(s[i])
		if out[i] == nil {
			out[i] = []string{}
		}
	}
	return out
}

// Space is the presets.Space the toggles describe. Everything on is the
// runner's default (nil Scopes: every subset); otherwise the scope sets
// are the whole layer (if on) and every non-empty subset of the scopes on.
func (c spaceChoice) Space() presets.Space {
	var s presets.Space
	for i, on := range c.impls {
		if on {
			s.Impls = append(s.Impls, presets.Impls[i])
		}
	}
	for i, on := range c.warmOn {
		if on {
			s.Warmups = append(s.Warmups, c.warmups[i])
		}
	}
	if c.explicit != nil {
		s.Scopes = cloneSets(c.explicit)
		return s
	}
	var on []string
	for i, v := range c.scopes {
		if v {
			on = append(on, presets.Scopes[i])
		}
	}
	if c.whole && len(on) == len(presets.Scopes) {
		return s
	}
	if c.whole {
		s.Scopes = append(s.Scopes, []string{})
	}
	// Subsets by size, then in the harness's scope order, so the list
	// reads from the simple to the elaborate.
	for size := 1; size <= len(on); size++ {
		for mask := 1; mask < 1<<len(on); mask++ {
			if popcount(mask) != size {
				continue
			}
			var set []string
			for j := range on {
				if mask&(1<<j) != 0 {
					set = append(set, on[j])
				}
			}
			s.Scopes = append(s.Scopes, set)
		}
	}
	return s
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// problem says why the toggles cannot make a space, "" when they can.
func (c spaceChoice) problem() string {
	s := c.Space()
	switch {
	case len(s.Impls) == 0:
		return "choose at least one impl"
	case len(s.Warmups) == 0:
		return "choose at least one warm-up value"
	case c.explicit == nil && !c.whole && !slices.Contains(c.scopes, true):
		return "choose the whole layer or at least one scope"
	}
	return ""
}

const (
	focusToggles = 0
	focusCands   = 1
)

type spaceScreen struct {
	focus    int
	row, col int // toggle grid cursor
	cursor   int // candidate list cursor
	offset   int
}

// toggleRows are the rows of the toggle grid.
func (m *Model) toggleRows() []toggleRow {
	c := &m.space
	var rows []toggleRow
	impl := toggleRow{label: "Impls"}
	for i, im := range presets.Impls {
		impl.items = append(impl.items, toggleItem{name: im, on: &c.impls[i]})
	}
	scope := toggleRow{label: "Scopes"}
	scope.items = append(scope.items, toggleItem{name: "whole layer", on: &c.whole, scope: true})
	for i, sc := range presets.Scopes {
		scope.items = append(scope.items, toggleItem{name: sc, on: &c.scopes[i], scope: true})
	}
	warm := toggleRow{label: "Warm-up"}
	for i, w := range c.warmups {
		warm.items = append(warm.items, toggleItem{name: strconv.Itoa(w), on: &c.warmOn[i]})
	}
	return append(rows, impl, scope, warm)
}

type toggleRow struct {
	label string
	items []toggleItem
}

type toggleItem struct {
	name  string
	on    *bool
	scope bool // toggling it leaves a preset's explicit scope sets
}

// replan asks the backend for the candidate list of the current space.
func (m *Model) replan() tea.Cmd {
	m.planSeq++
	if p := m.space.problem(); p != "" {
		m.plan, m.planErr, m.planning = nil, errors.New(p), false
		return nil
	}
	m.planning, m.planErr = true, nil
	return planCmd(m.backend, m.planSeq, m.request())
}

func (m *Model) onPlan(msg planMsg) {
	if msg.seq != m.planSeq {
		return // the space changed while this plan was made
	}
	m.planning = false
	m.planErr = msg.err
	// Valid candidates first: they are what will run; then those known
	// to fail, then the ones the rules reject, with the rule.
	plan := slices.Clone(msg.plan)
	class := func(p search.Planned) int {
		switch {
		case p.Valid():
			return 0
		case p.Violations[0].ID == search.WillFailID:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(plan, func(a, b search.Planned) int { return class(a) - class(b) })
	m.plan = plan
	m.spaceScr.cursor = min(m.spaceScr.cursor, max(len(plan)-1, 0))
}

func (m *Model) validCount() int {
	n := 0
	for _, p := range m.plan {
		if p.Valid() {
			n++
		}
	}
	return n
}

// planCounts are the plan's rows that will fail, are rejected by the
// rules, and the other spellings merged into rows.
func (m *Model) planCounts() (willFail, rejected, aliases int) {
	for _, p := range m.plan {
		aliases += len(p.Also)
		switch {
		case p.Valid():
		case p.Violations[0].ID == search.WillFailID:
			willFail++
		default:
			rejected++
		}
	}
	return willFail, rejected, aliases
}

// Ties are the tie bands the t key cycles through (search.RankOptions.Tie).
var Ties = []float64{search.DefaultTie, 0.02, 0.05, 0.1, search.NoTie, 0.005}

// tieText shows a tie band.
func tieText(t float64) string {
	switch {
	case t == 0:
		return search.FormatTie(search.DefaultTie)
	case t < 0:
		return "0% (spread only)"
	}
	return search.FormatTie(t)
}

func (m *Model) spaceKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	s := &m.spaceScr
	switch {
	case key.Matches(msg, k.Back):
		m.screen = screenGPU
		return nil
	case key.Matches(msg, k.Focus):
		s.focus = 1 - s.focus
		return nil
	case key.Matches(msg, k.Strategy):
		m.strategy = nextIn(Strategies, m.strategy, 1)
		return m.replan()
	case key.Matches(msg, k.BudgetUp):
		m.budget = nextBudget(m.budget, 1)
		return nil
	case key.Matches(msg, k.BudgetDown):
		m.budget = nextBudget(m.budget, -1)
		return nil
	case key.Matches(msg, k.Tie):
		m.tie = nextIn(Ties, m.tie, 1)
		m.setStatus("tie band %s: candidates within it (or whose measured p10–p90 ranges overlap) tie; less graph memory, then the simpler one, ranks first", tieText(m.tie))
		return nil
	case key.Matches(msg, k.Start):
		return m.startSearch()
	}
	if s.focus == focusCands {
		switch {
		case key.Matches(msg, k.Up):
			s.cursor = max(s.cursor-1, 0)
		case key.Matches(msg, k.Down):
			s.cursor = min(s.cursor+1, max(len(m.plan)-1, 0))
		case key.Matches(msg, k.PageUp):
			s.cursor = max(s.cursor-10, 0)
		case key.Matches(msg, k.PageDown):
			s.cursor = min(s.cursor+10, max(len(m.plan)-1, 0))
		}
		return nil
	}
	rows := m.toggleRows()
	switch {
	case key.Matches(msg, k.Up):
		s.row = max(s.row-1, 0)
		s.col = min(s.col, len(rows[s.row].items)-1)
	case key.Matches(msg, k.Down):
		s.row = min(s.row+1, len(rows)-1)
		s.col = min(s.col, len(rows[s.row].items)-1)
	case key.Matches(msg, k.Left):
		s.col = max(s.col-1, 0)
	case key.Matches(msg, k.Right):
		s.col = min(s.col+1, len(rows[s.row].items)-1)
	case key.Matches(msg, k.Toggle):
		s.col = min(s.col, len(rows[s.row].items)-1)
		it := rows[s.row].items[s.col]
		*it.on = !*it.on
		if it.scope {
			m.space.explicit = nil
		}
		return m.replan()
	case key.Matches(msg, k.All):
		row := rows[s.row]
		all := false
		for _, it := range row.items {
			if !*it.on {
				all = true
			}
		}
		for _, it := range row.items {
			*it.on = all
			if it.scope {
				m.space.explicit = nil
			}
		}
		return m.replan()
	}
	s.col = min(s.col, len(rows[s.row].items)-1)
	return nil
}

// nextBudget steps through Budgets from the nearest one at or above cur.
func nextBudget(cur time.Duration, dir int) time.Duration {
	i := len(Budgets) - 1 // NoBudget
	if cur >= 0 {
		i = slices.IndexFunc(Budgets, func(b time.Duration) bool { return b >= cur })
		if i < 0 {
			i = len(Budgets) - 2
		}
	}
	return Budgets[min(max(i+dir, 0), len(Budgets)-1)]
}

// budgetText shows a budget; exhaustive searches do not use one.
func budgetText(b time.Duration, strategy string) string {
	switch {
	case strategy == "exhaustive":
		return "none (exhaustive)"
	case b < 0:
		return "no limit"
	}
	return fmtDur(b)
}

func (m *Model) spaceHelp() helpKeys {
	k := m.keys
	if m.spaceScr.focus == focusCands {
		return helpKeys{short: []key.Binding{withHelp(k.Up, "↑/↓", "scroll"), k.Start, withHelp(k.Focus, "tab", "toggles"),
			k.Strategy, withHelp(k.BudgetUp, "+/-", "budget"), k.Tie, k.Back, k.Quit}}
	}
	short := []key.Binding{k.Toggle, k.Start, withHelp(k.Focus, "tab", "candidates"), withHelp(k.Up, "arrows", "move"),
		k.Strategy, withHelp(k.BudgetUp, "+/-", "budget"), k.Tie, withHelp(k.All, "a", "all"), k.Back, k.Quit}
	return helpKeys{short: short, full: [][]key.Binding{
		{withHelp(k.Up, "↑/↓", "row"), withHelp(k.Left, "←/→", "item"), k.Toggle, withHelp(k.All, "a", "all/none in row")},
		{withHelp(k.Focus, "tab", "candidate list"), k.Strategy, withHelp(k.BudgetUp, "+/-", "budget"), k.Tie},
		{k.Start, k.Back, k.Quit, k.Help},
	}}
}

func (m *Model) spaceView(w, h int) string {
	st := m.st
	s := &m.spaceScr
	var b strings.Builder
	title := "Search space"
	if s.focus == focusToggles {
		title = st.Focused.Render(title)
	} else {
		title = st.Title.Render(title)
	}
	b.WriteString(title + "  " + st.Muted.Render(fmt.Sprintf("%s on %s · MB %s", m.sel.model.Name, m.sel.layout.GPU, m.sel.mbridge)) + "\n")
	lines := 1
	for r, row := range m.toggleRows() {
		for _, l := range m.toggleRowLines(row, r, w) {
			b.WriteString(l + "\n")
			lines++
		}
	}
	if m.space.explicit != nil {
		b.WriteString(st.Muted.Render(fmt.Sprintf("  scope sets from the preset: %d (toggling a scope replaces them with every subset)", len(m.space.explicit))) + "\n")
		lines++
	}
	strategy := st.Label.Render("Strategy ") + st.Value.Render(m.strategy) + st.Faint.Render(" (s)")
	budget := st.Label.Render("Budget ") + st.Value.Render(budgetText(m.budget, m.strategy)) + st.Faint.Render(" (+/-)")
	engine := st.Label.Render("Engine ")
	if m.estimate {
		engine += st.Estimate.Render(" ESTIMATE ")
	} else {
		engine += st.Value.Render(fmt.Sprintf("%d GPU(s)", len(m.request().GPUs)))
	}
	tie := st.Label.Render("Tie ") + st.Value.Render(tieText(m.tie)) + st.Faint.Render(" (t)")
	// The run settings wrap under their label like the toggles do.
	run := padRight("Run", 9)
	runW := 9
	for i, item := range []string{strategy, budget, tie, engine} {
		iw := ansi.StringWidth(item)
		if i > 0 && runW+2+iw > w {
			b.WriteString(run + "\n")
			lines++
			run, runW = strings.Repeat(" ", 9), 9
		} else if i > 0 {
			run += "  "
			runW += 2
		}
		run += item
		runW += iw
	}
	b.WriteString(run + "\n\n")
	lines += 2

	ctitle := "Candidates"
	if s.focus == focusCands {
		ctitle = st.Focused.Render(ctitle)
	} else {
		ctitle = st.Title.Render(ctitle)
	}
	valid := m.validCount()
	var count string
	switch {
	case m.planErr != nil:
		count = st.Err.Render("✗ " + m.planErr.Error())
	case m.planning && m.plan == nil:
		count = st.Muted.Render("checking the rules…")
	default:
		fails, rejected, aliases := m.planCounts()
		count = st.OK.Render(fmt.Sprintf("%d valid", valid))
		if fails > 0 {
			count += st.Warn.Render(fmt.Sprintf(" · %d will fail", fails))
		}
		count += st.Muted.Render(fmt.Sprintf(" · %d rejected by the rules", rejected))
		if aliases > 0 {
			count += st.Muted.Render(fmt.Sprintf(" · %d aliases", aliases))
		}
		if m.planning {
			count += st.Faint.Render(" (updating…)")
		}
	}
	b.WriteString(ctitle + "  " + count + "\n")
	lines++
	// The rule under the cursor in full: the table only has room for its start.
	var detail []string
	if s.focus == focusCands && s.cursor < len(m.plan) {
		p := m.plan[s.cursor]
		for _, v := range p.Violations {
			text := v.ID + ": " + v.Message
			if v.ID == search.WillFailID {
				text = "will fail: " + v.Message
			}
			detail = append(detail, strings.Split(wrap(text, w-2), "\n")...)
		}
		if len(p.Also) > 0 {
			detail = append(detail, strings.Split(wrap(alsoText(p)+" ("+strings.Join(p.Why, "; ")+")", w-2), "\n")...)
		}
		if p.Valid() && p.Estimate != nil && p.Estimate.Failed() {
			detail = append(detail, strings.Split(wrap(fmt.Sprintf("%s: the estimate fails (%s): %s", p.Candidate.Label(), p.Estimate.ErrKind, p.Estimate.Err), w-2), "\n")...)
		} else if p.Valid() && p.Estimate != nil {
			detail = append(detail, fmt.Sprintf("%s: estimate %s ms/step, %s eager; capture %s ms; %d graphs",
				p.Candidate.Label(), fmtMs(p.Estimate.Step.Median), fmtMs(p.Estimate.Eager.Median), fmtMs(p.Estimate.CaptureMs), p.Estimate.Graphs))
		}
		// As much of it as leaves the list a header and three rows: the
		// end of a "will fail" note is the way out.
		detail = detail[:min(len(detail), max(h-lines-5, 2))]
	}
	listH := h - lines - 1 - len(detail)
	if listH < 1 || len(m.plan) == 0 {
		return b.String()
	}
	estHdr := "STEP ms"
	if m.estimate || m.anyEstimate() {
		estHdr = "EST. ms"
	}
	var cands []presets.Candidate
	for _, p := range m.plan {
		// The rows that run (or will fail) size the column; a long
		// rejected spelling is cut rather than push the notes away.
		if p.Valid() || p.Violations[0].ID == search.WillFailID {
			cands = append(cands, p.Candidate)
		}
	}
	// The candidate column is as wide as the longest name, leaving the
	// notes at least 16 cells; a name cut to fit keeps its warm-up.
	candW := nameWidth(cands, w-(1+8+6+16+2*4))
	t := newTable(w,
		column{title: "", width: 1},
		column{title: "CANDIDATE", width: candW},
		column{title: estHdr, width: 8, right: true},
		column{title: "×EAGER", width: 6, right: true},
		column{title: "RULE / NOTE", width: 20, flex: true},
	)
	b.WriteString(t.header(st) + "\n")
	listH--
	// A wide window has room for the notes in full: they go on under their
	// column; a narrow one cuts them (the detail shows the cursor's).
	wrapNotes := w >= wideNotes
	heights := make([]int, len(m.plan))
	for i, p := range m.plan {
		heights[i] = len(noteLines(planNote(p), t.widths[len(t.widths)-1], wrapNotes))
	}
	s.offset = scrollRows(s.offset, s.cursor, listH, heights)
	used := 0
	for i := s.offset; i < len(m.plan); i++ {
		lines := m.candidateLines(t, i, candW, wrapNotes)
		if used+len(lines) > listH {
			break
		}
		used += len(lines)
		b.WriteString(strings.Join(lines, "\n") + "\n")
	}
	if len(detail) > 0 {
		b.WriteString(strings.Repeat("\n", max(listH-used, 0)))
		for _, d := range detail {
			b.WriteString(st.Muted.Render("  "+d) + "\n")
		}
	}
	return b.String()
}

// wideNotes is the width from which the candidate list's notes (rules,
// "will fail", other spellings) are wrapped in full instead of cut.
const wideNotes = 120

// candidateLines draws plan row i: its mark, name, estimate and note in
// the table's columns, the note cut or (wrap) continued on lines of its
// own under the note column; styled by its kind, the cursor's row
// highlighted.
func (m *Model) candidateLines(t table, i, candW int, wrapNotes bool) []string {
	st := m.st
	s := &m.spaceScr
	p := m.plan[i]
	cur := s.focus == focusCands && i == s.cursor
	// The row's style: its own, or under the cursor the cursor's colour
	// for the row on the selection highlight.
	rowStyle := func(atCursor, own lipgloss.Style) lipgloss.Style {
		if cur {
			return st.CursorOn(atCursor)
		}
		return own
	}
	name := nameCell(p.Candidate, candW)
	var mark, est, sp string
	var style lipgloss.Style
	switch {
	case p.Valid():
		mark, est, sp = "✓", "—", "—"
		if p.Estimate != nil && !p.Estimate.Failed() {
			est, sp = fmtMs(p.Estimate.Step.Median), fmtSpeedup(p.Estimate.Speedup)
		}
		style = rowStyle(st.Cursor, lipgloss.NewStyle())
	case p.Violations[0].ID == search.WillFailID:
		mark = "!"
		style = rowStyle(st.Warn, st.Warn)
	default:
		mark = "✗"
		// A rejected row the person opened reads brighter than the rest.
		style = rowStyle(st.Muted, st.Faint)
	}
	noteW := t.widths[len(t.widths)-1]
	notes := noteLines(planNote(p), noteW, wrapNotes)
	if cur && st.Plain {
		mark = "›"
	}
	indent := strings.Repeat(" ", t.offset(len(t.widths)-1))
	out := []string{style.Render(t.row(mark, name, est, sp, notes[0]))}
	for _, n := range notes[1:] {
		out = append(out, style.Render(indent+truncate(n, noteW)))
	}
	return out
}

// planNote is a plan row's note: the rule that rejects it, why it will
// fail, or its other spellings.
func planNote(p search.Planned) string {
	switch {
	case p.Valid() && p.Estimate != nil && p.Estimate.Failed():
		// Valid by the rules, but the estimate says it will not run.
		return "estimate: " + p.Estimate.ErrKind
	case p.Valid():
		return alsoText(p)
	case p.Violations[0].ID == search.WillFailID:
		return "will fail: " + p.Violations[0].Message
	}
	v := p.Violations[0]
	note := v.ID + " " + v.Message
	if len(p.Violations) > 1 {
		note = fmt.Sprintf("%s (+%d more)", note, len(p.Violations)-1)
	}
	return note
}

// noteLines is a note in a column w wide: one line (cut by the table), or
// with wrap as many as it takes.
func noteLines(note string, w int, wrapNotes bool) []string {
	if !wrapNotes || ansi.StringWidth(note) <= w {
		return []string{note}
	}
	return strings.Split(wrap(note, w), "\n")
}

// scrollRows is scrollWindow for rows of several lines each (heights):
// the first row to show so that the cursor's row shows whole in h lines,
// the window filled down to the last row.
func scrollRows(offset, cursor, h int, heights []int) int {
	n := len(heights)
	if n == 0 {
		return 0
	}
	// below[i] is the lines of rows i.. to the end.
	below := make([]int, n+1)
	for i := n - 1; i >= 0; i-- {
		below[i] = below[i+1] + heights[i]
	}
	cursor = min(max(cursor, 0), n-1)
	offset = min(max(offset, 0), cursor)
	for offset < cursor && below[offset]-below[cursor+1] > h {
		offset++
	}
	for offset > 0 && below[offset-1] <= h {
		offset--
	}
	return offset
}

// alsoText lists the other spellings merged into a plan row.
func alsoText(p search.Planned) string {
	if len(p.Also) == 0 {
		return ""
	}
	names := make([]string, len(p.Also))
	for i, a := range p.Also {
		names[i] = candName(a)
	}
	return "also: " + strings.Join(names, ", ")
}

func (m *Model) anyEstimate() bool {
	for _, p := range m.plan {
		if p.Estimate != nil {
			return p.Estimate.Source == "estimated"
		}
	}
	return false
}

// toggleRowLines renders one row of toggles, wrapped under its label.
func (m *Model) toggleRowLines(row toggleRow, r, w int) []string {
	st := m.st
	s := &m.spaceScr
	const labelW = 9
	var lines []string
	cur := padRight(row.label, labelW)
	if s.focus == focusToggles && s.row == r {
		cur = st.Accent.Render(cur)
	} else {
		cur = st.Label.Render(cur)
	}
	curW := labelW
	for i, it := range row.items {
		box := "[ ]"
		if *it.on {
			box = "[x]"
		}
		item := box + " " + it.name
		iw := len([]rune(item))
		focused := s.focus == focusToggles && s.row == r && min(s.col, len(row.items)-1) == i
		switch {
		case focused && st.Plain:
			item = ">" + item + "<"
			iw += 2
		case focused:
			item = st.Cursor.Render(" " + item + " ")
			iw += 2
		case *it.on:
			item = " " + st.Value.Render(item) + " "
			iw += 2
		default:
			item = " " + st.Faint.Render(item) + " "
			iw += 2
		}
		if curW+iw > w && curW > labelW {
			lines = append(lines, cur)
			cur, curW = strings.Repeat(" ", labelW), labelW
		}
		cur += item
		curW += iw
	}
	return append(lines, cur)
}
