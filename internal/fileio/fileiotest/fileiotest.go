// Package fileiotest makes, for tests, the files a read must not hang on,
// bounds how long a read may take, and keeps a test's cache folder its
// own.
package fileiotest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Within fails the test when f has not returned after a few seconds: the
// bug these tests guard against is a read that never ends.
func Within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still reading after 5 s", what)
	}
}

// Hostile makes, in a temporary folder, files a read must not hang on: a
// FIFO nobody writes, a private /dev/zero (mknod 1,5 in the folder), a
// link to the FIFO, and a 5 MiB (sparse) file.
func Hostile(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{
		"a FIFO":             filepath.Join(dir, "fifo.yaml"),
		"a character device": filepath.Join(dir, "zero.yaml"),
		"link":               filepath.Join(dir, "link.yaml"),
		"larger than 4 MiB":  filepath.Join(dir, "big.yaml"),
	}
	must(t, syscall.Mkfifo(out["a FIFO"], 0o644))
	if err := syscall.Mknod(out["a character device"], syscall.S_IFCHR|0o644, 1<<8|5); err != nil {
		t.Skipf("mknod needs root: %v", err)
	}
	must(t, os.Symlink("fifo.yaml", out["link"]))
	f, err := os.Create(out["larger than 4 MiB"])
	must(t, err)
	must(t, f.Truncate(5<<20))
	f.Close()
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Refusal is what the refusal to read the file of Hostile's kind names:
// the kind, or for the link the FIFO it leads to.
func Refusal(kind string) string {
	if kind == "link" {
		return "a FIFO"
	}
	return kind
}

// IsolateCache points the user cache folder (XDG_CACHE_HOME) and the home
// folder into a temporary folder of the test, which it returns: nothing a
// test caches (probes, profiles, calibrations, runs) reaches the user's.
func IsolateCache(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	t.Setenv("HOME", dir)
	return dir
}
