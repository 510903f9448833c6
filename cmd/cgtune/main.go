// Command cgtune finds the fastest CUDA-graph configuration for a
// Megatron-Bridge training recipe by measuring it, and emits the overrides.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"cgtune/internal/setup"
)

// Exit codes: the contract with scripts (docs/reference.md, "Commands and exit codes").
const (
	exitOK          = 0
	exitInvalid     = 1 // invalid configuration, or no candidate succeeded
	exitBadInput    = 2 // usage or bad input file
	exitNoGPU       = 3 // no usable GPU / driver for the requested engine
	exitInterrupted = 130
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// exitError carries an exit code and a one-line message up to main; err
// is the message as an error, which keeps the chain of any error %w wrapped
// into it (errors.Is still sees a cancelled context or a missing file).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// fail is an error that ends cgtune with code; format and args are
// fmt.Errorf's.
func fail(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// quiet is an exitError whose message was already printed (check's
// violations go to stdout, and only the exit code is left to set).
func quiet(code int) error { return &exitError{code: code} }

// newRootCmd builds the command tree: the search itself on the root
// (root.go, the interactive program in tui.go) and one subcommand per file
// beside this one, each listed here so the tree is read in one place.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "cgtune",
		Short:         "Find the fastest CUDA-graph configuration for a Megatron-Bridge recipe",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return fail(exitBadInput, "%w", err)
	})
	root.AddCommand(
		newCalibrateCmd(),
		newCheckCmd(),
		newEmitCmd(),
		newGPUsCmd(),
		newProbeCmd(),
		newModelsCmd(),
		newPresetCmd(),
		newProfileCmd(),
		newRulesCmd(),
		newRunsCmd(),
		newValidateCmd(),
		newVersionCmd(),
		newWorkerCmd(),
	)
	// --version prints what cgtune version does (version.go).
	root.Version = versionText()
	root.SetVersionTemplate("{{.Version}}")
	configureRoot(root, runTUI) // the search itself: root.go; the TUI: tui.go
	registerCompletions(root)
	return root
}

func main() {
	// A reader that goes away (cgtune ... | head -1) must not kill cgtune
	// before it has written its files: with SIGPIPE caught, a write to the
	// closed pipe fails with EPIPE instead, which stdoutErr forgives. The
	// channel is never read; caught signals revert to the default in the
	// worker processes cgtune starts.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// stdoutErr is err from writing results to stdout, except that a reader
// that stopped reading (EPIPE) is not an error: what was asked for is done.
func stdoutErr(err error) error {
	if err == nil || errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return err
}

// run executes one command line; subcommands write results to
// cmd.OutOrStdout() and progress to cmd.ErrOrStderr(), so tests can capture both.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	out := &checkedWriter{w: stdout}
	if isTerminal(stdout) {
		root.SetOut(stdout) // the TUI needs the terminal itself
	} else {
		root.SetOut(out)
	}
	root.SetErr(stderr)
	code := exitCode(root, root.Execute(), stderr)
	if out.err != nil && (code == exitOK || code == exitInvalid) {
		// The results (or check's violations) never arrived: a full
		// disk, a closed descriptor. That is no success.
		return exitCode(root, fail(exitBadInput, "writing the results to stdout: %w", out.err), stderr)
	}
	return code
}

// exitCode is the exit code of a command's error, printing its message.
func exitCode(root *cobra.Command, err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	// Cobra's own errors (unknown command, bad flag, wrong arg count) are usage errors.
	code, msg := exitBadInput, err.Error()
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		code, msg = ee.code, ee.Error()
	case errors.Is(err, setup.ErrNoGPU):
		code = exitNoGPU
	}
	switch {
	case msg == "":
	case root.Flags().Changed("json"):
		// The search's --json: stderr holds JSON lines only.
		stderr.Write(jsonLine("error", errorEvent{Message: msg, ExitCode: code}))
	default:
		fmt.Fprintln(stderr, "cgtune: "+msg)
	}
	return code
}

// checkedWriter is stdout for the commands, remembering the first write
// error (stdoutErr: a reader that went away is none), so that no command
// reports success for results that were never written.
type checkedWriter struct {
	w   io.Writer
	err error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if c.err == nil {
		c.err = stdoutErr(err)
	}
	return n, err
}
