// Package job runs a candidate as the real training job: it renders the
// candidate's recipe overrides into the user's training command, launches
// it on this node (local) or through Slurm (slurm), follows its log, and
// turns the log's iteration and memory lines into step samples and a
// Result. It is the truest engine: what it reports is what the job did.
package job

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"cgtune/engine"
	"cgtune/internal/fileio"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/stepmodel"
)

// DefaultIters is how many iterations a validation job runs.
const DefaultIters = 30

// Config is how an Engine launches jobs.
type Config struct {
	Launcher Launcher
	Command  Template
	// Overrides gives a candidate's recipe overrides (recipe.WinnerOverrides
	// for the run's model and Megatron-Bridge release).
	Overrides func(presets.Candidate) recipe.Overrides
	// Dir holds one folder per job (script, log, YAML overrides) and the
	// ledger that lets a later cgtune re-attach.
	Dir string
	// Iters is the iterations each job runs ({iters}); default DefaultIters.
	// A job still running past them is stopped when the command has no
	// {iters} to end it itself.
	Iters int
	// Timeout bounds each job's running time (not its time in the queue);
	// 0: no bound beyond the scheduler's own.
	Timeout time.Duration
	// Poll is how often the job's state and log are read (default 1 s).
	Poll time.Duration
	// TailLines is how many log lines an Update's Tail keeps (default 12).
	TailLines int
	// SkipBadLines sets aside the unreadable lines of the ledger in Dir
	// (see OpenLedger) instead of refusing it.
	SkipBadLines bool
}

// Engine runs candidates as training jobs. It implements engine.Engine, so
// the search, its journal and the TUI can use it like any other engine;
// RunJob gives more (the job's state and log tail as it goes).
type Engine struct {
	cfg    Config
	ledger *Ledger
}

