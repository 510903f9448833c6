package job

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A job log's lines end at "\r" as at "\n", so the iteration lines of a
// progress bar redrawn with "\r" are read; a line with no end is cut to
// its last MaxLogLine bytes, with a note, so a huge one neither grows the
// process nor keeps the job RUNNING after it ended.
func TestLocalJobLogWithoutNewlines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "bar.sh")
	const junk = 8 << 20
	if err := os.WriteFile(script, []byte(`yes x | tr -d '\n' | head -c `+strconv.Itoa(junk)+`
for i in $(seq 1 12); do printf '\r [2026-01-01 00:00:00.000000] iteration %8d/%8d | elapsed time per iteration (ms): 40.0 |' $i 12; done
`), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, &Local{}, "bash "+Quote(script)+" {iters} {flags}", dir, nil)
	var u updates
	res := e.RunJob(context.Background(), eager, 0, u.add)
	if res.Failed() {
		t.Fatalf("%s: %s", res.ErrKind, res.Err)
	}
	if want := 12 - FirstMeasured(eager) + 1; res.Step.N != want || res.Step.Median != 40 {
		t.Errorf("step %+v, want %d iterations of 40 ms", res.Step, want)
	}
	if notes := strings.Join(res.Notes, "; "); !strings.Contains(notes, "1 log lines were longer than 64 KiB") {
		t.Errorf("no note of the cut line: %q", notes)
	}
	for _, x := range u.us {
		for _, l := range append(x.Lines, x.Tail...) {
			if len(l) > MaxLogLine+len("…") {
				t.Fatalf("an update carries a line of %d bytes", len(l))
			}
		}
	}
}

// A line of any length costs at most MaxLogLine bytes, whatever the
// chunks it comes in; the bytes dropped are counted.
func TestParserBoundsALineWithoutEnd(t *testing.T) {
	var p Parser
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	const chunks = 1600 // 100 MiB
	for range chunks {
		p.Feed(chunk, func(l LogLine) { t.Fatalf("a line ended: %d bytes", len(l.Text)) })
		if c := cap(p.split.line); c > 2*MaxLogLine {
			t.Fatalf("the partial line holds %d bytes", c)
		}
	}
	var got []LogLine
	p.Feed([]byte("tail\r\nnext"), func(l LogLine) { got = append(got, l) })
	p.End(func(l LogLine) { got = append(got, l) })
	r := p.Report()
	if len(got) != 2 || len(got[0].Text) != MaxLogLine || !strings.HasSuffix(got[0].Text, "xtail") || got[1].Text != "next" {
		t.Fatalf("lines %d, first ends %q", len(got), got[0].Text[max(0, len(got[0].Text)-8):])
	}
	if want := int64(chunks*len(chunk) + 4 - MaxLogLine); r.CutLines != 1 || r.CutBytes != want || got[0].Cut != want || r.Lines != 2 {
		t.Errorf("cut %d lines, %d bytes (line says %d), want 1, %d; %d lines", r.CutLines, r.CutBytes, got[0].Cut, want, r.Lines)
	}
}

// ParseLog (cgtune calibrate --log) cuts a log line over 16 MiB, counts
// it, and reads the iteration on the line after it.
func TestParseLogLongLine(t *testing.T) {
	log := strings.Repeat("x", 17<<20) + "\n [2026-01-01 00:00:00.000000] iteration        5/      12 | elapsed time per iteration (ms): 40.0 |\n"
	r, err := ParseLog(strings.NewReader(log))
	if err != nil || len(r.Iterations) != 1 || r.Iterations[0].Iter != 5 || r.Iterations[0].Line != 2 || r.CutLines != 1 {
		t.Errorf("err %v, iterations %+v, cut lines %d", err, r.Iterations, r.CutLines)
	}
}

