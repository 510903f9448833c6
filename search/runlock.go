package search

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"cgtune/internal/fileio"
)

// LockFile is the file in a run folder that the search holding the folder
// keeps locked (flock), with its process id in it.
const LockFile = "lock"

// RunLock is the exclusive hold of one process on a run folder, for the
// life of a search: two searches appending to one journal would each run
// every remaining candidate (on a GPU, measuring the same device at once)
// and one's settings would overwrite the other's.
type RunLock struct {
	f   *os.File
	dir string
}

// RunInUseError says which process holds a run folder.
type RunInUseError struct {
	Dir string
	PID int // 0 when the holder has not written its pid yet
}

func (e *RunInUseError) Error() string {
	who := "another cgtune"
	if e.PID > 0 {
		who = fmt.Sprintf("another cgtune (pid %d)", e.PID)
	}
	return fmt.Sprintf("run folder %s is in use by %s; wait for it to finish or use another folder", e.Dir, who)
}

// LockRunDir creates dir if needed and takes the lock on it without
// waiting; a folder another process holds is a *RunInUseError. The lock
// is the kernel's (flock), so a process that dies releases it.
func LockRunDir(dir string) (*RunLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockFile)
	f, err := fileio.OpenOwn(path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("run folder %s: cannot open its lock file: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &RunInUseError{Dir: dir, PID: readPID(f)}
		}
		return nil, fmt.Errorf("run folder %s: lock: %w", dir, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		f.WriteAt(pid, 0)
	}
	return &RunLock{f: f, dir: dir}, nil
}

func readPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	return pid
}

// Dir is the folder the lock holds.
func (l *RunLock) Dir() string { return l.dir }

// Release gives the folder up. The lock file stays (removing it would let
// a third process lock a new file while a second still waits on the old
// one); it is emptied, so no stale pid is read from it.
func (l *RunLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Truncate(0)
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}

// runFolderFiles are the names a run folder holds, besides the ones its
// caller adds (the command line's run.json).
var runFolderFiles = []string{JournalFile, LockFile, UnreadableFile, FinishedFile, RankingFile}

// CheckRunDir refuses a folder that holds something other than a cgtune
// run: a --run-dir pointed at a home folder or at another tool's output
// must not have its files overwritten. A missing or empty folder is fine;
// extra names files the caller keeps there too.
func CheckRunDir(dir string, extra ...string) error {
	known := append(slices.Clone(runFolderFiles), extra...)
	return checkOwnFolder(dir, "run", func(e fs.DirEntry) bool {
		return e.Type().IsRegular() && slices.Contains(known, e.Name())
	}, known)
}

// checkOwnFolder refuses a folder holding entries other than ours (what
// names what cgtune keeps there: "run") and the temporary files of an
// atomic write of one of the names in atomic cut short by a crash. A
// missing folder is fine.
func checkOwnFolder(dir, what string, ours func(fs.DirEntry) bool, atomic []string) error {
	entries, err := fileio.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		if st, serr := os.Stat(dir); serr == nil && !st.IsDir() {
			return fmt.Errorf("%s folder %s is not a folder", what, dir)
		}
		return err
	}
	var foreign []string
	for _, e := range entries {
		name := e.Name()
		if ours(e) {
			continue
		}
		if base, ok := strings.CutPrefix(name, "."); ok && slices.ContainsFunc(atomic, func(k string) bool { return strings.HasPrefix(base, k+".tmp-") }) {
			continue
		}
		foreign = append(foreign, name)
	}
	if len(foreign) == 0 {
		return nil
	}
	shown := foreign
	if len(shown) > 3 {
		shown = append(slices.Clone(shown[:3]), fmt.Sprintf("and %d more", len(foreign)-3))
	}
	return fmt.Errorf("%s holds files that are not a cgtune %s (%s); give an empty or new folder", dir, what, strings.Join(shown, ", "))
}
