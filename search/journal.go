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
	"strconv"
	"strings"
	"syscall"
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
}

func (c Config) fingerprint() Fingerprint {
	return Fingerprint{Model: c.Model, Layout: c.Layout, MBridge: c.mbridge(), Space: withDefaults(c.Space),
		Strategy: c.strategy(), Sets: c.Sets, Workload: c.Workload, Measured: c.Measured, Reference: c.Reference}
}

// diff names the parts of two fingerprints that differ.
func (f Fingerprint) diff(g Fingerprint) []string {
	parts := func(x Fingerprint) map[string]any {
		return map[string]any{"model": x.Model, "layout": x.Layout, "mbridge": x.MBridge, "space": x.Space,
			"strategy": x.Strategy, "sets": x.Sets, "workload": x.Workload, "run options": x.Measured, "reference": x.Reference}
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
	Type        string         `json:"type"` // "header" or "result"
	Version     int            `json:"version,omitempty"`
	Created     string         `json:"created,omitempty"`
	Fingerprint *Fingerprint   `json:"fingerprint,omitempty"`
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
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	j := &journal{f: f, path: path}
	if err := j.append(journalLine{Type: "header", Version: journalVersion, Created: time.Now().UTC().Format(time.RFC3339), Fingerprint: &fp}); err != nil {
		f.Close()
		return nil, nil, err
	}
	// The new file's directory entry must survive a crash too.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
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

// parsedJournal is a journal read back.
type parsedJournal struct {
	path    string
	fp      Fingerprint
	results []journalLine
	// good holds the readable lines, each with its newline, in order: what
	// the journal is rewritten to when the unreadable ones are dropped.
	good [][]byte
	bad  []badLine
	// intact is the length of the file without a torn last line.
	intact int64
	size   int64
}

// badLine is a line in the middle of a journal that cannot be read.
type badLine struct {
	n    int // line number, from 1
	text []byte
	err  error
}

// BadLinesError says that lines in the middle of a journal cannot be read
// (a disk fault, an edit by hand); the readable results around them are
// intact and a resume may skip the bad lines (Config.SkipBadLines).
type BadLinesError struct {
	Path     string
	Lines    []int // line numbers, from 1
	First    error // why the first of them cannot be read
	Readable int   // results that can be read
}

func (e *BadLinesError) Error() string {
	nums := make([]string, len(e.Lines))
	for i, n := range e.Lines {
		nums[i] = strconv.Itoa(n)
	}
	what := "line " + nums[0] + " is"
	if len(nums) > 1 {
		what = "lines " + strings.Join(nums, ", ") + " are"
	}
	return fmt.Sprintf("%s: %s unreadable (line %d: %v); its %d readable results are intact", e.Path, what, e.Lines[0], e.First, e.Readable)
}

func (pj parsedJournal) badLinesError(skipBad bool) error {
	if len(pj.bad) == 0 || skipBad {
		return nil
	}
	e := &BadLinesError{Path: pj.path, First: pj.bad[0].err, Readable: len(pj.results)}
	for _, b := range pj.bad {
		e.Lines = append(e.Lines, b.n)
	}
	return e
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
			return fmt.Errorf("candidate %s: %v", c.Key(), err)
		}
		if c.Key() != l.Key {
			return fmt.Errorf("a result for %s filed under key %q", c.Key(), l.Key)
		}
		p := rows[l.Key]
		if p == nil {
			return fmt.Errorf("candidate %s is not in this search's space", l.Key)
		}
		for _, v := range p.Violations {
			if v.ID != recipe.WillFailID {
				return fmt.Errorf("candidate %s is not run by this search: %s %s", l.Key, v.ID, v.Message)
			}
		}
		if l.Round < 1 || l.Round > rounds {
			return fmt.Errorf("round %d: the %s strategy has rounds 1 to %d", l.Round, strategy, rounds)
		}
		return nil
	}
}

