package search

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"cgtune/engine"
	"cgtune/internal/fileio"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/stepmodel"
)

// JournalFile is the name of the journal in a run folder.
const JournalFile = "journal.jsonl"

// UnreadableFile keeps, in a run folder, the journal lines a resume with
// SkipBadLines dropped from the journal: nothing is thrown away.
const UnreadableFile = "journal-unreadable.txt"

// journalVersion is the journal format's version.
const journalVersion = 1

// FinishedFile is the file a search writes in its run folder when it
// finishes (neither interrupted nor stopped by an error), and a resume
// removes before it appends anything: a folder without it holds a search
// that did not finish.
const FinishedFile = "finished.json"

// maxJournalBytes caps what a journal may hold when it is read back: a few
// KiB per finished run, so thousands of runs fit many times over, and a
// journal replaced by /dev/zero or a huge file is an error, not a hang.
const maxJournalBytes = 256 << 20

// Fingerprint is what makes two searches the same search: a journal is
// only resumed by a search with the same fingerprint, because its results
// would not be comparable otherwise. The budget and the job length are not
// part of it: they change which candidates run, not what one measures.
type Fingerprint struct {
	Model    presets.Model             `json:"model"`
	Layout   presets.Layout            `json:"layout"`
	MBridge  string                    `json:"mbridge"`
	Space    presets.Space             `json:"space"`
	Strategy string                    `json:"strategy"`
	Sets     map[string]string         `json:"sets,omitempty"`
	Workload stepmodel.WorkloadOptions `json:"workload"`
	Measured engine.RunOptions         `json:"measured"`
	// Reference is a preset's own reference (nil: the recipe's).
	Reference *presets.Candidate `json:"reference,omitempty"`
	// Costs is what the figures were computed with (zero in a journal of
	// a cgtune that did not record it: such a resume is not checked).
	Costs CostModel `json:"costs,omitzero"`
	// WhatIf: the search adds what-if rows (Config.WhatIf).
	WhatIf bool `json:"what_if,omitempty"`
}

func (c Config) fingerprint() Fingerprint {
	return Fingerprint{Model: c.Model, Layout: c.Layout, MBridge: c.mbridge(), Space: withDefaults(c.Space),
		Strategy: c.strategy(), Sets: c.Sets, Workload: c.Workload, Measured: c.Measured, Reference: c.Reference, Costs: c.Costs, WhatIf: c.WhatIf}
}

// resumableBy refuses a resume by a search of fingerprint g of the
// journal in dir of fingerprint f: another search, or the same one
// computed another way (the results would not be comparable).
func (f Fingerprint) resumableBy(g Fingerprint, dir string) error {
	if d := f.diff(g); len(d) > 0 {
		return fmt.Errorf("cannot resume %s: it holds a different search (%s differ: it was %s); start a new run instead",
			dir, strings.Join(d, ", "), describeFingerprint(f))
	}
	if f.Costs != (CostModel{}) && f.Costs != g.Costs {
		return &CostsChangedError{Dir: dir, Saved: f.Costs, Now: g.Costs}
	}
	return nil
}

// diff names the parts of two fingerprints that differ.
func (f Fingerprint) diff(g Fingerprint) []string {
	parts := func(x Fingerprint) map[string]any {
		return map[string]any{"model": x.Model, "layout": x.Layout, "mbridge": x.MBridge, "space": x.Space,
			"strategy": x.Strategy, "sets": x.Sets, "workload": x.Workload, "run options": x.Measured, "reference": x.Reference, "what-if rows": x.WhatIf}
	}
	a, b := parts(f), parts(g)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		ja, _ := json.Marshal(a[k])
		jb, _ := json.Marshal(b[k])
		if !bytes.Equal(ja, jb) {
			out = append(out, k)
		}
	}
	return out
}

