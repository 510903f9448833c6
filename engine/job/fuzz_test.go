package job

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/internal/fileio"
	"cgtune/stepmodel"
)

// fuzzTargets are the targets of the fuzzed validation journals.
var fuzzTargets = []Target{{Candidate: eager}, {Candidate: fullIter}}

// validationJournalSeed is a validation journal of fuzzTargets as
// Validate writes it: the header, then one result per target.
func validationJournalSeed(t testing.TB) []byte {
	var b bytes.Buffer
	for _, l := range []validationLine{
		{Type: "header", Targets: fuzzTargets},
		{Type: "result", Key: eager.Key(), Result: &engine.Result{Candidate: eager, Source: engine.SourceJob, Step: stepmodel.Stats{Median: 40, N: 9}}},
		{Type: "result", Key: fullIter.Key(), Result: &engine.Result{Candidate: fullIter, Source: engine.SourceJob, Step: stepmodel.Stats{Median: 22, N: 8}}},
	} {
		j, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(j, '\n'))
	}
	return b.Bytes()
}

// FuzzValidationJournal holds validate.jsonl to the search journal's
// rules (search.FuzzJournalReader): no content panics the reader; every
// line is readable, unreadable or the torn tail; only results of the
// targets, each under its own key, are taken; the readable lines alone
// read back to the same results; and a resume either refuses in one line
// (changing nothing) or, once it appended a line, leaves a journal that
// reads back clean with nothing lost.
func FuzzValidationJournal(f *testing.F) {
	seed := validationJournalSeed(f)
	f.Add(seed, false)
	f.Add(seed[:len(seed)-9], false)                                                             // torn last line
	f.Add(bytes.TrimSuffix(seed, []byte("\n")), false)                                           // no final newline
	f.Add(bytes.Replace(seed, []byte(`{"type":"result"`), []byte(`X{"type":"result"`), 1), true) // a bad middle line
	f.Add(bytes.Replace(seed, []byte(`"key":"none/layer/w3"`), []byte(`"key":"local/layer/w3"`), 1), false)
	f.Add([]byte(""), false)
	f.Add([]byte("\n\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, skipBad bool) {
		dir := t.TempDir()
		path := filepath.Join(dir, ValidationJournal)
		prior, lines, err := parseValidationJournal(dir, path, data, fuzzTargets)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") || !(strings.HasPrefix(msg, path) || strings.HasPrefix(msg, "cannot resume "+dir)) {
				t.Fatalf("error %q", msg)
			}
			return
		}
		checkLinesAccounted(t, data, lines)
		for k, r := range prior {
			if r.Candidate.Key() != k || (k != eager.Key() && k != fullIter.Key()) {
				t.Fatalf("took a result for %s under %q", r.Candidate.Key(), k)
			}
		}
		clean, cleanLines, err := parseValidationJournal(dir, path, bytes.Join(lines.Good, nil), fuzzTargets)
		if err != nil || len(cleanLines.Bad) != 0 || len(clean) != len(prior) {
			t.Fatalf("the readable lines alone: %v, %d unreadable, %d results (want %d)", err, len(cleanLines.Bad), len(clean), len(prior))
		}
		resumeValidationFuzzed(t, dir, path, data, skipBad, len(prior))
	})
}

// checkLinesAccounted: every line of data is readable, unreadable or the
// torn tail.
func checkLinesAccounted(t *testing.T, data []byte, lines fileio.JournalLines) {
	t.Helper()
	n := bytes.Count(data[:lines.Intact], []byte("\n"))
	if !lines.Torn() && len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		n++ // a last line without a newline that reads as JSON
	}
	if len(lines.Good)+len(lines.Bad) != n {
		t.Fatalf("%d readable + %d unreadable lines, the file has %d", len(lines.Good), len(lines.Bad), n)
	}
}

// resumeValidationFuzzed resumes a validation from journal data and
// appends a result as Validate would.
func resumeValidationFuzzed(t *testing.T, dir, path string, data []byte, skipBad bool, results int) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	prior, j, err := openValidationJournalFor(context.Background(), dir, fuzzTargets, true, skipBad)
	if err != nil {
		var bad *fileio.BadLinesError
		if msg := err.Error(); strings.Contains(msg, "\n") || skipBad || !errors.As(err, &bad) {
			t.Fatalf("resume error %q (skip bad lines %v)", msg, skipBad)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
			t.Fatal("a refused resume changed the journal")
		}
		return
	}
	if len(prior) != results {
		t.Fatalf("the resume took %d results, the reader %d", len(prior), results)
	}
	r := engine.Result{Candidate: eager, Source: engine.SourceJob, Step: stepmodel.Stats{Median: 41, N: 9}}
	if err := j.add(validationLine{Type: "result", Key: eager.Key(), Result: &r}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	again, lines, err := parseValidationJournal(dir, path, after, fuzzTargets)
	if err != nil || len(lines.Bad) != 0 || lines.Torn() || lines.NoFinalNewline {
		t.Fatalf("after the resume: %v, %d unreadable, torn %v, no final newline %v", err, len(lines.Bad), lines.Torn(), lines.NoFinalNewline)
	}
	if _, ok := again[eager.Key()]; !ok || len(again) < len(prior) {
		t.Fatalf("after the resume %d results (had %d), the appended one kept: %v", len(again), len(prior), ok)
	}
}

// FuzzJobLedger holds jobs.jsonl to the same rules: one-line errors, every
// line accounted for, an unreadable line named unless set aside, and a
// ledger appended to after a resume that reads back clean.
func FuzzJobLedger(f *testing.F) {
	var seed bytes.Buffer
	for _, e := range []LedgerEntry{{Key: eager.Key(), Job: Ref{Launcher: "slurm", ID: "12"}}, {Key: eager.Key(), Job: Ref{Launcher: "slurm", ID: "12"}, Done: true, State: StateCompleted}} {
		b, _ := json.Marshal(e)
		seed.Write(append(b, '\n'))
	}
	f.Add(seed.Bytes(), false)
	f.Add(seed.Bytes()[:seed.Len()-5], false)
	f.Add(bytes.TrimSuffix(seed.Bytes(), []byte("\n")), true)
	f.Add(append([]byte("{garbage\n"), seed.Bytes()...), true)
	f.Fuzz(func(t *testing.T, data []byte, skipBad bool) {
		dir := t.TempDir()
		path := filepath.Join(dir, LedgerFile)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := openLedger(dir, skipBad)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, path) {
				t.Fatalf("error %q", msg)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
				t.Fatal("a refused ledger was changed")
			}
			return
		}
		before := len(l.Entries())
		if err := l.Add(LedgerEntry{Key: fullIter.Key(), Job: Ref{Launcher: "local", ID: "local:1"}}); err != nil {
			t.Fatal(err)
		}
		again, err := openLedger(dir, false)
		if err != nil {
			t.Fatalf("after an append: %v", err)
		}
		if len(again.Entries()) != before+1 {
			t.Fatalf("after an append: %d entries, want %d", len(again.Entries()), before+1)
		}
		if _, ok := again.Open(fullIter.Key()); !ok {
			t.Fatal("the appended job is not open")
		}
	})
}
