package setup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// RunsRoot is where run folders go by default.
func RunsRoot() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "cgtune", "runs"), nil
}

// ResolveRun finds the run folder --resume names: a folder, or the name of
// one under the runs folder.
func ResolveRun(name string) (string, error) {
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		return name, nil
	}
	if !strings.ContainsRune(name, os.PathSeparator) {
		if root, err := RunsRoot(); err == nil {
			p := filepath.Join(root, name)
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("--resume %s: no such run folder", name)
}

// NewRunDir claims a fresh folder under the runs folder, named for the
// time (with a suffix when two searches start in the same second).
func NewRunDir() (string, error) {
	root, err := RunsRoot()
	if err != nil {
		return "", fmt.Errorf("no user cache folder for the run (%w): give --run-dir", err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	base := time.Now().Format("20060102-150405")
	for i := 1; ; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		p := filepath.Join(root, name)
		err := os.Mkdir(p, 0o755)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
}