// journalLine is one line of the journal: the header first, then one line
// per finished candidate run.
type journalLine struct {
	Type        string       `json:"type"` // "header" or "result"
	Version     int          `json:"version,omitempty"`
	Created     string       `json:"created,omitempty"`
	Fingerprint *Fingerprint `json:"fingerprint,omitempty"`
	// MarksFinish (in the header): the search writes FinishedFile when it
	// finishes, so a folder without one holds an interrupted search.
	MarksFinish bool           `json:"marks_finish,omitempty"`
	Round       int            `json:"round,omitempty"`
	Key         string         `json:"key,omitempty"`
	GPU         int            `json:"gpu"`
	Result      *engine.Result `json:"result,omitempty"`
}

// journal appends finished results to RunDir/journal.jsonl, one fsynced
// line each, so that an interrupted or crashed search loses at most the
// candidates that were running.
type journal struct {
	f    *os.File
	path string
}

// openJournal starts the journal of a new search in dir, or, with resume,
// reads the one there, checks that it is the same search and returns its
// results. An empty dir means no journal (nil, nil, nil). skipBad lets a
// resume go on past unreadable lines in the middle of the journal (see
// BadLinesError); a result check refuses is such a line.
func openJournal(dir string, fp Fingerprint, resume, skipBad bool, check resultCheck) (*journal, []journalLine, error) {
	if dir == "" {
		if resume {
			return nil, nil, errors.New("resume needs the run folder of the search to resume")
		}
		return nil, nil, nil
	}
	path := filepath.Join(dir, JournalFile)
	if resume {
		return reopenJournal(dir, path, fp, skipBad, check)
	}
	if _, err := os.Stat(path); err == nil {
		return nil, nil, fmt.Errorf("%s already holds a search (%s); resume it or choose another run folder", dir, JournalFile)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	f, err := fileio.CreateExclusive(path, 0o644)
	if err != nil {
		return nil, nil, err
	}
	j := &journal{f: f, path: path}
	if err := j.append(journalLine{Type: "header", Version: journalVersion, Created: time.Now().UTC().Format(time.RFC3339), Fingerprint: &fp, MarksFinish: true}); err != nil {
		f.Close()
		return nil, nil, err
	}
	// The new file's directory entry must survive a crash too.
	fileio.SyncDir(dir)
	return j, nil, nil
}

// ReadJournal reads the fingerprint and the finished results of the
// search in run folder dir (for a resume that takes its settings from the
// folder, and for tools). Unreadable lines in the middle are a
// *BadLinesError unless skipBad is set; the file is not changed.
func ReadJournal(dir string, skipBad bool) (Fingerprint, []engine.Result, error) {
	pj, err := readJournal(dir, filepath.Join(dir, JournalFile), nil)
	if err != nil {
		return Fingerprint{}, nil, err
	}
	if err := pj.badLinesError(skipBad); err != nil {
		return Fingerprint{}, nil, err
	}
	var rs []engine.Result
	for _, l := range pj.results {
		rs = append(rs, *l.Result)
	}
	return pj.fp, rs, nil
}

func readJournal(dir, path string, check resultCheck) (parsedJournal, error) {
	data, err := fileio.ReadFileLimited(path, maxJournalBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return parsedJournal{}, fmt.Errorf("%s holds no search to resume (no %s)", dir, JournalFile)
		}
		return parsedJournal{}, err
	}
	return parseJournal(path, data, check)
}

// parsedJournal is a journal read back: its lines as every journal's are
// (fileio.JournalLines), the header's fingerprint and the results.
type parsedJournal struct {
	lines   fileio.JournalLines
	path    string
	fp      Fingerprint
	results []journalLine
	// marksFinish: the header says the search writes FinishedFile.
	marksFinish bool
	// good, bad, intact and size are lines' Good, Bad, Intact and Size.
	good         [][]byte
	bad          []fileio.BadLine
	intact, size int64
}

// BadLinesError says that lines in the middle of a journal cannot be read;
// see fileio.BadLinesError.
type BadLinesError = fileio.BadLinesError

func (pj parsedJournal) badLinesError(skipBad bool) error {
	return pj.lines.BadLinesError(skipBad, len(pj.results))
}

// halvingRounds is the most rounds the halving strategy plans
// (nominalRounds: round1Steps, round2Steps, finalSteps).
const halvingRounds = 3

