package fileio

import (
	"errors"
	"fmt"
	"io/fs"
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

// WriteFileAtomic refuses a FIFO, a device or a socket at the path and
// leaves it as it was: renaming over it would make it a regular file (as
// root, --emit /dev/full would replace the real /dev/full).
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

// WriteFileAtomic through a symbolic link (relative, a chain, or one whose
// target does not exist yet) writes the target and keeps the link.
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
		t.Run(filepath.Base(p), func(t *testing.T) {
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
		})
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

// CheckWritable finds a missing folder, or a file where the folder should
// be, before the work that ends in the write; it and WriteFileAtomic name
// the path given, never the temporary file.
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

// A rewritten file keeps its mode (0600 stays 0600), whatever perm the
// caller passes.
func TestWriteFileAtomicKeepsTheMode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "secret.yaml")
	must(t, os.WriteFile(p, []byte("old\n"), 0o600))
	must(t, os.Chmod(p, 0o600))
	must(t, WriteFileAtomic(p, []byte("new\n"), 0o644))
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("mode after a rewrite %04o, want the old 0600", st.Mode().Perm())
	}
	fresh := filepath.Join(dir, "fresh.yaml")
	must(t, WriteFileAtomic(fresh, []byte("x\n"), 0o640))
	if st, _ := os.Stat(fresh); st.Mode().Perm() != 0o640 {
		t.Errorf("a new file's mode %04o, want 0640", st.Mode().Perm())
	}
}

// A read-only file (0444) is refused, though root could write it.
func TestWriteFileAtomicRefusesReadOnly(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "frozen.yaml")
	must(t, os.WriteFile(p, []byte("keep\n"), 0o444))
	must(t, os.Chmod(p, 0o444))
	link := filepath.Join(dir, "link.yaml")
	must(t, os.Symlink("frozen.yaml", link))
	for _, name := range []string{p, link} {
		t.Run(filepath.Base(name), func(t *testing.T) {
			err := WriteFileAtomic(name, []byte("new\n"), 0o644)
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "read-only") {
				t.Errorf("write: %v, want a refusal naming %s as read-only", err, name)
			}
			if err := CheckWritable(name); err == nil || !strings.Contains(err.Error(), "read-only") {
				t.Errorf("CheckWritable: %v", err)
			}
		})
	}
	if got, _ := os.ReadFile(p); string(got) != "keep\n" {
		t.Errorf("the read-only file holds %q", got)
	}
	if n := dirNames(t, dir); len(n) != 2 {
		t.Errorf("folder holds %v", n)
	}
}

// A link another user left in a sticky /tmp-like folder is neither read
// nor its target replaced, as the kernel's protected_symlinks forbids.
func TestWriteFileAtomicRefusesOthersLinkInStickyFolder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a link to another user needs root")
	}
	shared := t.TempDir()
	must(t, os.Chmod(shared, 0o777|os.ModeSticky))
	mine := filepath.Join(t.TempDir(), "mine.yaml")
	must(t, os.WriteFile(mine, []byte("keep\n"), 0o644))
	theirs := filepath.Join(shared, "theirs.yaml")
	must(t, os.Symlink(mine, theirs))
	must(t, os.Lchown(theirs, 65534, 65534))
	err := WriteFileAtomic(theirs, []byte("new\n"), 0o644)
	if err == nil || !strings.Contains(err.Error(), "uid 65534") || !strings.Contains(err.Error(), theirs) {
		t.Errorf("write through another user's link: %v", err)
	}
	if err := CheckWritable(theirs); err == nil {
		t.Error("CheckWritable passed another user's link in a sticky folder")
	}
	if got, _ := os.ReadFile(mine); string(got) != "keep\n" {
		t.Errorf("the link's target holds %q", got)
	}
	// One's own link there is followed, as the kernel would.
	own := filepath.Join(shared, "own.yaml")
	must(t, os.Symlink(mine, own))
	if err := WriteFileAtomic(own, []byte("new\n"), 0o644); err != nil {
		t.Errorf("write through one's own link: %v", err)
	}
	// Another user's link in a folder that is not sticky is followed too.
	plain := t.TempDir()
	other := filepath.Join(plain, "other.yaml")
	must(t, os.Symlink(mine, other))
	must(t, os.Lchown(other, 65534, 65534))
	if err := WriteFileAtomic(other, []byte("v3\n"), 0o644); err != nil {
		t.Errorf("write through a link in a private folder: %v", err)
	}
}

