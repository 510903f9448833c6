package main

import (
	"context"
	"errors"
	"fmt"

	"cgtune/engine"
	"cgtune/internal/setup"
	"cgtune/presets"
	"cgtune/search"
	"cgtune/stepmodel"
)

// errUntrustedCommand is the cause of a resume stopped before it would run
// a job command it took from run.json without --trust-preset-command.
var errUntrustedCommand = errors.New("the job command is not trusted")

// gateSavedCommand holds back, on a resume, the job command that came from
// the run folder's run.json (f.savedCommand) unless --trust-preset-command
// says to run it: run.json is a file anyone with access to the folder may
// have edited, as a preset's command may have been. Candidates the journal
// holds need no job, so a resume with nothing left to run needs no trust;
// the first candidate that would start a job stops the search instead,
// before anything is launched. refused is the error for that case;
// release frees the context.
func (f *rootFlags) gateSavedCommand(ctx context.Context, cfg *search.Config) (_ context.Context, release func(), refused func() error) {
	if f.savedCommand == "" || f.trustCommand || f.engine != setup.EngineJob {
		return ctx, func() {}, nil
	}
	ctx, stop := context.WithCancelCause(ctx)
	engines := make([]engine.Engine, len(cfg.Engines))
	for i, e := range cfg.Engines {
		engines[i] = untrustedCommand{Engine: e, stop: func() { stop(errUntrustedCommand) }}
	}
	cfg.Engines = engines
	return ctx, func() { stop(nil) }, func() error {
		return fail(exitBadInput, "the resume needs to run jobs, and their command template comes from %s, not from this command line: %s; it runs only with --trust-preset-command (read it first), or give --command again",
			f.savedCommand, quoteShort(oneLine(f.command)))
	}
}

// untrustedCommand is an engine whose candidates do not run: the first one
// stops the search (gateSavedCommand).
type untrustedCommand struct {
	engine.Engine
	stop func()
}

func (u untrustedCommand) Run(_ context.Context, _ *stepmodel.Workload, c presets.Candidate, _ engine.RunOptions, _ func(engine.StepSample)) engine.Result {
	u.stop()
	return engine.Result{Candidate: c, Source: engine.SourceJob, Device: u.Device(), ErrKind: engine.FailureCancel, Err: errUntrustedCommand.Error()}
}

// keptText says what the journal of a search stopped by an I/O error
// holds, read back after the error (search.DoneEvent.Kept): the count of
// the search's own runs would include the one that could not be written.
func keptText(k *search.JournalCount, dir string) string {
	switch {
	case k == nil:
		return "the journal in " + dir + " was not read back"
	case k.Err != "":
		return fmt.Sprintf("the journal cannot be read back (%s)", k.Err)
	}
	s := fmt.Sprintf("%s %s kept in %s", plural(k.Results, "finished candidate"), isAre(k.Results), dir)
	if k.Torn {
		s += " (and a line cut short, which a resume drops)"
	}
	if k.Unreadable > 0 {
		s += fmt.Sprintf(" (and %s: add --skip-bad-lines to the resume)", plural(k.Unreadable, "unreadable line"))
	}
	return s
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
