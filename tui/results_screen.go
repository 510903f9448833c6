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
	*s = resultsScreen{common: s.common, session: s.session, val: newValidationPane(s.common), formatIdx: s.formatIdx}
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
	case validateStartedMsg, validateMsg:
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
	switch {
	case key.Matches(msg, k.Up):
		s.cursor = max(s.cursor-1, 0)
	case key.Matches(msg, k.Down):
		s.cursor = min(s.cursor+1, max(len(s.ranking())-1, 0))
	case key.Matches(msg, k.Format):
		s.formatIdx = (s.formatIdx + 1) % len(recipe.Formats)
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
		s.retie()
	case key.Matches(msg, k.Validate):
		s.val.open(s.done)
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

// retie ranks the results again under the next tie band.
func (s *resultsScreen) retie() {
	s.tie = nextIn(Ties, s.tie, 1)
	if s.done == nil {
		return
	}
	s.done.Ranking = search.Rerank(s.done.Ranking, s.rankOptions())
	s.done.Winner = search.Winner(s.done.Ranking)
	s.cursor, s.offset = 0, 0
	s.setStatus("ranked again with a tie band of %s: %s", tieText(s.tie), winsText(s.done))
}

// winsText says who won d: "X wins", and when X is the recipe's own
// setting, that it is to be kept (search.KeepRecipe).
func winsText(d *search.DoneEvent) string {
	switch w := d.Winner; {
	case w == nil:
		return "no winner"
	case d.Reference.Won(w):
		return candName(w.Result.Candidate) + " wins: " + d.Reference.Keep()
	}
	return candName(d.Winner.Result.Candidate) + " wins"
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
	short := []key.Binding{k.Write, k.Format, k.Report, k.Save, k.Validate, k.Tie, withHelp(k.Up, "↑/↓", "candidate"), k.New, withHelp(k.Back, "esc", "run"), k.Quit}
	return helpKeys{short: short, full: [][]key.Binding{
		{withHelp(k.Up, "↑/↓", "show a candidate's overrides"), k.Format, withHelp(k.Tie, "t", "rank again with the next tie band")},
		{k.Write, k.Report, k.Save, withHelp(k.Validate, "v", "validate on real training jobs")},
		{k.New, withHelp(k.Back, "esc", "back to the run"), k.Quit, k.Help},
	}}
}

// --- view ---------------------------------------------------------------

// View is the ranking, why the winner won, the details of the candidate
// under the cursor and its overrides, side by side in a wide window and
// stacked in a narrow one; a prompt (or the winner) on the last line.
func (s *resultsScreen) View(w, h int) string {
	if s.done == nil {
		return s.st.Faint.Render("no results yet")
	}
	if s.val.phase != valOff {
		return s.val.View(w, h)
	}
	head := s.headLines(w, h)
	prompt := s.promptLine(w)
	var body string
	if w >= 140 {
		body = s.wideView(w, h, head)
	} else {
		body = s.narrowView(w, h, head)
	}
	return fitBlock(body, w, h-1) + "\n" + prompt
}

// headLines are the title with what the search was, how it ended, and its
// run folder (when the window is tall).
func (s *resultsScreen) headLines(w, h int) []string {
	st := s.st
	d := s.done
	title := st.Title.Render("Ranking")
	sub := fmt.Sprintf("%d ranked", len(d.Ranking))
	if d.Runs > 0 {
		sub += fmt.Sprintf(" · %d runs", d.Runs)
	}
	estimated := s.estimate || (s.run != nil && s.run.req.Estimate)
	if d.GPUTimeMs > 0 && !estimated {
		// An estimate spends no GPU time; a measured search says what it spent.
		sub += " · GPU time " + fmtJob(d.GPUTimeMs)
	}
	if s.run != nil {
		sub += " · " + s.run.req.Strategy
	}
	sub += " · tie " + tieText(s.tie)
	if slices.ContainsFunc(d.Ranking, func(r search.Ranked) bool { return r.Derived }) {
		sub += " · ≈ derived"
		if w >= 100 {
			sub += ", not run itself"
		}
	}
	line := title + "  " + st.Muted.Render(sub)
	if estimated {
		line += "  " + st.Estimate.Render(" ESTIMATE ")
	}
	head := []string{truncate(line, w)}
	switch {
	case d.Err != "":
		head = append(head, st.Err.Render(wrap("✗ search failed: "+d.Err, w)))
	case d.Interrupted:
		head = append(head, st.Warn.Render("stopped early: only the candidates that finished are ranked"))
	}
	if d.RunDir != "" && h >= 30 {
		head = append(head, st.Faint.Render("run folder "+d.RunDir))
	}
	return head
}

// wideView has the ranking, why, the candidate's details and the search's
// notes on the left; the overrides on the right. The ranking gets the
// room its names need, the overrides at least 48 cells.
func (s *resultsScreen) wideView(w, h int, head []string) string {
	leftW := min(max(w*11/20, s.rankingWidth()), w-48-3)
	rightW := w - leftW - 3
	ov := s.overridesLines(rightW)
	right := strings.Join(fitLines(ov, h-len(head)-2, rightW), "\n")
	return strings.Join(head, "\n") + "\n" + sideBySide(s.wideLeft(leftW, h-len(head)), leftW, right, 3)
}

// wideLeft is the left column of the wide view, h lines at most.
func (s *resultsScreen) wideLeft(w, h int) string {
	st := s.st
	why := s.reasonLines(w, 4)
	left := s.rankingTable(w, min(len(s.done.Ranking)+1, h-14-len(why)))
	left += "\n\n" + strings.Join(why, "\n")
	if rk, ok := s.shownCandidate(); ok {
		left += "\n\n" + strings.Join(s.resultDetail(rk, w), "\n")
	}
	if len(s.done.Notes) > 0 {
		left += "\n\n" + st.Title.Render("Search")
		for _, n := range s.done.Notes {
			left += "\n" + st.Muted.Render(hanging("· ", n, w))
		}
	}
	return left
}

// narrowView stacks the table, the reason, the memory lines and the
// overrides, which share the height. The table's header and cursor row
// come first, then the overrides whole (what the person came for), a
// line of the reason, the memory lines, the gaps, the rest of the reason
// and the table.
func (s *resultsScreen) narrowView(w, h int, head []string) string {
	avail := h - 1 - len(head)
	take := func(want int) int {
		n := max(min(want, avail), 0)
		avail -= n
		return n
	}
	whyMax := 3
	if h < 18 {
		whyMax = 2
	}
	rows := len(s.done.Ranking) + 1
	ov := s.overridesPane(w, h < 30)
	mem := s.memoryLine(w)
	tableH := take(min(rows, 2))
	ovH := take(len(ov))
	whyN := take(1)
	memN := take(len(mem))
	gapTable, gapOv := take(1), take(1)
	whyN += take(whyMax - whyN)
	tableH += take(rows - tableH)
	var b strings.Builder
	b.WriteString(strings.Join(head, "\n") + "\n")
	b.WriteString(s.rankingTable(w, max(tableH, 1)) + "\n")
	b.WriteString(strings.Repeat("\n", gapTable))
	if whyN > 0 {
		b.WriteString(strings.Join(s.reasonLines(w, whyN), "\n") + "\n")
	}
	if memN > 0 {
		b.WriteString(strings.Join(mem[:memN], "\n") + "\n")
	}
	b.WriteString(strings.Repeat("\n", gapOv))
	b.WriteString(strings.Join(fitLines(ov, ovH, w), "\n"))
	return b.String()
}
