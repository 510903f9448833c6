package codehealth

import (
	"go/ast"
	"go/token"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// history is a test comment that tells what the code did before the fix
// instead of what the test asserts: a line that opens with "Before:", or
// an aside "(before: ...)".
var history = regexp.MustCompile(`(?m)^\s*(Before|Previously|Formerly):|(?i)\((before|previously|formerly):`)

// historiesExcluded are test files whose comments still open with a
// history, each with why.
var historiesExcluded = map[string]string{}

// TestTestCommentsSayWhatTheyAssert fails on each test comment that
// opens with a history ("Before: ..."): a test's comment says what the
// test asserts and why; the history of the bug is the commit's.
func TestTestCommentsSayWhatTheyAssert(t *testing.T) {
	found := scanGo(t, true, func(fset *token.FileSet, f sourceFile, af *ast.File) []finding {
		if strings.HasPrefix(f.rel, "internal/codehealth/") {
			return nil // this package's comments name the pattern they look for
		}
		return commentFindings(fset, f, af, historyLines)
	})
	report(t, "a test comment that tells a history (say what the test asserts and why)", found, historiesExcluded)
}

// historyLines are the lines (1-based) of text that tell a history.
func historyLines(text string) []int {
	var lines []int
	for _, m := range history.FindAllStringIndex(text, -1) {
		if n := strings.Count(text[:m[0]], "\n") + 1; !slices.Contains(lines, n) {
			lines = append(lines, n)
		}
	}
	return lines
}

// The scan finds a history that opens a line or sits in an aside, and
// passes the word before used in its ordinary sense.
func TestHistoryFindsBeforeNotes(t *testing.T) {
	text := "Before: the FIFO was replaced.\n" +
		"the lock is taken before the journal is read\n" +
		"  Previously: it hung\n" +
		"read the file before: it must exist\n" +
		"exits within a second (before: ~60 s, or never)\n"
	if got, want := historyLines(text), []int{1, 3, 5}; !slices.Equal(got, want) {
		t.Errorf("historyLines = %v, want %v", got, want)
	}
}
