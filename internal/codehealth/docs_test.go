package codehealth

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docsPath is a path under docs/ as code cites it, in a comment or a
// string: it starts where a word does and ends on a letter or digit (a
// sentence's full stop is not part of it).
var docsPath = regexp.MustCompile(`(^|[^\w./-])(docs/[\w./-]*\w)`)

// upstreamCite is how code cites a document of another project, which
// this repository does not hold: the project's name just before the path
// ("Megatron-Bridge's docs/training/cuda-graphs.md", "MB docs/...").
var upstreamCite = regexp.MustCompile(`(Megatron-Bridge|Megatron-LM|Megatron-Core|MCore|MB|Transformer Engine|TE)('s)? $`)

// lineStart is what a line holds before its first word: indentation and
// a comment marker.
var lineStart = regexp.MustCompile(`^\s*(//|#)?\s*$`)

// citedDocs are the docs/ paths the text cites, each with its line; the
// paths upstreamCite marks as another project's are left out, the
// project's name standing before the path or at the end of the line
// before when the path starts its line.
func citedDocs(text string) (paths []string, lines []int) {
	all := strings.Split(text, "\n")
	for n, line := range all {
		for _, m := range docsPath.FindAllStringSubmatchIndex(line, -1) {
			before := line[:m[4]]
			if lineStart.MatchString(before) && n > 0 {
				before = strings.TrimRight(all[n-1], " ") + " "
			}
			if upstreamCite.MatchString(before) {
				continue
			}
			paths = append(paths, line[m[4]:m[5]])
			lines = append(lines, n+1)
		}
	}
	return paths, lines
}

// TestCitedDocsExist reads every Go, Python and shell file of the module
// (tests included) and fails on each docs/ path it cites, in a comment or
// a string, that the repository does not hold: a comment that sends the
// reader to a document must send them somewhere.
func TestCitedDocsExist(t *testing.T) {
	root := moduleRoot(t)
	var found []finding
	cited := 0
	for _, f := range sourceFiles(t, ".go", ".py", ".sh") {
		if strings.HasPrefix(f.rel, "internal/codehealth/") {
			continue // this package's examples cite made-up paths on purpose
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		paths, lines := citedDocs(string(b))
		cited += len(paths)
		for i, p := range paths {
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
				found = append(found, finding{f.rel, lines[i], p + " does not exist"})
			}
		}
	}
	// The engines' comments cite the measurement documents: a scan that
	// finds no citation at all missed the files.
	if cited < 10 {
		t.Fatalf("found only %d docs/ citations: the scan missed the module's files", cited)
	}
	t.Logf("%d docs/ citations checked", cited)
	report(t, "cites a document the repository does not hold", found, nil)
}

// The scan finds the paths a comment or string cites and leaves another
// project's documents to that project.
func TestCitedDocsFindsPaths(t *testing.T) {
	text := "// the band (docs/emulation-accuracy-2026-12-01.md).\n" +
		`x := "see docs/files.md, docs/data/a.tgz"` + "\n" +
		"// MB docs/training/cuda-graphs.md and Megatron-Bridge's docs/x.md: upstream\n" +
		"// mydocs/x.md and ./docs are no citations; upstream across a line: MB\n" +
		"// docs/training/cuda-graphs.md\n"
	paths, lines := citedDocs(text)
	want := []string{"docs/emulation-accuracy-2026-12-01.md", "docs/files.md", "docs/data/a.tgz"}
	if !slices.Equal(paths, want) || !slices.Equal(lines, []int{1, 2, 2}) {
		t.Errorf("citedDocs: %q at lines %v, want %q at lines 1, 2, 2", paths, lines, want)
	}
}
