package job

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"cgtune/engine"
	"cgtune/internal/fileio"
	"cgtune/presets"
)

// ValidationJournal is the file in a validation folder that holds each
// finished job's Result, so that a resumed validation does not run it again.
const ValidationJournal = "validate.jsonl"

// ValidationFile is the validation's outcome (Validation as JSON).
const ValidationFile = "validation.json"

// Target is a candidate to validate and what cgtune predicted for it.
type Target struct {
	Candidate presets.Candidate `json:"candidate"`
	// Predicted is the search's result for the candidate (nil: none).
	Predicted *engine.Result `json:"predicted,omitempty"`
}

// ValidateConfig is one validation: the targets (the eager baseline among
// them) run as jobs on Engine, at most Parallel at a time.
type ValidateConfig struct {
	Engine   *Engine
	Targets  []Target
	Parallel int // jobs queued or running at once (default 1)
	// Resume takes the results the folder's journal holds and re-attaches
	// to jobs still running; without it, a folder that holds a validation
	// is an error.
	Resume bool
	// Source says where the targets came from (a run folder, a preset).
	Source string
	// SkipBadLines lets a resume set aside the unreadable lines of the
	// folder's journal (to validate-unreadable.txt) and keep the rest;
	// without it they are a *fileio.BadLinesError.
	SkipBadLines bool
	// Notes go into the outcome as they are (what the targets' source
	// says about them).
	Notes []string
}

// ValidateEvent is what a validation reports while it runs.
type ValidateEvent interface{ isValidateEvent() }

// JobEvent: a job changed state or wrote log lines.
type JobEvent struct {
	Update Update `json:"update"`
}

// JobDone: a job ended (Resumed: its result came from the journal).
type JobDone struct {
	Result  engine.Result `json:"result"`
	Resumed bool          `json:"resumed"`
	Done    int           `json:"done"`
	Total   int           `json:"total"`
}

func (JobEvent) isValidateEvent() {}
func (JobDone) isValidateEvent()  {}

// Row is one validated candidate: what the job did against the prediction.
type Row struct {
	Rank      int               `json:"rank"` // by real step time; 0 for a failed job
	Candidate presets.Candidate `json:"candidate"`
	Real      engine.Result     `json:"real"`
	// Predicted step time and speed-up from the search (0: no prediction),
	// and the source of that prediction (measured, estimated).
	PredictedMs      float64       `json:"predicted_ms,omitempty"`
	PredictedSpeedup float64       `json:"predicted_speedup,omitempty"`
	PredictedSource  engine.Source `json:"predicted_source,omitempty"`
	// RealSpeedup is the eager job's step time over this job's.
	RealSpeedup float64 `json:"real_speedup,omitempty"`
	// ErrorPct is (predicted − real) / real × 100.
	ErrorPct float64 `json:"error_pct,omitempty"`
	HasError bool    `json:"has_error"`
}

// Validation is the outcome: rows ranked by the real step time, failed
// jobs last.
type Validation struct {
	Source      string    `json:"source"`
	Launcher    string    `json:"launcher"`
	Iters       int       `json:"iters"`
	Rows        []Row     `json:"rows"`
	Interrupted bool      `json:"interrupted"`
	Finished    time.Time `json:"finished"`
	Notes       []string  `json:"notes,omitempty"`
}

// Winner is the fastest row that succeeded, or nil.
func (v Validation) Winner() *Row {
	for i := range v.Rows {
		if !v.Rows[i].Real.Failed() {
			return &v.Rows[i]
		}
	}
	return nil
}

// Eager is the eager baseline's row, or nil.
func (v Validation) Eager() *Row {
	for i := range v.Rows {
		if !v.Rows[i].Candidate.Graphed() {
			return &v.Rows[i]
		}
	}
	return nil
}

type validationLine struct {
	Type    string         `json:"type"` // header | result
	Targets []Target       `json:"targets,omitempty"`
	Key     string         `json:"key,omitempty"`
	Result  *engine.Result `json:"result,omitempty"`
}

// Validate runs every target as a job and compares what the jobs did with
// the predictions. emit (may be nil) is called from one goroutine at a
// time. A cancelled ctx cancels the queued and running jobs and returns
// what finished with Interrupted set; that is not an error.
func Validate(ctx context.Context, cfg ValidateConfig, emit func(ValidateEvent)) (Validation, error) {
	if cfg.Engine == nil {
		return Validation{}, errors.New("validate: no job engine")
	}
	if len(cfg.Targets) == 0 {
		return Validation{}, errors.New("validate: nothing to validate")
	}
	prior, jf, err := openValidationJournalFor(ctx, cfg.Engine.cfg.Dir, cfg.Targets, cfg.Resume, cfg.SkipBadLines)
	if err != nil {
		return Validation{}, err
	}
	defer jf.Close()
	r := &validationRun{cfg: cfg, jf: jf, emit: emit,
		results: make([]engine.Result, len(cfg.Targets)), have: make([]bool, len(cfg.Targets))}
	for i, t := range cfg.Targets {
		if res, ok := prior[t.Candidate.Key()]; ok {
			r.results[i], r.have[i] = res, true
			r.done++
			r.send(JobDone{Result: res, Resumed: true, Done: r.done, Total: len(cfg.Targets)})
		}
	}
	r.runJobs(ctx)
	v := r.validation(ctx.Err() != nil)
	if r.jerr != nil {
		return v, r.jerr
	}
	if !v.Interrupted {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return v, err
		}
		if err := fileio.WriteOwnFileAtomic(filepath.Join(cfg.Engine.cfg.Dir, ValidationFile), append(b, '\n'), 0o644); err != nil {
			return v, err
		}
	}
	return v, nil
}

