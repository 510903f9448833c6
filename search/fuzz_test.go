package search

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/internal/fileio"
	"cgtune/presets"
)

// FuzzJournalReader: no journal content panics the reader; what it reads
// is accounted for (every line is readable, unreadable or the torn tail);
// the readable lines alone read back to the same results with nothing
// unreadable (what --skip-bad-lines writes); and a header is required.
// Then a search resumes from the journal (exhaustive or halving, skipping
// bad lines or not): it ends in a one-line error or in a result whose
// ranking holds only candidates its plan runs, and the journal it leaves
// reads back clean.
func FuzzJournalReader(f *testing.F) {
	space := presets.Space{Impls: []string{presets.ImplNone, presets.ImplTE, presets.ImplLocal}, Scopes: [][]string{{"attn"}, {"mlp"}, {"moe"}}, Warmups: []int{2, 3}}
	configFor := func(strategy string) Config {
		return Config{Model: denseModel, Layout: layoutFor(denseModel), Engines: []engine.Engine{&fakeEngine{}}, Strategy: strategy, Budget: -1, Space: space}
	}
	seed := func(strategy string) []byte {
		cfg := configFor(strategy)
		cfg.RunDir = filepath.Join(f.TempDir(), "run")
		if _, err := Run(context.Background(), cfg, nil); err != nil {
			f.Fatal(err)
		}
		journal, err := fileio.ReadFileLimited(filepath.Join(cfg.RunDir, JournalFile), maxJournalBytes)
		if err != nil {
			f.Fatal(err)
		}
		return journal
	}
	exhaustive, halving := seed(StrategyExhaustive), seed(StrategyHalving)
	f.Add(exhaustive, false, false)
	f.Add(halving, true, false)
	f.Add(exhaustive[:len(exhaustive)-7], false, false)                                                           // torn last line
	f.Add(bytes.Replace(exhaustive, []byte(`{"type":"result"`), []byte(`{"type":"result"x`), 1), false, true)     // bad middle line
	f.Add(bytes.Replace(halving, []byte(`"scopes":["mlp"]`), []byte(`"scopes":["mlq"]`), 1), true, false)         // a scope no one knows
	f.Add(bytes.Replace(halving, []byte(`"impl":"transformer_engine"`), []byte(`"impl":"local"`), 1), true, true) // another impl under a key
	f.Add(bytes.Replace(exhaustive, []byte(`"round":1`), []byte(`"round":-4`), 1), false, true)
	f.Add([]byte(""), false, false)
	f.Add([]byte("\n\n"), true, true)
	f.Add([]byte(`{"type":"header","version":1,"fingerprint":{}}`+"\n"+`{"type":"result","result":null}`+"\n"), false, false)
	plans := map[string]map[string]Planned{}
	for _, s := range Strategies() {
		plan, err := Plan(configFor(s))
		if err != nil {
			f.Fatal(err)
		}
		plans[s] = map[string]Planned{}
		for _, p := range plan {
			plans[s][p.Candidate.Key()] = p
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, halving, skipBad bool) {
		pj, err := parseJournal("journal.jsonl", data, nil)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "journal.jsonl") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q", msg)
			}
			return
		}
		if len(data) == 0 || pj.intact > pj.size || pj.intact < 0 {
			t.Fatalf("intact %d of %d bytes", pj.intact, pj.size)
		}
		var header journalLine
		if json.Unmarshal(pj.good[0], &header) != nil || header.Type != "header" {
			t.Fatalf("accepted without a header: %q", pj.good[0])
		}
		lines := bytes.Count(data[:pj.intact], []byte("\n"))
		if pj.intact == pj.size && !bytes.HasSuffix(data, []byte("\n")) {
			lines++ // a last line without a newline that reads as JSON
		}
		if len(pj.good)+len(pj.bad) != lines {
			t.Fatalf("%d readable + %d unreadable lines, the file has %d", len(pj.good), len(pj.bad), lines)
		}
		for _, r := range pj.results {
			if r.Result == nil {
				t.Fatal("a result line without a result was kept")
			}
		}
		if (pj.badLinesError(false) == nil) != (len(pj.bad) == 0) {
			t.Fatal("unreadable lines without an error, or an error without them")
		}
		clean, err := parseJournal("journal.jsonl", bytes.Join(pj.good, nil), nil)
		if err != nil || len(clean.bad) != 0 || len(clean.results) != len(pj.results) {
			t.Fatalf("the readable lines alone: %v, %d unreadable, %d results (want %d)", err, len(clean.bad), len(clean.results), len(pj.results))
		}
		resumeFuzzed(t, data, halving, skipBad, configFor, plans)
	})
}

// resumeFuzzed resumes a search from journal data: a one-line error, or a
// ranking of candidates the plan runs and a journal that reads back clean.
func resumeFuzzed(t *testing.T, data []byte, halving, skipBad bool, configFor func(string) Config, plans map[string]map[string]Planned) {
	strategy := StrategyExhaustive
	if halving {
		strategy = StrategyHalving
	}
	cfg := configFor(strategy)
	cfg.RunDir, cfg.Resume, cfg.SkipBadLines = t.TempDir(), true, skipBad
	if err := os.WriteFile(filepath.Join(cfg.RunDir, JournalFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Run(context.Background(), cfg, nil)
	if err != nil {
		if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
			t.Fatalf("resume error %q", msg)
		}
		return
	}
	for _, r := range d.Ranking {
		p, ok := plans[strategy][r.Result.Candidate.Key()]
		if !ok || !p.Valid() {
			t.Fatalf("ranked %s, which the plan does not run", r.Result.Candidate.Key())
		}
	}
	if _, _, err := ReadJournal(cfg.RunDir, false); err != nil {
		t.Fatalf("the journal after the resume: %v", err)
	}
}
