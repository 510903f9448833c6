package fileio

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fileCalls are the standard library's ways to open, read, create or
// list a file by its path. Every one of them blocks on a FIFO (os.Open
// of a FIFO waits for a writer), follows a planted link, or reads without
// a bound; cgtune's own code reaches files through this package instead
// (ReadFileLimited, ReadFileContext, OpenFileLimited, ReadDir, OpenAppend,
// CreateFresh, CreateExclusive, OpenOwn, WriteFileAtomic, ...).
var fileCalls = map[string][]string{
	"os":        {"Open", "OpenFile", "ReadFile", "Create", "WriteFile", "ReadDir", "CreateTemp", "Truncate", "OpenInRoot", "OpenRoot", "DirFS"},
	"io/ioutil": {"ReadFile", "WriteFile", "ReadDir", "TempFile"},
	"syscall":   {"Open", "Openat", "Creat"},
}

// allowed are the calls outside this package that may stay, keyed by the
// file (relative to the module) and the call ("search/x.go os.Open"),
// each with why. None may today.
var allowed = map[string]string{}

// fileioReaders are this package's functions that read a file by its
// path; the test lists where each is called.
var fileioReaders = []string{"ReadFileLimited", "ReadFileContext", "OpenFileLimited", "ReadDir", "Readable"}

// TestEveryFileOpenGoesThroughFileio lists, by parsing the module's Go
// sources (tests and testdata aside), every call that opens a file by its
// path outside this package, and fails on each that is not allowed. The
// readers and writers it finds are printed with -v.
func TestEveryFileOpenGoesThroughFileio(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var found, readers []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") || rel == filepath.Join("internal", "fileio") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		calls, reads, err := fileOpenCalls(path)
		if err != nil {
			return err
		}
		for _, c := range calls {
			found = append(found, filepath.ToSlash(rel)+":"+c)
		}
		for _, c := range reads {
			readers = append(readers, filepath.ToSlash(rel)+":"+c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the %d readers, all through internal/fileio:\n%s", len(readers), strings.Join(readers, "\n"))
	// The journals, the presets, the caches and the job logs are read
	// through fileio: a walk that finds none of them missed the module.
	for _, want := range []string{"search/journal.go", "engine/job/validate.go", "engine/job/ledger.go", "presets/store.go", "stepmodel/calibration.go", "engine/job/engine.go"} {
		if !slices.ContainsFunc(readers, func(r string) bool { return strings.HasPrefix(r, want+":") }) {
			t.Errorf("no fileio reader found in %s", want)
		}
	}
	for _, f := range found {
		where, call, _ := strings.Cut(f, ": ")
		if why, ok := allowed[strings.SplitN(where, ":", 2)[0]+" "+call]; ok {
			t.Logf("%s (allowed: %s)", f, why)
			continue
		}
		t.Errorf("%s opens a file by its path outside internal/fileio: use fileio's bounded, non-blocking helpers", f)
	}
}

// fileOpenCalls are the fileCalls in the Go file at path and its calls
// of fileioReaders, each as "LINE: pkg.Func".
func fileOpenCalls(path string) (calls, reads []string, err error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, nil, err
	}
	local := map[string]string{} // name in this file → import path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if _, ok := fileCalls[p]; !ok && p != "cgtune/internal/fileio" {
			continue
		}
		name := filepath.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		local[name] = p
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		p, ok := local[id.Name]
		at := strconv.Itoa(fset.Position(sel.Pos()).Line) + ": " + filepath.Base(p) + "." + sel.Sel.Name
		switch {
		case !ok:
		case p == "cgtune/internal/fileio" && slices.Contains(fileioReaders, sel.Sel.Name):
			reads = append(reads, at)
		case slices.Contains(fileCalls[p], sel.Sel.Name):
			calls = append(calls, at)
		}
		return true
	})
	return calls, reads, nil
}
