package fileio

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"time"
)

// StaleTempAge is how old a temporary file of an atomic write must be
// before RemoveStaleTemps takes it for one whose writer died: a write
// takes milliseconds, so an hour-old one is nobody's.
const StaleTempAge = time.Hour

// tempName matches the temporary files WriteFileAtomic, CreateFileAtomic
// and CheckWritable make beside a file NAME: ".NAME.tmp-DIGITS" and
// ".NAME.check-DIGITS" (os.CreateTemp's random part is digits).
var tempName = regexp.MustCompile(`^\..+\.(tmp|check)-[0-9]+$`)

// RemoveStaleTemps removes from dir the temporary files of atomic writes
// that were never finished: those a process killed with SIGKILL (which no
// program can catch) left behind. Only regular files named as cgtune
// names them, owned by this user and older than age are removed; a
// missing folder holds none. It returns the paths it removed.
func RemoveStaleTemps(dir string, age time.Duration) ([]string, error) {
	entries, err := ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		if !e.Type().IsRegular() || !tempName.MatchString(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < age {
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if os.Remove(p) == nil {
			removed = append(removed, p)
		}
	}
	return removed, nil
}
