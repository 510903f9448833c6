package tui

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
)

// Screen (e): the ranking, the overrides, writing them and saving the run
// as a team preset (results_files.go), validating the top candidates on
// real jobs (validate_pane.go).

// resultsScreen shows the ranking of the session's search, the overrides
// of the candidate under the cursor, and writes them, the report and the
// run as a preset.
type resultsScreen struct {
	*common
	*session

	cursor    int
	offset    int
	formatIdx int // index into recipe.Formats
	prompt    promptKind
	input     string
	// pending is the preset waiting for the overwrite answer.
	pending presets.TeamPreset
	// pendingFile is the overrides file waiting for the overwrite answer.
	pendingFile writtenMsg
	// pendingReport is the report waiting for the overwrite answer.
	pendingReport reportMsg
	// val is the validation on real jobs.
	val validationPane
	// overrides are the candidates' overrides by candidate key, derived
	// once per search (recipe.WinnerOverrides plans captures), by one
	// recommender for the search.
	overrides   map[string]recipe.Overrides
	recommender *recipe.Recommender
	// details puts the details (why, the candidate's times and memory,
	// the search's notes) in the pane in place of the overrides (d).
	details bool
	// pane scrolls what the pane shows (results_pane.go).
	pane resultsPane
	// reports are the reports written of this search: a re-rank (t)
	// writes them again, so that none says what the screen no longer does.
	reports []string
}

// newResultsScreen starts with the --format shown.
func newResultsScreen(c *common, ses *session) *resultsScreen {
	s := &resultsScreen{common: c, session: ses, val: newValidationPane(c)}
	if i := slices.Index(recipe.Formats, c.opts.Format); i >= 0 {
		s.formatIdx = i
	}
	return s
}

// reset forgets what the screen showed of the last search, for the next.
func (s *resultsScreen) reset() {
	// The format shown is the user's choice (--format, or f), not the
	// last search's: it stays.
	*s = resultsScreen{common: s.common, session: s.session, val: newValidationPane(s.common), formatIdx: s.formatIdx, details: s.details}
}

// enter shows the results from their top, the status saying how the
// search ended.
func (s *resultsScreen) enter() tea.Cmd {
	s.cursor, s.offset = 0, 0
	switch d := s.done; {
	case d == nil:
	case d.Err != "":
		s.setError(fmt.Errorf("search failed: %s", d.Err))
	case d.Winner == nil && d.Interrupted && len(d.Ranking) == 0:
		s.setStatus("search stopped%s: no candidate had finished", s.runsSoFar())
	case d.Winner == nil:
		s.setError(errors.New("no candidate succeeded"))
	case d.Interrupted:
		s.setStatus("search stopped early%s: the ranking holds the candidates that finished", s.runsSoFar())
	case s.run != nil && s.run.stopping:
		// The stop came after the last run: nothing was cut short.
		s.setStatus("the search had finished all %d runs before the stop took effect: %s", s.run.done, winsText(d))
	default:
		s.setStatus("search finished: %s", winsText(d))
	}
	return nil
}

// runsSoFar is " after N of M runs" for a stopped search, "" when the
// runner had not planned them yet.
func (s *resultsScreen) runsSoFar() string {
	if s.run == nil || s.run.total == 0 {
		return ""
	}
	return fmt.Sprintf(" after %d of %d runs", s.run.done, s.run.total)
}

// typing reports whether a prompt or the validation form has the
// keyboard.
func (s *resultsScreen) typing() bool {
	return s.prompt != promptNone || s.val.typing()
}

// validating reports whether jobs are being started or run.
func (s *resultsScreen) validating() bool { return s.val.validating() }

func (s *resultsScreen) Update(msg tea.Msg) (tea.Cmd, handoff) {
	switch msg := msg.(type) {
	case writtenMsg:
		s.onWritten(msg)
	case reportMsg:
		s.onReport(msg)
	case savedMsg:
		return s.onSaved(msg), nil
	case validatePlanMsg, validateStartedMsg, validateMsg:
		return s.val.Update(msg), nil
	case tea.PasteMsg:
		s.onPaste(msg.Content)
	case tea.KeyPressMsg:
		return s.key(msg)
	}
	return nil, nil
}

