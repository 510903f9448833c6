package search

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/engine"
)

// LockRunDir lets one process use a run folder at a time: a second lock
// is refused naming the holder's pid, a search on the held folder does
// not start, and after Release the folder can be locked again.
func TestLockRunDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	l, err := LockRunDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to an open file, so a second open in this very
	// process conflicts as another process's would.
	_, err = LockRunDir(dir)
	var inUse *RunInUseError
	if !errors.As(err, &inUse) || inUse.PID != os.Getpid() || !strings.Contains(err.Error(), "in use by another cgtune (pid ") {
		t.Fatalf("second lock: %v", err)
	}
	// A search on the held folder does not start.
	fe := &fakeEngine{}
	cfg := Config{Model: denseModel, Layout: layoutFor(denseModel), Engines: []engine.Engine{fe}, RunDir: dir}
	if _, err := Run(context.Background(), cfg, nil); !errors.As(err, &inUse) || len(fe.runs()) != 0 {
		t.Errorf("Run on a locked folder: %v, ran %v", err, fe.runs())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := LockRunDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.Release()
	if data, _ := os.ReadFile(filepath.Join(dir, LockFile)); len(data) != 0 {
		t.Errorf("a released lock file still names pid %q", data)
	}
}

// CheckRunDir takes a new folder or a cgtune run's, and refuses a folder
// with other files (naming them) or a file: run.json and a journal go
// only there.
func TestCheckRunDir(t *testing.T) {
	root := t.TempDir()
	if err := CheckRunDir(filepath.Join(root, "new")); err != nil {
		t.Errorf("a new folder: %v", err)
	}
	run := filepath.Join(root, "run")
	os.Mkdir(run, 0o755)
	for _, f := range []string{JournalFile, LockFile, "run.json", ".run.json.tmp-123"} {
		os.WriteFile(filepath.Join(run, f), nil, 0o644)
	}
	if err := CheckRunDir(run, "run.json"); err != nil {
		t.Errorf("a run folder: %v", err)
	}
	for _, f := range []string{"notes.txt", "b", "c", "d"} {
		os.WriteFile(filepath.Join(run, f), nil, 0o644)
	}
	err := CheckRunDir(run, "run.json")
	if err == nil || !strings.Contains(err.Error(), "holds files that are not a cgtune run (b, c, d, and 1 more)") {
		t.Errorf("a folder with other files: %v", err)
	}
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o644)
	if err := CheckRunDir(file); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("a file: %v", err)
	}
}
