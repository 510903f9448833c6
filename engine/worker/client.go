package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"cgtune/engine"
	"cgtune/internal/fileio"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// Command says how to start a worker process.
type Command struct {
	Path string
	Args []string
	Env  []string // added to the parent's environment
	// Log, when set, also receives everything the worker writes to stderr.
	Log io.Writer
}

// Client is the parent's end of one worker process. It implements
// engine.Engine, so the search drives local and remote engines alike.
type Client struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan Reply
	stderr *tailBuffer
	hello  Reply
	next   int
	dead   error
	// readErr is why the replies stopped (a line too long), set by the
	// reading goroutine before it closes lines.
	readErr error
	// Deadline is the longest one candidate may take; past it the worker
	// is killed and the candidate fails with engine.FailureTimeout. DeadlineFor, when
	// set, gives a per-candidate deadline instead.
	Deadline    time.Duration
	DeadlineFor func(w *stepmodel.Workload, c presets.Candidate) time.Duration
}

// tailBuffer keeps the last bytes of the worker's stderr for error reports.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// Start starts a worker and waits (up to startTimeout) for its hello. A
// cancelled ctx ends the wait at once and kills the worker: a framework's
// imports can take minutes, and Ctrl-C must not wait for them.
func Start(ctx context.Context, c Command, startTimeout time.Duration) (*Client, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = append(cmd.Environ(), c.Env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cl := &Client{cmd: cmd, stdin: stdin, lines: make(chan Reply, 256), stderr: &tailBuffer{}, Deadline: 10 * time.Minute}
	cmd.Stderr = cl.stderr
	if c.Log != nil {
		cmd.Stderr = io.MultiWriter(cl.stderr, c.Log)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go cl.read(stdout)
	select {
	case r, ok := <-cl.lines:
		if !ok {
			cmd.Wait()
			return nil, fmt.Errorf("worker exited before it was ready: %s", cl.exitReason())
		}
		if r.Type != TypeHello || r.V != Version {
			cl.Kill()
			return nil, fmt.Errorf("worker spoke %q version %d first, want hello version %d", r.Type, r.V, Version)
		}
		cl.hello = r
		return cl, nil
	case <-time.After(startTimeout):
		cl.Kill()
		return nil, fmt.Errorf("worker did not say hello within %s", startTimeout)
	case <-ctx.Done():
		cl.Kill()
		return nil, fmt.Errorf("worker start stopped: %w", context.Cause(ctx))
	}
}

// read relays the worker's replies. A reply line too long to read (a
// broken worker) kills the worker: the reply it carried is lost, and the
// candidate fails at once, naming the line, instead of at its deadline.
func (c *Client) read(stdout io.Reader) {
	defer close(c.lines)
	lr := fileio.NewLineReader(stdout, fmt.Sprintf("worker %d stdout", c.cmd.Process.Pid), MaxLineBytes)
	for {
		b, err := lr.Next()
		var long *fileio.LongLineError
		switch {
		case errors.As(err, &long):
			if c.readErr == nil {
				c.readErr = long
				c.cmd.Process.Kill()
			}
			continue
		case err != nil:
			return
		}
		var r Reply
		if json.Unmarshal(b, &r) == nil {
			c.lines <- r
		}
	}
}

func (c *Client) exitReason() string {
	if c.readErr != nil {
		return c.readErr.Error()
	}
	msg := c.stderr.lastLine()
	if c.cmd.ProcessState != nil {
		if msg != "" {
			return c.cmd.ProcessState.String() + ": " + msg
		}
		return c.cmd.ProcessState.String()
	}
	return msg
}

// Name is the worker's engine name.
func (c *Client) Name() string { return c.hello.Engine }

// Hello is what the worker said when it started.
func (c *Client) Hello() Reply { return c.hello }

// Device is the worker's GPU.
func (c *Client) Device() engine.DeviceInfo {
	if c.hello.Device == nil {
		return engine.DeviceInfo{}
	}
	return *c.hello.Device
}

// PID is the worker's process id.
func (c *Client) PID() int { return c.cmd.Process.Pid }

// Dead reports why the worker is gone, or nil while it lives.
func (c *Client) Dead() error { return c.dead }

// Kill ends the worker at once.
func (c *Client) Kill() {
	if c.cmd.Process != nil {
		c.cmd.Process.Kill()
	}
	c.stdin.Close()
	for range c.lines {
	}
	c.cmd.Wait()
	if c.dead == nil {
		c.dead = errors.New("killed")
	}
}

// Close asks the worker to quit and waits for it.
func (c *Client) Close() error {
	if c.dead != nil {
		return nil
	}
	json.NewEncoder(c.stdin).Encode(Request{V: Version, Type: TypeQuit})
	c.stdin.Close()
	done := make(chan struct{})
	go func() {
		for range c.lines {
		}
		c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
	c.dead = errors.New("closed")
	return nil
}

// Run sends the candidate to the worker and relays its samples. A worker
// that dies, stops answering past the deadline, or is cancelled yields a
// failed result; the client is then dead and the caller starts another.
func (c *Client) Run(ctx context.Context, w *stepmodel.Workload, cand presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	res := engine.Result{Candidate: cand, Source: engine.SourceMeasured, Device: c.Device()}
	if c.dead != nil {
		res.Err, res.ErrKind = "worker is not running: "+c.dead.Error(), engine.FailureCrash
		return res
	}
	c.next++
	id := fmt.Sprintf("c%d", c.next)
	req := Request{V: Version, Type: TypeRun, ID: id, Spec: &w.Spec, Candidate: &cand, Opts: &opts}
	if err := json.NewEncoder(c.stdin).Encode(req); err != nil {
		c.Kill()
		c.dead = fmt.Errorf("worker stdin: %w", err)
		res.Err, res.ErrKind = "worker died: "+c.exitReason(), engine.FailureCrash
		return res
	}
	deadline := c.Deadline
	if c.DeadlineFor != nil {
		deadline = c.DeadlineFor(w, cand)
	}
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		select {
		case r, ok := <-c.lines:
			if !ok {
				c.cmd.Wait()
				c.dead = errors.New("exited")
				res.Err, res.ErrKind = "worker died during the candidate: "+c.exitReason(), engine.FailureCrash
				return res
			}
			if r.ID != id {
				continue
			}
			switch r.Type {
			case TypeSample:
				if emit != nil && r.Sample != nil {
					emit(*r.Sample)
				}
			case TypeResult:
				if r.Result != nil {
					return *r.Result
				}
			case TypeError:
				res.Err, res.ErrKind = r.Error, engine.FailureCUDA
				return res
			}
		case <-timer.C:
			c.Kill()
			c.dead = fmt.Errorf("killed after %s without a result", deadline)
			res.Err, res.ErrKind = fmt.Sprintf("worker gave no result within the %s deadline; killed", deadline.Round(time.Millisecond)), engine.FailureTimeout
			return res
		case <-ctx.Done():
			c.Kill()
			c.dead = ctx.Err()
			res.Err, res.ErrKind = ctx.Err().Error(), engine.FailureCancel
			return res
		}
	}
}

// Supervisor keeps one worker alive for one GPU: it starts a new one when
// the last died, so a crash costs one candidate.
type Supervisor struct {
	Cmd          Command
	StartTimeout time.Duration
	DeadlineFor  func(w *stepmodel.Workload, c presets.Candidate) time.Duration
	// BeforeStart runs before every worker start (e.g. to verify the
	// worker's files); an error fails the start.
	BeforeStart func() error
	cur         *Client
	Restarts    int
	name        string
	dev         engine.DeviceInfo
}

// NewSupervisor starts the first worker, so that a GPU that cannot be used
// is reported before the search starts.
func NewSupervisor(ctx context.Context, cmd Command, startTimeout time.Duration, deadline func(*stepmodel.Workload, presets.Candidate) time.Duration) (*Supervisor, error) {
	s := &Supervisor{Cmd: cmd, StartTimeout: startTimeout, DeadlineFor: deadline}
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts the first worker (a no-op while one lives).
func (s *Supervisor) Start(ctx context.Context) error { return s.ensure(ctx) }

func (s *Supervisor) ensure(ctx context.Context) error {
	if s.cur != nil && s.cur.Dead() == nil {
		return nil
	}
	if s.cur != nil {
		s.Restarts++
	}
	if s.BeforeStart != nil {
		if err := s.BeforeStart(); err != nil {
			s.cur = nil
			return err
		}
	}
	c, err := Start(ctx, s.Cmd, s.StartTimeout)
	if err != nil {
		s.cur = nil
		return err
	}
	c.DeadlineFor = s.DeadlineFor
	s.cur, s.name, s.dev = c, c.Name(), c.Device()
	return nil
}

// Name is the engine's name.
func (s *Supervisor) Name() string { return s.name }

// Device is the worker's GPU.
func (s *Supervisor) Device() engine.DeviceInfo { return s.dev }

// Run runs a candidate on a live worker, starting one if needed.
func (s *Supervisor) Run(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	if err := s.ensure(ctx); err != nil {
		kind := engine.FailureCrash
		if ctx.Err() != nil {
			kind = engine.FailureCancel
		}
		return engine.Result{Candidate: c, Source: engine.SourceMeasured, Device: s.dev, Err: "could not start a worker: " + err.Error(), ErrKind: kind}
	}
	return s.cur.Run(ctx, w, c, opts, emit)
}

// Close stops the worker.
func (s *Supervisor) Close() error {
	if s.cur != nil {
		return s.cur.Close()
	}
	return nil
}

// Supervisor is an engine.Engine: the search drives it like a local one.
var _ engine.Engine = (*Supervisor)(nil)

// Current is the live worker (nil between a death and the next Run).
func (s *Supervisor) Current() *Client { return s.cur }
