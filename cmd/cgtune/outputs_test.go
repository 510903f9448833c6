package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"cgtune/report"
	"cgtune/search"
	"cgtune/tui"
)

// headless is the estimate-engine search the output tests run.
var headless = []string{"--headless", "--model", "llama3_8b", "--engine", "estimate"}

// refusedBeforeSearch checks a command line was refused with exit 2, one
// line naming want..., before the search planned anything.
func refusedBeforeSearch(t *testing.T, code int, out, errb string, want ...string) {
	t.Helper()
	if code != exitBadInput || strings.Count(errb, "\n") != 1 || strings.Contains(errb, "plan:") || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line before the search", code, out, errb)
	}
	for _, w := range want {
		if !strings.Contains(errb, w) {
			t.Errorf("stderr %q lacks %q", errb, w)
		}
	}
}

// --emit onto the run's own preset file (through a link or a hard link
// too), profile file or journal is refused before the search, and the
// input is left as it was.
func TestHeadlessNeverWritesOverItsInputs(t *testing.T) {
	cache := isolate(t)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(cache, "config"))
	dir := t.TempDir()
	t.Chdir(dir)
	if code, _, errb := cgtune(t, "preset", "save", "p", "--model", "llama3_8b"); code != exitOK {
		t.Fatalf("preset save: %s", errb)
	}
	if code, _, errb := cgtune(t, "preset", "export", "p", "-o", "pre.yaml"); code != exitOK {
		t.Fatalf("preset export: %s", errb)
	}
	must(t, os.Symlink("pre.yaml", "link.yaml"))
	must(t, os.Link("pre.yaml", "hard.yaml"))
	must(t, os.WriteFile("prof.md", []byte("host_scale: 1.1\n"), 0o644))
	run := filepath.Join(dir, "run")
	if code, _, errb := cgtune(t, append(headless, "--strategy", "exhaustive", "--run-dir", run)...); code != exitOK {
		t.Fatalf("search: %s", errb)
	}
	other := filepath.Join(dir, "other")
	if code, _, errb := cgtune(t, append(headless, "--run-dir", other)...); code != exitOK {
		t.Fatalf("search: %s", errb)
	}
	savedPreset := filepath.Join(cache, "config", "cgtune", "presets", "p.yaml")
	must(t, os.MkdirAll(filepath.Join(cache, "cgtune"), 0o755))
	inputs := map[string]string{}
	for _, p := range []string{"pre.yaml", "prof.md", savedPreset, filepath.Join(run, search.JournalFile), filepath.Join(run, runFile)} {
		data, err := os.ReadFile(p)
		must(t, err)
		inputs[p] = string(data)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"--emit onto --preset", []string{"--headless", "--preset", "pre.yaml", "--engine", "estimate", "--emit", "pre.yaml"}, []string{"--emit pre.yaml", "--preset"}},
		{"--emit onto --preset, forced", []string{"--headless", "--preset", "pre.yaml", "--engine", "estimate", "--emit", "pre.yaml", "--force"}, []string{"--emit pre.yaml", "input"}},
		{"--emit spelled another way", []string{"--headless", "--preset", "./pre.yaml", "--engine", "estimate", "--emit", filepath.Join(dir, "pre.yaml"), "--force"}, []string{"input"}},
		{"--emit through a link", []string{"--headless", "--preset", "pre.yaml", "--engine", "estimate", "--emit", "link.yaml", "--force"}, []string{"--emit link.yaml", "input"}},
		{"--emit onto a hard link", []string{"--headless", "--preset", "pre.yaml", "--engine", "estimate", "--emit", "hard.yaml", "--force"}, []string{"--emit hard.yaml", "input"}},
		{"--emit onto a preset found by name", []string{"--headless", "--preset", "p", "--engine", "estimate", "--emit", savedPreset, "--force"}, []string{"the preset p"}},
		{"--report onto --profile-file", append(slicesOf(headless), "--profile-file", "prof.md", "--report", "prof.md", "--force"), []string{"--report prof.md", "--profile-file"}},
		{"--emit onto the journal", []string{"--headless", "--resume", run, "--emit", filepath.Join(run, search.JournalFile), "--force"}, []string{"--emit " + filepath.Join(run, search.JournalFile), "run files"}},
		{"--emit into the run folder", []string{"--headless", "--resume", run, "--emit", filepath.Join(run, "o.yaml")}, []string{"run files"}},
		{"--emit into another run folder", append(slicesOf(headless), "--emit", filepath.Join(other, runFile), "--force"), []string{"run files"}},
		{"--emit into the cache folder", append(slicesOf(headless), "--emit", filepath.Join(cache, "cgtune", "o.yaml")), []string{"run files"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errb := cgtune(t, tc.args...)
			refusedBeforeSearch(t, code, out, errb, tc.want...)
		})
	}
	for p, before := range inputs {
		if got, _ := os.ReadFile(p); string(got) != before {
			t.Errorf("%s changed:\n%s", p, got)
		}
	}
	if _, err := os.Stat(filepath.Join(run, "o.yaml")); err == nil {
		t.Error("a file was written into the run folder")
	}
	// The journal is whole: the run resumes.
	if code, _, errb := cgtune(t, "--headless", "--resume", run); code != exitOK {
		t.Errorf("resume after the refusals: exit %d %s", code, errb)
	}
}

