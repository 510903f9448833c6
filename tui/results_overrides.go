package tui

import (
	"errors"
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
)

// The results screen's overrides: the shown candidate's, rendered in the
// format chosen, and laid out so that what is copied from the pane parses.

// formatExt is the file extension of each override format, for the
// default path of the write prompt.
var formatExt = map[string]string{"yaml": "yaml", "dotlist": "dotlist", "python": "py", "flags": "flags", "json": "json"}

// format is the overrides format shown.
func (s *resultsScreen) format() string { return recipe.Formats[s.formatIdx] }

// overridesText renders the shown candidate's overrides in the format.
func (s *resultsScreen) overridesText() ([]byte, error) {
	rk, ok := s.shownCandidate()
	if !ok {
		return nil, errors.New("no result to emit")
	}
	if rk.Result.Failed() {
		return nil, fmt.Errorf("%s failed (%s); it has no overrides worth emitting", rk.Result.Candidate.Label(), rk.Result.ErrKind)
	}
	return s.recommendation(rk).Render(s.format())
}

// recommendation is ranked result rk's overrides as every output writes
// them (search.Annotated): for the search the screen shows (the model,
// layout and MB version it ran with, the --set values), saying whether the
// recipe's setting stands and whether the figures are estimated.
func (s *resultsScreen) recommendation(rk search.Ranked) recipe.Overrides {
	return search.Annotated(s.candidateOverrides(s.ranRequest(), rk.Result.Candidate), s.done, rk)
}

// candidateOverrides are candidate c's overrides for the search of req
// (recipe.WinnerOverrides), kept per candidate: they do not change with
// the ranking.
func (s *resultsScreen) candidateOverrides(req Request, c presets.Candidate) recipe.Overrides {
	if o, ok := s.overrides[c.Key()]; ok {
		return o
	}
	if s.overrides == nil {
		s.overrides = map[string]recipe.Overrides{}
		s.recommender = recipe.NewRecommender(recipe.Target{Model: req.Model, Layout: req.Layout, MBridge: req.MBridge, Sets: s.opts.Sets})
	}
	o := s.recommender.Overrides(c)
	s.overrides[c.Key()] = o
	return o
}

// overridesLines are the format tabs and the rendered overrides, laid out
// to w so that what is copied from the pane still parses: a long comment
// goes on over lines that start with "# " again, and a dotlist or flags
// line breaks between tokens with a shell continuation ("\").
func (s *resultsScreen) overridesLines(w int) []string { return s.overridesPane(w, false) }

// overridesPane is overridesLines; brief leaves out the comments (where
// the file comes from, why a setting is there), for a short pane: the
// overrides themselves are what has to show.
func (s *resultsScreen) overridesPane(w int, brief bool) []string {
	st := s.st
	lines := s.overridesHead(w, brief)
	data, err := s.overridesText()
	if err != nil {
		return append(lines, st.Faint.Render(err.Error()))
	}
	for _, l := range overridesBody(data, brief) {
		for _, part := range copyableLines(l, s.format(), w-2) {
			lines = append(lines, "  "+st.Value.Render(part))
		}
	}
	return lines
}

// overridesHead is the pane's title (whose overrides) and the format
// tabs: on one line, or the tabs under the title rather than lose a
// format.
func (s *resultsScreen) overridesHead(w int, brief bool) []string {
	st := s.st
	var tabs []string
	for i, f := range recipe.Formats {
		switch {
		case i == s.formatIdx && st.Plain:
			tabs = append(tabs, "["+f+"]")
		case i == s.formatIdx:
			tabs = append(tabs, st.StepActive.Render(" "+f+" "))
		default:
			tabs = append(tabs, st.Muted.Render(" "+f+" "))
		}
	}
	title := "Overrides"
	if rk, ok := s.shownCandidate(); ok {
		title += " · " + candName(rk.Result.Candidate)
		if s.done.Winner != nil && rk.Result.Candidate.Key() == s.done.Winner.Result.Candidate.Key() {
			title += " (winner)"
		}
	}
	tabLine := strings.Join(tabs, "") + st.Faint.Render("  f")
	line := st.Title.Render(title) + "  " + tabLine
	switch short := st.Title.Render("Overrides") + "  " + tabLine; {
	case ansi.StringWidth(line) <= w:
		return []string{line}
	case brief && ansi.StringWidth(short) <= w:
		// A short pane keeps the line: the ranking's cursor row names
		// the candidate.
		return []string{short}
	}
	return []string{truncate(st.Title.Render(title), w), tabLine}
}

// overridesBody is the lines of the rendered overrides; brief keeps the
// overrides themselves: every comment (where the file comes from, why a
// setting is there) gives way.
func overridesBody(data []byte, brief bool) []string {
	body := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if !brief {
		return body
	}
	var kept []string
	for _, l := range body {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			kept = append(kept, l)
		}
	}
	if len(kept) > 0 {
		return kept
	}
	return body
}

// copyableLines lays one line of rendered overrides out in lines of at
// most w cells that mean the same when copied: comments continue as
// comments, shell tokens continue with a backslash, and a token longer
// than the line is left whole (cutting it would change it).
func copyableLines(l, format string, w int) []string {
	if ansi.StringWidth(l) <= w || w < 8 {
		return []string{l}
	}
	if strings.HasPrefix(l, "#") {
		body := strings.TrimSpace(strings.TrimPrefix(l, "#"))
		parts := strings.Split(wrap(body, w-2), "\n")
		for i := range parts {
			parts[i] = "# " + parts[i]
		}
		return parts
	}
	if format != "dotlist" && format != "flags" {
		return []string{l} // YAML, Python and JSON lines are short; never break one
	}
	var out []string
	cur := ""
	for _, tok := range strings.Fields(l) {
		switch {
		case cur == "":
			cur = tok
		case ansi.StringWidth(cur)+1+ansi.StringWidth(tok)+2 <= w:
			cur += " " + tok
		default:
			out = append(out, cur+" \\")
			cur = tok
		}
	}
	return append(out, cur)
}
