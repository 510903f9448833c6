package fileio

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"cgtune/internal/fileio/fileiotest"
)

// Each writer (a truncating open, an append) refuses what is not a
// regular file, naming it, and leaves a link's target as it was: a link
// planted at a job log's path must not empty the file it names, and a
// FIFO must not block.
func TestWritersNeverFollowALinkOrHang(t *testing.T) {
	dir := t.TempDir()
	precious := filepath.Join(dir, "precious.txt")
	must(t, os.WriteFile(precious, []byte("keep\n"), 0o644))
	fifo := filepath.Join(dir, "fifo")
	must(t, syscall.Mkfifo(fifo, 0o644))
	for name, open := range map[string]func(string) error{
		"CreateFresh": func(p string) error { f, err := CreateFresh(p, 0o644); closeIf(f); return err },
		"OpenAppend":  func(p string) error { f, err := OpenAppend(p, 0o644); closeIf(f); return err },
		"OpenOwn":     func(p string) error { f, err := OpenOwn(p, 0o644); closeIf(f); return err },
		"WriteFresh":  func(p string) error { return WriteFresh(p, []byte("x\n"), 0o644) },
		"WriteOwnFileAtomic": func(p string) error {
			return WriteOwnFileAtomic(p, []byte("x\n"), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			link := filepath.Join(t.TempDir(), "job.log")
			must(t, os.Symlink(precious, link))
			if err := open(link); err == nil || !strings.Contains(err.Error(), link) {
				t.Errorf("through a link: %v", err)
			}
			if got, _ := os.ReadFile(precious); string(got) != "keep\n" {
				t.Errorf("the link's target holds %q", got)
			}
			if name == "WriteOwnFileAtomic" {
				return // a FIFO is WriteFileAtomic's refusal, tested there
			}
			var err error
			fileiotest.Within(t, fifo, func() { err = open(fifo) })
			if err == nil || !strings.Contains(err.Error(), "a FIFO") {
				t.Errorf("a FIFO: %v", err)
			}
		})
	}
	// A regular file is started anew (CreateFresh) or appended to.
	log := filepath.Join(dir, "ok.log")
	must(t, os.WriteFile(log, []byte("old run\n"), 0o644))
	must(t, WriteFresh(log, []byte("new run\n"), 0o644))
	f, err := OpenAppend(log, 0o644)
	must(t, err)
	f.WriteString("more\n")
	f.Close()
	if got, _ := os.ReadFile(log); string(got) != "new run\nmore\n" {
		t.Errorf("log holds %q", got)
	}
	if _, err := CreateExclusive(log, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Errorf("CreateExclusive over a file: %v", err)
	}
}

func closeIf(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// ReadDir refuses a FIFO put where a folder is expected (a
// $CGTUNE_PRESETS entry, the profile cache) instead of blocking on it.
func TestReadDirNeverHangs(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	must(t, syscall.Mkfifo(fifo, 0o644))
	var err error
	fileiotest.Within(t, fifo, func() { _, err = ReadDir(fifo) })
	if err == nil || !strings.Contains(err.Error(), fifo+" is a FIFO, not a folder") {
		t.Errorf("ReadDir(FIFO): %v", err)
	}
	must(t, os.WriteFile(filepath.Join(dir, "b"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "a"), nil, 0o644))
	es, err := ReadDir(dir)
	if err != nil || len(es) != 3 || es[0].Name() != "a" || es[1].Name() != "b" {
		t.Errorf("ReadDir: %v %v", es, err)
	}
}

// ReadFileContext reads what ReadFileLimited reads, refuses what it
// refuses, and stops when its context is done.
func TestReadFileContext(t *testing.T) {
	for kind, p := range fileiotest.Hostile(t, t.TempDir()) {
		var err error
		fileiotest.Within(t, p, func() { _, err = ReadFileContext(context.Background(), p, 4<<20) })
		if err == nil || !strings.Contains(err.Error(), fileiotest.Refusal(kind)) {
			t.Errorf("%s: %v", kind, err)
		}
	}
	p := filepath.Join(t.TempDir(), "j.jsonl")
	must(t, os.WriteFile(p, []byte(strings.Repeat("x", 3*readChunk)), 0o644))
	if data, err := ReadFileContext(context.Background(), p, 3*readChunk); err != nil || len(data) != 3*readChunk {
		t.Errorf("%d bytes, %v", len(data), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReadFileContext(ctx, p, 3*readChunk); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// RemoveStaleTemps removes the old .NAME.yaml.tmp-* a save killed with
// SIGKILL (which no program can catch) left behind; a fresh one (a save
// in progress), another program's file and a folder are kept.
func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-2 * StaleTempAge)
	mk := func(name string, age time.Time) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, []byte("x"), 0o644))
		must(t, os.Chtimes(p, age, age))
		return p
	}
	stale := mk(".team.yaml.tmp-123456", old)
	check := mk(".team.yaml.check-99", old)
	fresh := mk(".team.yaml.tmp-777", time.Now())
	mine := mk(".team.yaml.tmp-notdigits", old)
	preset := mk("team.yaml", old)
	must(t, os.Mkdir(filepath.Join(dir, ".x.yaml.tmp-1"), 0o755))
	removed, err := RemoveStaleTemps(dir, StaleTempAge)
	if err != nil || len(removed) != 2 {
		t.Errorf("removed %v, %v; want the two old temporary files", removed, err)
	}
	for _, p := range []string{stale, check} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	for _, p := range []string{fresh, mine, preset, filepath.Join(dir, ".x.yaml.tmp-1")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed", p)
		}
	}
	if removed, err := RemoveStaleTemps(filepath.Join(dir, "missing"), StaleTempAge); err != nil || removed != nil {
		t.Errorf("a missing folder: %v %v", removed, err)
	}
}