func (s *resultsScreen) key(msg tea.KeyPressMsg) (tea.Cmd, handoff) {
	k := s.keys
	if s.prompt != promptNone {
		return s.promptKey(msg), nil
	}
	if s.val.phase != valOff {
		return s.val.Update(msg), nil
	}
	if s.pane.key(msg, k) { // pgup/pgdn scroll the pane
		return nil, nil
	}
	switch {
	case key.Matches(msg, k.Up):
		s.cursor = max(s.cursor-1, 0)
	case key.Matches(msg, k.Down):
		s.cursor = min(s.cursor+1, max(len(s.ranking())-1, 0))
	case key.Matches(msg, k.Format):
		s.formatIdx = (s.formatIdx + 1) % len(recipe.Formats)
		s.details = false // the format shows in the overrides
	case key.Matches(msg, k.Details):
		s.details = !s.details
	case key.Matches(msg, k.Write):
		if _, err := s.overridesText(); err != nil {
			s.setError(err)
			return nil, nil
		}
		s.prompt, s.input = promptPath, s.defaultPath()
	case key.Matches(msg, k.Report):
		s.prompt, s.input = promptReport, "./cgtune-report.md"
	case key.Matches(msg, k.Save):
		s.prompt, s.input = promptName, s.defaultPresetName()
	case key.Matches(msg, k.Tie):
		return s.retie(), nil
	case key.Matches(msg, k.Validate):
		return s.val.open(s.done), nil
	case key.Matches(msg, k.New):
		return nil, goTo{screenSpace}
	case key.Matches(msg, k.Back):
		return nil, backTo{screenRun}
	}
	return nil, nil
}

// ranking is the DoneEvent's ranking in rank order.
func (s *resultsScreen) ranking() []search.Ranked {
	if s.done == nil {
		return nil
	}
	r := slices.Clone(s.done.Ranking)
	// Unranked entries (rank 0: failed runs) go last, in the order the
	// search gives them (impl, scopes, then warm-ups as numbers).
	order := func(x search.Ranked) int {
		if x.Rank <= 0 {
			return math.MaxInt
		}
		return x.Rank
	}
	slices.SortStableFunc(r, func(a, b search.Ranked) int { return cmp.Compare(order(a), order(b)) })
	return r
}

// rankOptions are the options the ranking on screen was made with.
func (s *resultsScreen) rankOptions() search.RankOptions {
	req := s.ranRequest()
	o := search.RankOptions{TrainIters: req.TrainIters, JobGPUMemoryMiB: jobGPUMiB(req), Tie: s.tie}
	if s.done != nil {
		o.Emulation, o.KnownToFitMiB = s.done.Emulation, s.done.KnownToFitMiB
		o.ReferenceKey = s.done.ReferenceKey()
	}
	return o
}

// retie ranks the results again under the next tie band, and writes the
// reports written before it again to match.
func (s *resultsScreen) retie() tea.Cmd {
	s.tie = nextIn(Ties, s.tie, 1)
	if s.done == nil {
		return nil
	}
	s.done.Ranking = search.Rerank(s.done.Ranking, s.rankOptions())
	s.done.Winner = search.Winner(s.done.Ranking)
	s.cursor, s.offset = 0, 0
	s.setStatus("ranked again with a tie band of %s: %s", tieText(s.tie), winsText(s.done))
	var cmds []tea.Cmd
	for _, path := range s.reports {
		cmds = append(cmds, rewriteReportCmd(s.backend, path, s.reportInput()))
	}
	return tea.Batch(cmds...)
}

// winsText says who won d: "X wins", and when X is the recipe's own
// setting, that it is to be kept (search.KeepRecipe).
func winsText(d *search.DoneEvent) string {
	switch w := d.Winner; {
	case w == nil:
		return "no winner"
	case d.Reference.Won(w):
		return w.Result.Candidate.Name() + " wins: " + d.Reference.Keep()
	}
	return d.Winner.Result.Candidate.Name() + " wins"
}

