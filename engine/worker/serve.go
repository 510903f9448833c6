package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"cgtune/engine"
)

// Serve answers requests from in on out with eng until quit, EOF or ctx
// ends. It sends hello first.
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
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if err := ctx.Err(); err != nil {
			return err
		}
		var req Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			if err := send(Reply{Type: TypeError, Error: "bad request: " + err.Error()}); err != nil {
				return err
			}
			continue
		}
		if req.V != Version {
			if err := send(Reply{Type: TypeError, ID: req.ID, Error: fmt.Sprintf("protocol version %d, this worker speaks %d", req.V, Version)}); err != nil {
				return err
			}
			continue
		}
		switch req.Type {
		case TypeQuit:
			return nil
		case TypePing:
			if err := send(Reply{Type: TypePong, ID: req.ID}); err != nil {
				return err
			}
		case TypeRun:
			if req.Spec == nil || req.Candidate == nil {
				if err := send(Reply{Type: TypeError, ID: req.ID, Error: "run needs spec and candidate"}); err != nil {
					return err
				}
				continue
			}
			w, err := req.Spec.Build()
			if err != nil {
				if err := send(Reply{Type: TypeError, ID: req.ID, Error: err.Error()}); err != nil {
					return err
				}
				continue
			}
			var opts engine.RunOptions
			if req.Opts != nil {
				opts = *req.Opts
			}
			res := eng.Run(ctx, w, *req.Candidate, opts, func(s engine.StepSample) {
				send(Reply{Type: TypeSample, ID: req.ID, Sample: &s})
			})
			if err := send(Reply{Type: TypeResult, ID: req.ID, Result: &res}); err != nil {
				return err
			}
		default:
			if err := send(Reply{Type: TypeError, ID: req.ID, Error: fmt.Sprintf("unknown request type %q (allowed: run, ping, quit)", req.Type)}); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}