func slicesOf(s []string) []string { return append([]string(nil), s...) }

// --emit and --report (and its plot) must be different files, and none
// that exists is replaced without --force: each case is refused before
// the search, so no result is lost.
func TestHeadlessOutputsNeitherCollideNorReplace(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	t.Chdir(dir)
	must(t, os.WriteFile("old.yaml", []byte("mine\n"), 0o600))
	must(t, os.WriteFile("r.svg", []byte("my plot\n"), 0o644))
	must(t, os.Symlink("x.md", "alias.md"))
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"--emit is --report", []string{"--emit", "x.md", "--report", "x.md"}, []string{"--emit x.md and --report x.md are the same file"}},
		{"--emit is the plot", []string{"--emit", "y.svg", "--report", "y.md"}, []string{"--emit y.svg and --report's plot y.svg are the same file"}},
		{"--emit is --report through a link", []string{"--emit", "alias.md", "--report", "x.md", "--force"}, []string{"same file"}},
		{"--emit exists", []string{"--emit", "old.yaml"}, []string{"--emit old.yaml exists already", "--force"}},
		{"the plot exists", []string{"--report", "r.md"}, []string{"--report's plot r.svg exists already", "--force"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errb := cgtune(t, append(slicesOf(headless), tc.args...)...)
			refusedBeforeSearch(t, code, out, errb, tc.want...)
		})
	}
	if got, _ := os.ReadFile("r.svg"); string(got) != "my plot\n" {
		t.Errorf("r.svg holds %q", got)
	}
	for _, p := range []string{"x.md", "y.md", "y.svg", "r.md"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	// --force replaces both, keeping the old file's mode.
	code, _, errb := cgtune(t, append(slicesOf(headless), "--emit", "old.yaml", "--report", "r.md", "--force")...)
	if code != exitOK {
		t.Fatalf("--force: exit %d %s", code, errb)
	}
	if got, _ := os.ReadFile("old.yaml"); !strings.HasPrefix(string(got), "# Generated by cgtune") {
		t.Errorf("--force did not replace old.yaml: %q", got)
	}
	if st, _ := os.Stat("old.yaml"); st.Mode().Perm() != 0o600 {
		t.Errorf("old.yaml mode %04o after the rewrite, want 0600", st.Mode().Perm())
	}
	if got, _ := os.ReadFile("r.svg"); !strings.Contains(string(got), "<svg") {
		t.Errorf("--force did not replace r.svg: %.40q", got)
	}
	// A read-only file is not replaced even with --force.
	must(t, os.Chmod("old.yaml", 0o444))
	code, out, errb := cgtune(t, append(slicesOf(headless), "--emit", "old.yaml", "--force")...)
	refusedBeforeSearch(t, code, out, errb, "--emit old.yaml", "read-only")
}

