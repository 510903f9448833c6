package fileio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// maxSymlinks bounds how many links a path may go through, as the kernel
// does (ELOOP), so a link loop is an error and not a hang.
const maxSymlinks = 40

// fileKind names a file type for messages ("a FIFO", "a folder").
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsRegular():
		return "a regular file"
	}
	return "not a regular file"
}

// writeTarget is where a write to path lands: path itself, or, when path
// is a symbolic link (or a chain of them), the file it points to, so that
// replacing the file keeps the link. It fails, naming path, when that file
// exists and is not a regular file (renaming over a device, a FIFO or a
// socket would replace the node itself, which is never what was meant),
// when it is read-only, and when a link on the way is one the kernel would
// not follow for us (protectedLink).
func writeTarget(path string) (string, error) {
	p := path
	for range maxSymlinks {
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			// A new file (possibly at a dangling link's target); a folder
			// that is missing or not a folder is for the caller to report.
			return p, nil
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, unwrapPath(err))
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			if !st.Mode().IsRegular() {
				return "", fmt.Errorf("%s is %s, not a regular file; cgtune only writes regular files", describe(path, p), fileKind(st.Mode()))
			}
			if st.Mode().Perm()&0o222 == 0 {
				// Root may write anything; a file nobody may write says
				// it is not to be replaced, and cgtune takes it at its word.
				return "", fmt.Errorf("%s is read-only (mode %04o); cgtune does not replace a read-only file", describe(path, p), st.Mode().Perm())
			}
			return p, nil
		}
		if err := protectedLink(p, st); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		dest, err := os.Readlink(p)
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, unwrapPath(err))
		}
		if !filepath.IsAbs(dest) {
			dest = filepath.Join(filepath.Dir(p), dest)
		}
		p = dest
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", path)
}

// protectedLink refuses the symbolic link at p (whose Lstat is st) where
// Linux's fs.protected_symlinks would refuse to follow it: a link in a
// sticky, world-writable folder (/tmp) that belongs neither to us nor to
// the folder's owner. cgtune reads the link and renames over its target
// itself, so the kernel's rule would not apply; another user's link in
// /tmp must not make cgtune replace a file of ours it points to.
func protectedLink(p string, st fs.FileInfo) error {
	lst, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	dir := folderOf(p)
	dst, err := os.Stat(dir)
	if err != nil {
		return nil
	}
	ds, ok := dst.Sys().(*syscall.Stat_t)
	if !ok || dst.Mode()&fs.ModeSticky == 0 || dst.Mode().Perm()&0o002 == 0 {
		return nil
	}
	if int(lst.Uid) == os.Geteuid() || lst.Uid == ds.Uid {
		return nil
	}
	return fmt.Errorf("%s is a symbolic link owned by uid %d in the shared folder %s (sticky, world-writable); cgtune does not write through another user's link there", p, lst.Uid, dir)
}

// describe names path, and the file it leads to when that differs.
func describe(path, target string) string {
	if path == target {
		return path
	}
	return fmt.Sprintf("%s (a link to %s)", path, target)
}

// unwrapPath drops the path an *os.PathError carries, so that a message
// names the user's path and not a temporary file's.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// folderOf is the folder a file at target is written in.
func folderOf(target string) string {
	dir := filepath.Dir(target)
	if dir == "" {
		return "."
	}
	return dir
}

// CheckWritable tells, before any work is done, whether WriteFileAtomic
// could write path: the file is missing or regular (through symbolic
// links), and its folder exists and takes a new file. It tries that by
// creating and removing a temporary file, the only test that holds for
// root, read-only mounts and ACLs alike. Errors name path.
func CheckWritable(path string) error {
	if path == "" || os.IsPathSeparator(path[len(path)-1]) {
		return fmt.Errorf("%q: no file name", path)
	}
	target, err := writeTarget(path)
	if err != nil {
		return err
	}
	dir := folderOf(target)
	f, err := os.CreateTemp(dir, "."+filepath.Base(target)+".check-*")
	if err != nil {
		return folderError(path, dir, err)
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}

// folderError explains why a file cannot be created in dir.
func folderError(path, dir string, err error) error {
	st, serr := os.Stat(dir)
	switch {
	case errors.Is(serr, fs.ErrNotExist):
		return fmt.Errorf("%s: the folder %s does not exist", path, dir)
	case serr == nil && !st.IsDir():
		return fmt.Errorf("%s: %s is not a folder", path, dir)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%s: cannot create files in %s (%w)", path, dir, unwrapPath(err))
	}
	return fmt.Errorf("%s: %w", path, unwrapPath(err))
}

// WriteFileAtomic writes data to path so that a reader sees either the old
// file or the whole new one: it writes a temporary file in the same folder
// (rename is only atomic within one file system), syncs it, and renames it
// over path. A file it replaces keeps its mode (and, where the process may
// give it away, its owner and group); perm is for a new file. A symbolic
// link at path is kept: the file it points to is replaced, atomically in
// that file's folder. Anything at path that is not a regular file (a
// device, a FIFO, a socket, a folder), a read-only file and another user's
// link in a sticky folder are refused, not replaced. On any failure the
// temporary file is removed and path is left as it was; errors name path,
// never the temporary file.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeAtomic(path, data, perm, true)
}

