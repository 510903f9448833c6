package tui

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

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
		return nil, fmt.Errorf("%s failed (%s); it has no overrides worth emitting", rk.Result.Candidate.Name(), rk.Result.ErrKind)
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

// overridesHead is the pane's title (whose overrides) and the format
// tabs, in w cells: on one line; without the candidate's name (the
// ranking's cursor row names it); the tabs closer together; or the tabs
// on a line of their own, rather than lose a format.
func (s *resultsScreen) overridesHead(w int) []string {
	st := s.st
	title := "Overrides"
	if rk, ok := s.shownCandidate(); ok {
		title += " · " + rk.Result.Candidate.Name()
		if s.done.Winner != nil && rk.Result.Candidate.Key() == s.done.Winner.Result.Candidate.Key() {
			title += " (winner)"
		}
	}
	tabs, tight := s.formatTabs(false), s.formatTabs(true)
	short := st.Title.Render("Overrides")
	for _, line := range []string{st.Title.Render(title) + "  " + tabs, short + "  " + tabs, short + "  " + tight} {
		if ansi.StringWidth(line) <= w {
			return []string{line}
		}
	}
	return []string{truncate(st.Title.Render(title), w), tight}
}

// formatTabs are the formats, the one shown marked, and the key that
// changes it; tight puts them one space apart.
func (s *resultsScreen) formatTabs(tight bool) string {
	st := s.st
	pad := " "
	if tight {
		pad = ""
	}
	var tabs []string
	for i, f := range recipe.Formats {
		switch {
		case i == s.formatIdx && st.Plain:
			tabs = append(tabs, "["+f+"]")
		case i == s.formatIdx:
			tabs = append(tabs, st.StepActive.Render(pad+f+pad))
		default:
			tabs = append(tabs, st.Muted.Render(pad+f+pad))
		}
	}
	if tight {
		return strings.Join(tabs, " ") + st.Faint.Render(" (f)")
	}
	return strings.Join(tabs, "") + st.Faint.Render("  f")
}

// overridesBody is the shown candidate's overrides, every line laid out in
// w cells (less an indent of 2) so that what is copied from the pane
// still parses and means what the file means (copyableLines).
func (s *resultsScreen) overridesBody(w int) []string {
	st := s.st
	data, err := s.overridesText()
	if err != nil {
		return styleLines(st.Faint, wrap(err.Error(), w))
	}
	var lines []string
	listed := false
	for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		parts := copyableLines(l, s.format(), w-2)
		listed = listed || (s.format() == "json" && len(parts) > 1)
		for _, part := range parts {
			lines = append(lines, "  "+st.Value.Render(part))
		}
	}
	if listed {
		// What the pane shows is not byte for byte what w writes: say so,
		// outside the JSON.
		note := styleLines(st.Faint, wrapAtSpaces("long strings are shown as lists of their pieces; w writes each whole", w))
		lines = append(note, lines...)
	}
	return lines
}

// copyableLines lays one line of rendered overrides out in lines of at
// most w cells that mean the same when copied: a comment goes on as
// comments at its indent; a YAML value folds onto deeper-indented lines
// (YAML reads the break as a space); Python continues with a backslash
// outside its strings; shell tokens continue with a backslash (a token
// longer than a line too, its quotes closed and opened again); a JSON
// string too long for a line becomes a list of its pieces (JSON cannot
// continue a string, and the pieces keep every character). Only a word
// longer than a line is split where it must be, so that it still shows.
func copyableLines(l, format string, w int) []string {
	if ansi.StringWidth(l) <= w || w < 8 {
		return []string{l}
	}
	indent := l[:len(l)-len(strings.TrimLeft(l, " "))]
	body := strings.TrimLeft(l, " ")
	switch {
	case strings.HasPrefix(body, "#"):
		text := strings.TrimSpace(strings.TrimPrefix(body, "#"))
		return wrapHanging(strings.Fields(text), indent+"# ", indent+"# ", "", w)
	case format == "dotlist" || format == "flags":
		return shellLines(l, w)
	case format == "json":
		if out, ok := jsonStringLines(l, w); ok {
			return out
		}
	case format == "yaml":
		return wrapHanging(strings.Fields(body), indent, indent+"    ", "", w)
	case format == "python":
		return wrapHanging(pythonWords(body), indent, indent+"    ", " \\", w)
	}
	return wrapHanging(strings.Fields(body), indent, indent, "", w)
}

// wrapHanging lays words out in lines of at most w cells, the first
// after first, the others after rest, each but the last ending in end; a
// word longer than a line is split over lines.
func wrapHanging(words []string, first, rest, end string, w int) []string {
	var out []string
	line, lead := "", first
	room := func() int { return w - ansi.StringWidth(lead) - ansi.StringWidth(end) }
	for _, word := range words {
		switch {
		case line == "":
			line = word
		case ansi.StringWidth(line)+1+ansi.StringWidth(word) <= room():
			line += " " + word
		default:
			out = append(out, lead+line+end)
			line, lead = word, rest
		}
		for ansi.StringWidth(line) > room() && room() > 0 {
			out = append(out, lead+ansi.Truncate(line, room(), "")+end)
			line, lead = ansi.TruncateLeft(line, room(), ""), rest
		}
	}
	return append(out, lead+line)
}

