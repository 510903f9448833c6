package presets

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within fails the test when f has not returned after a few seconds: the
// bug these tests guard against is a read that never ends.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still reading after 5 s", what)
	}
}

// hostile makes, in a temporary folder, files a read must not hang on: a
// FIFO nobody writes, a private /dev/zero (mknod 1,5 in the folder), a
// link to the FIFO, and a 5 MiB (sparse) file.
func hostile(t *testing.T, dir string) map[string]string {
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

// Before: loading a FIFO blocked forever and /dev/zero grew the process
// without end.
func TestReadFileLimitedNeverHangs(t *testing.T) {
	for kind, p := range hostile(t, t.TempDir()) {
		want := kind
		if kind == "link" {
			want = "a FIFO"
		}
		var err error
		within(t, p, func() { _, err = ReadFileLimited(p, MaxYAMLBytes) })
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", kind, err)
		}
		within(t, p, func() { _, err = NewStore("", "", "").LoadFile(p) })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadFile(%s): %v", kind, err)
		}
	}
	ok := filepath.Join(t.TempDir(), "ok.yaml")
	must(t, os.WriteFile(ok, []byte("a: 1\n"), 0o644))
	if data, err := ReadFileLimited(ok, 5); err != nil || string(data) != "a: 1\n" {
		t.Errorf("a file of exactly the limit: %q %v", data, err)
	}
	if _, err := ReadFileLimited(ok, 4); err == nil || !strings.Contains(err.Error(), "larger than 4 bytes") {
		t.Errorf("a file over the limit: %v", err)
	}
}

// Before: a FIFO or /dev/zero lying in a $CGTUNE_PRESETS folder hung every
// command that lists presets (preset list/show/save, the TUI).
func TestListSkipsHostileEntriesWithAWarning(t *testing.T) {
	env := t.TempDir()
	bad := hostile(t, env)
	must(t, os.Mkdir(filepath.Join(env, "folder.yaml"), 0o755))
	must(t, os.Symlink("nowhere.yaml", filepath.Join(env, "dangling.yaml")))
	writePreset(t, env, "good", "llama3_8b", "h100")
	s := NewStore("", env, "")
	var warnings []string
	s.Warn = func(m string) { warnings = append(warnings, m) }
	var list []PresetInfo
	var err error
	within(t, "List", func() { list, err = s.List() })
	if err != nil || len(list) != 1 || list[0].Name != "good" || list[0].Problem != "" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if len(warnings) != len(bad)+2 {
		t.Errorf("warnings %q", warnings)
	}
	for _, w := range warnings {
		if !strings.HasPrefix(w, "skipped "+env) || !strings.Contains(w, SourceEnv) {
			t.Errorf("warning %q", w)
		}
	}
	if _, err := s.Load("good"); err != nil {
		t.Errorf("Load(good) beside the hostile entries: %v", err)
	}
}
