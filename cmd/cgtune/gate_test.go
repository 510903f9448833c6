package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/engine/job"
	"cgtune/internal/setup"
	"cgtune/presets"
	"cgtune/search"
)

// gateTarget is a file no writer may write: what it is, and its path.
type gateTarget struct {
	what, path string
}

// forbiddenTargets are, for the folders of a search (run) and of its
// validation (vd) and the test's cache folder, one file of each kind the
// output gate refuses: inside a run, validation or cache folder, or a
// folder below one (directly and through a link to the folder), the
// profile file the search reads, and the running executable.
func forbiddenTargets(t *testing.T, cache, run, vd, input string) []gateTarget {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(run, "jobs"), 0o755))
	must(t, os.MkdirAll(filepath.Join(cache, "cgtune", "runs"), 0o755))
	link := filepath.Join(t.TempDir(), "link")
	must(t, os.Symlink(run, link))
	exe, err := os.Executable()
	must(t, err)
	none := job.JobName(presets.Candidate{Impl: presets.ImplNone})
	return []gateTarget{
		{"the run's run.json", filepath.Join(run, runFile)},
		{"the run's journal", filepath.Join(run, search.JournalFile)},
		{"a new file in a run folder's sub-folder", filepath.Join(run, "jobs", "x.yaml")},
		{"the run's run.json through a link to the folder", filepath.Join(link, runFile)},
		{"the validation's outcome", filepath.Join(vd, job.ValidationFile)},
		{"a job's log in the validation folder", filepath.Join(vd, none, none+".log")},
		{"a new file in the cache folder", filepath.Join(cache, "cgtune", "x.yaml")},
		{"a new file in a sub-folder of the cache folder", filepath.Join(cache, "cgtune", "runs", "x.yaml")},
		{"an input of the command", input},
		{"the running executable", exe},
	}
}

// gateWriter writes to a path with --force (or the TUI's overwrite): its
// name and a function that returns the exit code and stderr.
type gateWriter struct {
	name  string
	write func(t *testing.T, path string) (int, string)
	// md: the writer writes Markdown (a report): the target is the same
	// name with .md.
	md bool
}

// Every writer (preset export -o, emit -o, --emit, --report) goes through
// one gate, which refuses a target in a run, validation or cache folder
// and the running cgtune itself, and leaves the target as it was: a
// resume needs those folders intact, and a job's log is its evidence.
func TestEveryWriterRefusesEveryForbiddenTarget(t *testing.T) {
	cache := isolate(t)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(cache, "config"))
	run := searchRun(t)
	vd, _ := validateOnce(t, run)
	prof := writeFile(t, "adj.yaml", "host_scale: 1.1\n")
	if code, _, errb := cgtune(t, "preset", "save", "team", "--model", "llama3_8b"); code != exitOK {
		t.Fatalf("preset save: %s", errb)
	}
	presetPath := filepath.Join(cache, "config", "cgtune", "presets", "team.yaml")
	headless := []string{"--headless", "--model", "llama3_8b", "--engine", "estimate", "--profile-file", prof, "--force"}
	b := newTUIBackend(&rootFlags{profile: setup.Profile{File: prof}}, nil)
	t.Cleanup(func() { b.close(func() {}) })
	writers := []gateWriter{
		{name: "emit -o", write: func(t *testing.T, p string) (int, string) {
			code, _, errb := cgtune(t, "emit", "--impl", "local", "--scope", "full_iteration", "--force", "-o", p)
			return code, errb
		}},
		{name: "preset export -o", write: func(t *testing.T, p string) (int, string) {
			code, _, errb := cgtune(t, "preset", "export", "team", "--force", "-o", p)
			return code, errb
		}},
		{name: "--emit", write: func(t *testing.T, p string) (int, string) {
			code, _, errb := cgtune(t, append(headless, "--emit", p)...)
			return code, errb
		}},
		{name: "--report", md: true, write: func(t *testing.T, p string) (int, string) {
			code, _, errb := cgtune(t, append(headless, "--report", p)...)
			return code, errb
		}},
		{name: "the TUI's overrides file", write: func(t *testing.T, p string) (int, string) {
			if _, err := b.WriteOverrides(p, []byte("x: 1\n"), true); err != nil {
				return exitBadInput, err.Error()
			}
			return exitOK, ""
		}},
	}
	for _, w := range writers {
		input := prof // what the search and the TUI read
		switch w.name {
		case "preset export -o":
			input = presetPath
		case "emit -o":
			input = "" // emit reads no file
		}
		for _, tg := range forbiddenTargets(t, cache, run, vd, input) {
			p := tg.path
			if p == "" {
				continue
			}
			if w.md {
				if tg.what == "the running executable" || tg.what == "an input of the command" {
					continue // a report is FILE.md: neither is one
				}
				p = strings.TrimSuffix(p, filepath.Ext(p)) + ".md"
			}
			t.Run(w.name+" onto "+tg.what, func(t *testing.T) {
				before, beforeErr := os.ReadFile(p)
				code, errb := w.write(t, p)
				if code != exitBadInput || !strings.Contains(errb, p) {
					t.Errorf("exit %d, %q; want exit 2 naming %s", code, errb, p)
				}
				after, afterErr := os.ReadFile(p)
				if !bytes.Equal(before, after) || (beforeErr == nil) != (afterErr == nil) {
					t.Errorf("%s was changed", p)
				}
			})
		}
	}
}
