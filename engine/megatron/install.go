// Package megatron measures candidates on the real framework: the user's
// installed Megatron-Core (and Transformer Engine when importable) runs the
// job's per-rank slice on this node's GPUs, driven by a Python worker that
// ships inside the binary and speaks cgtune's worker protocol.
package megatron

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"cgtune/internal/fileio"
)

//go:embed pyworker/*.py
var pyFiles embed.FS

// WorkerEntry is the worker's main file inside an installed folder.
const WorkerEntry = "worker.py"

// workerFiles lists the embedded worker's files and contents, sorted.
func workerFiles() ([]string, map[string][]byte, error) {
	entries, err := fs.ReadDir(pyFiles, "pyworker")
	if err != nil {
		return nil, nil, err
	}
	content := map[string][]byte{}
	var names []string
	for _, e := range entries {
		b, err := pyFiles.ReadFile("pyworker/" + e.Name())
		if err != nil {
			return nil, nil, err
		}
		names = append(names, e.Name())
		content[e.Name()] = b
	}
	sort.Strings(names)
	return names, content, nil
}

// ContentHash is the hash of the embedded worker (names and contents); the
// installed copy lives in a folder named after it.
func ContentHash() (string, error) {
	names, content, err := workerFiles()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(content[n]))
		h.Write(content[n])
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Install writes the embedded worker under root/<content hash>/ (root is
// created with mode 0700) unless a verified copy is already there, and
// returns the path of its entry file. It is called before every worker
// start, so a copy someone changed is replaced, never run.
func Install(root string) (string, error) {
	hash, err := ContentHash()
	if err != nil {
		return "", err
	}
	if err := privateDir(root); err != nil {
		return "", err
	}
	dir := filepath.Join(root, hash)
	if err := Verify(dir); err == nil {
		return filepath.Join(dir, WorkerEntry), nil
	}
	names, content, err := workerFiles()
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, ".install-")
	if err != nil {
		return "", fmt.Errorf("megatron worker: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, n := range names {
		if err := fileio.WriteFresh(filepath.Join(tmp, n), content[n], 0o600); err != nil {
			return "", fmt.Errorf("megatron worker: %w", err)
		}
	}
	if err := os.Chmod(tmp, 0o700); err != nil {
		return "", err
	}
	// A stale or tampered copy is moved aside, then replaced in one rename.
	if _, err := os.Lstat(dir); err == nil {
		old := dir + ".old"
		os.RemoveAll(old)
		if err := os.Rename(dir, old); err != nil {
			return "", fmt.Errorf("megatron worker: cannot replace %s: %w", dir, err)
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("megatron worker: %w", err)
	}
	if err := Verify(dir); err != nil {
		return "", err
	}
	return filepath.Join(dir, WorkerEntry), nil
}

// privateDir makes sure dir exists, is a real folder owned by this user,
// and no one else can write to it.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("megatron worker cache %s: %w", dir, err)
	}
	return checkPrivate(dir)
}

func checkPrivate(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("megatron worker: %w", err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("megatron worker: %s is a symbolic link; refusing to run code from it", path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("megatron worker: %s belongs to uid %d, not to this user; refusing to run code from it", path, st.Uid)
	}
	if fi.IsDir() && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o700); err != nil {
			return fmt.Errorf("megatron worker: %s is writable by others (mode %o): %w", path, fi.Mode().Perm(), err)
		}
	}
	if !fi.IsDir() && fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("megatron worker: %s is writable by others (mode %o)", path, fi.Mode().Perm())
	}
	return nil
}

// Verify checks an installed worker folder: private to this user, and
// every file exactly what this binary embeds (no more, no fewer).
func Verify(dir string) error {
	if err := checkPrivate(dir); err != nil {
		return err
	}
	fi, _ := os.Lstat(dir)
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("megatron worker: %s is not a private folder", dir)
	}
	names, content, err := workerFiles()
	if err != nil {
		return err
	}
	onDisk, err := fileio.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("megatron worker: %w", err)
	}
	seen := 0
	for _, e := range onDisk {
		if e.Name() == "__pycache__" {
			continue
		}
		want, ok := content[e.Name()]
		if !ok {
			return fmt.Errorf("megatron worker: unexpected file %s in %s", e.Name(), dir)
		}
		p := filepath.Join(dir, e.Name())
		if err := checkPrivate(p); err != nil {
			return err
		}
		got, err := fileio.ReadFileLimited(p, int64(len(want))+1)
		if err != nil || sha256.Sum256(got) != sha256.Sum256(want) {
			return fmt.Errorf("megatron worker: %s differs from the embedded copy", p)
		}
		seen++
	}
	if seen != len(names) {
		return fmt.Errorf("megatron worker: %s is incomplete", dir)
	}
	return nil
}
