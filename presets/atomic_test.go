package presets

import (
	"os"
	"path/filepath"
	"testing"
)

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range es {
		n = append(n, e.Name())
	}
	return n
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.yaml")
	if err := WriteFileAtomic(p, []byte("one\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(p, []byte("two\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || string(got) != "two\n" {
		t.Fatalf("content %q, %v", got, err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", st.Mode().Perm())
	}
	if n := dirNames(t, dir); len(n) != 1 {
		t.Errorf("folder holds %v; temporary files were left behind", n)
	}
}

func TestWriteFileAtomicFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	// The target is a non-empty folder: the rename fails after the data
	// was written, which is the case that must not leave a temp file.
	target := filepath.Join(dir, "taken")
	if err := os.MkdirAll(filepath.Join(target, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(target, []byte("data"), 0o644); err == nil {
		t.Fatal("writing over a folder succeeded")
	}
	if n := dirNames(t, dir); len(n) != 1 || n[0] != "taken" {
		t.Errorf("folder holds %v after a failed write", n)
	}
	if st, err := os.Stat(target); err != nil || !st.IsDir() {
		t.Error("the folder in the way was changed")
	}
	// A missing folder fails before anything is written.
	if err := WriteFileAtomic(filepath.Join(dir, "no", "such", "f"), []byte("x"), 0o644); err == nil {
		t.Error("writing into a missing folder succeeded")
	}
	if err := WriteFileAtomic(dir+string(filepath.Separator), []byte("x"), 0o644); err == nil {
		t.Error("a path with no file name succeeded")
	}
}
