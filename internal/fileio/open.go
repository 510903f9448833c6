package fileio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
)

// Unbounded is the limit of OpenFileLimited for a file read as a stream
// that grows while it is read (a training job's log): its reader bounds
// each read itself.
const Unbounded = int64(1<<63 - 1)

// readChunk is how much ReadFileContext reads between looks at its
// context.
const readChunk = 1 << 20

// ReadFileContext is ReadFileLimited that gives up when ctx is done: a
// large journal on a slow disk must not keep Ctrl-C waiting.
func ReadFileContext(ctx context.Context, path string, limit int64) ([]byte, error) {
	f, err := OpenFileLimited(path, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var data []byte
	buf := make([]byte, readChunk)
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		n, rerr := f.Read(buf)
		data = append(data, buf[:n]...)
		if int64(len(data)) > limit {
			return nil, tooBig(path, limit)
		}
		if errors.Is(rerr, io.EOF) {
			return data, nil
		}
		if rerr != nil {
			return nil, fmt.Errorf("%s: %w", path, unwrapPath(rerr))
		}
	}
}

// ReadDir lists the folder at path, sorted by name, as os.ReadDir does,
// but opens it only as a folder (O_DIRECTORY, non-blocking): a FIFO put
// where a folder was expected is an error naming it, not a hang.
func ReadDir(path string) ([]fs.DirEntry, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			if st, serr := os.Stat(path); serr == nil {
				return nil, fmt.Errorf("%s is %s, not a folder", path, fileKind(st.Mode()))
			}
		}
		return nil, err
	}
	defer f.Close()
	es, err := f.ReadDir(-1)
	slices.SortFunc(es, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return es, err
}

// OpenAppend opens the regular file at path for appending (and reading
// back), creating it with perm when it is missing. It never follows a
// symbolic link at path (O_NOFOLLOW: a link planted there is an error, not
// a way to append to the file it names) and never blocks on a FIFO or a
// device (O_NONBLOCK, then the file is checked to be a regular one).
func OpenAppend(path string, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, openError(path, err)
	}
	if err := checkOpened(path, f); err != nil {
		return nil, err
	}
	return f, nil
}

// CreateFresh creates the file at path anew for writing (a job's log that
// a re-run starts again): a regular file there is removed first (its name
// only: a hard link's other names keep their data), and the new one is
// created exclusively (O_EXCL, which never follows a link). A symbolic
// link, a FIFO, a device or a folder at path is refused, naming it: the
// file it leads to is not cgtune's to truncate.
func CreateFresh(path string, perm os.FileMode) (*os.File, error) {
	st, err := os.Lstat(path)
	switch {
	case err == nil && st.Mode().IsRegular():
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	case err == nil:
		return nil, fmt.Errorf("%s is %s, not a regular file; cgtune does not write through it", path, fileKind(st.Mode()))
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return nil, openError(path, err)
	}
	return f, nil
}

// openError names what is at path when an open refused it: a link that
// O_NOFOLLOW would not follow (ELOOP), a FIFO without a reader (ENXIO).
func openError(path string, err error) error {
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENXIO) || errors.Is(err, fs.ErrExist) {
		if st, serr := os.Lstat(path); serr == nil && !st.Mode().IsRegular() {
			return fmt.Errorf("%s is %s, not a regular file; cgtune does not write through it", path, fileKind(st.Mode()))
		}
	}
	return err
}

// checkOpened closes f and fails unless it is a regular file.
func checkOpened(path string, f *os.File) error {
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is %s, not a regular file; cgtune does not write through it", path, fileKind(st.Mode()))
	}
	if err != nil {
		f.Close()
	}
	return err
}

// SyncDir persists the names in the folder dir (a file just created or
// renamed there). Not every file system lets a folder be synced, and the
// data is safe already, so a failure is not reported.
func SyncDir(dir string) {
	if d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0); err == nil {
		d.Sync()
		d.Close()
	}
}

// CreateExclusive creates the file at path for appending, failing (with an
// error that is an fs.ErrExist) when anything is there already, a link
// included: the start of a journal that must be new.
func CreateExclusive(path string, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, perm)
}

// WriteFresh writes data to a new file at path (CreateFresh: a regular
// file there is replaced, a link or any other node refused), synced.
func WriteFresh(path string, data []byte, perm os.FileMode) error {
	f, err := CreateFresh(path, perm)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	if err := errors.Join(werr, serr, f.Close()); err != nil {
		os.Remove(path)
		return fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	return nil
}

// WriteOwnFileAtomic is WriteFileAtomic for a file in a folder of
// cgtune's own (a run's run.json, a validation's outcome): a symbolic link
// planted at path is refused, never followed to replace the file it names.
func WriteOwnFileAtomic(path string, data []byte, perm os.FileMode) error {
	if st, err := os.Lstat(path); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link; cgtune does not write through a link in its own folders", path)
	}
	return WriteFileAtomic(path, data, perm)
}

// OpenOwn opens the regular file at path for reading and writing in place
// (a lock file whose content is rewritten), creating it with perm: never
// through a link planted at path, never blocking on a FIFO.
func OpenOwn(path string, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, openError(path, err)
	}
	if err := checkOpened(path, f); err != nil {
		return nil, err
	}
	return f, nil
}