// splitWhole is the reference for lineSplitter: the whole input at once,
// "\r\n", "\r" and "\n" each one line end, each line's last MaxLogLine
// bytes, a last line without an end if it is not empty.
func splitWhole(in string) (lines []string, cuts []int64) {
	s := strings.ReplaceAll(strings.ReplaceAll(in, "\r\n", "\n"), "\r", "\n")
	parts := strings.Split(s, "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	for _, l := range parts {
		var cut int64
		if len(l) > MaxLogLine {
			cut = int64(len(l) - MaxLogLine)
			l = l[cut:]
		}
		lines, cuts = append(lines, l), append(cuts, cut)
	}
	return lines, cuts
}

// FuzzLogReader feeds a log in chunks of a fuzzed size (and repeats the
// input to make long lines): the lines must be those of the whole input
// split at once, none longer than MaxLogLine, and the parser must not panic.
func FuzzLogReader(f *testing.F) {
	for _, name := range []string{"mlm_pretrain_gpt_full_iteration.log", "mb_run_recipe_te.log", "mlm_oom.log"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint16(4096), uint8(1))
	}
	f.Add([]byte("\r 10%|#  |\r 20%|## |\r\n"), uint16(1), uint8(1))
	f.Add([]byte("abc\r"), uint16(3), uint8(255))
	f.Add(bytes.Repeat([]byte("x"), 1024), uint16(5000), uint8(99))
	f.Add([]byte{0, 0xff, '\r', '\r', '\n', '\n'}, uint16(2), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16, repeat uint8) {
		in := bytes.Repeat(data, int(repeat)+1)
		size := int(chunk)%8192 + 1
		var p Parser
		var lines []string
		var cuts []int64
		on := func(l LogLine) {
			if len(l.Text) > MaxLogLine {
				t.Fatalf("a line of %d bytes", len(l.Text))
			}
			lines, cuts = append(lines, l.Text), append(cuts, l.Cut)
		}
		for rest := in; len(rest) > 0; {
			n := min(size, len(rest))
			p.Feed(rest[:n], on)
			rest = rest[n:]
		}
		p.End(on)
		want, wantCuts := splitWhole(string(in))
		if len(lines) != len(want) {
			t.Fatalf("%d lines, want %d", len(lines), len(want))
		}
		for i := range want {
			if lines[i] != want[i] || cuts[i] != wantCuts[i] {
				t.Fatalf("line %d: %q (cut %d), want %q (cut %d)", i+1, clipLine(lines[i]), cuts[i], clipLine(want[i]), wantCuts[i])
			}
		}
		r := p.Report()
		if r.Lines != len(want) {
			t.Fatalf("report counts %d lines, want %d", r.Lines, len(want))
		}
		if len(r.Err) > 400+len("…") {
			t.Fatalf("error of %d bytes", len(r.Err))
		}
	})
}

func clipLine(s string) string { return s[:min(len(s), 80)] }

// A ledger line over 1 MiB, or a validation journal line over 64 MiB, is
// an error naming the file and the line, never a bare "token too long"
// or a silent end of the reading (the results after it would run again).
func TestJournalLinesTooLongNameFileAndLine(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x", 17<<20)
	ledger := filepath.Join(dir, LedgerFile)
	if err := os.WriteFile(ledger, []byte(`{"key":"none","job":{"launcher":"local","id":"local:1"}}`+"\n\""+long+"\"\n{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenLedger(dir); err == nil || err.Error() != ledger+" line 2 is longer than 1 MiB, the most cgtune reads on one line" {
		t.Errorf("ledger: %v", err)
	}
	targets := []Target{{Candidate: eager}}
	header, _ := json.Marshal(validationLine{Type: "header", Targets: targets})
	journal := filepath.Join(dir, ValidationJournal)
	if err := os.WriteFile(journal, []byte(string(header)+"\n\""+long+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openValidationJournal(dir, targets, true); err == nil || err.Error() != journal+" line 2 is longer than 16 MiB, the most cgtune reads on one line" {
		t.Errorf("validation journal: %v", err)
	}
}
