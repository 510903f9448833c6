package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"cgtune/engine/job"
	"cgtune/internal/fileio"
	"cgtune/search"
	"cgtune/stepmodel"
)

// validateOnce runs a validation of run's top candidate and its eager
// baseline (two jobs of the fake training job) in a new folder, and
// returns the folder and the arguments that ran it.
func validateOnce(t *testing.T, run string) (string, []string) {
	t.Helper()
	vd := filepath.Join(t.TempDir(), "vd")
	args := []string{"validate", run, "--dir", vd, "--launcher", "local", "--command", fakeJobCommand(t), "--job-te", "no",
		"--top", "1", "--iters", "12", "--no-calibrate", "--poll", "100ms"}
	if code, out, errb := cgtune(t, args...); code != exitOK {
		t.Fatalf("validate: exit %d\n%s%s", code, out, errb)
	}
	return vd, args
}

func fileLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	return strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
}

// One torn line in the middle of validate.jsonl stops validate --resume
// with the line named (exit 2, nothing run, nothing changed);
// --skip-bad-lines sets it aside and keeps the intact result after it,
// and later resumes run nothing again.
func TestValidateResumeNamesABadJournalLine(t *testing.T) {
	isolate(t)
	vd, args := validateOnce(t, searchRun(t))
	path := filepath.Join(vd, job.ValidationJournal)
	lines := fileLines(t, path)
	if len(lines) != 3 {
		t.Fatalf("the journal has %d lines, want the header and 2 results", len(lines))
	}
	lines[1] = "X" + lines[1]
	torn := strings.Join(lines, "")
	must(t, os.WriteFile(path, []byte(torn), 0o644))

	code, out, errb := cgtune(t, append(args, "--resume")...)
	if code != exitBadInput || out != "" || !strings.Contains(errb, "cgtune: "+path+": line 2 is unreadable") ||
		!strings.Contains(errb, "its 1 readable results are intact") || !strings.Contains(errb, "--skip-bad-lines") || strings.Contains(errb, "RUNNING") {
		t.Fatalf("resume: exit %d\nstdout %q\nstderr %q", code, out, errb)
	}
	if got, _ := os.ReadFile(path); string(got) != torn {
		t.Errorf("the refused resume changed the journal:\n%s", got)
	}
	code, out, errb = cgtune(t, append(args, "--resume", "--skip-bad-lines")...)
	if code != exitOK || strings.Count(errb, "(from the journal)") != 1 || !strings.Contains(errb, "[2/2]") {
		t.Fatalf("resume --skip-bad-lines: exit %d\n%s%s", code, out, errb)
	}
	if n := len(fileLines(t, path)); n != 3 {
		t.Errorf("after the resume the journal has %d lines, want 3", n)
	}
	aside, err := os.ReadFile(filepath.Join(vd, fileio.UnreadableName(job.ValidationJournal)))
	if err != nil || !strings.Contains(string(aside), "validate.jsonl line 2") || !strings.Contains(string(aside), "X{") {
		t.Errorf("the unreadable line was not kept aside: %q %v", aside, err)
	}
	code, _, errb = cgtune(t, append(args, "--resume")...)
	if code != exitOK || strings.Count(errb, "(from the journal)") != 2 {
		t.Errorf("a later resume: exit %d\n%s", code, errb)
	}
	if n := len(fileLines(t, path)); n != 3 {
		t.Errorf("after a resume with nothing to run the journal has %d lines", n)
	}
	if code, _, errb := cgtune(t, append(args, "--skip-bad-lines")...); code != exitBadInput || !strings.Contains(errb, "--skip-bad-lines is for --resume") {
		t.Errorf("--skip-bad-lines without --resume: exit %d %q", code, errb)
	}
}

