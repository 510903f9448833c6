package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// Ledger is the jobs.jsonl of one run folder. Lines are appended and
// fsynced one at a time; a torn last line (cgtune died writing it) is
// ignored.
type Ledger struct {
	path string
	mu   sync.Mutex
	open map[string]LedgerEntry // key → its last job not followed to the end
	all  []LedgerEntry
}

// OpenLedger reads (or starts) the ledger in dir.
func OpenLedger(dir string) (*Ledger, error) {
	l := &Ledger{path: filepath.Join(dir, LedgerFile), open: map[string]LedgerEntry{}}
	data, err := os.ReadFile(l.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	lr := fileio.NewLineReader(bytes.NewReader(data), l.path, 1<<20)
	for {
		b, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return l, nil
		}
		if err != nil {
			return nil, err
		}
		var e LedgerEntry
		if err := json.Unmarshal(b, &e); err != nil {
			if lr.Line() == bytes.Count(data, []byte("\n"))+1 {
				return l, nil // the torn last line
			}
			return nil, fmt.Errorf("%s line %d: %v", l.path, lr.Line(), err)
		}
		l.note(e)
	}
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
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
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