// shownCandidate is the candidate whose overrides are shown: the one under
// the cursor (the winner at first).
func (s *resultsScreen) shownCandidate() (search.Ranked, bool) {
	r := s.ranking()
	if len(r) == 0 {
		return search.Ranked{}, false
	}
	c := min(s.cursor, len(r)-1)
	return r[c], true
}

// helpKeys put writing the overrides first; w and v are offered only
// where they work (a candidate with overrides, a search to validate).
func (s *resultsScreen) helpKeys() helpKeys {
	k := s.keys
	if s.val.phase != valOff {
		return s.val.helpKeys()
	}
	switch s.prompt {
	case promptPath, promptName, promptReport:
		return helpKeys{short: []key.Binding{withHelp(k.Next, "enter", "ok"), withHelp(k.Back, "esc", "cancel"), withHelp(k.Back, "ctrl+u", "clear")}}
	case promptOverwrite, promptOverwriteFile, promptOverwriteReport:
		return helpKeys{short: []key.Binding{withHelp(k.Confirm, "y", "overwrite"), withHelp(k.Deny, "n", "keep the old one")}}
	}
	var write, validate []key.Binding
	if _, err := s.overridesText(); err == nil {
		write = []key.Binding{k.Write}
	}
	if d := s.done; d != nil && d.RunDir != "" && d.Winner != nil {
		validate = []key.Binding{k.Validate}
	}
	details := withHelp(k.Details, "d", "details")
	if s.details {
		details = withHelp(k.Details, "d", "overrides")
	}
	var scroll []key.Binding
	if s.pane.scrolls() {
		scroll = []key.Binding{withHelp(k.PageDown, "pgdn/pgup", "scroll")}
	}
	short := append(write, withHelp(k.Up, "↑/↓", "candidate"), details)
	short = append(short, scroll...)
	short = append(short, k.Format)
	short = append(short, validate...)
	short = append(short, k.Report, k.Save, k.Tie, k.New, withHelp(k.Back, "esc", "run"), k.Quit)
	return helpKeys{short: short, full: [][]key.Binding{
		// Short enough to stand in two columns at 60 columns.
		{withHelp(k.Up, "↑/↓", "show a candidate"), withHelp(k.Details, "d", "details or overrides"), withHelp(k.PageDown, "pgup/pgdn", "scroll them"), k.Format, withHelp(k.Tie, "t", "rank again, next tie band")},
		append(append(write, k.Report, k.Save), k.Validate),
		{k.New, withHelp(k.Back, "esc", "back to the run"), k.Quit, k.Help},
	}}
}

// --- view ---------------------------------------------------------------

// View is the ranking and the pane (the overrides of the candidate under
// the cursor, or its details), stacked in a narrow window and side by side
// in a wide one; a prompt (or the winner) at the bottom.
func (s *resultsScreen) View(w, h int) string {
	if s.done == nil {
		return s.st.Faint.Render("no results yet")
	}
	if s.val.phase != valOff {
		return s.val.View(w, h)
	}
	prompt := s.promptLines(w)
	bodyH := h - len(prompt)
	head := s.headLines(w, bodyH)
	var body string
	if w >= 140 {
		body = s.wideView(w, bodyH, head)
	} else {
		body = s.narrowView(w, bodyH, head)
	}
	return fitBlock(body, w, bodyH) + "\n" + strings.Join(prompt, "\n")
}

