package codehealth

import (
	"go/ast"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// figure is a number with a unit of time, memory, rate or ratio, a range
// included: "216.4 ms", "213.5–243.8 ms", "98.6 GB", "1.2%", "3.1×".
var figure = regexp.MustCompile(`\d[\d,]*(\.\d+)?(\s*[–-]\s*\d[\d,]*(\.\d+)?)?\s*((ms|µs|us|ns|s|min|KiB|MiB|GiB|MB|GB|TB/s|GB/s|TFLOP/s|PFLOP/s)\b|%|×|x\b)`)

// runWord says a figure nearby came from a run: the word for measuring,
// or the GPU it ran on.
var runWord = regexp.MustCompile(`\b(measured|measures|measuring|peaked|came out|fitted on|ran at|A100|H100|H200|B200|GB200|GB300)\b`)

// figureWindow is how far (in characters, either side) a run word makes
// a figure a measured one, beyond the figure's own sentence.
const figureWindow = 120

// sentenceEnd ends a sentence: a full stop (not a decimal point, not a
// file name's dot) and the space after it.
var sentenceEnd = regexp.MustCompile(`[.!?](\s+|$)`)

// measuredFigures are the lines (1-based, in text) that hold a figure
// with a run word near it: in its sentence, or within figureWindow.
func measuredFigures(text string) []int {
	flat := strings.ReplaceAll(text, "\n", " ")
	ends := sentenceEnd.FindAllStringIndex(flat, -1)
	var lines []int
	for _, m := range figure.FindAllStringIndex(flat, -1) {
		start, end := 0, len(flat) // the figure's sentence
		for _, e := range ends {
			if e[1] <= m[0] {
				start = e[1]
			} else if e[0] >= m[1] {
				end = e[0]
				break
			}
		}
		lo, hi := min(start, max(0, m[0]-figureWindow)), max(end, min(len(flat), m[1]+figureWindow))
		if !runWord.MatchString(flat[lo:hi]) {
			continue
		}
		if line := strings.Count(text[:m[0]], "\n") + 1; !slices.Contains(lines, line) {
			lines = append(lines, line)
		}
	}
	return lines
}

// commentFindings are the findings of lines (which lines of a comment's
// text break a rule) in each comment of af.
func commentFindings(fset *token.FileSet, f sourceFile, af *ast.File, lines func(text string) []int) []finding {
	var found []finding
	for _, cg := range af.Comments {
		text := commentText(cg)
		found = append(found, lineFindings(f.rel, fset.Position(cg.Pos()).Line, text, lines(text))...)
	}
	return found
}

// lineFindings are findings at lines (1-based) of text, a comment that
// starts on line start of file rel, each naming its line's text.
func lineFindings(rel string, start int, text string, lines []int) []finding {
	all := strings.Split(text, "\n")
	var found []finding
	for _, n := range lines {
		found = append(found, finding{rel, start + n - 1, strings.TrimSpace(all[n-1])})
	}
	return found
}

// commentText is a comment group's text as written, the comment markers
// taken off each line, with the line the group starts on.
func commentText(cg *ast.CommentGroup) string {
	var b strings.Builder
	for i, c := range cg.List {
		if i > 0 {
			b.WriteByte('\n')
		}
		t := strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), "/*")
		b.WriteString(strings.TrimSuffix(t, "*/"))
	}
	return b.String()
}

// figuresExcluded are files whose comments still carry measured figures,
// each with why.
var figuresExcluded = map[string]string{}

// TestNoMeasuredFiguresInComments fails on each comment outside tests that
// carries a figure from a run (a number with its unit and, within about
// a sentence, the word measured or the GPU it ran on). A figure in a
// comment goes stale without anyone noticing; the comment says why, and
// the docs/ document that holds the measurement says how much.
func TestNoMeasuredFiguresInComments(t *testing.T) {
	found := scanGo(t, false, func(fset *token.FileSet, f sourceFile, af *ast.File) []finding {
		return commentFindings(fset, f, af, measuredFigures)
	})
	for _, f := range sourceFiles(t, ".py") {
		if strings.HasPrefix(f.rel, "internal/codehealth/") || strings.Contains(f.rel, "/test_") {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range pyComments(string(b)) {
			found = append(found, lineFindings(f.rel, g.line, g.text, measuredFigures(g.text))...)
		}
	}
	sortFindings(found)
	report(t, "a measured figure in a comment (cite the docs/ document that holds it)", found, figuresExcluded)
}

// pyComment is a run of Python # comment lines, their text without the
// markers, and the line it starts on.
type pyComment struct {
	text string
	line int
}

// pyComments are the # comments of Python source, each run of lines
// with a comment (whole lines, or a line's tail after code) as one.
func pyComments(src string) []pyComment {
	var out []pyComment
	var cur []string
	flush := func(n int) {
		if len(cur) > 0 {
			out = append(out, pyComment{strings.Join(cur, "\n"), n - len(cur)})
			cur = nil
		}
	}
	for n, line := range strings.Split(src, "\n") {
		if i := pyCommentStart(line); i >= 0 {
			cur = append(cur, line[i+1:])
			continue
		}
		flush(n + 1)
	}
	flush(len(strings.Split(src, "\n")) + 1)
	return out
}

// pyCommentStart is where a line's # comment starts, or -1: a # inside a
// string literal on the line is no comment.
func pyCommentStart(line string) int {
	var quote byte
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quote != 0 && c == '\\':
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '\'' || c == '"'):
			quote = c
		case quote == 0 && c == '#':
			return i
		}
	}
	return -1
}

// The scan tells a measurement from a figure that is a bound, a default
// or a unit in an example.
func TestMeasuredFiguresFindsRuns(t *testing.T) {
	for text, want := range map[string][]int{
		"the tie band: 216.4 ms, 213.5–243.8, against\n209.9 ms measured on the H200": {1, 2},
		"qwen3's slice peaked at 98.6 GB":                                             {1},
		"an eager step 8 ms above\nthe run it was fitted on":                          {1},
		"on an H200 the emulation put layer 1 1.2% ahead":                             {1},
		"every speed-up within 15%, the same winner":                                  nil,
		"byteSize renders a size as people write it (4 MiB)":                          nil,
		"samples every interval (250 ms gives 4 Hz)":                                  nil,
		"the measured median (docs/emulation-accuracy-2026-12-01.md)":                 nil,
		"H200 has 141 GB of HBM":                                                      {1},
	} {
		if got := measuredFigures(text); !slices.Equal(got, want) {
			t.Errorf("measuredFigures(%q) = %v, want %v", text, got, want)
		}
	}
	py := "x = 1\n# first, measured\n# at 3 ms on the H200\ny = '#' + \"#\"  # tail\n\n  # alone\n"
	want := []pyComment{{" first, measured\n at 3 ms on the H200\n tail", 2}, {" alone", 6}}
	if got := pyComments(py); !slices.Equal(got, want) {
		t.Errorf("pyComments = %+v, want %+v", got, want)
	}
}
