package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"cgtune/engine"
	"cgtune/stepmodel"
)

// Run states, as RunInfo.State says them.
const (
	RunComplete    = "complete"
	RunInterrupted = "interrupted"
	RunRunning     = "running"     // another process holds its lock
	RunNotStarted  = "not started" // no journal yet (the search never began)
)

// RunFile is the file a command keeps in a run folder beside the journal
// (how the search was run, for --resume) and how to tell that a file of
// that name is the command's own.
type RunFile struct {
	Name string
	Ours func(path string) bool
}

// RunInfo describes a run folder for listing and showing it.
type RunInfo struct {
	Dir     string    `json:"dir"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	State   string    `json:"state"`
	// What was searched (zero for a search that never started).
	Fingerprint *Fingerprint `json:"search,omitempty"`
	// Results counts the configurations the journal holds a result of.
	Results int    `json:"results"`
	Bytes   int64  `json:"bytes"`
	PID     int    `json:"pid,omitempty"` // the process holding a running search
	Problem string `json:"problem,omitempty"`
	// Ranking is the journal's results ranked as the search ranks them
	// (ReadRun only; nil from ListRun's summaries).
	Ranking []Ranked `json:"ranking,omitempty"`
	Winner  *Ranked  `json:"winner,omitempty"`
	// WhatIf are the journal's what-if rows, ranked on their own.
	WhatIf []Ranked `json:"what_if,omitempty"`
	// Reference is the search's reference and how it did (ReadRun only).
	Reference *Reference `json:"reference,omitempty"`
	// FromJournal: the search kept no ranking (RankingFile), so the
	// ranking is of the journal's runs alone.
	FromJournal bool `json:"ranked_from_journal,omitempty"`
}

// RunView is how the search that wrote a run folder ranked its results
// beyond what its journal's fingerprint holds: its tie band, job length
// and the what-if changes it accepted (the command's run file keeps them).
type RunView struct {
	Tie        float64
	TrainIters int
	Accept     []string
}

// ReadRun describes run folder dir with its results ranked as the search
// ranked them: its RankingFile where the search kept one, else the
// journal's runs ranked as the search ranks (rank). A folder that is no
// cgtune run (no journal header, no run file) is an error.
func ReadRun(dir string, runFile RunFile, v RunView) (RunInfo, error) {
	info, lines, err := readRunInfo(dir, runFile)
	if err != nil || info.Fingerprint == nil {
		return info, err
	}
	if d, ok := readRanking(dir); ok {
		info.Ranking, info.WhatIf, info.Winner, info.Reference = d.Ranking, d.WhatIf, d.Winner, d.Reference
		return info, nil
	}
	var es []entry
	for _, r := range latestResults(lines) {
		es = append(es, entry{res: r})
	}
	info.FromJournal = true
	if err := info.rank(es, info.Fingerprint.config(v)); err != nil {
		return info, fmt.Errorf("%s: ranking its results: %w", dir, err)
	}
	return info, nil
}

// rank ranks es as the search of cfg does when it finishes (runner.rank),
// with its reference and the memory anchor on it; the journal holds the
// runs only, so the warm-ups a search derives from them are not rows here.
func (info *RunInfo) rank(es []entry, cfg Config) error {
	cfg, w, err := cfg.withWorkload(context.Background())
	if err != nil {
		return err
	}
	plan, err := Plan(cfg)
	if err != nil {
		return err
	}
	r := &runner{cfg: cfg, w: w, ws: newWorkloads(cfg, w), plan: plan}
	ref := r.takeReference()
	info.Ranking, info.WhatIf = r.rank(es, r.rankOptions(), &ref)
	info.Winner, info.Reference = Winner(info.Ranking), &ref
	return nil
}

// config is the search the fingerprint records, ranked as v says, against
// the memory of the job's GPU type (setup.Workload's).
func (f Fingerprint) config(v RunView) Config {
	gpuMiB := stepmodel.JobGPUMiB(f.Layout, 0)
	return Config{Model: f.Model, Layout: f.Layout, MBridge: f.MBridge, Sets: f.Sets, Space: f.Space, Reference: f.Reference,
		Strategy: f.Strategy, Costs: f.Costs, Workload: f.Workload, Measured: f.Measured, WhatIf: f.WhatIf,
		Tie: v.Tie, TrainIters: v.TrainIters, Accept: v.Accept, JobGPUMemoryMiB: gpuMiB}
}

// SummarizeRun is ReadRun without the ranking.
func SummarizeRun(dir string, runFile RunFile) (RunInfo, error) {
	info, _, err := readRunInfo(dir, runFile)
	return info, err
}

func readRunInfo(dir string, runFile RunFile) (RunInfo, []journalLine, error) {
	info := RunInfo{Dir: dir, Name: filepath.Base(dir)}
	st, err := os.Lstat(dir)
	if err != nil {
		return info, nil, err
	}
	if !st.IsDir() {
		return info, nil, fmt.Errorf("%s is not a folder", dir)
	}
	info.Created, info.Bytes = st.ModTime(), folderBytes(dir)
	var pj parsedJournal
	_, err = os.Lstat(filepath.Join(dir, JournalFile))
	if err == nil {
		pj, err = readJournal(dir, filepath.Join(dir, JournalFile), nil)
	}
	switch {
	case err == nil:
		fp := pj.fp
		info.Fingerprint = &fp
		info.State = RunInterrupted
		var first journalLine
		json.Unmarshal(pj.good[0], &first)
		if t, err := time.Parse(time.RFC3339, first.Created); err == nil {
			info.Created = t
		}
		if _, err := os.Lstat(filepath.Join(dir, FinishedFile)); err == nil {
			info.State = RunComplete
		}
		info.Results = len(latestResults(pj.results))
		if len(pj.bad) > 0 {
			info.Problem = fmt.Sprintf("%d unreadable journal lines", len(pj.bad))
		}
	case errors.Is(err, fs.ErrNotExist):
		// A search that never began leaves its run file alone.
		if !runFile.Ours(filepath.Join(dir, runFile.Name)) {
			return info, nil, fmt.Errorf("%s is not a cgtune run folder (no %s, no %s of cgtune's)", dir, JournalFile, runFile.Name)
		}
		info.State = RunNotStarted
	default:
		return info, nil, fmt.Errorf("%s is not a cgtune run folder: %w", dir, err)
	}
	if pid, held := runHeld(dir); held {
		info.State, info.PID = RunRunning, pid
	}
	return info, pj.results, nil
}

// runHeld reports whether another process holds dir's lock (and its pid).
// Only an existing lock file is tried: a look never creates one.
func runHeld(dir string) (int, bool) {
	if st, err := os.Lstat(filepath.Join(dir, LockFile)); err != nil || !st.Mode().IsRegular() {
		return 0, false
	}
	l, err := LockRunDir(dir)
	if err == nil {
		l.Release()
		return 0, false
	}
	var inUse *RunInUseError
	if errors.As(err, &inUse) {
		return inUse.PID, true
	}
	return 0, false
}

// latestResults are the results of a journal's lines, one per
// configuration (its latest round's), in the order they first finished.
func latestResults(lines []journalLine) []engine.Result {
	latest := map[string]journalLine{}
	var order []string
	for _, l := range lines {
		if old, ok := latest[l.Key]; !ok {
			order = append(order, l.Key)
		} else if old.Round > l.Round {
			continue
		}
		latest[l.Key] = l
	}
	results := make([]engine.Result, 0, len(order))
	for _, k := range order {
		results = append(results, *latest[k].Result)
	}
	return results
}

// folderBytes is the size of the regular files under dir.
func folderBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// RemoveRun deletes run folder dir, which must be a cgtune run (a journal
// with its header, or the run file of one that never began) holding only
// what cgtune keeps in one: the files CheckRunDir knows (extra: the
// caller's), a validation folder CheckValidationDir accepts. The folder is
// locked first, so a running search is never removed under it.
func RemoveRun(dir string, runFile RunFile, extra ...string) error {
	if _, err := SummarizeRun(dir, runFile); err != nil {
		return err
	}
	if err := checkRunContents(dir, runFile, extra); err != nil {
		return err
	}
	l, err := LockRunDir(dir)
	if err != nil {
		return err
	}
	// Checked again under the lock: a search may have begun in between.
	if err := checkRunContents(dir, runFile, extra); err != nil {
		l.Release()
		return err
	}
	l.Release()
	return os.RemoveAll(dir)
}

// validateFolder is where cgtune validate RUN keeps its jobs in the run
// folder (JobValidationForRun).
const validateFolder = "validate"

// checkRunContents refuses a run folder holding anything cgtune does not
// put there.
func checkRunContents(dir string, runFile RunFile, extra []string) error {
	if p := filepath.Join(dir, runFile.Name); !runFile.Ours(p) {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s is not cgtune's %s; cgtune removes only what it made", p, runFile.Name)
		}
	}
	known := append(slices.Clone(runFolderFiles), append(extra, runFile.Name)...)
	err := checkOwnFolder(dir, "run", func(e fs.DirEntry) bool {
		return (e.Type().IsRegular() && slices.Contains(known, e.Name())) || (e.IsDir() && e.Name() == validateFolder)
	}, known)
	if err != nil {
		return fmt.Errorf("%w; cgtune removes only what it made: remove it by hand if you mean to", err)
	}
	v := filepath.Join(dir, validateFolder)
	if st, err := os.Lstat(v); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is not a cgtune validation folder; cgtune removes only what it made", v)
		}
		if err := CheckValidationDir(v); err != nil {
			return fmt.Errorf("%w; cgtune removes only what it made: remove it by hand if you mean to", err)
		}
	}
	return nil
}
