package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// w on the space screen turns the what-if rows on and off: the search is
// asked for them, the candidate list shows them with their changes, and
// the run settings say what-if is on.
func TestSpaceScreenTogglesWhatIfRows(t *testing.T) {
	f := newFake(t)
	m := newColourModel(t, f, "qwen3_30b_a3b", "h100", 120, 40)
	press(m, "enter", "enter")
	planNow(t, m, f)
	if m.request().WhatIf || strings.Contains(ansi.Strip(view(m)), "[drop-and-pad") {
		t.Fatalf("what-if on before w:\n%s", ansi.Strip(view(m)))
	}
	if cmd := press(m, "w"); cmd == nil || !m.request().WhatIf {
		t.Fatal("w did not ask for a plan with what-if rows")
	}
	planNow(t, m, f)
	v := ansi.Strip(view(m))
	if !strings.Contains(v, "What-if on (w)") || !strings.Contains(v, "[drop-and-pad") {
		t.Errorf("with what-if on, the screen lacks the setting or the rows:\n%s", v)
	}
	press(m, "w")
	planNow(t, m, f)
	if v := ansi.Strip(view(m)); m.request().WhatIf || strings.Contains(v, "What-if on") || strings.Contains(v, "[drop-and-pad") {
		t.Errorf("w again left what-if on:\n%s", v)
	}
}