// pythonWords splits a line of Python at the spaces outside its string
// literals, where a backslash may continue it.
func pythonWords(l string) []string {
	var words []string
	var quote rune
	start := 0
	for i, r := range l {
		switch {
		case quote != 0 && r == quote && (i == 0 || l[i-1] != '\\'):
			quote = 0
		case quote == 0 && (r == '"' || r == '\''):
			quote = r
		case quote == 0 && r == ' ':
			if i > start {
				words = append(words, l[start:i])
			}
			start = i + 1
		}
	}
	if start < len(l) {
		words = append(words, l[start:])
	}
	return words
}

// shellLines breaks a line of shell tokens between tokens with a shell
// continuation (" \"); a token longer than a line goes on over lines
// ending in "\" with nothing between, which the shell joins (a quoted
// token closes its quote first and opens it again on the next line).
func shellLines(l string, w int) []string {
	var out []string
	cur := ""
	flush := func() {
		if cur != "" {
			out = append(out, cur+" \\")
			cur = ""
		}
	}
	for _, tok := range strings.Fields(l) {
		switch {
		case ansi.StringWidth(tok)+2 > w:
			flush()
			out = append(out, splitShellToken(tok, w)...)
			out[len(out)-1] += " \\"
		case cur == "":
			cur = tok
		case ansi.StringWidth(cur)+1+ansi.StringWidth(tok)+2 <= w:
			cur += " " + tok
		default:
			flush()
			cur = tok
		}
	}
	if cur == "" && len(out) > 0 {
		last := out[len(out)-1]
		out[len(out)-1] = strings.TrimSuffix(last, " \\")
		return out
	}
	return append(out, cur)
}

// splitShellToken cuts a token over lines of w cells that the shell
// joins back: each but the last ends in a backslash right after it.
func splitShellToken(tok string, w int) []string {
	quoted := len(tok) >= 2 && tok[0] == '\'' && tok[len(tok)-1] == '\''
	inner := []rune(tok)
	open, end := "", "\\"
	if quoted {
		inner = inner[1 : len(inner)-1]
		open, end = "'", "'\\"
	}
	size := max(w-len(open)-len(end)-2, 1)
	var out []string
	for len(inner) > size {
		out = append(out, open+string(inner[:size])+end)
		inner = inner[size:]
	}
	return append(out, open+string(inner)+strings.TrimSuffix(end, "\\"))
}

// jsonString is a JSON object member whose value is a string, or a
// string element of a list: indent, "key": (none for an element),
// "value" and a comma or not.
var jsonString = regexp.MustCompile(`^(\s*)(?:("(?:[^"\\]|\\.)*"):\s*)?"((?:[^"\\]|\\.)*)"(,?)$`)

// jsonStringLines shows a member (or a list's element) whose string is
// too long for a line as a list of the string's pieces, each ending at a space the next piece
// does not repeat, so that joined they are the string; false when the
// line is not such a member.
func jsonStringLines(l string, w int) ([]string, bool) {
	m := jsonString.FindStringSubmatch(l)
	if m == nil {
		return nil, false
	}
	indent, name, value, comma := m[1], m[2], m[3], m[4]
	inner := indent + "  "
	room := max(w-len(inner)-3, 8) // the quotes and a comma
	var pieces []string
	cur := ""
	for _, word := range strings.SplitAfter(value, " ") {
		if cur != "" && ansi.StringWidth(cur+word) > room {
			pieces = append(pieces, cur)
			cur = ""
		}
		for ansi.StringWidth(word) > room {
			cut := safeJSONCut(word, room)
			pieces = append(pieces, word[:cut])
			word = word[cut:]
		}
		cur += word
	}
	pieces = append(pieces, cur)
	open := indent + "["
	if name != "" {
		open = indent + name + ": ["
	}
	out := []string{open}
	for i, p := range pieces {
		sep := ","
		if i == len(pieces)-1 {
			sep = ""
		}
		out = append(out, inner+`"`+p+`"`+sep)
	}
	return append(out, indent+"]"+comma), true
}

// safeJSONCut is where to cut an escaped JSON string at most n bytes in
// (at least one escape or character in): never inside an escape (\n,
// \u00e9) nor inside a UTF-8 character.
func safeJSONCut(s string, n int) int {
	cut := 0
	for i := 0; i < len(s); {
		size := 1
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == 'u':
			size = 6
		case s[i] == '\\':
			size = 2
		default:
			_, size = utf8.DecodeRuneInString(s[i:])
		}
		if i+size > n && cut > 0 {
			break
		}
		i += size
		cut = min(i, len(s))
	}
	return cut
}
