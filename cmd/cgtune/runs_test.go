package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"cgtune/engine/job"
	"cgtune/search"
)

// completeRun makes a finished estimate-engine search under the runs
// folder and returns its folder.
func completeRun(t *testing.T) string {
	t.Helper()
	code, out, errb := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--json")
	if code != exitOK {
		t.Fatalf("search: exit %d\n%s", code, errb)
	}
	var r struct {
		RunDir string `json:"run_dir"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.RunDir == "" {
		t.Fatalf("search result: %v %q", err, out)
	}
	return r.RunDir
}

// interruptedRun makes a search under the runs folder that Ctrl-C stopped
// after its first result, and returns its folder.
func interruptedRun(t *testing.T, cache string) string {
	t.Helper()
	cmd := asMain(t, cache, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--strategy", "exhaustive",
		"--estimate-delay", "150ms", "--json")
	var stdout strings.Builder
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"event":"result"`) {
			cmd.Process.Signal(syscall.SIGINT)
			break
		}
	}
	for sc.Scan() {
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("interrupted search: exit %d", code)
	}
	var r struct {
		RunDir string `json:"run_dir"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &r); err != nil {
		t.Fatal(err)
	}
	return r.RunDir
}

// runsList is runs list --json's runs by name.
func runsList(t *testing.T) map[string]search.RunInfo {
	t.Helper()
	code, out, errb := cgtune(t, "runs", "list", "--json")
	if code != exitOK {
		t.Fatalf("runs list: exit %d %s", code, errb)
	}
	var list []search.RunInfo
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	byName := map[string]search.RunInfo{}
	for _, r := range list {
		byName[r.Name] = r
	}
	return byName
}

// runs list shows each run folder with its date, state, model and size;
// runs show prints one's summary and what to do next; a folder that is
// no cgtune run is skipped with a warning.
func TestRunsListAndShow(t *testing.T) {
	cache := isolate(t)
	done := completeRun(t)
	stopped := interruptedRun(t, cache)
	foreign := filepath.Join(filepath.Dir(done), "holiday-photos")
	must(t, os.MkdirAll(foreign, 0o755))
	must(t, os.WriteFile(filepath.Join(foreign, "beach.jpg"), []byte("jpg"), 0o644))

	code, out, errb := cgtune(t, "runs", "list")
	if code != exitOK {
		t.Fatalf("runs list: exit %d %s", code, errb)
	}
	for _, want := range []string{"NAME", "DATE", "STATE", "MODEL", "SIZE", filepath.Base(done), filepath.Base(stopped), "complete", "interrupted", "llama3_8b", "in 2 runs"} {
		if !strings.Contains(out, want) {
			t.Errorf("runs list lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "holiday-photos") || !strings.Contains(errb, foreign+" is not a cgtune run folder") {
		t.Errorf("the foreign folder was listed or not warned about:\n%s%s", out, errb)
	}
	list := runsList(t)
	if r := list[filepath.Base(done)]; r.State != search.RunComplete || r.Results == 0 || r.Bytes == 0 || r.Fingerprint == nil || r.Fingerprint.Model.Name != "llama3_8b" {
		t.Errorf("the finished search: %+v", r)
	}
	if r := list[filepath.Base(stopped)]; r.State != search.RunInterrupted || r.Results == 0 {
		t.Errorf("the interrupted search: %+v", r)
	}

	code, out, errb = cgtune(t, "runs", "show", filepath.Base(stopped))
	if code != exitOK {
		t.Fatalf("runs show: exit %d %s", code, errb)
	}
	for _, want := range []string{"run " + filepath.Base(stopped), "interrupted", "searched: llama3_8b on 8× h100", "best run: ", "RANK", "continue it: cgtune --headless --resume " + filepath.Base(stopped)} {
		if !strings.Contains(out, want) {
			t.Errorf("runs show lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := cgtune(t, "runs", "show", done); code != exitOK || !strings.Contains(out, "complete") || !strings.Contains(out, "cgtune validate "+done) {
		t.Errorf("runs show of the finished search by path: exit %d\n%s", code, out)
	}
	for _, bad := range []string{"no-such-run", foreign} {
		if code, _, errb := cgtune(t, "runs", "show", bad); code != exitBadInput || strings.Count(strings.TrimSpace(errb), "\n") != 0 {
			t.Errorf("runs show %s: exit %d %q", bad, code, errb)
		}
	}
	// A running search says so (its lock is held; the lock is the
	// kernel's, held here by this process's own descriptor).
	l, err := search.LockRunDir(stopped)
	if err != nil {
		t.Fatal(err)
	}
	if r := runsList(t)[filepath.Base(stopped)]; r.State != search.RunRunning || r.PID != os.Getpid() {
		t.Errorf("a held run: %+v", r)
	}
	l.Release()
}

// runs rm removes cgtune's run folders only: never a folder without a
// journal or run file of cgtune's, one holding other files, or one a
// running search holds; each refusal is exit 2 and leaves the folder.
func TestRunsRmRemovesOnlyCgtuneRuns(t *testing.T) {
	isolate(t)
	a, b := completeRun(t), completeRun(t)
	root := filepath.Dir(a)
	foreign := filepath.Join(root, "notes")
	must(t, os.MkdirAll(foreign, 0o755))
	must(t, os.WriteFile(filepath.Join(foreign, "todo.txt"), []byte("x"), 0o644))
	elsewhere := t.TempDir()
	must(t, os.WriteFile(filepath.Join(elsewhere, "run.json"), []byte("not ours"), 0o644))
	// A run the person put a file of their own into.
	must(t, os.WriteFile(filepath.Join(b, "my-notes.md"), []byte("keep me"), 0o644))
	held := completeRun(t)
	l, err := search.LockRunDir(held)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()

	for _, tc := range []struct{ arg, want string }{
		{"notes", "is not a cgtune run folder"},
		{elsewhere, "is not a cgtune run folder"},
		{b, "my-notes.md"},
		{held, "in use by another cgtune"},
		{"no-such-run", `no run folder "no-such-run"`},
	} {
		code, _, errb := cgtune(t, "runs", "rm", tc.arg)
		if code != exitBadInput || !strings.Contains(errb, tc.want) || strings.Count(strings.TrimSpace(errb), "\n") != 0 {
			t.Errorf("runs rm %s: exit %d %q, want 2 and %q", tc.arg, code, errb, tc.want)
		}
	}
	for _, kept := range []string{filepath.Join(foreign, "todo.txt"), filepath.Join(elsewhere, "run.json"), filepath.Join(b, "my-notes.md"), filepath.Join(held, search.JournalFile)} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
	// One bad name among good ones removes nothing.
	if code, _, _ := cgtune(t, "runs", "rm", filepath.Base(a), "notes"); code != exitBadInput {
		t.Errorf("runs rm with a foreign folder among them: exit %d", code)
	}
	if _, err := os.Stat(a); err != nil {
		t.Errorf("%s went with a refused name beside it", a)
	}
	// A validated run holds cgtune validate's folder: its files and one
	// folder per job.
	v := filepath.Join(a, "validate")
	must(t, os.MkdirAll(filepath.Join(v, "cgtune-none"), 0o755))
	for _, f := range []string{job.ValidationJournal, job.ValidationFile, job.LedgerFile, filepath.Join("cgtune-none", "job.log")} {
		must(t, os.WriteFile(filepath.Join(v, f), []byte("{}\n"), 0o644))
	}
	code, out, errb := cgtune(t, "runs", "rm", filepath.Base(a))
	if code != exitOK || !strings.Contains(out, "removed "+a) {
		t.Fatalf("runs rm: exit %d %s%s", code, out, errb)
	}
	if _, err := os.Stat(a); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", a, err)
	}
	// A validation folder holding someone else's file keeps its run.
	c := completeRun(t)
	must(t, os.MkdirAll(filepath.Join(c, "validate"), 0o755))
	must(t, os.WriteFile(filepath.Join(c, "validate", "thesis.tex"), []byte("x"), 0o644))
	if code, _, errb := cgtune(t, "runs", "rm", c); code != exitBadInput || !strings.Contains(errb, "thesis.tex") {
		t.Errorf("runs rm of a run whose validate folder holds a foreign file: exit %d %q", code, errb)
	}
}

// setCreated rewrites the start time in a run's journal header.
func setCreated(t *testing.T, dir string, when time.Time) {
	t.Helper()
	path := filepath.Join(dir, search.JournalFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(string(data), "\n")
	var h map[string]any
	must(t, json.Unmarshal([]byte(first), &h))
	h["created"] = when.UTC().Format(time.RFC3339)
	line, _ := json.Marshal(h)
	must(t, os.WriteFile(path, []byte(string(line)+"\n"+rest), 0o644))
}

// runs prune removes the runs older than --older-than, or all but the
// --keep newest, and never a foreign folder or a running search;
// --dry-run only says what it would remove.
func TestRunsPrune(t *testing.T) {
	isolate(t)
	old, older, recent := completeRun(t), completeRun(t), completeRun(t)
	setCreated(t, old, time.Now().Add(-40*24*time.Hour))
	setCreated(t, older, time.Now().Add(-60*24*time.Hour))
	foreign := filepath.Join(filepath.Dir(old), "mine")
	must(t, os.MkdirAll(foreign, 0o755))
	exists := func(dir string) bool { _, err := os.Stat(dir); return err == nil }

	if code, _, errb := cgtune(t, "runs", "prune"); code != exitBadInput || !strings.Contains(errb, "--older-than") {
		t.Errorf("prune without a rule: exit %d %q", code, errb)
	}
	if code, _, errb := cgtune(t, "runs", "prune", "--older-than", "soon"); code != exitBadInput || !strings.Contains(errb, `--older-than "soon"`) {
		t.Errorf("prune --older-than soon: exit %d %q", code, errb)
	}
	code, out, _ := cgtune(t, "runs", "prune", "--older-than", "30d", "--dry-run")
	if code != exitOK || !strings.Contains(out, "would remove "+old) || !strings.Contains(out, "would remove "+older) || strings.Contains(out, recent) || !exists(old) || !exists(older) {
		t.Errorf("dry run: exit %d\n%s", code, out)
	}
	// The older of the two is held by a running search: it stays.
	l, err := search.LockRunDir(older)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errb := cgtune(t, "runs", "prune", "--older-than", "30d")
	l.Release()
	if code != exitOK || exists(old) || !exists(older) || !exists(recent) || !exists(foreign) || !strings.Contains(errb, older+" is running") {
		t.Errorf("prune --older-than 30d: exit %d, old %v older %v recent %v foreign %v\n%s%s", code, exists(old), exists(older), exists(recent), exists(foreign), out, errb)
	}
	code, out, errb = cgtune(t, "runs", "prune", "--keep", "1")
	if code != exitOK || exists(older) || !exists(recent) || !exists(foreign) {
		t.Errorf("prune --keep 1: exit %d, older %v recent %v\n%s%s", code, exists(older), exists(recent), out, errb)
	}
}

// runs show ranks a run's results as the search did: where the recipe's
// own setting ties with faster candidates it is the best run and the
// summary says to keep it, as the search's own output did, and the
// what-if rows are listed in a table of their own. The search keeps its
// ranking beside the journal, warm-ups derived from a run included;
// without it (or with one older than the journal) runs show ranks the
// journal's runs the same way.
func TestRunsShowRanksAsTheSearchDid(t *testing.T) {
	isolate(t)
	code, out, errb := cgtune(t, "--headless", "--model", "qwen3_30b_a3b", "--gpu-type", "h100", "--engine", "estimate", "--what-if", "--json")
	if code != exitOK {
		t.Fatalf("search: exit %d\n%s", code, errb)
	}
	var d struct {
		RunDir string          `json:"run_dir"`
		Winner search.Ranked   `json:"winner"`
		Keep   bool            `json:"keep_reference"`
		WhatIf []search.Ranked `json:"what_if"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if !d.Keep || len(d.WhatIf) == 0 {
		t.Fatalf("the search should keep the recipe's setting and have what-if rows: keep %v, %d what-if rows", d.Keep, len(d.WhatIf))
	}
	var all, run []string
	for _, r := range d.WhatIf {
		all = append(all, r.Result.Candidate.Name())
		if !r.Derived {
			run = append(run, r.Result.Candidate.Name())
		}
	}
	if slices.Equal(all, run) {
		t.Fatal("no what-if row was derived from another warm-up's run")
	}
	kept := filepath.Join(d.RunDir, search.RankingFile)
	data, err := os.ReadFile(kept)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want []string // the what-if rows runs show lists
		prep func()
	}{
		{"the search's ranking", all, func() {}},
		{"the journal's runs, without the ranking", run, func() { must(t, os.Remove(kept)) }},
		{"the journal's runs, the ranking older than the journal", run, func() {
			must(t, os.WriteFile(kept, data, 0o644))
			old := time.Now().Add(-time.Hour)
			must(t, os.Chtimes(kept, old, old))
		}},
	} {
		tc.prep()
		code, out, errb := cgtune(t, "runs", "show", d.RunDir, "--json")
		if code != exitOK {
			t.Fatalf("%s: runs show --json: exit %d %s", tc.name, code, errb)
		}
		var info search.RunInfo
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatal(err)
		}
		if info.Winner == nil || info.Winner.Result.Candidate.Key() != d.Winner.Result.Candidate.Key() || !info.Reference.Won(info.Winner) {
			t.Errorf("%s: runs show's best run is not the search's winner, %s: %s", tc.name, d.Winner.Result.Candidate.Name(), rankedName(info.Winner))
		}
		var shown []string
		for _, r := range info.WhatIf {
			shown = append(shown, r.Result.Candidate.Name())
		}
		if !slices.Equal(shown, tc.want) {
			t.Errorf("%s: runs show's what-if rows %q, want %q", tc.name, shown, tc.want)
		}
		code, out, _ = cgtune(t, "runs", "show", d.RunDir)
		if info.FromJournal == slices.Equal(tc.want, all) {
			t.Errorf("%s: ranked from the journal: %v", tc.name, info.FromJournal)
		}
		for _, want := range []string{"best run: " + d.Winner.Result.Candidate.Name() + ",", search.KeepRecipe, "WHAT-IF", tc.want[0]} {
			if code != exitOK || !strings.Contains(out, want) {
				t.Errorf("%s: runs show (exit %d) lacks %q:\n%s", tc.name, code, want, out)
			}
		}
	}
}

func rankedName(r *search.Ranked) string {
	if r == nil {
		return "none"
	}
	return r.Result.Candidate.Name()
}

// A winner the search derived and never ran itself (none, from the eager
// baselines every run measures) is the best run runs show names.
func TestRunsShowNamesADerivedWinner(t *testing.T) {
	isolate(t)
	code, out, errb := cgtune(t, "--headless", "--model", "llama3_8b", "--gpu-type", "h100", "--engine", "estimate", "--json")
	if code != exitOK {
		t.Fatalf("search: exit %d\n%s", code, errb)
	}
	var d struct {
		RunDir string        `json:"run_dir"`
		Winner search.Ranked `json:"winner"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if !d.Winner.Derived {
		t.Fatalf("the search's winner %s was run itself: this test needs a derived one", d.Winner.Result.Candidate.Name())
	}
	code, out, _ = cgtune(t, "runs", "show", d.RunDir)
	if want := "best run: " + d.Winner.Result.Candidate.Name() + ","; code != exitOK || !strings.Contains(out, want) {
		t.Errorf("runs show (exit %d) lacks %q:\n%s", code, want, out)
	}
}