// headLines are the title with what the search was (as much of it as
// fits), how it ended, and its run folder (when the window is tall).
func (s *resultsScreen) headLines(w, h int) []string {
	st := s.st
	d := s.done
	estimated := s.estimate || (s.run != nil && s.run.req.Estimate)
	badge := ""
	basis := search.Basis(d.Ranking)
	switch {
	case estimated && strings.Contains(basis, "LOWER BOUND"):
		badge = "  " + st.Estimate.Render(" ESTIMATE · LOWER BOUND ")
	case estimated:
		badge = "  " + st.Estimate.Render(" ESTIMATE ")
	}
	// What the search was, most needed first; what does not fit gives way.
	parts := []string{fmt.Sprintf("%d ranked", len(d.Ranking)), "tie " + tieText(s.tie)}
	if slices.ContainsFunc(d.Ranking, func(r search.Ranked) bool { return r.Derived }) {
		parts = append(parts, "≈ derived, not run itself")
	}
	if n := len(d.WhatIf); n > 0 {
		// Their table is the report's "What it would take" (r).
		parts = append(parts, fmt.Sprintf("%d what-if (report: r)", n))
	}
	if d.Runs > 0 {
		parts = append(parts, fmt.Sprintf("%d runs", d.Runs))
	}
	if d.GPUTimeMs > 0 && !estimated {
		// An estimate spends no GPU time; a measured search says what it spent.
		parts = append(parts, "GPU time "+fmtJob(d.GPUTimeMs))
	}
	if s.run != nil {
		parts = append(parts, s.run.req.Strategy)
	}
	room := w - ansi.StringWidth("Ranking  ") - ansi.StringWidth(badge)
	for len(parts) > 1 && ansi.StringWidth(strings.Join(parts, " · ")) > room {
		parts = parts[:len(parts)-1]
	}
	line := st.Title.Render("Ranking") + "  " + st.Muted.Render(strings.Join(parts, " · ")) + badge
	head := []string{line}
	switch {
	case d.Err != "":
		head = append(head, styleLines(st.Err, wrap("✗ search failed: "+d.Err, w))...)
	case d.Interrupted:
		head = append(head, styleLines(st.Warn, wrap("stopped early: only the candidates that finished are ranked", w))...)
	}
	if d.RunDir != "" && h >= 30 {
		head = append(head, st.Faint.Render(truncate("run folder "+d.RunDir, w)))
	}
	return head
}

// minRankingRows is how many rows of the ranking show in any window (as
// many as there are, up to this): the pane scrolls instead.
const minRankingRows = 5

// wideView has the ranking on the left and the pane on the right (at
// least 48 cells). While the pane shows the overrides, the details (why
// the winner won, the candidate's, the search's notes) go under the
// ranking as far as they fit; d shows them whole, in the pane.
func (s *resultsScreen) wideView(w, h int, head []string) string {
	leftW := min(max(w*11/20, s.rankingWidth()), w-48-3)
	rightW := w - leftW - 3
	avail := h - len(head)
	var below []string
	if !s.details {
		below = append([]string{""}, s.detailLines(leftW)...)
	}
	heights := s.rowHeights(s.rankingColumns(leftW, s.ranking()))
	least := sum(heights[:min(len(heights), minRankingRows)])
	tableH := 1 + min(max(avail-1-len(below), least), sum(heights))
	if room := avail - tableH; len(below) > room {
		below = append(below[:max(room-1, 0)], s.st.Faint.Render(truncate("d shows the details whole, beside the ranking", leftW)))
	}
	left := strings.Join(append([]string{s.rankingTable(leftW, tableH)}, below...), "\n")
	right := s.paneView(rightW, avail)
	return strings.Join(head, "\n") + "\n" + sideBySide(left, leftW, right, 3)
}

// narrowView stacks the ranking (at least minRankingRows rows) over the
// pane, which gets the rest of the height and scrolls.
func (s *resultsScreen) narrowView(w, h int, head []string) string {
	avail := h - len(head)
	heights := s.rowHeights(s.rankingColumns(w, s.ranking()))
	all := sum(heights)
	least := sum(heights[:min(len(heights), minRankingRows)])
	gap := 0
	if avail >= 1+least+1+5 {
		gap = 1
	}
	// The pane gets what it needs (its title and lines) when the ranking
	// keeps its least; the ranking gets the rest, up to all its rows.
	need := 1 + s.paneNeed(w)
	tableH := 1 + min(max(avail-1-gap-need, least), all)
	paneH := avail - tableH - gap
	var b strings.Builder
	b.WriteString(strings.Join(head, "\n") + "\n")
	b.WriteString(s.rankingTable(w, tableH) + "\n")
	b.WriteString(strings.Repeat("\n", gap))
	if paneH >= 2 {
		b.WriteString(s.paneView(w, paneH))
	}
	return b.String()
}

// paneNeed is how many lines the pane's content takes at width w.
func (s *resultsScreen) paneNeed(w int) int {
	if s.details {
		return len(s.detailLines(w))
	}
	return len(s.overridesBody(w))
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
