package codehealth

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

// maxFuncLines is the longest a function outside tests may be, from its
// func line to its closing brace: one a reader takes in at once.
const maxFuncLines = 80

// isTable is whether a function's body is only data: one return of
// composite literals (a table as a function). Its length is its rows'.
func isTable(fd *ast.FuncDecl) bool {
	if len(fd.Body.List) != 1 {
		return false
	}
	ret, ok := fd.Body.List[0].(*ast.ReturnStmt)
	if !ok || len(ret.Results) == 0 {
		return false
	}
	for _, r := range ret.Results {
		if _, ok := r.(*ast.CompositeLit); !ok {
			return false
		}
	}
	return true
}

// longFuncs are the functions of a file longer than maxFuncLines, tables
// aside, as "Recv.Name (N lines)" at their line.
func longFuncs(fset *token.FileSet, f *ast.File, rel string) []finding {
	var found []finding
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil || isTable(fd) {
			continue
		}
		start, end := fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
		if n := end - start + 1; n > maxFuncLines {
			found = append(found, finding{rel, start, fmt.Sprintf("%s is %d lines", funcName(fd), n)})
		}
	}
	return found
}

// funcName is a function's name as a reader looks it up: Recv.Name for a
// method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// longFuncsExcluded are files that still hold a function over
// maxFuncLines, each with why: files being changed elsewhere, to be split
// when they are free.
var longFuncsExcluded = map[string]string{}

// TestNoLongFunctions fails on each function outside tests longer than
// maxFuncLines (a table, a function that only returns data, aside): a
// long function does several things, and is split along them.
func TestNoLongFunctions(t *testing.T) {
	found := scanGo(t, false, func(fset *token.FileSet, f sourceFile, af *ast.File) []finding {
		return longFuncs(fset, af, f.rel)
	})
	report(t, fmt.Sprintf("a function over %d lines", maxFuncLines), found, longFuncsExcluded)
}

// The count runs from the func line to the closing brace, names methods
// by their receiver, and leaves a function that only returns a table.
func TestLongFuncsCounts(t *testing.T) {
	body := func(n int) string {
		s := ""
		for i := 0; i < n; i++ {
			s += "\tx++\n"
		}
		return s
	}
	rows := ""
	for i := 0; i < 100; i++ {
		rows += "\t\t{1},\n"
	}
	src := "package p\n\ntype T struct{}\n\n" +
		"func short() {\n" + body(78) + "}\n\n" + // 80 lines
		"func long() {\n" + body(79) + "}\n\n" + // 81
		"func (t *T) method() {\n" + body(90) + "}\n\n" +
		"func table() []struct{ a int } {\n\treturn []struct{ a int }{\n" + rows + "\t}\n}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fd := range longFuncs(fset, f, "p.go") {
		got = append(got, fd.what)
	}
	if want := []string{"long is 81 lines", "T.method is 92 lines"}; !slices.Equal(got, want) {
		t.Errorf("longFuncs = %q, want %q", got, want)
	}
}
