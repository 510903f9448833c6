package codehealth

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// goPackage is what go list says of one package: its folder and files,
// and the compiled export data the type checker imports it from.
type goPackage struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	CgoFiles   []string
	DepOnly    bool
}

// modulePackages lists the module's packages (go list -export builds
// them, as go vet does) and every package they import, by import path.
func modulePackages(t *testing.T) (own []goPackage, exports map[string]string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Dir,Export,GoFiles,CgoFiles,DepOnly", "./...")
	cmd.Dir = moduleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	exports = map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly {
			own = append(own, p)
		}
	}
	return own, exports
}

// typeCheck type-checks one package from its sources, importing the
// others from their export data.
func typeCheck(t *testing.T, fset *token.FileSet, p goPackage, exports map[string]string) ([]*ast.File, *types.Info) {
	t.Helper()
	var files []*ast.File
	for _, name := range append(append([]string{}, p.GoFiles...), p.CgoFiles...) {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files, typesOf(fset, p.ImportPath, files, exports)
}

// typesOf type-checks the files of one package. Cgo's C package is
// faked; the errors that leaves (C's own values untyped, never an error
// value) are passed over.
func typesOf(fset *token.FileSet, path string, files []*ast.File, exports map[string]string) *types.Info {
	lookup := func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) }
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup), FakeImportC: true, Error: func(error) {}}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
	conf.Check(path, fset, files, info)
	return info
}

var errorType = types.Universe.Lookup("error").Type().(*types.Named).Underlying().(*types.Interface)

// isError is whether an expression's type is an error (an interface or
// concrete type that implements error).
func isError(info *types.Info, e ast.Expr) bool {
	tv, ok := info.Types[e]
	return ok && tv.Type != nil && types.Implements(tv.Type, errorType)
}

// errorfLike is whether the call formats an error: fmt.Errorf, or a
// function of the module's own whose last parameters are (format string,
// args ...any) and which returns an error (cmd/cgtune's fail, setup's
// noGPUf and the like, which hand their format to fmt.Errorf).
func errorfLike(info *types.Info, call *ast.CallExpr) (format int, ok bool) {
	tv, ok := info.Types[call.Fun]
	if !ok {
		return 0, false
	}
	sig, ok := tv.Type.(*types.Signature)
	if !ok || !sig.Variadic() || sig.Results().Len() != 1 || !types.Identical(sig.Results().At(0).Type(), types.Universe.Lookup("error").Type()) {
		return 0, false
	}
	n := sig.Params().Len()
	if n < 2 || sig.Params().At(n-2).Name() != "format" {
		return 0, false
	}
	if b, ok := sig.Params().At(n - 2).Type().(*types.Basic); !ok || b.Kind() != types.String {
		return 0, false
	}
	return n - 2, true
}

// verbs are the verbs of a format string in order, one per argument it
// takes (%% takes none; a * width or precision takes one, given as '*').
func verbs(format string) []rune {
	var out []rune
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		for i++; i < len(format); i++ {
			c := format[i]
			if c == '*' {
				out = append(out, '*')
				continue
			}
			if strings.IndexByte("+-# 0123456789.[]", c) >= 0 {
				continue
			}
			if c != '%' {
				out = append(out, rune(c))
			}
			break
		}
	}
	return out
}

// unwrappedErrors finds, in one package, each error formatted into an
// error with a verb other than %w, and each err.Error() formatted so: the
// new error's chain ends there, and errors.Is and errors.As no longer see
// the cause.
func unwrappedErrors(fset *token.FileSet, root string, files []*ast.File, info *types.Info) []finding {
	var found []finding
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || call.Ellipsis.IsValid() {
				return true
			}
			fi, ok := errorfLike(info, call)
			if !ok || fi >= len(call.Args) {
				return true
			}
			tv := info.Types[call.Args[fi]]
			if tv.Value == nil {
				return true // a format built at run time: nothing to read
			}
			format, _ := strconv.Unquote(tv.Value.ExactString())
			args := call.Args[fi+1:]
			for i, v := range verbs(format) {
				if i >= len(args) || v == 'w' {
					continue
				}
				arg := args[i]
				what := ""
				if isError(info, arg) {
					what = "an error formatted with %" + string(v)
				} else if sel, ok := ast.Unparen(arg).(*ast.CallExpr); ok {
					if fn, ok := sel.Fun.(*ast.SelectorExpr); ok && fn.Sel.Name == "Error" && len(sel.Args) == 0 && isError(info, fn.X) {
						what = "an error's Error() formatted into an error"
					}
				}
				if what != "" {
					pos := fset.Position(arg.Pos())
					rel, _ := filepath.Rel(root, pos.Filename)
					found = append(found, finding{filepath.ToSlash(rel), pos.Line, what + " (use %w)"})
				}
			}
			return true
		})
	}
	return found
}

// unwrapExcluded are files that format an error into another without
// %w, each with why: files being changed elsewhere, to be cleared when
// they are free.
var unwrapExcluded = map[string]string{}

// TestErrorsAreWrapped type-checks every package of the module and fails
// on each error formatted into a new error (fmt.Errorf and the module's
// own Errorf-like helpers) with %v, %s or as err.Error(): the caller's
// errors.Is(err, context.Canceled) or errors.As(err, &fs.PathError) must
// see through every layer that adds words.
func TestErrorsAreWrapped(t *testing.T) {
	root := moduleRoot(t)
	own, exports := modulePackages(t)
	fset := token.NewFileSet()
	var found []finding
	for _, p := range own {
		files, info := typeCheck(t, fset, p, exports)
		found = append(found, unwrappedErrors(fset, root, files, info)...)
	}
	report(t, "error chain dropped", found, unwrapExcluded)
}

// The check finds each error formatted without %w, through fmt.Errorf
// and a helper of the same shape, as a value or as its Error(); it
// passes %w, strings, and a %% before the verb.
func TestUnwrappedErrorsFindsDroppedChains(t *testing.T) {
	_, exports := modulePackages(t)
	src := `package p

import "fmt"

type myErr struct{}

func (myErr) Error() string { return "mine" }

func fail(code int, format string, args ...any) error { return fmt.Errorf(format, args...) }

func f(err error, e myErr) []any {
	return []any{
		fmt.Errorf("a: %v", err),
		fmt.Errorf("b: %w", err),
		fmt.Errorf("c: %s", err.Error()),
		fail(2, "d: %d %v", 1, e),
		fmt.Errorf("e: %v", "text"),
		fmt.Errorf("%%v %q: %v", "x", err),
		fmt.Sprintf("g: %v", err),
	}
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "/m/p/p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	info := typesOf(fset, "p", []*ast.File{f}, exports)
	var lines []int
	for _, fd := range unwrappedErrors(fset, "/m", []*ast.File{f}, info) {
		if fd.rel != "p/p.go" {
			t.Errorf("finding in %q, want p/p.go", fd.rel)
		}
		lines = append(lines, fd.line)
	}
	if want := []int{13, 15, 16, 18}; !slices.Equal(lines, want) {
		t.Errorf("findings at lines %v, want %v (a, c, d, f)", lines, want)
	}
}
