package tui

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"go.yaml.in/yaml/v3"
)

// paneText pages the results pane from its top to its end with pgdn and
// returns every line it showed, in order, as drawn (each page's lines are
// checked to be on the screen, none wider than the pane).
func paneText(t *testing.T, m *App) []string {
	t.Helper()
	for !m.resScr.pane.vp.AtTop() {
		press(m, "pgup")
	}
	var lines []string
	seen := map[int]bool{}
	for {
		out := ansi.Strip(view(m))
		vp := m.resScr.pane.vp
		for i, l := range strings.Split(ansi.Strip(vp.View()), "\n") {
			l = strings.TrimRight(l, " ")
			if ansi.StringWidth(l) > vp.Width() {
				t.Errorf("pane line %q is wider than the pane (%d)", l, vp.Width())
			}
			if l != "" && !strings.Contains(out, l) {
				t.Fatalf("pane line %q is not on the screen:\n%s", l, out)
			}
			if at := vp.YOffset() + i; at < vp.TotalLineCount() && !seen[at] {
				seen[at] = true
				lines = append(lines, l)
			}
		}
		if vp.AtBottom() {
			return lines
		}
		press(m, "pgdown")
	}
}

// copied is the pane's lines as a person copies them into a file: the
// pane's indent of 2 taken off, the note above a JSON body left out.
func copied(lines []string) string {
	var out []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "  ") && l != "" {
			continue // the note on a JSON pane, which is not part of it
		}
		out = append(out, strings.TrimPrefix(l, "  "))
	}
	return strings.Join(out, "\n") + "\n"
}

// comments are the words of a text's comments, in order.
func comments(text string) string {
	var words []string
	for _, l := range strings.Split(text, "\n") {
		if c, ok := strings.CutPrefix(strings.TrimSpace(l), "#"); ok {
			words = append(words, strings.Fields(c)...)
		}
	}
	return strings.Join(words, " ")
}

// joinPieces undoes the pane's JSON lists of pieces: a list of strings
// where the file has a string becomes that string again.
func joinPieces(pane, file any) any {
	switch f := file.(type) {
	case map[string]any:
		p, ok := pane.(map[string]any)
		if !ok {
			return pane
		}
		out := map[string]any{}
		for k, v := range p {
			out[k] = joinPieces(v, f[k])
		}
		return out
	case []any:
		p, ok := pane.([]any)
		if !ok || len(p) != len(f) {
			return pane
		}
		out := make([]any, len(p))
		for i := range p {
			out[i] = joinPieces(p[i], f[i])
		}
		return out
	case string:
		if list, ok := pane.([]any); ok {
			var b strings.Builder
			for _, x := range list {
				s, _ := x.(string)
				b.WriteString(s)
			}
			return b.String()
		}
	}
	return pane
}

// The overrides pane never cuts a line: paged through at 80×24, 60×16 and
// 160×48, what it shows, copied, is the file: the same YAML (comments,
// cut by earlier versions, go on as comments and keep every word) and
// valid JSON whose long strings are lists of their pieces.
func TestOverridesPaneCopiesAsTheFile(t *testing.T) {
	for _, model := range []struct{ name, gpu string }{{"llama3_70b", "h100"}, {"qwen3_30b_a3b", "h100"}} {
		for _, sz := range []struct{ w, h int }{{80, 24}, {60, 16}, {160, 48}} {
			for _, format := range []string{"yaml", "json"} {
				t.Run(fmt.Sprintf("%s/%dx%d/%s", model.name, sz.w, sz.h, format), func(t *testing.T) {
					f := newFake(t)
					m := newColourModel(t, f, model.name, model.gpu, sz.w, sz.h)
					m.opts.NoColor = true
					m.setStyles()
					m.opts.Format = format
					m.resScr = newResultsScreen(m.common, m.session)
					toResults(t, m, f)
					file, err := m.resScr.overridesText()
					if err != nil {
						t.Fatal(err)
					}
					pane := copied(paneText(t, m))
					switch format {
					case "yaml":
						var want, got any
						if err := yaml.Unmarshal(file, &want); err != nil {
							t.Fatal(err)
						}
						if err := yaml.Unmarshal([]byte(pane), &got); err != nil || !reflect.DeepEqual(got, want) {
							t.Errorf("the pane copied is not the file's YAML (%v):\n%s\nfile:\n%s", err, pane, file)
						}
						if comments(pane) != comments(string(file)) {
							t.Errorf("comments differ:\npane %q\nfile %q", comments(pane), comments(string(file)))
						}
					case "json":
						var want, got any
						if err := json.Unmarshal(file, &want); err != nil {
							t.Fatal(err)
						}
						if err := json.Unmarshal([]byte(pane), &got); err != nil {
							t.Fatalf("the pane copied is not JSON: %v\n%s", err, pane)
						}
						if !reflect.DeepEqual(joinPieces(got, want), want) {
							t.Errorf("the pane's JSON is not the file's:\n%s\nfile:\n%s", pane, file)
						}
					}
				})
			}
		}
	}
}
