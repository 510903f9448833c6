package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"cgtune/engine/job"
	"cgtune/internal/fileio"
	"cgtune/internal/setup"
	"cgtune/search"
)

// output is a file a command is about to write: the flag (or key) that
// names it, and its path.
type output struct {
	flag, path string
}

// input is a file a command reads: what names it ("--preset", "the preset
// qwen-h100") and its path.
type input struct {
	what, path string
}

// outputCheck is the one gate every file a command writes for the person
// passes (--emit, --report and its plot, emit -o, preset export -o, the
// TUI's files): an output must not be one of the command's inputs, the
// running cgtune executable, a file in a folder of cgtune's own (a run or
// validation folder, or one below it, wherever it is; the cache folder and
// anything under it), or another of the command's outputs; and, without
// force, an existing file.
type outputCheck struct {
	inputs  []input
	folders []string // folders of cgtune's own (run folders, the cache) nothing is written into
	force   bool
}

// newOutputCheck is the gate for a command reading inputs, with force
// as its --force says: cgtune's cache folder is always closed to it.
func newOutputCheck(force bool, inputs ...input) outputCheck {
	return outputCheck{inputs: inputs, folders: []string{cacheFolder()}, force: force}
}

// check refuses, before anything is written, the outputs that could not be
// written or must not be: each gets the writability check WriteFileAtomic
// makes (a regular file or none, in a folder that takes files, no
// read-only file, no other user's link in a sticky folder). Files are
// compared by what they resolve to, not by how they are spelled. The
// error is one line naming the flag and the file.
func (c outputCheck) check(outs ...output) error {
	for i, o := range outs {
		if err := c.checkOne(o); err != nil {
			return err
		}
		for _, prev := range outs[:i] {
			if fileio.SameFile(o.path, prev.path) {
				return fail(exitBadInput, "%s %s and %s %s are the same file; give each its own", prev.flag, prev.path, o.flag, o.path)
			}
		}
	}
	return nil
}

func (c outputCheck) checkOne(o output) error {
	if err := fileio.CheckWritable(o.path); err != nil {
		return fail(exitBadInput, "%s %w", o.flag, err)
	}
	target, exists, err := fileio.Target(o.path)
	if err != nil {
		return fail(exitBadInput, "%s %w", o.flag, err)
	}
	if exe, err := os.Executable(); err == nil && fileio.SameFile(o.path, exe) {
		return fail(exitBadInput, "%s %s is the cgtune program itself (%s); cgtune never writes over it", o.flag, o.path, exe)
	}
	for _, in := range c.inputs {
		if in.path != "" && fileio.SameFile(o.path, in.path) {
			return fail(exitBadInput, "%s %s is %s (%s), an input of this run; cgtune never writes over its inputs", o.flag, o.path, in.what, in.path)
		}
	}
	if dir := c.ownFolder(target); dir != "" {
		return fail(exitBadInput, "%s %s is inside %s, which holds cgtune's run files; write it elsewhere", o.flag, o.path, dir)
	}
	if exists && !c.force {
		return fail(exitBadInput, "%s %s exists already; give --force to replace it", o.flag, o.path)
	}
	return nil
}

// ownMarkers are the files that make a folder a run or validation folder
// of cgtune's: a journal, a validation's outcome, a job ledger.
var ownMarkers = []string{search.JournalFile, job.ValidationJournal, job.ValidationFile, job.LedgerFile}

// ownFolder is the folder of cgtune's that target would be written into
// ("" for none): one of c.folders or a folder below one; a run or
// validation folder anywhere (target's own folder holding one of
// ownMarkers); or a folder below one (a job's folder in a validation
// folder): an ancestor holding a journal and the lock file every search
// and validation keeps, so that a folder of the person's that merely has
// a file named like a marker does not close everything below it.
// target's folder is resolved (fileio.Target).
func (c outputCheck) ownFolder(target string) string {
	dir := filepath.Dir(target)
	for _, f := range c.folders {
		if f != "" && within(dir, f) {
			return f
		}
	}
	has := func(d, name string) bool {
		_, err := os.Lstat(filepath.Join(d, name))
		return err == nil
	}
	if slices.ContainsFunc(ownMarkers, func(m string) bool { return has(dir, m) }) {
		return dir
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		if has(d, search.LockFile) && (has(d, search.JournalFile) || has(d, job.ValidationJournal)) {
			return d
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// within reports whether dir (resolved) is folder or inside it.
func within(dir, folder string) bool {
	if fileio.SameFile(dir, folder) {
		return true
	}
	real, err := filepath.EvalSymlinks(folder)
	if err != nil {
		return false
	}
	if real, err = filepath.Abs(real); err != nil {
		return false
	}
	rel, err := filepath.Rel(real, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// writeOutput writes data to path: replacing a file only with force, and
// otherwise creating it in one step, so a file that appeared since the
// check is not replaced either (an error that is an fs.ErrExist).
func writeOutput(path string, data []byte, force bool) error {
	if force {
		return fileio.WriteFileAtomic(path, data, 0o644)
	}
	err := fileio.CreateFileAtomic(path, data, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w; give --force to replace it", err)
	}
	return err
}

// cacheFolder is cgtune's folder in the user cache folder (run folders,
// profiles, calibration, the worker), "" when there is none.
func cacheFolder() string {
	root, err := setup.RunsRoot()
	if err != nil {
		return ""
	}
	return filepath.Dir(root)
}

// runInputs are the files a search started from f reads: the preset (a
// file, or the file a NAME is found in), the profile file, the Python
// interpreter and the run folder's run.json (newOutputCheck adds cgtune
// itself).
func (f *rootFlags) runInputs() []input {
	var ins []input
	if f.preset != "" {
		if st, err := os.Stat(f.preset); err == nil && !st.IsDir() {
			ins = append(ins, input{"--preset", f.preset})
		} else if info, err := presetStore("").Find(f.preset); err == nil {
			ins = append(ins, input{"the preset " + f.preset, info.Path})
		}
	}
	if f.profile.File != "" {
		ins = append(ins, input{"--profile-file", f.profile.File})
	}
	if f.python != "" {
		ins = append(ins, input{"--python", f.python})
	}
	return ins
}

// outputCheck is the check for the files a search from f writes, with the
// run folder dir ("" when it is yet to be made under the cache folder).
func (f *rootFlags) outputCheck(dir string) outputCheck {
	c := newOutputCheck(f.force, f.runInputs()...)
	c.folders = append(c.folders, dir)
	return c
}