// An unreadable line in the job ledger (jobs.jsonl) is named, and
// --skip-bad-lines sets it aside, as for the journal.
func TestValidateResumeNamesABadLedgerLine(t *testing.T) {
	isolate(t)
	vd, args := validateOnce(t, searchRun(t))
	path := filepath.Join(vd, job.LedgerFile)
	lines := fileLines(t, path)
	lines[0] = "{garbage\n"
	must(t, os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644))
	code, _, errb := cgtune(t, append(args, "--resume")...)
	if code != exitBadInput || !strings.Contains(errb, path+": line 1 is unreadable") || !strings.Contains(errb, "--skip-bad-lines") {
		t.Fatalf("resume: exit %d %q", code, errb)
	}
	if code, out, errb := cgtune(t, append(args, "--resume", "--skip-bad-lines")...); code != exitOK {
		t.Fatalf("resume --skip-bad-lines: exit %d\n%s%s", code, out, errb)
	}
	if aside, err := os.ReadFile(filepath.Join(vd, fileio.UnreadableName(job.LedgerFile))); err != nil || !strings.Contains(string(aside), "{garbage") {
		t.Errorf("the ledger's unreadable line: %q %v", aside, err)
	}
}

// A journal whose last line lost its newline (an editor, a copy) is
// repaired on resume: the next result starts a line of its own, and the
// resume after that reads every result.
func TestResumeRepairsAMissingFinalNewline(t *testing.T) {
	isolate(t)
	run := filepath.Join(t.TempDir(), "run")
	args := []string{"--headless", "--model", "llama3_8b", "--engine", "estimate", "--strategy", "exhaustive", "--run-dir", run}
	if code, _, errb := cgtune(t, args...); code != exitOK {
		t.Fatalf("search: exit %d %s", code, errb)
	}
	path := filepath.Join(run, search.JournalFile)
	lines := fileLines(t, path)
	total := len(lines) - 1
	kept := strings.TrimSuffix(strings.Join(lines[:4], ""), "\n") // header and 3 results, no final newline
	must(t, os.WriteFile(path, []byte(kept), 0o644))
	must(t, os.Remove(filepath.Join(run, search.FinishedFile)))
	code, _, errb := cgtune(t, "--headless", "--resume", run)
	if code != exitOK || !strings.Contains(errb, fmt.Sprintf("done: %d runs now, 3 runs read back from the journal", total-3)) {
		t.Fatalf("resume: exit %d\n%s", code, errb)
	}
	_, rs, err := search.ReadJournal(run, false)
	if err != nil || len(rs) != total {
		t.Fatalf("the journal after the resume: %d results, %v; want %d and no error", len(rs), err, total)
	}
	if code, _, errb := cgtune(t, "--headless", "--resume", run); code != exitOK || !strings.Contains(errb, fmt.Sprintf("done: 0 runs now, %d runs read back", total)) {
		t.Errorf("second resume: exit %d\n%s", code, errb)
	}
}

// After a failed journal write the message counts the finished
// candidates the journal holds, read back, not those the search meant to
// write.
func TestIOErrorCountsWhatTheJournalKept(t *testing.T) {
	cache := isolate(t)
	args := []string{"--headless", "--model", "llama3_8b", "--engine", "estimate", "--strategy", "exhaustive"}
	ref := filepath.Join(t.TempDir(), "ref")
	if code, _, errb := cgtune(t, append(args, "--run-dir", ref)...); code != exitOK {
		t.Fatalf("reference search: %s", errb)
	}
	lines := journalLines(t, ref)
	for _, tc := range []struct {
		name  string
		limit int
		want  string
	}{
		{"one kept, one cut", len(lines[0]) + len(lines[1]) + len(lines[2])/2, "1 finished candidate is kept in RUN (and a line cut short, which a resume drops)"},
		{"none kept", len(lines[0]) + len(lines[1])/2, "0 finished candidates are kept in RUN (and a line cut short, which a resume drops)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := filepath.Join(t.TempDir(), "run")
			cmd := asMain(t, cache, append(args, "--run-dir", run)...)
			cmd.Env = append(cmd.Env, "CGTUNE_TEST_FSIZE="+strconv.Itoa(tc.limit))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmd.Run()
			errLines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			last := errLines[len(errLines)-1]
			if code := cmd.ProcessState.ExitCode(); code != exitBadInput || !strings.Contains(last, strings.ReplaceAll(tc.want, "RUN", run)) {
				t.Errorf("exit %d, last line %q\nwant it to say %q", code, last, tc.want)
			}
		})
	}
}