// New checks cfg and opens the ledger in cfg.Dir.
func New(cfg Config) (*Engine, error) {
	if cfg.Launcher == nil {
		return nil, errors.New("job engine: no launcher")
	}
	if cfg.Overrides == nil {
		return nil, errors.New("job engine: no overrides function")
	}
	if len(cfg.Command.segs) == 0 {
		return nil, errors.New("job engine: no command template (ParseCommand)")
	}
	if cfg.Dir == "" {
		return nil, errors.New("job engine: no folder for the jobs")
	}
	if cfg.Iters <= 0 {
		cfg.Iters = DefaultIters
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.TailLines <= 0 {
		cfg.TailLines = 12
	}
	l, err := openLedger(cfg.Dir, cfg.SkipBadLines)
	if err != nil {
		return nil, err
	}
	return &Engine{cfg: cfg, ledger: l}, nil
}

// Name is "job".
func (e *Engine) Name() string { return "job" }

// Device names the launcher.
func (e *Engine) Device() engine.DeviceInfo {
	return engine.DeviceInfo{Name: e.cfg.Launcher.Name() + " training job"}
}

// Close does nothing: every job ends (or is cancelled) inside Run.
func (e *Engine) Close() error { return nil }

// Run is engine.Engine's Run: the job runs the warm-up, the capture and
// opts.MeasuredSteps measured iterations (or Config.Iters, if more).
func (e *Engine) Run(ctx context.Context, _ *stepmodel.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	iters := max(e.cfg.Iters, FirstMeasured(c)+opts.WithDefaults().MeasuredSteps-1)
	return e.RunJob(ctx, c, iters, func(u Update) {
		if emit != nil {
			for _, s := range u.Samples {
				emit(s)
			}
		}
	})
}

// Update is what a running job reports: its state, new log lines, the
// iterations they held. The TUI shows State, JobID and Tail.
type Update struct {
	Candidate  presets.Candidate   `json:"candidate"`
	JobID      string              `json:"job_id"`               // "" until submitted
	State      string              `json:"state"`                // SUBMITTING, PENDING, RUNNING, COMPLETED, ...
	Reason     string              `json:"reason,omitempty"`     // Slurm's reason for the state (Priority, Resources, ...)
	Reattached bool                `json:"reattached,omitempty"` // followed a job an earlier cgtune launched
	Lines      []string            `json:"lines,omitempty"`      // new lines (the last maxUpdateLines when more came at once)
	Tail       []string            `json:"tail,omitempty"`       // the last Config.TailLines lines of the log
	Samples    []engine.StepSample `json:"samples,omitempty"`
	Output     string              `json:"output,omitempty"` // the log file
}

// JobName is the job's name for candidate c: cgtune-impl-scopes-wN, or
// cgtune-none for the eager baseline.
func JobName(c presets.Candidate) string {
	if !c.Graphed() {
		return "cgtune-none"
	}
	r := strings.NewReplacer("/", "-", ",", "+")
	return "cgtune-" + r.Replace(c.Key())
}

// Command renders the command for candidate c with its job folder dir,
// as RunJob would launch it: every value is shell-quoted. It writes the
// YAML overrides file when the template uses {yaml_file}.
func (e *Engine) Command(c presets.Candidate, dir string) (string, error) {
	return e.commandFor(c, dir, e.cfg.Iters)
}

// JobDir is the folder of candidate c's job.
func (e *Engine) JobDir(c presets.Candidate) string { return filepath.Join(e.cfg.Dir, JobName(c)) }

func renderCommand(t Template, o recipe.Overrides, dir string, vals map[string]string) (string, error) {
	dot := QuoteAll(o.DotlistTokens(false))
	mlm, err := o.MegatronLMFlagTokens(false)
	if err != nil {
		return "", err
	}
	rs, err := o.FlagTokens(false)
	if err != nil {
		return "", err
	}
	vals[PhDotlist], vals[PhFlags], vals[PhRunScriptFlags] = dot, QuoteAll(mlm), QuoteAll(rs)
	vals[PhOverrides] = vals[t.Format]
	if t.Has(PhYAMLFile) {
		y, err := o.Render("yaml")
		if err != nil {
			return "", err
		}
		p := filepath.Join(dir, "overrides.yaml")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if err := fileio.WriteFileAtomic(p, y, 0o644); err != nil {
			return "", err
		}
		abs, _ := filepath.Abs(p)
		vals[PhYAMLFile] = Quote(abs)
	}
	return t.Expand(vals), nil
}

// RunJob launches candidate c for iters iterations (0: Config.Iters), or
// re-attaches to the job an earlier cgtune launched for it, follows it to
// its end and returns its Result. on (may be nil) gets the job's state and
// log as they change. A cancelled ctx cancels the job (scancel, or the
// local process group) and returns a Result with ErrKind cancelled.
func (e *Engine) RunJob(ctx context.Context, c presets.Candidate, iters int, on func(Update)) engine.Result {
	start := time.Now()
	if iters <= 0 {
		iters = e.cfg.Iters
	}
	if on == nil {
		on = func(Update) {}
	}
	f := &follower{e: e, c: c, iters: iters, on: on, tail: newTail(e.cfg.TailLines)}
	res := f.run(ctx)
	res.WallMs = float64(time.Since(start).Microseconds()) / 1000
	return res
}

// follower follows one job.
type follower struct {
	e     *Engine
	c     presets.Candidate
	iters int
	on    func(Update)
	tail  *tail

	job        Job
	info       engine.JobInfo
	reattached bool
	parser     Parser
	file       *os.File
}

func (f *follower) failed(kind engine.FailureKind, msg string) engine.Result {
	r := engine.Result{Candidate: f.c, Source: engine.SourceJob, Device: f.e.Device(), ErrKind: kind, Err: msg}
	if f.info.ID != "" {
		info := f.info
		r.Job = &info
	}
	return r
}

func (f *follower) update(st Status, lines []string, samples []engine.StepSample) {
	f.tail.add(lines)
	f.on(Update{Candidate: f.c, JobID: f.info.ID, State: st.State, Reason: st.Reason, Reattached: f.reattached,
		Lines: lines, Tail: f.tail.lines(), Samples: samples, Output: f.info.Output})
}

// start re-attaches to the candidate's open job in the ledger, or submits.
func (f *follower) start(ctx context.Context) error {
	e := f.e
	key := f.c.Key()
	dir := e.JobDir(f.c)
	cmd, err := e.commandFor(f.c, dir, f.iters)
	if err != nil {
		return err
	}
	f.info = engine.JobInfo{Launcher: e.cfg.Launcher.Name(), Nodes: e.cfg.Launcher.Nodes(), GPUs: e.cfg.Launcher.GPUs(), Command: cmd}
	if open, ok := e.ledger.Open(key); ok && open.Job.Launcher == e.cfg.Launcher.Name() {
		j, err := e.cfg.Launcher.Attach(ctx, open.Job)
		if err == nil {
			f.job, f.reattached = j, true
			f.info.ID, f.info.Output = j.Ref().ID, j.Ref().Output
			return nil
		}
		if !errors.Is(err, ErrNotAttachable) {
			return fmt.Errorf("re-attach to job %s: %w", open.Job.ID, err)
		}
		// Gone without a trace: close its entry and run the candidate again.
		e.ledger.Add(LedgerEntry{Key: key, Job: open.Job, Done: true, State: StateUnknown})
	}
	f.update(Status{State: StateSubmitting}, nil, nil)
	j, err := e.cfg.Launcher.Submit(ctx, Request{Name: JobName(f.c), Command: cmd, Dir: dir, Candidate: f.c.Name()})
	if err != nil {
		return err
	}
	f.job = j
	f.info.ID, f.info.Output = j.Ref().ID, j.Ref().Output
	if err := e.ledger.Add(LedgerEntry{Key: key, Job: j.Ref(), Submitted: time.Now().UTC()}); err != nil {
		j.Cancel(context.WithoutCancel(ctx))
		return fmt.Errorf("record job %s: %w", j.Ref().ID, err)
	}
	return nil
}

func (e *Engine) commandFor(c presets.Candidate, dir string, iters int) (string, error) {
	o := e.cfg.Overrides(c)
	vals := map[string]string{PhIters: strconv.Itoa(iters), PhCand: Quote(c.Name()), PhJobDir: Quote(dir)}
	return renderCommand(e.cfg.Command, o, dir, vals)
}

// run follows the job from submission to its Result.
func (f *follower) run(ctx context.Context) engine.Result {
	if ctx.Err() != nil {
		return f.failed(engine.FailureCancel, "cancelled before the job was submitted")
	}
	if err := f.start(ctx); err != nil {
		if ctx.Err() != nil {
			return f.failed(engine.FailureCancel, "cancelled while submitting: "+err.Error())
		}
		return f.failed(engine.FailureCrash, "launch: "+err.Error())
	}
	defer func() {
		if f.file != nil {
			f.file.Close()
		}
	}()
	st, stopped, why := f.follow(ctx)
	// Read what the job wrote last (a shared file system may show it late).
	f.drain(st)
	state := st.State
	if why != "" {
		state = why
	}
	f.e.ledger.Add(LedgerEntry{Key: f.c.Key(), Job: f.job.Ref(), Done: true, State: state})
	switch why {
	case string(engine.FailureCancel):
		return f.failed(engine.FailureCancel, fmt.Sprintf("cancelled: job %s stopped (%s)", f.info.ID, st.State))
	case string(engine.FailureTimeout):
		return f.failed(engine.FailureTimeout, fmt.Sprintf("job %s ran longer than %s and was cancelled", f.info.ID, f.e.cfg.Timeout))
	case "lost":
		return f.failed(engine.FailureCrash, fmt.Sprintf("lost track of job %s: %s", f.info.ID, st.Reason))
	}
	res := buildResult(f.c, f.parser.Report(), st, stopped, f.info)
	if f.reattached {
		res.Notes = append(res.Notes, fmt.Sprintf("re-attached to job %s launched by an earlier cgtune", f.info.ID))
	}
	return res
}

// follow polls the job until it ends. stopped: cgtune cancelled it after
// enough iterations; why: engine.FailureCancel (ctx), engine.FailureTimeout, or
// "lost" (the launcher stopped answering).
func (f *follower) follow(ctx context.Context) (st Status, stopped bool, why string) {
	poll := time.NewTicker(f.e.cfg.Poll)
	defer poll.Stop()
	var runningSince time.Time
	var errSince time.Time
	last := ""
	bg := context.WithoutCancel(ctx)
	for {
		s, err := f.job.Status(bg)
		switch {
		case err != nil:
			if errSince.IsZero() {
				errSince = time.Now()
			}
			if time.Since(errSince) > 5*time.Minute {
				f.job.Cancel(bg)
				return Status{State: StateUnknown, Reason: err.Error(), Done: true}, false, "lost"
			}
		default:
			errSince = time.Time{}
			st = s
		}
		if st.State == StateRunning && runningSince.IsZero() {
			runningSince = time.Now()
		}
		lines, samples, _ := f.read()
		if len(lines) > 0 || st.State != last {
			f.update(st, lastLines(lines), samples)
			last = st.State
		}
		if st.Done {
			return st, stopped, ""
		}
		if !stopped && !f.e.cfg.Command.Has(PhIters) && f.parser.lastIter >= f.iters {
			// The command does not end itself after {iters}: enough.
			stopped = true
			f.job.Cancel(bg)
			continue
		}
		if f.e.cfg.Timeout > 0 && !runningSince.IsZero() && time.Since(runningSince) > f.e.cfg.Timeout {
			return f.stop(bg), false, string(engine.FailureTimeout)
		}
		select {
		case <-ctx.Done():
			return f.stop(bg), false, string(engine.FailureCancel)
		case <-poll.C:
		}
	}
}

// stop cancels the job and waits (at most a minute) until it has ended.
func (f *follower) stop(ctx context.Context) Status {
	f.job.Cancel(ctx)
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := f.job.Status(ctx)
		if err == nil && st.Done {
			f.update(st, nil, nil)
			return st
		}
		if time.Now().After(deadline) {
			return Status{State: StateCancelled, Done: true}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readBudget is the most of the log one read takes in: the follow loop
// must get back to the job's state, the time-out and ctx however fast the
// log grows.
const readBudget = 64 << 20

// maxUpdateLines is the most new lines one Update carries (the last ones):
// a log of empty lines must not turn into millions of strings.
const maxUpdateLines = 4096

// read returns the complete lines the log gained since the last call (the
// last maxUpdateLines of them), parsed into samples; more says it stopped
// at readBudget with more of the log to read. Each byte is parsed once.
func (f *follower) read() (lines []string, samples []engine.StepSample, more bool) {
	if f.file == nil {
		fh, err := fileio.OpenFileLimited(f.info.Output, fileio.Unbounded) // a FIFO put there must not hang the follower
		if err != nil {
			return nil, nil, false // not created yet (the job is queued)
		}
		f.file = fh
	}
	buf := make([]byte, 64*1024)
	for took := 0; took < readBudget; {
		n, err := f.file.Read(buf)
		took += n
		f.parser.Feed(buf[:n], func(l LogLine) { lines, samples = f.took(l, lines, samples) })
		if err != nil || n == 0 {
			return lines, samples, false
		}
	}
	return lines, samples, true
}

// took adds a parsed line to what read returns.
func (f *follower) took(l LogLine, lines []string, samples []engine.StepSample) ([]string, []engine.StepSample) {
	text := l.Text
	if l.Cut > 0 {
		text = "…" + text
	}
	if len(lines) == 2*maxUpdateLines {
		lines = append(lines[:0], lines[maxUpdateLines:]...)
	}
	lines = append(lines, text)
	if l.IsIter {
		samples = append(samples, engine.StepSample{Candidate: f.c.Key(), Phase: Phase(f.c, l.Iter), Step: l.Iter.Iter, StepMs: l.Iter.Ms})
	}
	return lines, samples
}

// drain reads the log after the job ended until it stops growing for a
// moment (Slurm's output may arrive late on a shared file system), and
// takes a last line that has no newline.
func (f *follower) drain(st Status) {
	quiet := 0
	for polls := 0; polls < 20 && quiet < 2; {
		lines, samples, more := f.read()
		if len(lines) > 0 || more {
			f.update(st, lastLines(lines), samples)
			quiet = 0
			if !more {
				polls++
			}
			continue
		}
		polls++
		quiet++
		if f.file != nil && quiet < 2 {
			time.Sleep(min(f.e.cfg.Poll, 250*time.Millisecond))
		}
	}
	var lines []string
	var samples []engine.StepSample
	f.parser.End(func(l LogLine) { lines, samples = f.took(l, lines, samples) })
	if len(lines) > 0 {
		f.update(st, lines, samples)
	}
}

// lastLines is the last maxUpdateLines of lines.
func lastLines(lines []string) []string {
	if len(lines) > maxUpdateLines {
		return lines[len(lines)-maxUpdateLines:]
	}
	return lines
}

// tail keeps the last n lines.
type tail struct {
	n   int
	buf []string
}

func newTail(n int) *tail { return &tail{n: n} }

var ansiRe = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

func (t *tail) add(lines []string) {
	for _, l := range lines {
		t.buf = append(t.buf, ansiRe.ReplaceAllString(l, ""))
	}
	if len(t.buf) > t.n {
		t.buf = append([]string(nil), t.buf[len(t.buf)-t.n:]...)
	}
}

func (t *tail) lines() []string { return append([]string(nil), t.buf...) }
