package codehealth

import (
	"cmp"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// moduleRoot is the folder of go.mod, two levels above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// sourceFile is one file of the module: its path on disk and relative to
// the module root (slash-separated, as the exclusion lists name it).
type sourceFile struct{ path, rel string }

// sourceFiles lists the module's files whose names end in one of exts.
// Hidden folders (checkouts of upstream code, caches), testdata and
// vendor are passed over: they are not the module's own code.
func sourceFiles(t *testing.T, exts ...string) []sourceFile {
	t.Helper()
	root := moduleRoot(t)
	var files []sourceFile
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if slices.ContainsFunc(exts, func(ext string) bool { return strings.HasSuffix(path, ext) }) {
			files = append(files, sourceFile{path: path, rel: filepath.ToSlash(rel)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no %v files under %s", exts, root)
	}
	return files
}

// goFiles are the module's Go files, parsed with their comments: the
// tests' own (_test.go) when tests is set, else the others.
func goFiles(t *testing.T, tests bool) (*token.FileSet, map[sourceFile]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	parsed := map[sourceFile]*ast.File{}
	for _, f := range sourceFiles(t, ".go") {
		if strings.HasSuffix(f.rel, "_test.go") != tests {
			continue
		}
		af, err := parser.ParseFile(fset, f.path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed[f] = af
	}
	return fset, parsed
}

// scanGo runs find on each of the module's Go files (the tests' own when
// tests is set, else the others) and returns what it finds, in file and
// line order.
func scanGo(t *testing.T, tests bool, find func(fset *token.FileSet, f sourceFile, af *ast.File) []finding) []finding {
	t.Helper()
	fset, files := goFiles(t, tests)
	var found []finding
	for f, af := range files {
		found = append(found, find(fset, f, af)...)
	}
	sortFindings(found)
	return found
}

// finding is one place a rule is broken: FILE:LINE and what.
type finding struct {
	rel  string
	line int
	what string
}

// report fails t on each finding outside the exclusions (file → why) and
// logs the excluded ones; an exclusion that excludes nothing fails too,
// so the list shrinks as files are cleared.
func report(t *testing.T, rule string, found []finding, excluded map[string]string) {
	t.Helper()
	used := map[string]bool{}
	for _, f := range found {
		if why, ok := excluded[f.rel]; ok {
			used[f.rel] = true
			t.Logf("%s:%d: %s (%s)", f.rel, f.line, f.what, why)
			continue
		}
		t.Errorf("%s:%d: %s: %s", f.rel, f.line, rule, f.what)
	}
	for rel, why := range excluded {
		if !used[rel] {
			t.Errorf("%s is excluded from %q (%s) but breaks no rule: take it off the list", rel, rule, why)
		}
	}
}

// sortFindings orders findings by file and line, so that a report reads
// the same on every run.
func sortFindings(found []finding) {
	slices.SortFunc(found, func(a, b finding) int {
		return cmp.Or(strings.Compare(a.rel, b.rel), cmp.Compare(a.line, b.line))
	})
}
