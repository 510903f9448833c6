package tui

import (
	"fmt"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
)

// The space screen's candidate list: the plan's rows, valid first, with
// the rule that rejects a row or why it will fail, and the row under the
// cursor in full.

// candidatesTitle is the list's title with its counts (as many as fit
// in w), or why there is no list, whole.
func (s *spaceScreen) candidatesTitle(w int) []string {
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
		return append([]string{title}, styleLines(st.Err, wrapAtSpaces("✗ "+s.planErr.Error(), w))...)
	case s.planning && s.plan == nil:
		count = st.Muted.Render("checking the rules…")
	default:
		fails, rejected, aliases := s.planCounts()
		count = st.OK.Render(fmt.Sprintf("%d valid", s.validCount()))
		if fails > 0 {
			count += st.Warn.Render(fmt.Sprintf(" · %d will fail", fails))
		}
		rules := fmt.Sprintf(" · %d rejected by the rules", rejected)
		more := ""
		if aliases > 0 {
			more = fmt.Sprintf(" · %d aliases", aliases)
		}
		if ansi.StringWidth(title+"  "+count+rules+more) > w {
			rules = fmt.Sprintf(" · %d rejected", rejected) // the ✗ rows say by which rule
		}
		if ansi.StringWidth(title+"  "+count+rules+more) > w {
			more = "" // the rows say "also:"
		}
		count += st.Muted.Render(rules + more)
		if s.planning {
			count += st.Faint.Render(" (updating…)")
		}
	}
	return []string{truncate(title+"  "+count, w)}
}

// cursorDetail is the row under the cursor in full, at most n lines: the
// rules that reject it, why it will fail, its other spellings, its
// estimate. The table only has room for the start of them.
func (s *spaceScreen) cursorDetail(w, n int) []string {
	p := s.plan[s.cursor]
	var detail []string
	for _, v := range p.Violations {
		text := v.ID + ": " + v.Message
		if v.ID == recipe.WillFailID {
			text = "will fail: " + v.Message
		}
		detail = append(detail, strings.Split(wrap(text, w-2), "\n")...)
	}
	if also := alsoText(p, s.sel.model.Arch); also != "" {
		detail = append(detail, strings.Split(wrap(also+" ("+strings.Join(p.Why, "; ")+")", w-2), "\n")...)
	}
	if p.Valid() && p.Estimate != nil && p.Estimate.Failed() {
		detail = append(detail, strings.Split(wrap(fmt.Sprintf("%s: the estimate fails (%s): %s", p.Candidate.Name(), p.Estimate.ErrKind, p.Estimate.Err), w-2), "\n")...)
	} else if p.Valid() && p.Estimate != nil {
		detail = append(detail, strings.Split(wrap(fmt.Sprintf("%s: estimate %s ms/step, %s eager; capture %s ms; %d graphs",
			p.Candidate.Name(), fmtMs(p.Estimate.Step.Median), fmtMs(p.Estimate.Eager.Median), fmtMs(p.Estimate.CaptureMs), p.Estimate.Graphs), w-2), "\n")...)
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
		heights[i] = len(noteLines(planNote(p, s.sel.model.Arch), t.widths[len(t.widths)-1], wrapNotes))
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
		if p.Valid() || p.Violations[0].ID == recipe.WillFailID {
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
	case p.Violations[0].ID == recipe.WillFailID:
		mark = "!"
		style = rowStyle(st.Warn, st.Warn)
	default:
		mark = "✗"
		// A rejected row the person opened reads brighter than the rest.
		style = rowStyle(st.Muted, st.Faint)
	}
	noteW := t.widths[len(t.widths)-1]
	notes := noteLines(planNote(p, s.sel.model.Arch), noteW, wrapNotes)
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
// fail, or its other spellings that name only layers model a has.
func planNote(p search.Planned, a presets.Arch) string {
	switch {
	case p.Valid() && p.Estimate != nil && p.Estimate.Failed():
		// Valid by the rules, but the estimate says it will not run.
		return "estimate: " + string(p.Estimate.ErrKind)
	case p.Valid():
		return alsoText(p, a)
	case p.Violations[0].ID == recipe.WillFailID:
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

// alsoText lists the other spellings merged into a plan row, leaving out
// those that name layers model a does not have (te attn,mamba for Llama):
// they say nothing the row's own name does not.
func alsoText(p search.Planned, a presets.Arch) string {
	shown := search.ShownAlso(p, a)
	if len(shown) == 0 {
		return ""
	}
	names := make([]string, len(shown))
	for i, c := range shown {
		names[i] = c.Name()
	}
	return "also: " + strings.Join(names, ", ")
}

func (s *spaceScreen) anyEstimate() bool {
	for _, p := range s.plan {
		if p.Estimate != nil {
			return p.Estimate.Source == engine.SourceEstimated
		}
	}
	return false
}