// validationRun is one Validate: the targets' results so far (have marks
// those there are), journalled as they come; mu guards them and emit.
type validationRun struct {
	cfg     ValidateConfig
	jf      *validationJournal
	emit    func(ValidateEvent)
	mu      sync.Mutex
	results []engine.Result
	have    []bool
	done    int
	jerr    error // the first journal write that failed
}

// send hands ev to emit, one goroutine at a time.
func (r *validationRun) send(ev ValidateEvent) {
	if r.emit != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.emit(ev)
	}
}

// runJobs runs the targets without a result, cfg.Parallel at a time,
// until they are done or ctx is cancelled.
func (r *validationRun) runJobs(ctx context.Context) {
	sem := make(chan struct{}, max(1, r.cfg.Parallel))
	var wg sync.WaitGroup
	for i, t := range r.cfg.Targets {
		if r.have[i] {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res := r.cfg.Engine.RunJob(ctx, t.Candidate, 0, func(u Update) { r.send(JobEvent{Update: u}) })
			if ctx.Err() != nil && res.ErrKind == engine.FailureCancel {
				return // cancelled by the interruption: runs again on resume
			}
			r.record(i, res)
		}()
	}
	wg.Wait()
}

// record keeps target i's result and journals it.
func (r *validationRun) record(i int, res engine.Result) {
	t := r.cfg.Targets[i]
	r.mu.Lock()
	r.results[i], r.have[i] = res, true
	r.done++
	n := r.done
	if err := r.jf.add(validationLine{Type: "result", Key: t.Candidate.Key(), Result: &res}); err != nil && r.jerr == nil {
		r.jerr = err
	}
	r.mu.Unlock()
	r.send(JobDone{Result: res, Done: n, Total: len(r.cfg.Targets)})
}

// validation compares the targets that have a result.
func (r *validationRun) validation(interrupted bool) Validation {
	e := r.cfg.Engine
	v := Validation{Source: r.cfg.Source, Launcher: e.cfg.Launcher.Name(), Iters: e.cfg.Iters,
		Interrupted: interrupted, Finished: time.Now().UTC(), Notes: r.cfg.Notes}
	var got []Target
	var res []engine.Result
	for i, t := range r.cfg.Targets {
		if r.have[i] {
			got = append(got, t)
			res = append(res, r.results[i])
		}
	}
	v.Rows = Compare(got, res)
	return v
}

// Compare ranks the jobs' results by real step time and sets each row's
// prediction error and speed-ups against the eager job (the target
// without graphs).
func Compare(targets []Target, results []engine.Result) []Row {
	var eagerReal, eagerPred float64
	for i, t := range targets {
		if !t.Candidate.Graphed() {
			if !results[i].Failed() {
				eagerReal = results[i].Step.Median
			}
			if t.Predicted != nil && !t.Predicted.Failed() {
				eagerPred = t.Predicted.Step.Median
			}
		}
	}
	rows := make([]Row, len(targets))
	for i, t := range targets {
		r := Row{Candidate: t.Candidate, Real: results[i]}
		if p := t.Predicted; p != nil && !p.Failed() {
			r.PredictedMs, r.PredictedSource = p.Step.Median, p.Source
			switch {
			case eagerPred > 0 && p.Step.Median > 0:
				r.PredictedSpeedup = eagerPred / p.Step.Median
			case p.Speedup > 0:
				r.PredictedSpeedup = p.Speedup
			}
		}
		if !r.Real.Failed() {
			if eagerReal > 0 {
				r.RealSpeedup = eagerReal / r.Real.Step.Median
			}
			if r.PredictedMs > 0 {
				r.ErrorPct = (r.PredictedMs - r.Real.Step.Median) / r.Real.Step.Median * 100
				r.HasError = true
			}
		}
		rows[i] = r
	}
	slices.SortStableFunc(rows, func(a, b Row) int {
		fa, fb := a.Real.Failed(), b.Real.Failed()
		switch {
		case fa != fb:
			if fa {
				return 1
			}
			return -1
		case fa:
			return cmp.Compare(a.Candidate.Key(), b.Candidate.Key())
		}
		return cmp.Compare(a.Real.Step.Median, b.Real.Step.Median)
	})
	for i := range rows {
		if !rows[i].Real.Failed() {
			rows[i].Rank = i + 1
		}
	}
	return rows
}