// resultCheck says why a journal's result line does not belong to the
// search resuming it (nil: it does).
type resultCheck func(journalLine) error

// planCheck accepts the results a search with plan and strategy can have
// run: a candidate of the plan that the search runs (a row the rules
// accept, or one only predicted to fail, which --run-predicted-failures
// runs), recorded under its own key, in a round the strategy has. Anything
// else was edited in or comes from another search; a strategy fed it would
// rank a candidate the rules reject or find no arm for it.
func planCheck(plan []Planned, strategy string) resultCheck {
	rows := map[string]*Planned{}
	for i := range plan {
		rows[plan[i].Candidate.Key()] = &plan[i]
	}
	rounds := 1
	if strategy == StrategyHalving {
		rounds = halvingRounds
	}
	return func(l journalLine) error {
		c := l.Result.Candidate
		if err := c.Validate(); err != nil {
			return fmt.Errorf("candidate %s: %w", c.Name(), err)
		}
		if c.Key() != l.Key {
			return fmt.Errorf("a result for %s filed under key %q", c.Name(), l.Key)
		}
		p := rows[l.Key]
		if p == nil {
			return fmt.Errorf("candidate %s is not in this search's space", c.Name())
		}
		for _, v := range p.Violations {
			if v.ID != recipe.WillFailID {
				return fmt.Errorf("candidate %s is not run by this search: %s %s", c.Name(), v.ID, v.Message)
			}
		}
		if l.Round < 1 || l.Round > rounds {
			return fmt.Errorf("round %d: the %s strategy has rounds 1 to %d", l.Round, strategy, rounds)
		}
		return nil
	}
}

// parseJournal reads a journal (fileio.ParseJournal): a last line cut
// short (the process died while writing it) is ignored; unreadable lines
// elsewhere, and result lines check (may be nil) refuses, are collected in
// bad, never silently dropped. Only a missing or foreign header (the
// journal of what?) is an error here.
func parseJournal(path string, data []byte, check resultCheck) (parsedJournal, error) {
	pj := parsedJournal{path: path}
	header := false
	lines, err := fileio.ParseJournal(path, data, 0, func(n int, raw []byte) error {
		var l journalLine
		jerr := json.Unmarshal(raw, &l)
		switch {
		case n == 1 && (jerr != nil || l.Type != "header" || l.Fingerprint == nil):
			return fileio.StopReading(fmt.Errorf("%s: the first line is not a cgtune journal header", path))
		case n == 1 && l.Version != journalVersion:
			return fileio.StopReading(fmt.Errorf("%s: journal version %d, this cgtune reads version %d", path, l.Version, journalVersion))
		case jerr != nil:
			return jerr
		case n == 1:
			header, pj.fp, pj.marksFinish = true, *l.Fingerprint, l.MarksFinish
		case l.Type == "result" && l.Result == nil:
			return errors.New("a result line without a result")
		case l.Type == "result" && check != nil:
			if err := check(l); err != nil {
				return err
			}
			fallthrough
		case l.Type == "result":
			pj.results = append(pj.results, l)
		}
		return nil
	})
	pj.lines, pj.good, pj.bad, pj.intact, pj.size = lines, lines.Good, lines.Bad, lines.Intact, lines.Size
	switch {
	case err != nil:
		return pj, err
	case len(data) == 0:
		return pj, fmt.Errorf("%s is empty", path)
	case !header:
		return pj, fmt.Errorf("%s: the first line is not a cgtune journal header", path)
	}
	return pj, nil
}

func reopenJournal(dir, path string, fp Fingerprint, skipBad bool, check resultCheck) (*journal, []journalLine, error) {
	pj, err := readJournal(dir, path, check)
	if err != nil {
		return nil, nil, err
	}
	// Another search's results are all foreign: say that, not which lines.
	if err := pj.fp.resumableBy(fp, dir); err != nil {
		return nil, nil, err
	}
	if err := pj.badLinesError(skipBad); err != nil {
		return nil, nil, err
	}
	// Whatever it said, the search is unfinished again until it ends, and
	// ranks again when it does.
	for _, name := range []string{FinishedFile, RankingFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
	}
	f, err := fileio.OpenJournalAppend(pj.lines)
	if err != nil {
		return nil, nil, err
	}
	return &journal{f: f, path: path}, pj.results, nil
}

