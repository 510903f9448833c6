package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"cgtune/search"
)

// The results screen's pane, under the ranking (beside it in a wide
// window): the overrides of the candidate under the cursor, or with d the
// details (why the winner won, the candidate's times and memory, the
// search's notes). Both are laid out whole to the pane's width and scroll
// (pgup/pgdn, a bubbles viewport), so nothing is cut to fit: the ranking
// keeps its rows.

// resultsPane scrolls what the pane shows.
type resultsPane struct {
	vp viewport.Model
	// shows is what the pane was last filled with (pane, candidate,
	// format): another thing starts at its top.
	shows string
}

// fill puts lines in the pane, h lines high and w wide.
func (p *resultsPane) fill(shows string, lines []string, w, h int) {
	if p.shows != shows {
		p.shows = shows
		p.vp = viewport.New()
	}
	p.vp.SetWidth(w)
	p.vp.SetHeight(max(h, 1))
	p.vp.SetContentLines(lines)
}

// scrolls reports whether the pane has more lines than it shows.
func (p *resultsPane) scrolls() bool { return p.vp.TotalLineCount() > p.vp.VisibleLineCount() }

// key scrolls the pane by a page; it reports whether the key was one of
// its own.
func (p *resultsPane) key(msg tea.KeyPressMsg, k KeyMap) bool {
	switch {
	case key.Matches(msg, k.PageDown):
		p.vp.PageDown()
	case key.Matches(msg, k.PageUp):
		p.vp.PageUp()
	default:
		return false
	}
	return true
}

// position says which lines show ("3–12/15") and which way there is
// more, "" when everything shows.
func (p *resultsPane) position() string {
	if !p.scrolls() {
		return ""
	}
	first := p.vp.YOffset() + 1
	last := min(p.vp.YOffset()+p.vp.VisibleLineCount(), p.vp.TotalLineCount())
	arrow := "↕"
	switch {
	case p.vp.AtTop():
		arrow = "↓"
	case p.vp.AtBottom():
		arrow = "↑"
	}
	return fmt.Sprintf("%d–%d/%d %s", first, last, p.vp.TotalLineCount(), arrow)
}

// paneView is the pane, w×h: its title line (with the scroll position)
// over its lines.
func (s *resultsScreen) paneView(w, h int) string {
	var lines []string
	shows := "overrides "
	if s.details {
		lines, shows = s.detailLines(w), "details "
	} else {
		lines = s.overridesBody(w)
	}
	rk, _ := s.shownCandidate()
	shows += rk.Result.Candidate.Name() + " " + s.format()
	// The title leaves room for the scroll position at its end when the
	// lines will not all show.
	room := w
	if len(lines) > h-1 {
		n := len(lines)
		room -= ansi.StringWidth(fmt.Sprintf("%d–%d/%d ↕", n, n, n)) + 2
	}
	head := []string{s.st.Title.Render("Details")}
	if !s.details {
		head = s.overridesHead(room)
	}
	s.pane.fill(shows, lines, w, max(h-len(head), 1))
	if pos := s.pane.position(); pos != "" {
		last := len(head) - 1
		head[last] = joinEnds(head[last], s.st.Muted.Render(pos), w)
	}
	return strings.Join(head, "\n") + "\n" + s.pane.vp.View()
}

// candidateTitle names the candidate the details are of, its rank and
// where its numbers come from.
func (s *resultsScreen) candidateTitle(rk search.Ranked) string {
	st := s.st
	rank := fmt.Sprintf("#%d", rk.Rank)
	if rk.Rank <= 0 {
		rank = "failed"
	}
	return st.Title.Render(rk.Result.Candidate.Name()) + "  " + st.Muted.Render(fmt.Sprintf("%s · %s", rank, rk.Result.Source))
}

// detailLines are the details pane's lines, w wide: the candidate under
// the cursor in full and why the winner won (that first when the cursor
// is on the winner: what is under the cursor comes first), then the
// search's notes.
func (s *resultsScreen) detailLines(w int) []string {
	st := s.st
	why := s.reasonLines(w)
	var cand []string
	rk, ok := s.shownCandidate()
	if ok {
		cand = append([]string{truncate(s.candidateTitle(rk), w)}, s.resultDetail(rk, w)...)
	}
	lines := append(append(cand, ""), why...)
	if !ok || rk.Result.Candidate.Key() == s.winnerKey() {
		lines = append(append(why, ""), cand...)
	}
	if len(s.done.Notes) > 0 {
		lines = append(lines, "", st.Title.Render("Search"))
		for _, n := range s.done.Notes {
			lines = append(lines, styleLines(st.Muted, hanging("· ", n, w))...)
		}
	}
	return lines
}
