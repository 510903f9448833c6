package tui

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"cgtune/recipe"
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
		case p.Violations[0].ID == recipe.WillFailID:
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
		case p.Violations[0].ID == recipe.WillFailID:
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
	case key.Matches(msg, k.WhatIf):
		s.whatIf = !s.whatIf
		if s.whatIf {
			s.setStatus("what-if on: rejected candidates also run with the enabling changes that let them run, priced over the recipe's own eager step (the report's \"What it would take\")")
		} else {
			s.setStatus("what-if off: only the candidates the recipe allows run")
		}
		return s.replan(), nil
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

// helpKeys put enter first, offered once the plan has a valid candidate
// to run.
func (s *spaceScreen) helpKeys() helpKeys {
	k := s.keys
	var start []key.Binding
	if s.planErr == nil && s.validCount() > 0 {
		start = []key.Binding{k.Start}
	}
	if s.focus == focusCands {
		return helpKeys{short: append(start, withHelp(k.Up, "↑/↓", "scroll"), withHelp(k.Focus, "tab", "toggles"),
			k.Strategy, withHelp(k.BudgetUp, "+/-", "budget"), k.Tie, k.Back, k.Quit)}
	}
	short := append(start, k.Toggle, withHelp(k.Focus, "tab", "candidates"), withHelp(k.Up, "arrows", "move"),
		k.Strategy, withHelp(k.BudgetUp, "+/-", "budget"), k.Tie, withHelp(k.All, "a", "all"), k.Back, k.Quit)
	return helpKeys{short: short, full: [][]key.Binding{
		{withHelp(k.Up, "↑/↓", "row"), withHelp(k.Left, "←/→", "item"), k.Toggle, withHelp(k.All, "a", "all/none in row")},
		{withHelp(k.Focus, "tab", "candidate list"), k.Strategy, withHelp(k.BudgetUp, "+/-", "budget"), k.Tie, k.WhatIf},
		append(start, k.Back, k.Quit, k.Help),
	}}
}

// --- view ---------------------------------------------------------------

// minCandidateRows is how many candidate rows the list keeps in any
// window: a short one shows the settings one line each (compact).
const minCandidateRows = 3

// View is the settings (toggles, run settings) above the candidate list;
// with the keyboard on the list, the rules of the row under the cursor
// in full below it.
func (s *spaceScreen) View(w, h int) string {
	title := s.candidatesTitle(w)
	head := append(s.settingsLines(w, false), title...)
	// The cursor's detail: as much of it as leaves the list a header and
	// its least rows (the end of a "will fail" note is the way out).
	detail := func() []string {
		if s.focus != focusCands || s.cursor >= len(s.plan) {
			return nil
		}
		return s.cursorDetail(w, max(h-len(head)-1-minCandidateRows, 2))
	}
	if h-len(head)-1-len(detail()) < minCandidateRows {
		head = append(s.settingsLines(w, true), title...)
	}
	out := strings.Join(head, "\n") + "\n"
	d := detail()
	listH := h - len(head) - len(d)
	if listH < 1 || len(s.plan) == 0 {
		return out
	}
	return out + s.candidateList(w, listH, d)
}

// settingsLines are the title, the toggles, and the run's settings;
// compact puts each on one line (a toggle row scrolls to its cursor) and
// leaves out the gap under them.
func (s *spaceScreen) settingsLines(w int, compact bool) []string {
	st := s.st
	title := "Search space"
	if s.focus == focusToggles {
		title = st.Focused.Render(title)
	} else {
		title = st.Title.Render(title)
	}
	lines := []string{title + "  " + st.Muted.Render(fmt.Sprintf("%s on %s · MB %s", s.sel.model.Name, s.sel.layout.GPU, s.sel.mbridge))}
	for r, row := range s.space.toggleRows() {
		if compact {
			lines = append(lines, s.toggleRowLine(row, r, w))
		} else {
			lines = append(lines, s.toggleRowLines(row, r, w)...)
		}
	}
	if s.space.explicit != nil {
		lines = append(lines, st.Muted.Render(truncate(fmt.Sprintf("  scope sets from the preset: %d (toggling a scope replaces them with every subset)", len(s.space.explicit)), w)))
	}
	if compact {
		return append(lines, s.runLine(w))
	}
	lines = append(lines, s.runLines(w)...)
	return append(lines, "")
}

