package search

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/presets"
)

// Before: one unreadable line in the middle of a journal made the whole
// run folder unresumable ("journal.jsonl line 4: invalid character").
func TestJournalCorruptInTheMiddle(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	dir := filepath.Join(t.TempDir(), "run")
	fe := &fakeEngine{}
	cfg := Config{Model: m, Layout: l, Engines: []engine.Engine{fe}, RunDir: dir, Strategy: StrategyExhaustive, Budget: -1,
		Space: presets.Space{Impls: []string{presets.ImplTE, presets.ImplLocal}, Scopes: [][]string{{"attn"}, {"mlp"}}, Warmups: []int{3}}}
	d, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, JournalFile)
	data, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) < 5 {
		t.Fatalf("journal of %d lines", len(lines))
	}
	lines[2] = []byte("garbage{\n")                         // line 3
	lines[3] = []byte(`{"type":"result","round":1}` + "\n") // line 4: a result without one
	must(t, os.WriteFile(path, bytes.Join(lines, nil), 0o644))
	readable := d.Runs - 2

	cfg.Resume = true
	_, err = Run(context.Background(), cfg, nil)
	var bad *BadLinesError
	if !errors.As(err, &bad) || len(bad.Lines) != 2 || bad.Lines[0] != 3 || bad.Lines[1] != 4 || bad.Readable != readable ||
		!strings.Contains(err.Error(), "lines 3, 4 are unreadable (line 3: invalid character 'g'") {
		t.Fatalf("resume: %v", err)
	}
	if _, _, err := ReadJournal(dir, false); !errors.As(err, &bad) {
		t.Errorf("ReadJournal: %v", err)
	}
	if fp, rs, err := ReadJournal(dir, true); err != nil || len(rs) != readable || fp.Strategy != StrategyExhaustive {
		t.Errorf("ReadJournal skipping: %d results, %v", len(rs), err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, bytes.Join(lines, nil)) {
		t.Error("a refused resume changed the journal")
	}

	// Skipping: the readable results are kept, the two lost runs run again,
	// the bad lines are set aside, and the journal reads clean afterwards.
	cfg.SkipBadLines = true
	fe2 := &fakeEngine{}
	cfg.Engines = []engine.Engine{fe2}
	d2, err := Run(context.Background(), cfg, nil)
	if err != nil || d2.Resumed != readable || d2.Runs != 2 || len(fe2.runs()) != 2 {
		t.Fatalf("resume skipping: %v, %d resumed, %d runs", err, d2.Resumed, d2.Runs)
	}
	aside, _ := os.ReadFile(filepath.Join(dir, UnreadableFile))
	if !strings.Contains(string(aside), "journal.jsonl line 3 (invalid character 'g'") || !strings.Contains(string(aside), ": garbage{\n") ||
		!strings.Contains(string(aside), `line 4 (a result line without a result): {"type":"result","round":1}`) {
		t.Errorf("%s:\n%s", UnreadableFile, aside)
	}
	if _, rs, err := ReadJournal(dir, false); err != nil || len(rs) != d.Runs {
		t.Errorf("journal after the resume: %d results, %v", len(rs), err)
	}
	if err := CheckRunDir(dir, "run.json"); err != nil {
		t.Errorf("the run folder with its set-aside lines: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