// parseJournal reads a journal. A last line cut short (the process died
// while writing it) is ignored; unreadable lines elsewhere, and result
// lines check (may be nil) refuses, are collected in bad, never silently
// dropped. Only a missing or foreign header (the journal of what?) is an
// error here.
func parseJournal(path string, data []byte, check resultCheck) (parsedJournal, error) {
	pj := parsedJournal{path: path, size: int64(len(data)), intact: int64(len(data))}
	var off int64
	for n := 1; off < int64(len(data)); n++ {
		rest := data[off:]
		raw, end, last := rest, int64(len(data)), true
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			raw, end, last = rest[:i], off+int64(i)+1, false
		}
		var l journalLine
		jerr := json.Unmarshal(raw, &l)
		switch {
		case n == 1 && (jerr != nil || l.Type != "header" || l.Fingerprint == nil):
			return pj, fmt.Errorf("%s: the first line is not a cgtune journal header", path)
		case n == 1 && l.Version != journalVersion:
			return pj, fmt.Errorf("%s: journal version %d, this cgtune reads version %d", path, l.Version, journalVersion)
		case jerr != nil && last:
			pj.intact = off // the torn last line
		case jerr == nil && l.Type == "result" && l.Result == nil:
			pj.bad = append(pj.bad, badLine{n: n, text: raw, err: errors.New("a result line without a result")})
		case jerr != nil:
			pj.bad = append(pj.bad, badLine{n: n, text: raw, err: jerr})
		default:
			if n > 1 && l.Type == "result" && check != nil {
				if err := check(l); err != nil {
					pj.bad = append(pj.bad, badLine{n: n, text: raw, err: err})
					break
				}
			}
			if n == 1 {
				pj.fp = *l.Fingerprint
			} else if l.Type == "result" {
				pj.results = append(pj.results, l)
			}
			pj.good = append(pj.good, append(append([]byte(nil), raw...), '\n'))
		}
		off = end
	}
	if len(data) == 0 {
		return pj, fmt.Errorf("%s is empty", path)
	}
	return pj, nil
}

func reopenJournal(dir, path string, fp Fingerprint, skipBad bool, check resultCheck) (*journal, []journalLine, error) {
	pj, err := readJournal(dir, path, check)
	if err != nil {
		return nil, nil, err
	}
	// Another search's results are all foreign: say that, not which lines.
	if d := pj.fp.diff(fp); len(d) > 0 {
		return nil, nil, fmt.Errorf("cannot resume %s: it holds a different search (%s differ: it was %s); start a new run instead",
			dir, strings.Join(d, ", "), describeFingerprint(pj.fp))
	}
	if err := pj.badLinesError(skipBad); err != nil {
		return nil, nil, err
	}
	if len(pj.bad) > 0 {
		if err := setAsideBadLines(dir, path, pj); err != nil {
			return nil, nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	if len(pj.bad) == 0 && pj.intact < pj.size {
		// Drop the torn line, or the next result would be glued to it.
		if err := f.Truncate(pj.intact); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	return &journal{f: f, path: path}, pj.results, nil
}

// setAsideBadLines moves the unreadable lines of a journal to
// UnreadableFile (appended, synced) and then replaces the journal, in one
// rename, by its readable lines: later reads see a clean journal, and not
// a byte of the old one is lost. A crash in between leaves the bad lines
// in both files, never in neither.
func setAsideBadLines(dir, path string, pj parsedJournal) error {
	var buf bytes.Buffer
	for _, b := range pj.bad {
		fmt.Fprintf(&buf, "%s line %d (%v): %s\n", JournalFile, b.n, b.err, b.text)
	}
	aside := filepath.Join(dir, UnreadableFile)
	f, err := os.OpenFile(aside, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(buf.Bytes())
	serr := f.Sync()
	if err := errors.Join(werr, serr, f.Close()); err != nil {
		return fmt.Errorf("%s: %w", aside, err)
	}
	return fileio.WriteFileAtomic(path, bytes.Join(pj.good, nil), 0o644)
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
