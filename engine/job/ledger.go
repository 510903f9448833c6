package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"cgtune/internal/fileio"
)

// LedgerFile is the file in a run folder that lists the jobs cgtune
// launched, so that a resumed cgtune re-attaches to jobs still queued or
// running instead of submitting them again.
const LedgerFile = "jobs.jsonl"

// LedgerEntry is one line of the ledger: a job was submitted for a
// candidate, or (Done) it was followed to its end.
type LedgerEntry struct {
	Key       string    `json:"key"` // the candidate's key
	Job       Ref       `json:"job"`
	Submitted time.Time `json:"submitted,omitzero"`
	Done      bool      `json:"done,omitempty"`
	State     string    `json:"state,omitempty"`
}

// maxLedgerLine is the longest ledger line read: an entry is a job
// reference, a few hundred bytes.
const maxLedgerLine = 1 << 20

// Ledger is the jobs.jsonl of one run folder. Lines are appended and
// fsynced one at a time, and read back as every journal is
// (fileio.ParseJournal): a torn last line is dropped, an unreadable one
// named unless it is to be set aside.
type Ledger struct {
	path string
	mu   sync.Mutex
	open map[string]LedgerEntry // key → its last job not followed to the end
	all  []LedgerEntry
	// repair is the file read back when it must be made whole (its torn
	// tail cut, its last newline added, its bad lines set aside) before
	// the first line is appended; nil when it is whole.
	repair *fileio.JournalLines
}

// OpenLedger reads (or starts) the ledger in dir; unreadable lines are a
// *fileio.BadLinesError.
func OpenLedger(dir string) (*Ledger, error) { return openLedger(dir, false) }

// openLedger is OpenLedger that, with skipBad, sets unreadable lines aside
// (to jobs-unreadable.txt) when the first line is appended.
func openLedger(dir string, skipBad bool) (*Ledger, error) {
	l := &Ledger{path: filepath.Join(dir, LedgerFile), open: map[string]LedgerEntry{}}
	data, err := fileio.ReadFileLimited(l.path, maxJournalBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, err
	}
	lines, err := fileio.ParseJournal(l.path, data, maxLedgerLine, func(_ int, raw []byte) error {
		var e LedgerEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return err
		}
		if e.Key == "" || e.Job.ID == "" {
			return errors.New("an entry without a candidate key or job id")
		}
		l.note(e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := lines.BadLinesError(skipBad, len(l.all)); err != nil {
		return nil, err
	}
	switch {
	case len(lines.Bad) > 0:
		// Asked to go on without them: set aside now, so that the next
		// resume finds a clean ledger even when this one runs no job.
		f, err := fileio.OpenJournalAppend(lines)
		if err != nil {
			return nil, err
		}
		f.Close()
	case lines.Torn() || lines.NoFinalNewline:
		l.repair = &lines
	}
	return l, nil
}

func (l *Ledger) note(e LedgerEntry) {
	l.all = append(l.all, e)
	if e.Done {
		if o, ok := l.open[e.Key]; ok && o.Job.ID == e.Job.ID {
			delete(l.open, e.Key)
		}
		return
	}
	l.open[e.Key] = e
}

// Open returns the job submitted for key that no cgtune followed to its
// end (it may still be queued or running).
func (l *Ledger) Open(key string) (LedgerEntry, bool) {
	if l == nil {
		return LedgerEntry{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.open[key]
	return e, ok
}

// Entries are every line read or written, in order.
func (l *Ledger) Entries() []LedgerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]LedgerEntry(nil), l.all...)
}

// Add appends one entry and syncs it to disk.
func (l *Ledger) Add(e LedgerEntry) error {
	if l == nil {
		return nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return err
	}
	var f *os.File
	if l.repair != nil {
		f, err = fileio.OpenJournalAppend(*l.repair)
	} else {
		f, err = fileio.OpenAppend(l.path, 0o644)
	}
	if err != nil {
		return err
	}
	l.repair = nil
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", l.path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", l.path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	l.note(e)
	return nil
}
