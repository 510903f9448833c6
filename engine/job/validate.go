package job

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	e := cfg.Engine
	if e == nil {
		return Validation{}, errors.New("validate: no job engine")
	}
	if len(cfg.Targets) == 0 {
		return Validation{}, errors.New("validate: nothing to validate")
	}
	var mu sync.Mutex
	send := func(ev ValidateEvent) {
		if emit != nil {
			mu.Lock()
			defer mu.Unlock()
			emit(ev)
		}
	}
	prior, jf, err := openValidationJournal(e.cfg.Dir, cfg.Targets, cfg.Resume)
	if err != nil {
		return Validation{}, err
	}
	defer jf.Close()

	results := make([]engine.Result, len(cfg.Targets))
	have := make([]bool, len(cfg.Targets))
	done := 0
	for i, t := range cfg.Targets {
		if r, ok := prior[t.Candidate.Key()]; ok {
			results[i], have[i] = r, true
			done++
			send(JobDone{Result: r, Resumed: true, Done: done, Total: len(cfg.Targets)})
		}
	}
	par := max(1, cfg.Parallel)
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var jerr error
	for i, t := range cfg.Targets {
		if have[i] {
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
			r := e.RunJob(ctx, t.Candidate, 0, func(u Update) { send(JobEvent{Update: u}) })
			if ctx.Err() != nil && r.ErrKind == engine.FailureCancel {
				return // cancelled by the interruption: runs again on resume
			}
			mu.Lock()
			results[i], have[i] = r, true
			done++
			n := done
			if err := jf.add(validationLine{Type: "result", Key: t.Candidate.Key(), Result: &r}); err != nil && jerr == nil {
				jerr = err
			}
			mu.Unlock()
			send(JobDone{Result: r, Done: n, Total: len(cfg.Targets)})
		}()
	}
	wg.Wait()
	v := Validation{Source: cfg.Source, Launcher: e.cfg.Launcher.Name(), Iters: e.cfg.Iters,
		Interrupted: ctx.Err() != nil, Finished: time.Now().UTC()}
	var got []Target
	var res []engine.Result
	for i, t := range cfg.Targets {
		if have[i] {
			got = append(got, t)
			res = append(res, results[i])
		}
	}
	v.Rows = Compare(got, res)
	if jerr != nil {
		return v, jerr
	}
	if !v.Interrupted {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return v, err
		}
		if err := fileio.WriteFileAtomic(filepath.Join(e.cfg.Dir, ValidationFile), append(b, '\n'), 0o644); err != nil {
			return v, err
		}
	}
	return v, nil
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

// openValidationJournal starts dir's journal, or with resume reads it
// (the targets must be the same) and returns the finished results by key.
func openValidationJournal(dir string, targets []Target, resume bool) (map[string]engine.Result, *validationJournal, error) {
	path := filepath.Join(dir, ValidationJournal)
	keys := func(ts []Target) []string {
		var k []string
		for _, t := range ts {
			k = append(k, t.Candidate.Key())
		}
		slices.Sort(k)
		return k
	}
	data, err := os.ReadFile(path)
	switch {
	case err == nil && !resume:
		return nil, nil, fmt.Errorf("%s already holds a validation; continue it with --resume or choose another folder", dir)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, nil, err
	case err != nil && resume:
		return nil, nil, fmt.Errorf("%s holds no validation to resume (no %s)", dir, ValidationJournal)
	}
	prior := map[string]engine.Result{}
	if resume {
		lr := fileio.NewLineReader(bytes.NewReader(data), path, 16<<20)
		first := true
		for {
			b, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, nil, err
			}
			var l validationLine
			if err := json.Unmarshal(b, &l); err != nil {
				break // a torn last line: what follows it is lost anyway
			}
			if first {
				if l.Type != "header" {
					return nil, nil, fmt.Errorf("%s: the first line is not a validation header", path)
				}
				if !slices.Equal(keys(l.Targets), keys(targets)) {
					return nil, nil, fmt.Errorf("cannot resume %s: it validates %v, not %v", dir, keys(l.Targets), keys(targets))
				}
				first = false
				continue
			}
			if l.Type == "result" && l.Result != nil {
				prior[l.Key] = *l.Result
			}
		}
		// Drop a torn last line so that the next result starts a line.
		if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
			if err := os.Truncate(path, int64(i+1)); err != nil {
				return nil, nil, err
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	j := &validationJournal{f: f}
	if !resume {
		if err := j.add(validationLine{Type: "header", Targets: targets}); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	return prior, j, nil
}

// ReadValidation reads the validation.json in dir.
func ReadValidation(dir string) (Validation, error) {
	var v Validation
	b, err := os.ReadFile(filepath.Join(dir, ValidationFile))
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("%s: %v", filepath.Join(dir, ValidationFile), err)
	}
	return v, nil
}
