package fileio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// LineReader reads the newline-terminated lines of a JSON-lines file or
// pipe, each at most a given length. A longer line is never held in
// memory: Next reads past it and returns a *LongLineError that names the
// source and the line, and the call after that goes on with the next line,
// so a reader that answers requests can refuse the one line and go on.
type LineReader struct {
	r    *bufio.Reader
	name string
	max  int
	n    int
	buf  []byte
}

// NewLineReader reads lines of at most max bytes (without the newline)
// from r; name says what r is in errors (a file's path, "stdin").
func NewLineReader(r io.Reader, name string, max int) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, min(max+1, 64<<10)), name: name, max: max}
}

// LongLineError is a line longer than a LineReader takes.
type LongLineError struct {
	Name string // what was read (a file's path)
	Line int    // line number, from 1
	Max  int    // the most one line may hold, in bytes
}

func (e *LongLineError) Error() string {
	return fmt.Sprintf("%s line %d is longer than %s, the most cgtune reads on one line", e.Name, e.Line, byteSize(int64(e.Max)))
}

// Line is the number of the line Next returned last, from 1.
func (l *LineReader) Line() int { return l.n }

// Next returns the next line without its newline (valid until the next
// call), or io.EOF after the last one; a last line without a newline is a
// line. A line longer than the limit is a *LongLineError (the reader is
// then at the start of the next line); another read error names the source.
func (l *LineReader) Next() ([]byte, error) {
	l.buf = l.buf[:0]
	long, empty := false, true
	for {
		chunk, err := l.r.ReadSlice('\n')
		empty = empty && len(chunk) == 0
		if !long && len(l.buf)+len(chunk) > l.max+1 {
			long, l.buf = true, l.buf[:0]
		}
		if !long {
			l.buf = append(l.buf, chunk...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && empty:
			return nil, io.EOF
		case err != nil && !errors.Is(err, io.EOF):
			return nil, fmt.Errorf("%s line %d: %w", l.name, l.n+1, err)
		}
		l.n++
		if long || (err != nil && len(l.buf) > l.max) {
			return nil, &LongLineError{Name: l.name, Line: l.n, Max: l.max}
		}
		if err == nil {
			return l.buf[:len(l.buf)-1], nil
		}
		return l.buf, nil
	}
}