// Before (a stat, then a rename): of several writers creating one name at
// once, more than one succeeded and the last one's file won.
func TestCreateFileAtomicOneWinnerPerRace(t *testing.T) {
	dir := t.TempDir()
	const writers, trials = 8, 40
	for trial := range trials {
		p := filepath.Join(dir, fmt.Sprintf("race-%d.yaml", trial))
		errs := make(chan error, writers)
		start := make(chan struct{})
		for w := range writers {
			go func() {
				<-start
				errs <- CreateFileAtomic(p, []byte(fmt.Sprintf("writer %d\n", w)), 0o644)
			}()
		}
		close(start)
		won := 0
		for range writers {
			err := <-errs
			switch {
			case err == nil:
				won++
			case !errors.Is(err, fs.ErrExist):
				t.Fatalf("trial %d: %v", trial, err)
			}
		}
		if won != 1 {
			t.Fatalf("trial %d: %d writers created %s, want exactly one", trial, won, p)
		}
	}
	if n := dirNames(t, dir); len(n) != trials {
		t.Errorf("folder holds %d names, want %d (temporary files left?)", len(n), trials)
	}
}

func TestCreateFileAtomicNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "taken.yaml")
	must(t, os.WriteFile(p, []byte("keep\n"), 0o644))
	dangling := filepath.Join(dir, "link.yaml")
	must(t, os.Symlink("later.yaml", dangling))
	err := CreateFileAtomic(p, []byte("new\n"), 0o644)
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), p) {
		t.Errorf("create over a file: %v, want fs.ErrExist naming %s", err, p)
	}
	if got, _ := os.ReadFile(p); string(got) != "keep\n" {
		t.Errorf("the file holds %q", got)
	}
	// A dangling link's target is a new file: it is created there.
	must(t, CreateFileAtomic(dangling, []byte("new\n"), 0o600))
	if got, _ := os.ReadFile(filepath.Join(dir, "later.yaml")); string(got) != "new\n" {
		t.Errorf("the dangling link's target holds %q", got)
	}
	if st, _ := os.Stat(dangling); st.Mode().Perm() != 0o600 {
		t.Errorf("new file mode %04o", st.Mode().Perm())
	}
	if n := dirNames(t, dir); len(n) != 3 {
		t.Errorf("folder holds %v", n)
	}
}

func TestTargetAndSameFile(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.yaml")
	must(t, os.WriteFile(real, []byte("x\n"), 0o644))
	link := filepath.Join(dir, "link.yaml")
	must(t, os.Symlink("real.yaml", link))
	hard := filepath.Join(dir, "hard.yaml")
	must(t, os.Link(real, hard))
	folderLink := filepath.Join(t.TempDir(), "d")
	must(t, os.Symlink(dir, folderLink))
	t.Chdir(dir)
	for _, tc := range []struct {
		name, a, b string
		same       bool
	}{
		{"relative and absolute", "real.yaml", real, true},
		{"a link and its target", link, real, true},
		{"a hard link", hard, real, true},
		{"through a linked folder", filepath.Join(folderLink, "real.yaml"), real, true},
		{"two new names in one folder", "new.yaml", "other.yaml", false},
		{"a new name and itself through the linked folder", "new.yaml", filepath.Join(folderLink, "new.yaml"), true},
		{"different files", real, filepath.Join(dir, "new.yaml"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SameFile(tc.a, tc.b); got != tc.same {
				t.Errorf("SameFile(%s, %s) = %v", tc.a, tc.b, got)
			}
		})
	}
	got, exists, err := Target(link)
	if err != nil || got != real || !exists {
		t.Errorf("Target(link) = %s %v %v, want %s", got, exists, err, real)
	}
	if got, exists, err := Target(filepath.Join(folderLink, "new.yaml")); err != nil || got != filepath.Join(dir, "new.yaml") || exists {
		t.Errorf("Target(new through a linked folder) = %s %v %v", got, exists, err)
	}
}