// A --report (or its plot) that is a FIFO or a folder is refused before
// the search, not after it with the search's work lost.
func TestHeadlessReportCheckedBeforeSearch(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.md")
	must(t, syscall.Mkfifo(fifo, 0o644))
	folder := filepath.Join(dir, "folder.md")
	must(t, os.Mkdir(folder, 0o755))
	plotFolder := filepath.Join(dir, "p.svg")
	must(t, os.Mkdir(plotFolder, 0o755))
	for _, tc := range []struct{ name, report, want string }{
		{"a FIFO", fifo, "a FIFO"},
		{"a folder", folder, "a folder"},
		{"the plot is a folder", filepath.Join(dir, "p.md"), "a folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errb := cgtune(t, append(slicesOf(headless), "--report", tc.report, "--force")...)
			refusedBeforeSearch(t, code, out, errb, "--report", tc.want)
		})
	}
	if st, _ := os.Lstat(fifo); st.Mode()&os.ModeNamedPipe == 0 {
		t.Error("the FIFO was replaced")
	}
}

// journalLines are the lines of a run folder's journal.
func journalLines(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, search.JournalFile))
	must(t, err)
	return strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
}

// A search whose journal cannot be written (a full disk) exits 2 and
// writes nothing: --emit keeps its old content, no report is written and
// no partial winner is printed as if the search were whole.
func TestHeadlessIOErrorWritesNothing(t *testing.T) {
	cache := isolate(t)
	exhaustive := append(slicesOf(headless), "--strategy", "exhaustive")
	ref := filepath.Join(t.TempDir(), "ref")
	if code, _, errb := cgtune(t, append(exhaustive, "--run-dir", ref)...); code != exitOK {
		t.Fatalf("reference search: %s", errb)
	}
	lines := journalLines(t, ref)
	if len(lines) < 5 {
		t.Fatalf("the reference journal has %d lines", len(lines))
	}
	// Room for the header and two results: the third result's line is cut
	// short by the file size limit, as by a full disk.
	limit := len(lines[0]) + len(lines[1]) + len(lines[2]) + len(lines[3])/2
	dir := t.TempDir()
	emit := filepath.Join(dir, "o.yaml")
	must(t, os.WriteFile(emit, []byte("old\n"), 0o644))
	md := filepath.Join(dir, "r.md")
	run := filepath.Join(dir, "run")
	cmd := asMain(t, cache, append(exhaustive, "--run-dir", run, "--emit", emit, "--force", "--report", md)...)
	cmd.Env = append(cmd.Env, "CGTUNE_TEST_FSIZE="+strconv.Itoa(limit))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	code := cmd.ProcessState.ExitCode()
	errLines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	last := errLines[len(errLines)-1]
	if code != exitBadInput || !strings.Contains(last, "the search stopped: journal") || !strings.Contains(last, "nothing was written") ||
		!strings.Contains(last, "--resume "+run) {
		t.Errorf("exit %d, last line %q; want exit 2 saying nothing was written and how to resume", code, last)
	}
	if got, _ := os.ReadFile(emit); string(got) != "old\n" {
		t.Errorf("--emit holds %q after the journal failed", got)
	}
	for _, p := range []string{md, filepath.Join(dir, "r.svg")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written after the journal failed", p)
		}
	}
	if strings.Contains(stdout.String(), "\nwinner: ") || !strings.Contains(stdout.String(), "winner (so far: the search stopped on an error)") {
		t.Errorf("stdout does not say the winner is of a part:\n%s", stdout.String())
	}
	if got := len(journalLines(t, run)); got < 3 {
		t.Errorf("the journal has %d lines; the limit left room for 3", got)
	}
}