// CreateFileAtomic is WriteFileAtomic for a file that must not exist yet:
// the new file gets its name with link(2), which fails when the name is
// taken, so of several processes creating the same path at once exactly
// one succeeds and none replaces another's file. A path that exists (a
// dangling link's target is created) is an error wrapping fs.ErrExist.
func CreateFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeAtomic(path, data, perm, false)
}

func writeAtomic(path string, data []byte, perm os.FileMode, replace bool) (err error) {
	if path == "" || os.IsPathSeparator(path[len(path)-1]) {
		return &os.PathError{Op: "write", Path: path, Err: errors.New("no file name")}
	}
	target, err := writeTarget(path)
	if err != nil {
		return err
	}
	dir := folderOf(target)
	f, err := os.CreateTemp(dir, "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return folderError(path, dir, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			if !errors.Is(err, fs.ErrExist) || replace {
				err = fmt.Errorf("%s: %w", path, unwrapPath(err))
			}
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	old, lerr := os.Lstat(target)
	if lerr == nil && replace {
		keepOwner(f, old)
		perm = old.Mode().Perm()
	}
	// CreateTemp makes the file 0600; set the mode before the file becomes
	// visible under its real name.
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if replace {
		err = replaceWith(tmp, target)
	} else {
		err = linkNew(path, tmp, target)
	}
	if err != nil {
		return err
	}
	// Persist the rename itself; not every file system lets a folder be
	// synced, and the data is already safe, so a failure here is ignored.
	SyncDir(dir)
	return nil
}

// keepOwner gives the new file f the owner and group of the file old it
// replaces, as far as the process may (root may; others may keep the group
// when they are in it); where it may not, the file is the writer's.
func keepOwner(f *os.File, old fs.FileInfo) {
	st, ok := old.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	if f.Chown(int(st.Uid), int(st.Gid)) != nil {
		f.Chown(-1, int(st.Gid))
	}
}

// replaceWith renames tmp over target, once more refusing a target that
// has become something other than a regular file since it was checked
// (rename would take the node's place).
func replaceWith(tmp, target string) error {
	if st, err := os.Lstat(target); err == nil && !st.Mode().IsRegular() {
		return fmt.Errorf("is %s now, not a regular file", fileKind(st.Mode()))
	}
	return os.Rename(tmp, target)
}

// linkNew gives tmp the name target with link(2), which never replaces a
// file (unlike rename, or a stat before it), then drops the temporary name.
func linkNew(path, tmp, target string) error {
	if err := os.Link(tmp, target); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return existsError(path)
		}
		return err
	}
	os.Remove(tmp)
	return nil
}

// existsError is CreateFileAtomic's refusal of a path that is taken.
type existsError string

func (e existsError) Error() string        { return string(e) + " exists already" }
func (e existsError) Is(target error) bool { return target == fs.ErrExist }

// Target is where a write to path would land (through symbolic links, see
// WriteFileAtomic), as an absolute path whose folder has no links left in
// it, and whether a file is there now. Two paths that name the same file
// have the same Target; errors are WriteFileAtomic's refusals.
func Target(path string) (string, bool, error) {
	if path == "" || os.IsPathSeparator(path[len(path)-1]) {
		return "", false, fmt.Errorf("%q: no file name", path)
	}
	target, err := writeTarget(path)
	if err != nil {
		return "", false, err
	}
	_, serr := os.Lstat(target)
	return resolved(target), serr == nil, nil
}

// resolved is p made absolute with the links in its folder resolved (the
// file itself is taken as it is); as much as exists is resolved.
func resolved(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}

// SameFile reports whether paths a and b name one file: the same path once
// links are resolved, or (hard links, bind mounts) the same inode.
func SameFile(a, b string) bool {
	ra, rb := resolvedAll(a), resolvedAll(b)
	if ra == rb {
		return true
	}
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// resolvedAll is p with every link resolved, the file's own included
// (a missing file: its folder's).
func resolvedAll(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		if abs, err := filepath.Abs(r); err == nil {
			return abs
		}
	}
	if t, err := writeTarget(p); err == nil {
		return resolved(t)
	}
	return resolved(p)
}
