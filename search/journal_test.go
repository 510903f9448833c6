package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/presets"
)

// Unreadable lines in the middle of a journal are named in one error that
// counts the readable results around them, and SkipBadLines resumes
// without them.
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

// editJournal rewrites the first result line of the journal in dir filed
// under key with edit, which changes the line's JSON object, and returns
// the line's number (from 1).
func editJournal(t *testing.T, dir, key string, edit func(l map[string]any)) int {
	t.Helper()
	path := filepath.Join(dir, JournalFile)
	data, err := os.ReadFile(path)
	must(t, err)
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, raw := range lines[1:] {
		var l map[string]any
		if json.Unmarshal(raw, &l) != nil || l["key"] != key {
			continue
		}
		edit(l)
		b, err := json.Marshal(l)
		must(t, err)
		lines[i+1] = append(b, '\n')
		must(t, os.WriteFile(path, bytes.Join(lines, nil), 0o644))
		return i + 2
	}
	t.Fatalf("no result for %s in the journal", key)
	return 0
}

// setCandidate makes a result line's key and candidate c.
func setCandidate(c presets.Candidate) func(map[string]any) {
	return func(l map[string]any) {
		l["key"] = c.Key()
		l["result"].(map[string]any)["candidate"] = map[string]any{"impl": c.Impl, "scopes": c.Scopes, "warmup": c.Warmup}
	}
}

// Every journal result is checked against the plan on resume: a
// candidate outside it is a bad line, named with why, that SkipBadLines
// sets aside. It must neither panic a halving resume nor be ranked the
// winner of an exhaustive one though the rules reject it.
func TestResumeRefusesResultsOutsideThePlan(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	fast := func(l map[string]any) {
		step := l["result"].(map[string]any)["step"].(map[string]any)
		step["median_ms"], step["p10_ms"], step["p90_ms"] = 1.0, 1.0, 1.0
	}
	for _, tc := range []struct {
		name, strategy string
		edit           func(map[string]any)
		why            string
	}{
		{"unknown scope, halving", StrategyHalving, func(l map[string]any) {
			l["result"].(map[string]any)["candidate"].(map[string]any)["scopes"] = []string{"mlq"}
			fast(l)
		}, `candidate te mlq w3: field "scopes": unknown scope "mlq"`},
		{"another impl under the key, halving", StrategyHalving, func(l map[string]any) {
			l["result"].(map[string]any)["candidate"].(map[string]any)["impl"] = "local"
			fast(l)
		}, `a result for local mlp w3 filed under key "transformer_engine/mlp/w3"`},
		{"rejected by the rules, exhaustive", StrategyExhaustive, func(l map[string]any) {
			setCandidate(presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"moe"}, Warmup: 3})(l)
			fast(l)
		}, "candidate te moe w3 is not run by this search: TC-20 moe cuda graph is only supported for MoE."},
		{"not in the space, exhaustive", StrategyExhaustive, func(l map[string]any) {
			setCandidate(presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}, Warmup: 7})(l)
			fast(l)
		}, "candidate te attn w7 is not in this search's space"},
		{"round 4, halving", StrategyHalving, func(l map[string]any) { l["round"] = 4 }, "round 4: the halving strategy has rounds 1 to 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			cfg := Config{Model: m, Layout: l, Engines: []engine.Engine{&fakeEngine{}}, Estimator: estimator(t, "h100"), RunDir: dir, Strategy: tc.strategy, Budget: -1,
				Space: presets.Space{Impls: []string{presets.ImplNone, presets.ImplTE, presets.ImplLocal}, Scopes: [][]string{{"attn"}, {"mlp"}, {"moe"}}, Warmups: []int{3}}}
			d, err := Run(context.Background(), cfg, nil)
			must(t, err)
			n := editJournal(t, dir, "transformer_engine/mlp/w3", tc.edit)
			cfg.Resume = true
			_, err = Run(context.Background(), cfg, nil)
			var bad *BadLinesError
			at := fmt.Sprintf("line %d is unreadable (line %d: ", n, n)
			if !errors.As(err, &bad) || len(bad.Lines) != 1 || bad.Lines[0] != n || !strings.Contains(err.Error(), at) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("resume: %v", err)
			}
			cfg.SkipBadLines = true
			fe := &fakeEngine{}
			cfg.Engines = []engine.Engine{fe}
			d2, err := Run(context.Background(), cfg, nil)
			if err != nil || d2.Resumed != d.Runs-1 || d2.Winner == nil || d2.Winner.Result.Candidate.Key() != d.Winner.Result.Candidate.Key() {
				t.Fatalf("resume skipping: %v, %d resumed, winner %v", err, d2.Resumed, d2.Winner)
			}
			if aside, _ := os.ReadFile(filepath.Join(dir, UnreadableFile)); !strings.Contains(string(aside), tc.why) {
				t.Errorf("%s: %s", UnreadableFile, aside)
			}
		})
	}
}
