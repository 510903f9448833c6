package search

import (
	"bufio"
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
	"cgtune/presets"
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
	Model    presets.Model          `json:"model"`
	Layout   presets.Layout         `json:"layout"`
	MBridge  string                 `json:"mbridge"`
	Space    presets.Space          `json:"space"`
	Strategy string                 `json:"strategy"`
	Sets     map[string]string      `json:"sets,omitempty"`
	Workload engine.WorkloadOptions `json:"workload"`
	Measured engine.RunOptions      `json:"measured"`
}

func (c Config) fingerprint() Fingerprint {
	return Fingerprint{Model: c.Model, Layout: c.Layout, MBridge: c.mbridge(), Space: withDefaults(c.Space),
		Strategy: c.strategy(), Sets: c.Sets, Workload: c.Workload, Measured: c.Measured}
}

// diff names the parts of two fingerprints that differ.
func (f Fingerprint) diff(g Fingerprint) []string {
	parts := func(x Fingerprint) map[string]any {
		return map[string]any{"model": x.Model, "layout": x.Layout, "mbridge": x.MBridge, "space": x.Space,
			"strategy": x.Strategy, "sets": x.Sets, "workload": x.Workload, "run options": x.Measured}
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
// results. An empty dir means no journal (nil, nil, nil).
func openJournal(dir string, fp Fingerprint, resume bool) (*journal, []journalLine, error) {
	if dir == "" {
		if resume {
			return nil, nil, errors.New("resume needs the run folder of the search to resume")
		}
		return nil, nil, nil
	}
	path := filepath.Join(dir, JournalFile)
	if resume {
		return reopenJournal(dir, path, fp)
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
// folder, and for tools).
func ReadJournal(dir string) (Fingerprint, []engine.Result, error) {
	data, err := presets.ReadFileLimited(filepath.Join(dir, JournalFile), maxJournalBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Fingerprint{}, nil, fmt.Errorf("%s holds no search to resume (no %s)", dir, JournalFile)
		}
		return Fingerprint{}, nil, err
	}
	fp, lines, _, err := parseJournal(dir, data)
	if err != nil {
		return Fingerprint{}, nil, err
	}
	var rs []engine.Result
	for _, l := range lines {
		rs = append(rs, *l.Result)
	}
	return fp, rs, nil
}

// parseJournal reads a journal. A last line cut short (the process died
// while writing it) is ignored; good is the length of the intact part.
func parseJournal(dir string, data []byte) (fp Fingerprint, lines []journalLine, good int64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	n := 0
	var off int64
	for sc.Scan() {
		n++
		raw := sc.Bytes()
		end := off + int64(len(raw)) + 1
		var l journalLine
		if jerr := json.Unmarshal(raw, &l); jerr != nil {
			if end >= int64(len(data)) && !bytes.HasSuffix(data, []byte("\n")) {
				break // the torn last line
			}
			return fp, nil, 0, fmt.Errorf("%s line %d: %v", filepath.Join(dir, JournalFile), n, jerr)
		}
		switch {
		case n == 1:
			if l.Type != "header" || l.Fingerprint == nil {
				return fp, nil, 0, fmt.Errorf("%s: the first line is not a cgtune journal header", filepath.Join(dir, JournalFile))
			}
			if l.Version != journalVersion {
				return fp, nil, 0, fmt.Errorf("%s: journal version %d, this cgtune reads version %d", filepath.Join(dir, JournalFile), l.Version, journalVersion)
			}
			fp = *l.Fingerprint
		case l.Type == "result" && l.Result != nil:
			lines = append(lines, l)
		}
		off = min(end, int64(len(data)))
		good = off
	}
	if err := sc.Err(); err != nil {
		return fp, nil, 0, err
	}
	if n == 0 {
		return fp, nil, 0, fmt.Errorf("%s is empty", filepath.Join(dir, JournalFile))
	}
	return fp, lines, good, nil
}

func reopenJournal(dir, path string, fp Fingerprint) (*journal, []journalLine, error) {
	data, err := presets.ReadFileLimited(path, maxJournalBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("%s holds no search to resume (no %s)", dir, JournalFile)
		}
		return nil, nil, err
	}
	old, lines, good, err := parseJournal(dir, data)
	if err != nil {
		return nil, nil, err
	}
	if d := old.diff(fp); len(d) > 0 {
		return nil, nil, fmt.Errorf("cannot resume %s: it holds a different search (%s differ: it was %s); start a new run instead",
			dir, strings.Join(d, ", "), describeFingerprint(old))
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	if good < int64(len(data)) {
		// Drop the torn line, or the next result would be glued to it.
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	return &journal{f: f, path: path}, lines, nil
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