func describeFingerprint(f Fingerprint) string {
	return fmt.Sprintf("model %s, %d GPUs %s TP%d PP%d EP%d, MB %s, strategy %s",
		f.Model.Name, f.Layout.NumGPUs, f.Layout.GPU, f.Layout.TPSize(), f.Layout.PPSize(), f.Layout.EPSize(), f.MBridge, f.Strategy)
}

func (j *journal) append(l journalLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := j.f.Write(b); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	return nil
}

func (j *journal) close() error {
	if j == nil {
		return nil
	}
	return j.f.Close()
}

// JournalCount is what a journal holds when it is read back: the results
// a resume takes, the unreadable lines it would name, and whether its last
// line is cut short (a resume drops it). Err says why it cannot be read
// at all.
type JournalCount struct {
	Results    int    `json:"results"`
	Unreadable int    `json:"unreadable,omitempty"`
	Torn       bool   `json:"torn,omitempty"`
	Err        string `json:"error,omitempty"`
}

// keptInJournal reads back the journal in dir.
func keptInJournal(dir string) *JournalCount {
	if dir == "" {
		return nil
	}
	pj, err := readJournal(dir, filepath.Join(dir, JournalFile), nil)
	if err != nil {
		return &JournalCount{Err: err.Error()}
	}
	return &JournalCount{Results: len(pj.results), Unreadable: len(pj.bad), Torn: pj.lines.Torn()}
}

// RankingFile is what the search ranked when it ended, finished or
// interrupted (its DoneEvent): what runs show prints, as the search's own
// output ranked it, warm-ups derived from a run and none from the eager
// baselines included, which the journal does not hold.
const RankingFile = "ranking.json"

// writeRanking writes d as dir's RankingFile.
func writeRanking(dir string, d DoneEvent) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := fileio.WriteOwnFileAtomic(filepath.Join(dir, RankingFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("run folder %s: %w", dir, err)
	}
	return nil
}

// readRanking is dir's RankingFile, when it is there, readable and no
// older than the journal (a search resumed after it ranked and stopped
// before it ranked again leaves it stale).
func readRanking(dir string) (DoneEvent, bool) {
	var d DoneEvent
	st, err := os.Lstat(filepath.Join(dir, RankingFile))
	jst, jerr := os.Lstat(filepath.Join(dir, JournalFile))
	if err != nil || jerr != nil || !st.Mode().IsRegular() || st.ModTime().Before(jst.ModTime()) {
		return d, false
	}
	data, err := fileio.ReadFileLimited(filepath.Join(dir, RankingFile), maxRankingBytes)
	if err != nil || json.Unmarshal(data, &d) != nil {
		return d, false
	}
	return d, true
}

// maxRankingBytes bounds RankingFile: a ranking of the largest space
// allowed, with every row's notes.
const maxRankingBytes = 256 << 20

// finishedMark is FinishedFile's content.
type finishedMark struct {
	Finished string `json:"finished"` // when, RFC 3339
	Results  int    `json:"results"`
}

// markFinished writes FinishedFile in dir.
func markFinished(dir string, results int) error {
	b, _ := json.Marshal(finishedMark{Finished: time.Now().UTC().Format(time.RFC3339), Results: results})
	if err := fileio.WriteOwnFileAtomic(filepath.Join(dir, FinishedFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("run folder %s: %w", dir, err)
	}
	return nil
}

// Finished reports whether the search in dir finished (FinishedFile is
// there); known is false for the journal of a cgtune that did not write
// that file.
func Finished(dir string) (finished, known bool, err error) {
	pj, err := readJournal(dir, filepath.Join(dir, JournalFile), nil)
	if err != nil {
		return false, false, err
	}
	_, serr := os.Lstat(filepath.Join(dir, FinishedFile))
	return serr == nil, pj.marksFinish, nil
}
