package fileio

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// lineResults reads every line, writing a long one as "LONG n".
func lineResults(t *testing.T, r io.Reader, max int) []string {
	t.Helper()
	lr := NewLineReader(r, "f.jsonl", max)
	var out []string
	for {
		b, err := lr.Next()
		var long *LongLineError
		switch {
		case errors.Is(err, io.EOF):
			return out
		case errors.As(err, &long):
			if long.Line != lr.Line() || long.Name != "f.jsonl" || long.Max != max {
				t.Fatalf("%+v at line %d", long, lr.Line())
			}
			out = append(out, "LONG "+string(rune('0'+long.Line)))
		case err != nil:
			t.Fatal(err)
		default:
			out = append(out, string(b))
		}
	}
}

func TestLineReader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"lines", "a\nbb\n\nc\n", []string{"a", "bb", "", "c"}},
		{"no final newline", "a\nbb", []string{"a", "bb"}},
		{"empty", "", nil},
		{"exactly the limit", "abcd\nabcd", []string{"abcd", "abcd"}},
		{"long in the middle", "a\nabcde\nb\n", []string{"a", "LONG 2", "b"}},
		{"long last without newline", "a\nabcde", []string{"a", "LONG 2"}},
		{"very long", "x\n" + strings.Repeat("y", 1<<20) + "\nz\n", []string{"x", "LONG 2", "z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				t.Run(fmt.Sprintf("%T", r), func(t *testing.T) {
					got := lineResults(t, r, 4)
					if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
						t.Errorf("got %q, want %q", got, tc.want)
					}
				})
			}
		})
	}
	err := &LongLineError{Name: "jobs.jsonl", Line: 7, Max: 16 << 20}
	if got := err.Error(); got != "jobs.jsonl line 7 is longer than 16 MiB, the most cgtune reads on one line" {
		t.Errorf("message %q", got)
	}
}
