package fileio

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// ReadFileLimited reads the regular file at path, which may hold at most
// limit bytes. Anything that could block or never end — a FIFO, a device
// such as /dev/zero, a socket, a folder — is refused before it is opened
// for reading (and the open itself is non-blocking, so a file swapped for
// a FIFO in between cannot hang either). Errors name path.
func ReadFileLimited(path string, limit int64) ([]byte, error) {
	f, err := OpenFileLimited(path, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	if int64(len(data)) > limit {
		return nil, tooBig(path, limit)
	}
	return data, nil
}

// OpenFileLimited opens the regular file at path for reading, with the
// checks of ReadFileLimited: for an input read as a stream (a training
// log), which the caller reads at most limit bytes of.
func OpenFileLimited(path string, limit int64) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, notRegular(path, st.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err = f.Stat(); err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(path, st.Mode())
	}
	if st.Size() > limit {
		f.Close()
		return nil, tooBig(path, limit)
	}
	return f, nil
}

func notRegular(path string, m os.FileMode) error {
	return fmt.Errorf("%s is %s, not a regular file", path, fileKind(m))
}

func tooBig(path string, limit int64) error {
	return fmt.Errorf("%s is larger than %s, the most cgtune reads from such a file", path, byteSize(limit))
}

// byteSize renders a power-of-two size as people write it (4 MiB).
func byteSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Readable checks, without opening it, that path is a regular file (links
// followed) of at most limit bytes: one ReadFileLimited would read.
func Readable(path string, limit int64) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return unwrapPath(err)
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s, not a regular file", fileKind(st.Mode()))
	case st.Size() > limit:
		return fmt.Errorf("larger than %s", byteSize(limit))
	}
	return nil
}
