package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"cgtune/internal/setup"
)

// An error that ends cgtune keeps the chain of the cause it wraps: the
// exit code is fail's, the message is the one line printed, and
// errors.Is still finds the cause (a missing file, a cancelled start, no
// GPU) through it.
func TestFailKeepsTheCause(t *testing.T) {
	missing := &fs.PathError{Op: "open", Path: "p.yaml", Err: fs.ErrNotExist}
	for _, tc := range []struct {
		err   error
		cause error
		code  int
		line  string
	}{
		{fail(exitBadInput, "--preset: %w", missing), fs.ErrNotExist, exitBadInput, "cgtune: --preset: open p.yaml: file does not exist\n"},
		{fail(exitInterrupted, "start: %w", context.Canceled), context.Canceled, exitInterrupted, "cgtune: start: context canceled\n"},
		{fmt.Errorf("opening: %w", setup.ErrNoGPU), setup.ErrNoGPU, exitNoGPU, "cgtune: opening: no usable GPU\n"},
	} {
		if !errors.Is(tc.err, tc.cause) {
			t.Errorf("%q does not wrap %v", tc.err, tc.cause)
		}
		var stderr bytes.Buffer
		if code := exitCode(newRootCmd(), tc.err, &stderr); code != tc.code || stderr.String() != tc.line {
			t.Errorf("%q: exit %d, printed %q; want exit %d, %q", tc.err, code, stderr.String(), tc.code, tc.line)
		}
	}
}
