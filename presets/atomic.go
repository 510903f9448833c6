package presets

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
// exists and is not a regular file: renaming over a device, a FIFO or a
// socket would replace the node itself, which is never what was meant.
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
			return p, nil
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
		return fmt.Errorf("%s: cannot create files in %s (%v)", path, dir, unwrapPath(err))
	}
	return fmt.Errorf("%s: %v", path, unwrapPath(err))
}

// WriteFileAtomic writes data to path so that a reader sees either the old
// file or the whole new one: it writes a temporary file in the same folder
// (rename is only atomic within one file system), syncs it, and renames it
// over path. A symbolic link at path is kept: the file it points to is
// replaced, atomically in that file's folder. Anything at path that is not
// a regular file (a device, a FIFO, a socket, a folder) is refused, not
// replaced. On any failure the temporary file is removed and path is left
// as it was; errors name path, never the temporary file.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
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
			err = fmt.Errorf("%s: %w", path, unwrapPath(err))
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	// CreateTemp makes the file 0600; set what the caller asked for before
	// it becomes visible under its real name.
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	// The target may have been replaced by something else since it was
	// checked; rename would take the node's place, so look once more.
	if st, lerr := os.Lstat(target); lerr == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("is %s now, not a regular file", fileKind(st.Mode()))
		return err
	}
	if err = os.Rename(tmp, target); err != nil {
		return err
	}
	// Persist the rename itself; not every file system lets a folder be
	// synced, and the data is already safe, so a failure here is ignored.
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