// maxJournalBytes bounds what a validation journal or job ledger may hold
// when it is read back: a few KiB per job, so any real validation fits
// many times over, and /dev/zero or a huge file put there is an error.
const maxJournalBytes = 256 << 20

// maxValidationLine is the longest validation journal line read: a
// result with its samples and notes.
const maxValidationLine = 16 << 20

// validationJournal appends finished results to validate.jsonl.
type validationJournal struct{ f *os.File }

func (j *validationJournal) add(l validationLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return err
	}
	return j.f.Sync()
}

func (j *validationJournal) Close() error { return j.f.Close() }

// targetKeys are the sorted keys of ts.
func targetKeys(ts []Target) []string {
	var k []string
	for _, t := range ts {
		k = append(k, t.Candidate.Key())
	}
	slices.Sort(k)
	return k
}

// openValidationJournal starts dir's journal, or with resume reads it (the
// targets must be the same) and returns the finished results by key. It
// reads as the search reads its journal (fileio.ParseJournal): a torn last
// line is dropped; an unreadable line, or a result that is not of one of
// the targets, is a *fileio.BadLinesError unless skipBad sets it aside.
func openValidationJournal(dir string, targets []Target, resume bool) (map[string]engine.Result, *validationJournal, error) {
	return openValidationJournalFor(context.Background(), dir, targets, resume, false)
}

// openValidationJournalFor is openValidationJournal that gives up when ctx
// is done and, with skipBad, sets unreadable lines aside.
func openValidationJournalFor(ctx context.Context, dir string, targets []Target, resume, skipBad bool) (map[string]engine.Result, *validationJournal, error) {
	path := filepath.Join(dir, ValidationJournal)
	if !resume {
		if _, err := os.Lstat(path); err == nil {
			return nil, nil, fmt.Errorf("%s already holds a validation; continue it with --resume or choose another folder", dir)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, err
		}
		f, err := fileio.CreateExclusive(path, 0o644)
		if err != nil {
			return nil, nil, err
		}
		j := &validationJournal{f: f}
		if err := j.add(validationLine{Type: "header", Targets: targets}); err != nil {
			f.Close()
			return nil, nil, err
		}
		return map[string]engine.Result{}, j, nil
	}
	data, err := fileio.ReadFileContext(ctx, path, maxJournalBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("%s holds no validation to resume (no %s)", dir, ValidationJournal)
	}
	if err != nil {
		return nil, nil, err
	}
	prior, lines, err := parseValidationJournal(dir, path, data, targets)
	if err != nil {
		return nil, nil, err
	}
	if err := lines.BadLinesError(skipBad, len(prior)); err != nil {
		return nil, nil, err
	}
	f, err := fileio.OpenJournalAppend(lines)
	if err != nil {
		return nil, nil, err
	}
	return prior, &validationJournal{f: f}, nil
}

// parseValidationJournal reads a validation journal at path in dir for a
// validation of targets: its header must name the same targets, and each
// result must be one of them, filed under its own key.
func parseValidationJournal(dir, path string, data []byte, targets []Target) (map[string]engine.Result, fileio.JournalLines, error) {
	want := targetKeys(targets)
	prior := map[string]engine.Result{}
	header := false
	lines, err := fileio.ParseJournal(path, data, maxValidationLine, func(n int, raw []byte) error {
		var l validationLine
		jerr := json.Unmarshal(raw, &l)
		switch {
		case n == 1 && (jerr != nil || l.Type != "header"):
			return fileio.StopReading(fmt.Errorf("%s: the first line is not a validation header", path))
		case n == 1 && !slices.Equal(targetKeys(l.Targets), want):
			return fileio.StopReading(fmt.Errorf("cannot resume %s: it validates %v, not %v", dir, targetKeys(l.Targets), want))
		case n == 1:
			header = true
		case jerr != nil:
			return jerr
		case l.Type != "result":
			return fmt.Errorf("a line of type %q (allowed: result)", l.Type)
		case l.Result == nil:
			return errors.New("a result line without a result")
		case l.Result.Candidate.Key() != l.Key:
			return fmt.Errorf("a result for %s filed under key %q", l.Result.Candidate.Name(), l.Key)
		case !slices.Contains(want, l.Key):
			return fmt.Errorf("candidate %s is not one this validation runs", l.Key)
		default:
			prior[l.Key] = *l.Result
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, lines, err
	case !header:
		return nil, lines, fmt.Errorf("%s: the first line is not a validation header", path)
	}
	return prior, lines, nil
}

// ReadValidation reads the validation.json in dir.
func ReadValidation(dir string) (Validation, error) {
	var v Validation
	path := filepath.Join(dir, ValidationFile)
	b, err := fileio.ReadFileLimited(path, maxJournalBytes)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