// A FIFO or a device as validate.jsonl, jobs.jsonl, a calibration cache
// entry or journal-unreadable.txt is refused, naming the file, instead of
// hanging the command or reading it until memory runs out.
func TestJournalsAndCachesNeverHang(t *testing.T) {
	cache := isolate(t)
	run := searchRun(t)
	vd, args := validateOnce(t, run)
	for _, name := range []string{job.ValidationJournal, job.LedgerFile} {
		for kind, mk := range hostileMakers() {
			t.Run(name+" "+kind, func(t *testing.T) {
				p := filepath.Join(vd, name)
				keep, err := os.ReadFile(p)
				must(t, err)
				must(t, os.Remove(p))
				mk(t, p)
				code, _, errb := cgtuneWithin(t, append(args, "--resume")...)
				if code != exitBadInput || !strings.Contains(errb, p) || !strings.Contains(errb, "not a regular file") {
					t.Errorf("exit %d, %q", code, errb)
				}
				must(t, os.Remove(p))
				must(t, os.WriteFile(p, keep, 0o644))
			})
		}
	}
	// The calibration cache: a FIFO where the search looks for the
	// model's calibration counts as none.
	cal := filepath.Join(cache, "cgtune", "calibration")
	must(t, os.MkdirAll(cal, 0o755))
	for kind, mk := range hostileMakers() {
		t.Run("calibration "+kind, func(t *testing.T) {
			dir := t.TempDir()
			entries, _ := os.ReadDir(cal)
			for _, e := range entries {
				os.Remove(filepath.Join(cal, e.Name()))
			}
			// Every name the model's calibration may have: the one file
			// the search reads is among them.
			for _, n := range calibrationNames(t) {
				mk(t, filepath.Join(cal, n))
			}
			code, _, errb := cgtuneWithin(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--run-dir", filepath.Join(dir, "run"))
			if code != exitOK {
				t.Errorf("search with a %s in the calibration cache: exit %d %q", kind, code, errb)
			}
			if code, _, errb := cgtuneWithin(t, "calibrate", "--list"); code != exitOK && code != exitBadInput {
				t.Errorf("calibrate --list: exit %d %q", code, errb)
			}
		})
	}
}

// calibrationNames are the calibration file names of llama3_8b's layouts
// (stepmodel names them by model and layout).
func calibrationNames(t *testing.T) []string {
	t.Helper()
	m := mustModel(t, "llama3_8b")
	var out []string
	for _, g := range m.GPUs() {
		l, err := m.Layout(g)
		must(t, err)
		if n := stepmodel.CalibrationID(stepmodel.ModelKey(m), stepmodel.LayoutKey(l)) + ".json"; !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// hostileMakers make, at a path, the files a reader must not hang on.
func hostileMakers() map[string]func(*testing.T, string) {
	return map[string]func(*testing.T, string){
		"FIFO":   func(t *testing.T, p string) { must(t, syscall.Mkfifo(p, 0o644)) },
		"device": func(t *testing.T, p string) { must(t, syscall.Mknod(p, syscall.S_IFCHR|0o644, 1<<8|5)) }, // a private /dev/zero
	}
}

// A FIFO as journal-unreadable.txt is refused, naming the file, and the
// journal is left as it was: setting a bad line aside must not hang.
func TestSettingAsideNeverHangs(t *testing.T) {
	isolate(t)
	dir := filepath.Join(t.TempDir(), "run")
	if code, _, errb := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--strategy", "exhaustive", "--run-dir", dir); code != exitOK {
		t.Fatalf("search: exit %d %s", code, errb)
	}
	path := filepath.Join(dir, search.JournalFile)
	lines := fileLines(t, path)
	lines[2] = "garbage{\n"
	must(t, os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644))
	before, _ := os.ReadFile(path)
	aside := filepath.Join(dir, search.UnreadableFile)
	must(t, syscall.Mkfifo(aside, 0o644))
	code, _, errb := cgtuneWithin(t, "--headless", "--resume", dir, "--skip-bad-lines")
	if code != exitBadInput || !strings.Contains(errb, aside) || !strings.Contains(errb, "not a regular file") {
		t.Errorf("exit %d %q", code, errb)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("the journal was changed although its bad line could not be set aside")
	}
}
