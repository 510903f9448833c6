package fileio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Journals are JSON-lines files cgtune appends to one fsynced line at a
// time (the search's journal.jsonl, a validation's validate.jsonl, the job
// ledger jobs.jsonl). Read back, they all follow the same rules:
//
//   - a last line cut short (no newline, not JSON: the process died while
//     writing it) is dropped;
//   - a line in the middle that cannot be read (a disk fault, an edit by
//     hand) is named in a *BadLinesError, and never silently dropped with
//     the readable results around it; a resume that is told to
//     (--skip-bad-lines) moves such lines to a file of their own beside the
//     journal (UnreadableName) and keeps the rest;
//   - a last line that is whole but lacks its newline gets one before
//     anything is appended, so the next line is not glued onto it.

// StopReading marks an error of a line parser as one about the whole file
// (a missing or foreign header): ParseJournal returns it instead of
// counting the line as unreadable.
func StopReading(err error) error { return stopReading{err} }

type stopReading struct{ err error }

func (s stopReading) Error() string { return s.err.Error() }
func (s stopReading) Unwrap() error { return s.err }

// BadLine is a line of a journal that cannot be read.
type BadLine struct {
	N    int // line number, from 1
	Text []byte
	Err  error
}

// JournalLines is a journal read back by ParseJournal.
type JournalLines struct {
	Path string
	// Good holds the readable lines, each with its newline, in order: what
	// the journal is rewritten to when its unreadable lines are set aside.
	Good [][]byte
	Bad  []BadLine
	// Intact is the length of the file without a torn last line; Size its
	// whole length.
	Intact, Size int64
	// NoFinalNewline: the last line is readable but has no newline.
	NoFinalNewline bool
}

// Torn reports whether the file ends in a line cut short.
func (j JournalLines) Torn() bool { return j.Intact < j.Size }

// ParseJournal splits data, the journal at path, into lines and hands each
// whole line that is valid JSON to parse (n counts from 1). A line parse
// refuses (any error) is unreadable; an error made by StopReading ends
// the reading and is returned, as is a *LongLineError for a line longer
// than maxLine bytes (0: no limit). A last line without a newline that is
// not valid JSON is the torn tail, neither readable nor unreadable.
func ParseJournal(path string, data []byte, maxLine int, parse func(n int, line []byte) error) (JournalLines, error) {
	j := JournalLines{Path: path, Size: int64(len(data)), Intact: int64(len(data))}
	var off int64
	for n := 1; off < int64(len(data)); n++ {
		rest := data[off:]
		raw, end, last := rest, int64(len(data)), true
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			raw, end, last = rest[:i], off+int64(i)+1, false
		}
		if maxLine > 0 && len(raw) > maxLine {
			return j, &LongLineError{Name: path, Line: n, Max: maxLine}
		}
		switch err := lineError(n, raw, parse); {
		case err == nil:
			j.Good = append(j.Good, append(append([]byte(nil), raw...), '\n'))
			j.NoFinalNewline = last
		case errors.As(err, new(stopReading)):
			return j, err
		case last && !json.Valid(raw):
			j.Intact = off
		default:
			j.Bad = append(j.Bad, BadLine{N: n, Text: raw, Err: err})
		}
		off = end
	}
	return j, nil
}

// lineError is why line n cannot be read (nil: it can).
func lineError(n int, raw []byte, parse func(int, []byte) error) error {
	if !json.Valid(raw) {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
	}
	return parse(n, raw)
}

// BadLinesError says that lines in the middle of a journal cannot be read
// (a disk fault, an edit by hand); the readable results around them are
// intact and a resume may set the bad lines aside (--skip-bad-lines).
type BadLinesError struct {
	Path     string
	Lines    []int // line numbers, from 1
	First    error // why the first of them cannot be read
	Readable int   // results that can be read
}

func (e *BadLinesError) Error() string {
	nums := make([]string, len(e.Lines))
	for i, n := range e.Lines {
		nums[i] = strconv.Itoa(n)
	}
	what := "line " + nums[0] + " is"
	if len(nums) > 1 {
		what = "lines " + strings.Join(nums, ", ") + " are"
	}
	return fmt.Sprintf("%s: %s unreadable (line %d: %v); its %d readable results are intact", e.Path, what, e.Lines[0], e.First, e.Readable)
}

// BadLinesError is the error for j's unreadable lines (nil when it has
// none, or when skipBad says they are to be set aside); readable counts
// the results the journal holds besides them.
func (j JournalLines) BadLinesError(skipBad bool, readable int) error {
	if len(j.Bad) == 0 || skipBad {
		return nil
	}
	e := &BadLinesError{Path: j.Path, First: j.Bad[0].Err, Readable: readable}
	for _, b := range j.Bad {
		e.Lines = append(e.Lines, b.N)
	}
	return e
}

// UnreadableName is the file beside a journal that its unreadable lines
// are moved to: journal.jsonl's is journal-unreadable.txt.
func UnreadableName(journal string) string {
	return strings.TrimSuffix(journal, filepath.Ext(journal)) + "-unreadable.txt"
}

// OpenJournalAppend opens the journal j was read from for appending what
// comes next, after making it whole: its unreadable lines are moved to
// UnreadableName beside it (appended and synced first, then the journal
// is replaced, in one rename, by its readable lines: a crash in between
// leaves a bad line in both files, never in neither); else a torn last
// line is cut off, and a last line without its newline gets one.
func OpenJournalAppend(j JournalLines) (*os.File, error) {
	if len(j.Bad) > 0 {
		if err := setAside(j); err != nil {
			return nil, err
		}
	}
	f, err := OpenAppend(j.Path, 0o644)
	if err != nil {
		return nil, err
	}
	if len(j.Bad) > 0 {
		return f, nil // rewritten: the readable lines, each with its newline
	}
	switch {
	case j.Torn():
		err = f.Truncate(j.Intact)
	case j.NoFinalNewline:
		_, err = f.Write([]byte("\n"))
	}
	if err == nil && (j.Torn() || j.NoFinalNewline) {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", j.Path, unwrapPath(err))
	}
	return f, nil
}

func setAside(j JournalLines) error {
	var buf bytes.Buffer
	name := filepath.Base(j.Path)
	for _, b := range j.Bad {
		fmt.Fprintf(&buf, "%s line %d (%v): %s\n", name, b.N, b.Err, b.Text)
	}
	aside := filepath.Join(filepath.Dir(j.Path), UnreadableName(name))
	f, err := OpenAppend(aside, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(buf.Bytes())
	serr := f.Sync()
	if err := errors.Join(werr, serr, f.Close()); err != nil {
		return fmt.Errorf("%s: %w", aside, err)
	}
	return WriteOwnFileAtomic(j.Path, bytes.Join(j.Good, nil), 0o644)
}
