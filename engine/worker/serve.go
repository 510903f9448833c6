package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"cgtune/engine"
	"cgtune/internal/fileio"
	"cgtune/presets"
)

// StopGrace is how long Serve waits, once ctx ends, for the running
// candidate to notice (the engine gets the cancelled context) before it
// returns anyway: a GPU step can take tens of seconds, and a worker told to
// stop (SIGTERM) must be gone within a second. The caller exits the
// process; the driver frees what the abandoned run held.
const StopGrace = 500 * time.Millisecond

// MaxSteps bounds the eager and measured steps a run request may ask for.
const MaxSteps = 100_000

// Serve answers requests from in on out with eng until quit, EOF or ctx
// ends (it then returns ctx's error within StopGrace, whether it was
// waiting for a request or running one). It sends hello first. Requests
// are checked before anything runs: a candidate with an unknown impl or
// scope, a warm-up out of range or a workload past the size bounds is
// answered with an error, never run.
func Serve(ctx context.Context, eng engine.Engine, in io.Reader, out io.Writer) error {
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	send := func(r Reply) error {
		r.V = Version
		mu.Lock()
		defer mu.Unlock()
		return enc.Encode(r)
	}
	dev := eng.Device()
	if err := send(Reply{Type: TypeHello, Engine: eng.Name(), Device: &dev, PID: os.Getpid()}); err != nil {
		return err
	}
	lines, readErr := readLines(in)
	for {
		var line request
		select {
		case <-ctx.Done():
			return ctx.Err()
		case l, ok := <-lines:
			if !ok {
				return <-readErr
			}
			line = l
		}
		if line.tooLong != nil {
			// The line was not kept: refuse it and read on.
			if err := send(Reply{Type: TypeError, Error: "bad request: " + line.tooLong.Error()}); err != nil {
				return err
			}
			continue
		}
		quit, err := serveOne(ctx, eng, line.b, send)
		if err != nil || quit {
			return err
		}
	}
}

// request is one request line, or the line too long to be read.
type request struct {
	b       []byte
	tooLong *fileio.LongLineError
}

// readLines reads requests on a goroutine of their own, so that Serve can
// stop while no request is coming. The channel closes at EOF or a read
// error, which then arrives on the error channel (nil at EOF).
func readLines(in io.Reader) (<-chan request, <-chan error) {
	lines := make(chan request)
	errc := make(chan error, 1)
	go func() {
		defer close(lines)
		lr := fileio.NewLineReader(in, "stdin", MaxLineBytes)
		for {
			b, err := lr.Next()
			var long *fileio.LongLineError
			switch {
			case errors.As(err, &long):
				lines <- request{tooLong: long}
			case errors.Is(err, io.EOF):
				errc <- nil
				return
			case err != nil:
				errc <- err
				return
			default:
				lines <- request{b: append([]byte(nil), b...)}
			}
		}
	}()
	return lines, errc
}

// serveOne answers one request line; quit is true for a quit request.
func serveOne(ctx context.Context, eng engine.Engine, line []byte, send func(Reply) error) (quit bool, err error) {
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return false, send(Reply{Type: TypeError, Error: "bad request: " + err.Error()})
	}
	if req.V != Version {
		return false, send(Reply{Type: TypeError, ID: req.ID, Error: fmt.Sprintf("protocol version %d, this worker speaks %d", req.V, Version)})
	}
	switch req.Type {
	case TypeQuit:
		return true, nil
	case TypePing:
		return false, send(Reply{Type: TypePong, ID: req.ID})
	case TypeRun:
		return false, serveRun(ctx, eng, req, send)
	}
	return false, send(Reply{Type: TypeError, ID: req.ID, Error: fmt.Sprintf("unknown request type %q (allowed: run, ping, quit)", req.Type)})
}

// checkRun validates a run request the way the search validates its own
// candidates: the worker is a process boundary, and what comes over it is
// input like any file.
func checkRun(req Request) error {
	if req.Spec == nil || req.Candidate == nil {
		return fmt.Errorf("run needs spec and candidate")
	}
	if err := req.Candidate.Validate(); err != nil {
		return fmt.Errorf("invalid candidate: %w", err)
	}
	if o := req.Opts; o != nil {
		for _, f := range []struct {
			name string
			v    int
			max  int
		}{{"measured_steps", o.MeasuredSteps, MaxSteps}, {"eager_steps", o.EagerSteps, MaxSteps}, {"layers", o.Layers, presets.MaxLayers}} {
			if f.v < 0 || f.v > f.max {
				return fmt.Errorf("invalid run options: %s %d is out of range (allowed: 0 for the default, up to %d)", f.name, f.v, f.max)
			}
		}
	}
	return nil
}

func serveRun(ctx context.Context, eng engine.Engine, req Request, send func(Reply) error) error {
	if err := checkRun(req); err != nil {
		return send(Reply{Type: TypeError, ID: req.ID, Error: err.Error()})
	}
	w, err := req.Spec.BuildContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return send(Reply{Type: TypeError, ID: req.ID, Error: err.Error()})
	}
	var opts engine.RunOptions
	if req.Opts != nil {
		opts = *req.Opts
	}
	done := make(chan engine.Result, 1)
	go func() {
		done <- eng.Run(ctx, w, *req.Candidate, opts, func(s engine.StepSample) {
			send(Reply{Type: TypeSample, ID: req.ID, Sample: &s})
		})
	}()
	var res engine.Result
	select {
	case res = <-done:
	case <-ctx.Done():
		// The engine has the cancelled context; give it a moment to stop
		// cleanly, then leave it: the process is about to end.
		select {
		case <-done:
		case <-time.After(StopGrace):
		}
		return ctx.Err()
	}
	return send(Reply{Type: TypeResult, ID: req.ID, Result: &res})
}
