package presets

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// nodes makes, in a temporary folder, each kind of file that is not a
// regular file: a FIFO, a character device (a private copy of /dev/null's
// numbers, made with mknod; the real /dev is never touched), a socket and
// a folder.
func nodes(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{
		"a FIFO":             filepath.Join(dir, "fifo"),
		"a character device": filepath.Join(dir, "null"),
		"a socket":           filepath.Join(dir, "sock"),
		"a folder":           filepath.Join(dir, "folder"),
	}
	if err := syscall.Mkfifo(out["a FIFO"], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(out["a character device"], syscall.S_IFCHR|0o644, int(unix1_3())); err != nil {
		t.Skipf("mknod needs root: %v", err)
	}
	l, err := net.Listen("unix", out["a socket"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := os.Mkdir(out["a folder"], 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// unix1_3 is the device number 1,3 (what /dev/null is on Linux).
func unix1_3() uint64 { return 1<<8 | 3 }

// Before: the FIFO, the device and the socket were renamed over and became
// regular files (as root, --emit /dev/full replaced the real /dev/full).
func TestWriteFileAtomicRefusesNonRegular(t *testing.T) {
	for kind, p := range nodes(t) {
		before, _ := os.Lstat(p)
		err := WriteFileAtomic(p, []byte("x"), 0o644)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), kind) {
			t.Errorf("%s: err %v, want a refusal naming %s and %q", kind, err, p, kind)
		}
		if err := CheckWritable(p); err == nil || !strings.Contains(err.Error(), kind) {
			t.Errorf("CheckWritable(%s): %v", kind, err)
		}
		after, _ := os.Lstat(p)
		if after.Mode() != before.Mode() {
			t.Errorf("%s was changed: %v -> %v", kind, before.Mode(), after.Mode())
		}
		// A link to it is refused too, and stays a link.
		link := p + ".link"
		if err := os.Symlink(p, link); err != nil {
			t.Fatal(err)
		}
		if err := WriteFileAtomic(link, []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), link) {
			t.Errorf("link to %s: err %v", kind, err)
		}
		if st, _ := os.Lstat(link); st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("link to %s was replaced", kind)
		}
	}
}

// Before: a symbolic link at the path was replaced by a regular file.
func TestWriteFileAtomicKeepsSymlinks(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "team")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(other, "real.yaml")
	os.WriteFile(real, []byte("old\n"), 0o644)
	rel := filepath.Join(dir, "rel.yaml")     // relative link
	chain := filepath.Join(dir, "chain.yaml") // link to a link
	dangling := filepath.Join(dir, "new.yaml")
	must(t, os.Symlink("team/real.yaml", rel))
	must(t, os.Symlink(rel, chain))
	must(t, os.Symlink(filepath.Join(other, "later.yaml"), dangling))
	for i, p := range []string{rel, chain, dangling} {
		data := []byte(fmt.Sprintf("v%d\n", i))
		if err := WriteFileAtomic(p, data, 0o644); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if st, _ := os.Lstat(p); st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a link", p)
		}
		if got, _ := os.ReadFile(p); string(got) != string(data) {
			t.Errorf("%s reads %q, want %q", p, got, data)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(other, "later.yaml")); string(got) != "v2\n" {
		t.Errorf("the dangling link's target holds %q", got)
	}
	// The temporary files went to the target's folder and are gone.
	if n := dirNames(t, other); len(n) != 2 {
		t.Errorf("%s holds %v", other, n)
	}
	loop := filepath.Join(dir, "loop")
	must(t, os.Symlink(loop, loop))
	if err := WriteFileAtomic(loop, []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), "symbolic links") {
		t.Errorf("a link loop: %v", err)
	}
}

// Before: a missing folder was only found when the file was written, after
// the search, and the message named the temporary file.
func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	if err := CheckWritable(filepath.Join(dir, "out.yaml")); err != nil {
		t.Errorf("a new file in a folder: %v", err)
	}
	if n := dirNames(t, dir); len(n) != 0 {
		t.Errorf("the check left %v behind", n)
	}
	missing := filepath.Join(dir, "no", "such", "out.yaml")
	err := CheckWritable(missing)
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), ".tmp-") {
		t.Errorf("missing folder: %v", err)
	}
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	if err := CheckWritable(filepath.Join(file, "out.yaml")); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("a file as the folder: %v", err)
	}
	err = WriteFileAtomic(missing, []byte("x"), 0o644)
	if err == nil || !strings.HasPrefix(err.Error(), missing+": ") || strings.Contains(err.Error(), ".tmp-") {
		t.Errorf("write into a missing folder: %v (want it to name %s, not the temporary file)", err, missing)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
