package tui

import (
	"errors"
	"fmt"
	"slices"
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

const (
	focusToggles = 0
	focusCands   = 1
)

// spaceScreen edits the session's space, strategy, budget and tie band,
// and lists the candidates the rules leave of the space (the plan, which
// the backend makes).
type spaceScreen struct {
	*common
	*session

	focus    int
	row, col int // toggle grid cursor
	cursor   int // candidate list cursor
	offset   int

	plan     []search.Planned
	planSeq  int // drops answers to a space that has changed since
	planErr  error
	planning bool
}

func newSpaceScreen(c *common, s *session) *spaceScreen {
	return &spaceScreen{common: c, session: s}
}

// enter plans the space as it is set up now.
func (s *spaceScreen) enter() tea.Cmd { return s.replan() }

func (s *spaceScreen) typing() bool { return false }

func (s *spaceScreen) Update(msg tea.Msg) (tea.Cmd, handoff) {
	switch msg := msg.(type) {
	case planMsg:
		s.onPlan(msg)
	case tea.KeyPressMsg:
		return s.key(msg)
	}
	return nil, nil
}

// replan asks the backend for the candidate list of the current space.
func (s *spaceScreen) replan() tea.Cmd {
	s.planSeq++
	if p := s.space.problem(); p != "" {
		s.plan, s.planErr, s.planning = nil, errors.New(p), false
		return nil
	}
	s.planning, s.planErr = true, nil
	return planCmd(s.backend, s.planSeq, s.request())
}

func (s *spaceScreen) onPlan(msg planMsg) {
	if msg.seq != s.planSeq {
		return // the space changed while this plan was made
	}
	s.planning = false
	s.planErr = msg.err
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
	s.plan = plan
	s.cursor = min(s.cursor, max(len(plan)-1, 0))
}

func (s *spaceScreen) validCount() int {
	n := 0
	for _, p := range s.plan {
		if p.Valid() {
			n++
		}
	}
	return n
}

// planCounts are the plan's rows that will fail, are rejected by the
// rules, and the other spellings merged into rows.
func (s *spaceScreen) planCounts() (willFail, rejected, aliases int) {
	for _, p := range s.plan {
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

func (s *spaceScreen) key(msg tea.KeyPressMsg) (tea.Cmd, handoff) {
	k := s.keys
	switch {
	case key.Matches(msg, k.Back):
		return nil, backTo{screenGPU}
	case key.Matches(msg, k.Focus):
		s.focus = 1 - s.focus
		return nil, nil
	case key.Matches(msg, k.Strategy):
		s.strategy = nextIn(Strategies, s.strategy, 1)
		return s.replan(), nil
	case key.Matches(msg, k.BudgetUp):
		s.budget = nextBudget(s.budget, 1)
		return nil, nil
	case key.Matches(msg, k.BudgetDown):
		s.budget = nextBudget(s.budget, -1)
		return nil, nil
	case key.Matches(msg, k.Tie):
		s.tie = nextIn(Ties, s.tie, 1)
		s.setStatus("tie band %s: candidates within it (or whose measured p10–p90 ranges overlap) tie; less graph memory, then the simpler one, ranks first", tieText(s.tie))
		return nil, nil
	case key.Matches(msg, k.Start):
		return nil, s.start()
	}
	if s.focus == focusCands {
		s.candidatesKey(msg)
		return nil, nil
	}
	return s.togglesKey(msg), nil
}

// start hands the plan's valid candidates to the root to search, once
// the rules have been checked.
func (s *spaceScreen) start() handoff {
	if s.planning {
		s.setStatus("still checking the rules; a moment…")
		return nil
	}
	if s.validCount() == 0 {
		s.setError(errors.New("no valid candidate to run: widen the space"))
		return nil
	}
	return startSearch{plan: s.plan}
}

// candidatesKey moves the candidate list's cursor.
func (s *spaceScreen) candidatesKey(msg tea.KeyPressMsg) {
	k := s.keys
	switch {
	case key.Matches(msg, k.Up):
		s.cursor = max(s.cursor-1, 0)
	case key.Matches(msg, k.Down):
		s.cursor = min(s.cursor+1, max(len(s.plan)-1, 0))
	case key.Matches(msg, k.PageUp):
		s.cursor = max(s.cursor-10, 0)
	case key.Matches(msg, k.PageDown):
		s.cursor = min(s.cursor+10, max(len(s.plan)-1, 0))
	}
}

// togglesKey moves over the toggle grid and toggles; a changed space is
// planned again.
func (s *spaceScreen) togglesKey(msg tea.KeyPressMsg) tea.Cmd {
	k := s.keys
	rows := s.space.toggleRows()
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
		s.toggle(rows[s.row].items[s.col], !*rows[s.row].items[s.col].on)
		return s.replan()
	case key.Matches(msg, k.All):
		s.toggleAll(rows[s.row])
		return s.replan()
	}
	s.col = min(s.col, len(rows[s.row].items)-1)
	return nil
}

// toggle sets one toggle; a scope leaves a preset's explicit scope sets.
func (s *spaceScreen) toggle(it toggleItem, on bool) {
	*it.on = on
	if it.scope {
		s.space.explicit = nil
	}
}

// toggleAll turns a row's toggles all on, or all off when they are.
func (s *spaceScreen) toggleAll(row toggleRow) {
	all := false
	for _, it := range row.items {
		if !*it.on {
			all = true
		}
	}
	for _, it := range row.items {
		s.toggle(it, all)
	}
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

func (s *spaceScreen) helpKeys() helpKeys {
	k := s.keys
	if s.focus == focusCands {
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

// --- view ---------------------------------------------------------------

// View is the settings (toggles, run settings) above the candidate list;
// with the keyboard on the list, the rules of the row under the cursor
// in full below it.
func (s *spaceScreen) View(w, h int) string {
	head := append(s.settingsLines(w), s.candidatesTitle())
	var detail []string
	if s.focus == focusCands && s.cursor < len(s.plan) {
		// As much of it as leaves the list a header and three rows: the
		// end of a "will fail" note is the way out.
		detail = s.cursorDetail(w, max(h-len(head)-5, 2))
	}
	out := strings.Join(head, "\n") + "\n"
	listH := h - len(head) - 1 - len(detail)
	if listH < 1 || len(s.plan) == 0 {
		return out
	}
	return out + s.candidateList(w, listH, detail)
}

// settingsLines are the title, the toggles, and the run's settings.
func (s *spaceScreen) settingsLines(w int) []string {
	st := s.st
	title := "Search space"
	if s.focus == focusToggles {
		title = st.Focused.Render(title)
	} else {
		title = st.Title.Render(title)
	}
	lines := []string{title + "  " + st.Muted.Render(fmt.Sprintf("%s on %s · MB %s", s.sel.model.Name, s.sel.layout.GPU, s.sel.mbridge))}
	for r, row := range s.space.toggleRows() {
		lines = append(lines, s.toggleRowLines(row, r, w)...)
	}
	if s.space.explicit != nil {
		lines = append(lines, st.Muted.Render(fmt.Sprintf("  scope sets from the preset: %d (toggling a scope replaces them with every subset)", len(s.space.explicit))))
	}
	lines = append(lines, s.runLines(w)...)
	return append(lines, "")
}

// runLines are the run settings, wrapped under their label like the
// toggles.
func (s *spaceScreen) runLines(w int) []string {
	st := s.st
	strategy := st.Label.Render("Strategy ") + st.Value.Render(s.strategy) + st.Faint.Render(" (s)")
	budget := st.Label.Render("Budget ") + st.Value.Render(budgetText(s.budget, s.strategy)) + st.Faint.Render(" (+/-)")
	engine := st.Label.Render("Engine ")
	if s.estimate {
		engine += st.Estimate.Render(" ESTIMATE ")
	} else {
		engine += st.Value.Render(fmt.Sprintf("%d GPU(s)", len(s.request().GPUs)))
	}
	tie := st.Label.Render("Tie ") + st.Value.Render(tieText(s.tie)) + st.Faint.Render(" (t)")
	var lines []string
	run := padRight("Run", 9)
	runW := 9
	for i, item := range []string{strategy, budget, tie, engine} {
		iw := ansi.StringWidth(item)
		if i > 0 && runW+2+iw > w {
			lines = append(lines, run)
			run, runW = strings.Repeat(" ", 9), 9
		} else if i > 0 {
			run += "  "
			runW += 2
		}
		run += item
		runW += iw
	}
	return append(lines, run)
}

// candidatesTitle is the list's title with its counts, or why there is
// no list.
func (s *spaceScreen) candidatesTitle() string {
	st := s.st
	title := "Candidates"
	if s.focus == focusCands {
		title = st.Focused.Render(title)
	} else {
		title = st.Title.Render(title)
	}
	var count string
	switch {
	case s.planErr != nil:
		count = st.Err.Render("✗ " + s.planErr.Error())
	case s.planning && s.plan == nil:
		count = st.Muted.Render("checking the rules…")
	default:
		fails, rejected, aliases := s.planCounts()
		count = st.OK.Render(fmt.Sprintf("%d valid", s.validCount()))
		if fails > 0 {
			count += st.Warn.Render(fmt.Sprintf(" · %d will fail", fails))
		}
		count += st.Muted.Render(fmt.Sprintf(" · %d rejected by the rules", rejected))
		if aliases > 0 {
			count += st.Muted.Render(fmt.Sprintf(" · %d aliases", aliases))
		}
		if s.planning {
			count += st.Faint.Render(" (updating…)")
		}
	}
	return title + "  " + count
}

// cursorDetail is the row under the cursor in full, at most n lines: the
// rules that reject it, why it will fail, its other spellings, its
// estimate. The table only has room for the start of them.
func (s *spaceScreen) cursorDetail(w, n int) []string {
	p := s.plan[s.cursor]
	var detail []string
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
	return detail[:min(len(detail), n)]
}

// candidateList is the plan's table in h lines, scrolled to the cursor,
// with the cursor's detail at the bottom.
func (s *spaceScreen) candidateList(w, h int, detail []string) string {
	st := s.st
	t := s.candidateTable(w)
	candW := t.widths[1]
	var b strings.Builder
	b.WriteString(t.header(st) + "\n")
	h--
	// A wide window has room for the notes in full: they go on under their
	// column; a narrow one cuts them (the detail shows the cursor's).
	wrapNotes := w >= wideNotes
	heights := make([]int, len(s.plan))
	for i, p := range s.plan {
		heights[i] = len(noteLines(planNote(p), t.widths[len(t.widths)-1], wrapNotes))
	}
	s.offset = scrollRows(s.offset, s.cursor, h, heights)
	used := 0
	for i := s.offset; i < len(s.plan); i++ {
		lines := s.candidateLines(t, i, candW, wrapNotes)
		if used+len(lines) > h {
			break
		}
		used += len(lines)
		b.WriteString(strings.Join(lines, "\n") + "\n")
	}
	if len(detail) > 0 {
		b.WriteString(strings.Repeat("\n", max(h-used, 0)))
		for _, d := range detail {
			b.WriteString(st.Muted.Render("  "+d) + "\n")
		}
	}
	return b.String()
}

// candidateTable is the list's columns in w cells. The candidate column
// is as wide as the longest name, leaving the notes at least 16 cells; a
// name cut to fit keeps its warm-up.
func (s *spaceScreen) candidateTable(w int) table {
	estHdr := "STEP ms"
	if s.estimate || s.anyEstimate() {
		estHdr = "EST. ms"
	}
	var cands []presets.Candidate
	for _, p := range s.plan {
		// The rows that run (or will fail) size the column; a long
		// rejected spelling is cut rather than push the notes away.
		if p.Valid() || p.Violations[0].ID == search.WillFailID {
			cands = append(cands, p.Candidate)
		}
	}
	return newTable(w,
		column{title: "", width: 1},
		column{title: "CANDIDATE", width: nameWidth(cands, w-(1+8+6+16+2*4))},
		column{title: estHdr, width: 8, right: true},
		column{title: "×EAGER", width: 6, right: true},
		column{title: "RULE / NOTE", width: 20, flex: true},
	)
}

// wideNotes is the width from which the candidate list's notes (rules,
// "will fail", other spellings) are wrapped in full instead of cut.
const wideNotes = 120

// candidateLines draws plan row i: its mark, name, estimate and note in
// the table's columns, the note cut or (wrap) continued on lines of its
// own under the note column; styled by its kind, the cursor's row
// highlighted.
func (s *spaceScreen) candidateLines(t table, i, candW int, wrapNotes bool) []string {
	st := s.st
	p := s.plan[i]
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

func (s *spaceScreen) anyEstimate() bool {
	for _, p := range s.plan {
		if p.Estimate != nil {
			return p.Estimate.Source == "estimated"
		}
	}
	return false
}

// toggleRowLines renders one row of toggles, wrapped under its label.
func (s *spaceScreen) toggleRowLines(row toggleRow, r, w int) []string {
	st := s.st
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
