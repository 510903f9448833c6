package fileio

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entryParse accepts JSON objects with a "k" field; a line "stop" (in
// JSON) ends the reading.
func entryParse(_ int, raw []byte) error {
	var e map[string]any
	if err := json.Unmarshal(raw, &e); err != nil {
		return err
	}
	if e["stop"] != nil {
		return StopReading(errors.New("stopped"))
	}
	if e["k"] == nil {
		return errors.New("no k")
	}
	return nil
}

// What a journal holds after OpenJournalAppend made it whole and one line
// was appended: the torn tail cut, a missing final newline added, bad
// lines (when there are any) moved aside.
func TestJournalMadeWholeBeforeAppending(t *testing.T) {
	for _, tc := range []struct {
		name, in    string
		good, bad   int
		torn, nonl  bool
		after, kept string
	}{
		{name: "whole", in: "{\"k\":1}\n{\"k\":2}\n", good: 2, after: "{\"k\":1}\n{\"k\":2}\n{\"k\":9}\n"},
		{name: "torn tail", in: "{\"k\":1}\n{\"k\":", good: 1, torn: true, after: "{\"k\":1}\n{\"k\":9}\n"},
		{name: "no final newline", in: "{\"k\":1}\n{\"k\":2}", good: 2, nonl: true, after: "{\"k\":1}\n{\"k\":2}\n{\"k\":9}\n"},
		{name: "bad middle line", in: "{\"k\":1}\nX{\"k\":2}\n{\"k\":3}\n", good: 2, bad: 1, after: "{\"k\":1}\n{\"k\":3}\n{\"k\":9}\n", kept: "X{\"k\":2}"},
		{name: "bad and no final newline", in: "{}\n{\"k\":3}", good: 1, bad: 1, nonl: true, after: "{\"k\":3}\n{\"k\":9}\n", kept: "line 1 (no k): {}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.jsonl")
			must(t, os.WriteFile(path, []byte(tc.in), 0o644))
			j, err := ParseJournal(path, []byte(tc.in), 0, entryParse)
			if err != nil || len(j.Good) != tc.good || len(j.Bad) != tc.bad || j.Torn() != tc.torn || j.NoFinalNewline != tc.nonl {
				t.Fatalf("%+v, %v", j, err)
			}
			if err := j.BadLinesError(false, tc.good); (err != nil) != (tc.bad > 0) {
				t.Errorf("BadLinesError: %v", err)
			}
			f, err := OpenJournalAppend(j)
			must(t, err)
			f.WriteString("{\"k\":9}\n")
			f.Close()
			if got, _ := os.ReadFile(path); string(got) != tc.after {
				t.Errorf("journal holds %q, want %q", got, tc.after)
			}
			aside, _ := os.ReadFile(filepath.Join(filepath.Dir(path), UnreadableName("j.jsonl")))
			if !strings.Contains(string(aside), tc.kept) || (tc.kept == "") != (len(aside) == 0) {
				t.Errorf("set aside: %q, want %q", aside, tc.kept)
			}
		})
	}
}

func TestJournalStopsAndLongLines(t *testing.T) {
	if _, err := ParseJournal("j", []byte("{\"k\":1}\n{\"stop\":1}\n{\"k\":2}\n"), 0, entryParse); err == nil || err.Error() != "stopped" {
		t.Errorf("StopReading: %v", err)
	}
	var long *LongLineError
	if _, err := ParseJournal("j", []byte("{\"k\":1}\n{\"k\":\"123456\"}\n"), 10, entryParse); !errors.As(err, &long) || long.Line != 2 {
		t.Errorf("a long line: %v", err)
	}
	if got := UnreadableName("journal.jsonl"); got != "journal-unreadable.txt" {
		t.Errorf("UnreadableName = %q", got)
	}
}
