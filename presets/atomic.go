package presets

import (
	"errors"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to path so that a reader sees either the old
// file or the whole new one: it writes a temporary file in the same folder
// (rename is only atomic within one file system), syncs it, and renames it
// over path. On any failure the temporary file is removed and path is left
// as it was.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if base == "" {
		return &os.PathError{Op: "write", Path: path, Err: errors.New("no file name")}
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
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
	if err = os.Rename(tmp, path); err != nil {
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