// runLine is the run settings on one line, without their labels (the
// keys that change them say what they are).
func (s *spaceScreen) runLine(w int) string {
	st := s.st
	engine := st.Value.Render(fmt.Sprintf("%d GPU(s)", len(s.request().GPUs)))
	if s.estimate {
		engine = st.Estimate.Render(" ESTIMATE ")
	}
	sep := st.Faint.Render(" · ")
	line := st.Label.Render(padRight("Run", 9)) + st.Value.Render(s.strategy) + st.Faint.Render(" (s)") + sep +
		st.Value.Render(budgetText(s.budget, s.strategy)) + st.Faint.Render(" (+/-)") + sep +
		st.Value.Render("tie "+tieText(s.tie)) + st.Faint.Render(" (t)") + sep + engine
	if s.whatIf {
		line += sep + st.Value.Render("what-if") + st.Faint.Render(" (w)")
	}
	return truncate(line, w)
}

// toggleCell renders toggle i of a row as the row shows it (the cursor's
// marked), and its width.
func (s *spaceScreen) toggleCell(row toggleRow, r, i int) (string, int) {
	st := s.st
	it := row.items[i]
	box := "[ ]"
	if *it.on {
		box = "[x]"
	}
	item := box + " " + it.name
	iw := len([]rune(item)) + 2
	focused := s.focus == focusToggles && s.row == r && min(s.col, len(row.items)-1) == i
	switch {
	case focused && st.Plain:
		return ">" + item + "<", iw
	case focused:
		return st.Cursor.Render(" " + item + " "), iw
	case *it.on:
		return " " + st.Value.Render(item) + " ", iw
	}
	return " " + st.Faint.Render(item) + " ", iw
}

// toggleLabel is a toggle row's label, marked when the cursor is on it.
func (s *spaceScreen) toggleLabel(row toggleRow, r int) string {
	label := padRight(row.label, toggleLabelW)
	if s.focus == focusToggles && s.row == r {
		return s.st.Accent.Render(label)
	}
	return s.st.Label.Render(label)
}

// toggleLabelW is the width of the toggle rows' labels.
const toggleLabelW = 9

// toggleRowLine is a row of toggles on one line: the window of them that
// holds the cursor's (or the first ones), "‹" and "›" where more are.
func (s *spaceScreen) toggleRowLine(row toggleRow, r, w int) string {
	n := len(row.items)
	cells, widths := make([]string, n), make([]int, n)
	for i := range row.items {
		cells[i], widths[i] = s.toggleCell(row, r, i)
	}
	room := w - toggleLabelW - 2 // the markers
	span := func(a, b int) int { return sum(widths[a:b]) }
	first := 0
	if s.focus == focusToggles && s.row == r {
		cur := min(s.col, n-1)
		for first < cur && span(first, cur+1) > room {
			first++
		}
	}
	last := first
	for last < n && span(first, last+1) <= room {
		last++
	}
	left, right := " ", ""
	if first > 0 {
		left = s.st.Faint.Render("‹")
	}
	if last < n {
		right = s.st.Faint.Render("›")
	}
	return s.toggleLabel(row, r) + left + strings.Join(cells[first:last], "") + right
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
	items := []string{strategy, budget, tie, engine}
	if s.whatIf {
		items = append(items, st.Label.Render("What-if ")+st.Value.Render("on")+st.Faint.Render(" (w)"))
	}
	var lines []string
	run := padRight("Run", 9)
	runW := 9
	for i, item := range items {
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

// toggleRowLines renders one row of toggles, wrapped under its label.
func (s *spaceScreen) toggleRowLines(row toggleRow, r, w int) []string {
	var lines []string
	cur, curW := s.toggleLabel(row, r), toggleLabelW
	for i := range row.items {
		item, iw := s.toggleCell(row, r, i)
		if curW+iw > w && curW > toggleLabelW {
			lines = append(lines, cur)
			cur, curW = strings.Repeat(" ", toggleLabelW), toggleLabelW
		}
		cur += item
		curW += iw
	}
	return append(lines, cur)
}