// The TUI's w and r keys make the headless checks: even when the person
// says to overwrite, the program's own preset file and a run's journal
// are refused, and a replaced file keeps its mode.
func TestTUIWritesMakeTheHeadlessChecks(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(cache, "config"))
	t.Setenv("CGTUNE_PRESETS", "")
	dir := t.TempDir()
	pre := filepath.Join(dir, "pre.yaml")
	if code, _, errb := cgtune(t, "preset", "save", "saved", "--model", "llama3_8b"); code != exitOK {
		t.Fatal(errb)
	}
	if code, _, errb := cgtune(t, "preset", "export", "saved", "-o", pre); code != exitOK {
		t.Fatal(errb)
	}
	b := newTUIBackend(&rootFlags{preset: pre, trainIters: search.DefaultTrainIters}, nil)
	t.Cleanup(func() { b.close(func() {}) })
	run := filepath.Join(t.TempDir(), "run")
	if code, _, errb := cgtune(t, append(slicesOf(headless), "--run-dir", run)...); code != exitOK {
		t.Fatal(errb)
	}
	journal := filepath.Join(run, search.JournalFile)
	saved := filepath.Join(cache, "config", "cgtune", "presets", "saved.yaml")
	before := map[string]string{}
	for _, p := range []string{pre, journal, saved} {
		data, err := os.ReadFile(p)
		must(t, err)
		before[p] = string(data)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"the --preset file", pre, "input"},
		{"a listed preset", saved, "the preset saved"},
		{"a run's journal", journal, "run files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.WriteOverrides(tc.path, []byte("x: 1\n"), true); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("w onto %s: %v", tc.path, err)
			}
		})
	}
	md := filepath.Join(run, "r.md")
	if _, _, err := b.WriteReport(md, reportInput(t), true); err == nil || !strings.Contains(err.Error(), "run files") {
		t.Errorf("r into the run folder: %v", err)
	}
	for p, data := range before {
		if got, _ := os.ReadFile(p); string(got) != data {
			t.Errorf("%s changed", p)
		}
	}
	mine := filepath.Join(dir, "mine.yaml")
	must(t, os.WriteFile(mine, []byte("mine\n"), 0o600))
	_, err := b.WriteOverrides(mine, []byte("x: 1\n"), true)
	must(t, err)
	if st, _ := os.Stat(mine); st.Mode().Perm() != 0o600 {
		t.Errorf("w kept mode %04o, want 0600", st.Mode().Perm())
	}
	// An existing report is asked about, then replaced when allowed.
	r := filepath.Join(dir, "r.md")
	must(t, os.WriteFile(r, []byte("mine\n"), 0o644))
	if _, _, err := b.WriteReport(r, reportInput(t), false); !errors.Is(err, tui.ErrFileExists) {
		t.Errorf("r over an existing report: %v, want ErrFileExists", err)
	}
	if _, _, err := b.WriteReport(r, reportInput(t), true); err != nil {
		t.Errorf("r, overwrite: %v", err)
	}
}

// reportInput is a report of a search that finished no candidate.
func reportInput(t *testing.T) report.Input {
	t.Helper()
	m := mustModel(t, "llama3_8b")
	l, err := m.Layout("h100")
	must(t, err)
	return report.Input{Model: m, Layout: l, MBridge: "0.4", Done: search.DoneEvent{Interrupted: true}}
}

// An --emit file that appears while the search runs is not replaced
// either: without --force the overrides are created, never renamed over.
func TestHeadlessEmitThatAppearsDuringTheSearchIsKept(t *testing.T) {
	cache := isolate(t)
	dir := t.TempDir()
	emit := filepath.Join(dir, "o.yaml")
	run := filepath.Join(dir, "run")
	cmd := asMain(t, cache, append(slicesOf(headless), "--strategy", "exhaustive", "--estimate-delay", "100ms", "--run-dir", run, "--emit", emit)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	waitForSearch(t, run)
	must(t, os.WriteFile(emit, []byte("mine\n"), 0o644))
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitBadInput || !strings.Contains(stderr.String(), "--emit "+emit+" exists already") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if got, _ := os.ReadFile(emit); string(got) != "mine\n" {
		t.Errorf("--emit holds %q", got)
	}
}
