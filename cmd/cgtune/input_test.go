package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"cgtune/presets"
	"cgtune/search"
)

// A preset whose space lists warm-ups 0 to 1000 is bad input, refused at
// once with its line, the bound and why: planning that space would take
// minutes, deaf to Ctrl-C.
func TestOversizedSpaceRefusedAtParse(t *testing.T) {
	isolate(t)
	var ws []string
	for w := range presets.MaxWarmup + 1 {
		ws = append(ws, fmt.Sprint(w))
	}
	preset := writeFile(t, "big.yaml", `version: 1
name: big
model: llama3_8b
gpu: h100
space:
  impls: [none, local, transformer_engine]
  warmups: [`+strings.Join(ws, ",")+`]
mbridge: "0.4"
`)
	for _, args := range [][]string{
		{"--headless", "--preset", preset, "--engine", "estimate"},
		{"check", "--preset", preset},
	} {
		t.Run(argsName(args), func(t *testing.T) {
			code, out, errb := cgtuneWithin(t, args...)
			if code != exitBadInput || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, preset+":5: ") ||
				!strings.Contains(errb, "130131 candidates") || !strings.Contains(errb, "more than the 4096 cgtune plans: each is checked against the rules") {
				t.Errorf("%v: exit %d, stderr %q, stdout %q", args, code, errb, out)
			}
		})
	}
}

// A 100 MB request line does not end `cgtune worker`: it answers with an
// error naming the line and the limit, keeps serving, and exits 0 when
// told to quit.
func TestWorkerCommandSurvivesAnOverlongLine(t *testing.T) {
	cache := isolate(t)
	cmd := asMain(t, cache, "worker", "--engine", "estimate")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	must(t, cmd.Start())
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"hello"`) {
		t.Fatalf("no hello: %q", sc.Text())
	}
	go func() {
		piece := []byte(strings.Repeat("x", 1<<20))
		for range 100 {
			if _, err := in.Write(piece); err != nil {
				return
			}
		}
		in.Write([]byte("\n" + `{"v":1,"type":"ping","id":"p"}` + "\n" + `{"v":1,"type":"quit"}` + "\n"))
	}()
	if !sc.Scan() || !strings.Contains(sc.Text(), `"type":"error"`) || !strings.Contains(sc.Text(), "stdin line 1 is longer than 16 MiB") {
		t.Errorf("long line: %q", sc.Text())
	}
	if !sc.Scan() || !strings.Contains(sc.Text(), `"type":"pong"`) {
		t.Errorf("ping after the long line: %q", sc.Text())
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("worker: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("worker still running 10 s after quit")
	}
}

// editJournalLine rewrites line n (from 1) of run's journal with edit.
func editJournalLine(t *testing.T, run string, n int, edit func(l map[string]any)) {
	t.Helper()
	path := filepath.Join(run, search.JournalFile)
	data, err := os.ReadFile(path)
	must(t, err)
	lines := strings.SplitAfter(string(data), "\n")
	var l map[string]any
	must(t, json.Unmarshal([]byte(lines[n-1]), &l))
	edit(l)
	b, err := json.Marshal(l)
	must(t, err)
	lines[n-1] = string(b) + "\n"
	must(t, os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644))
}

// A journal edited to hold a candidate outside the plan (an unknown
// scope) stops the resume of a halving run with the line named and why
// (exit 2, nothing on stdout), and --skip-bad-lines sets it aside.
func TestResumeNamesAForeignJournalLine(t *testing.T) {
	isolate(t)
	run := filepath.Join(t.TempDir(), "run")
	if code, _, errb := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--run-dir", run); code != exitOK {
		t.Fatalf("search: exit %d %s", code, errb)
	}
	editJournalLine(t, run, 3, func(l map[string]any) {
		res := l["result"].(map[string]any)
		res["candidate"].(map[string]any)["scopes"] = []string{"mlq"}
		res["step"] = map[string]any{"median_ms": 1, "p10_ms": 1, "p90_ms": 1, "n": 3}
	})
	code, out, errb := cgtune(t, "--headless", "--resume", run)
	want := filepath.Join(run, search.JournalFile) + `: line 3 is unreadable (line 3: candidate `
	if code != exitBadInput || out != "" || !strings.Contains(errb, want) || !strings.Contains(errb, `unknown scope "mlq"`) || strings.Contains(errb, "panic") {
		t.Fatalf("resume: exit %d, stderr %q", code, errb)
	}
	if code, out, errb := cgtune(t, "--headless", "--resume", run, "--skip-bad-lines"); code != exitOK || !strings.Contains(out, "winner") || strings.Contains(out, "mlq") {
		t.Errorf("resume --skip-bad-lines: exit %d\n%s\n%s", code, out, errb)
	}
}

// validate checks the candidates it reads from a run's journal as any
// input: an impl "banana" is refused, naming the line, and never launched.
func TestValidateChecksJournalCandidates(t *testing.T) {
	isolate(t)
	run := searchRun(t)
	editJournalLine(t, run, 2, func(l map[string]any) {
		l["key"] = "banana/attn/w3"
		l["result"].(map[string]any)["candidate"] = map[string]any{"impl": "banana", "scopes": []string{"attn"}, "warmup": 3}
	})
	code, out, errb := cgtune(t, "validate", run, "--launcher", "local", "--dry-run", "--command", fakeJobCommand(t))
	want := filepath.Join(run, search.JournalFile) + `: line 2 is unreadable (line 2: candidate banana attn w3: field "impl": unknown impl "banana"`
	if code != exitBadInput || !strings.Contains(errb, want) || strings.Contains(out, "banana") {
		t.Errorf("exit %d, stderr %q, stdout %q", code, errb, out)
	}
}

// failingWriter is a stdout whose every write fails, as on a full disk.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// A command whose results cannot be written to stdout (a full disk) exits
// 2 naming the write error, never 0 or check's 1 as if they had arrived.
func TestResultsThatCannotBeWrittenAreAnError(t *testing.T) {
	isolate(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"check valid", []string{"check", "--model", "llama3_8b"}},
		{"check invalid", []string{"check", "--model", "llama3_8b", "--impl", "transformer_engine", "--scope", "moe"}},
		{"models", []string{"models"}},
		{"headless", []string{"--headless", "--model", "llama3_8b", "--engine", "estimate", "--strategy", "exhaustive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errb strings.Builder
			code := run(tc.args, failingWriter{}, &errb)
			lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
			if code != exitBadInput || !strings.HasSuffix(lines[len(lines)-1], ": no space left on device") {
				t.Errorf("exit %d, stderr %q", code, errb.String())
			}
		})
	}
}

// The same with the process's own stdout on a full device (a private
// /dev/full node).
func TestCheckToAFullDevice(t *testing.T) {
	cache := isolate(t)
	full := filepath.Join(t.TempDir(), "full")
	must(t, syscall.Mknod(full, syscall.S_IFCHR|0o666, 1<<8|7))
	f, err := os.OpenFile(full, os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no private /dev/full: %v", err)
	}
	defer f.Close()
	cmd := asMain(t, cache, "check", "--model", "llama3_8b")
	var errb strings.Builder
	cmd.Stdout, cmd.Stderr = f, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitBadInput || errb.String() != "cgtune: writing the results to stdout: write /dev/stdout: no space left on device\n" {
		t.Errorf("%v, stderr %q", err, errb.String())
	}
}

// A journal that cannot be written (here: past the file size limit) stops
// the search with exit 2, naming the journal, not exit 1, which means an
// invalid configuration or no candidate succeeding.
func TestJournalWriteFailureExitsTwo(t *testing.T) {
	cache := isolate(t)
	args := []string{"--headless", "--model", "llama3_8b", "--engine", "estimate", "--strategy", "exhaustive"}
	first := filepath.Join(t.TempDir(), "run")
	if code, _, errb := cgtune(t, append(args, "--run-dir", first)...); code != exitOK {
		t.Fatalf("exit %d %s", code, errb)
	}
	data, err := os.ReadFile(filepath.Join(first, search.JournalFile))
	must(t, err)
	header, _, _ := strings.Cut(string(data), "\n")
	// Room for the header and part of the first result (ulimit -f counts KiB).
	limit := (len(header)+1)/1024 + 1
	run := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command("bash", append([]string{"-c", `ulimit -f "$1"; shift; exec "$@"`, "bash", fmt.Sprint(limit), os.Args[0]}, append(args, "--run-dir", run)...)...)
	cmd.Env = asMain(t, cache).Env
	var errb strings.Builder
	cmd.Stderr = &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitBadInput || !strings.Contains(errb.String(), "cgtune: the search stopped: journal "+filepath.Join(run, search.JournalFile)) {
		t.Errorf("%v, stderr %q", err, errb.String())
	}
}

// Numeric flags and --set values out of their range are refused with
// exit 2 and the allowed range, before anything runs: the engines would
// otherwise take their defaults, or jobs would be launched first.
func TestFlagsOutOfRangeAreRefused(t *testing.T) {
	isolate(t)
	h := []string{"--headless", "--model", "llama3_8b", "--engine", "estimate"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"max-layers", append(h, "--max-layers", "-1"), "cgtune: --max-layers -1: out of range (allowed: 1 to 1024)"},
		{"max-microbatches", append(h, "--max-microbatches", "0"), "cgtune: --max-microbatches 0: out of range (allowed: 1 to "},
		{"probe max-layers", []string{"probe", "--framework", "--model", "llama3_8b", "--max-layers", "0"}, "cgtune: --max-layers 0: out of range (allowed: 1 to 1024)"},
		{"ranks", append(h, "--ranks", "-3"), "cgtune: --ranks -3: allowed: 0 (as many of --gpu as the layout's TP×EP can use) or 1 or more"},
		{"job-iters 0", append(h, "--job-iters", "0"), "cgtune: --job-iters 0: out of range (allowed: 1 to "},
		{"job-iters -1", append(h, "--job-iters", "-1"), "cgtune: --job-iters -1: out of range (allowed: 1 to "},
		{"job-timeout", append(h, "--job-timeout", "-5s"), "cgtune: --job-timeout -5s: allowed: 0 (no bound beyond the scheduler's) or a positive duration"},
		{"hidden dropout", append(h, "--set", "model.hidden_dropout=1e308"), "cgtune: --set model.hidden_dropout=1e308: field model.hidden_dropout: bad value \"1e+308\" (allowed: a probability: a number from 0 up to but not including 1)"},
		{"attention dropout", []string{"check", "--model", "llama3_8b", "--set", "model.attention_dropout=7"}, "(allowed: a probability: a number from 0 up to but not including 1)"},
		{"dropout 1", []string{"check", "--model", "llama3_8b", "--set", "model.attention_dropout=1"}, "bad value \"1\""},
		{"negative dropout", []string{"check", "--model", "llama3_8b", "--set", "model.hidden_dropout=-0.1"}, "bad value \"-0.1\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errb := cgtune(t, tc.args...)
			lines := strings.Split(strings.TrimSpace(errb), "\n")
			if code != exitBadInput || !strings.HasPrefix(lines[len(lines)-1], "cgtune: ") || !strings.Contains(lines[len(lines)-1], tc.want) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %q", code, out, errb, tc.want)
			}
		})
	}
	if code, out, errb := cgtune(t, "check", "--model", "llama3_8b", "--set", "model.hidden_dropout=0.1", "--set", "model.attention_dropout=0"); code != exitOK {
		t.Errorf("dropouts 0.1 and 0: exit %d %s %s", code, out, errb)
	}
}

// --resume refuses a --gpu-type or --run-dir that contradicts the run it
// resumes, saying what the run is, instead of ignoring it.
func TestResumeRefusesContradictingFlags(t *testing.T) {
	isolate(t)
	run := filepath.Join(t.TempDir(), "run")
	if code, _, errb := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--run-dir", run); code != exitOK {
		t.Fatalf("search: exit %d %s", code, errb)
	}
	other := filepath.Join(t.TempDir(), "other")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"gpu-type", []string{"--gpu-type", "b200"}, "cgtune: --gpu-type b200: the search in " + run + " is for h100 (its journal says); leave --gpu-type out to resume it, or start a new search"},
		{"run-dir", []string{"--run-dir", other}, "cgtune: --run-dir " + other + ": --resume " + run + " continues the search in " + run + "; leave --run-dir out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errb := cgtune(t, append([]string{"--headless", "--resume", run}, tc.args...)...)
			if code != exitBadInput || errb != tc.want+"\n" || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errb)
			}
		})
	}
	for _, args := range [][]string{{"--gpu-type", "h100"}, {"--run-dir", run}} {
		t.Run(argsName(args), func(t *testing.T) {
			if code, _, errb := cgtune(t, append([]string{"--headless", "--resume", run}, args...)...); code != exitOK {
				t.Errorf("%v agreeing with the run: exit %d %s", args, code, errb)
			}
		})
	}
	if _, err := os.Stat(other); err == nil {
		t.Error("the refused --run-dir was created")
	}
}

// A preset's layout with tp: 0 (or any parallel size 0) is refused with
// its line; a size left out is 1, and a preset without tp survives import
// and export (it is not written back as 0).
func TestPresetParallelSizeZero(t *testing.T) {
	isolate(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	body := func(layout string) string {
		return "version: 1\nname: p\nmodel: llama3_8b\ngpu: h100\nlayout: {" + layout +
			"num_gpus: 8, precision: bf16, gbs: 128, mbs: 1, seq: 8192}\nspace: {impls: [none, local], warmups: [3]}\nmbridge: \"0.4\"\n"
	}
	for _, f := range []string{"tp", "pp", "cp", "ep", "etp", "vp"} {
		t.Run(f, func(t *testing.T) {
			p := writeFile(t, "p.yaml", body(f+": 0, "))
			code, _, errb := cgtune(t, "check", "--preset", p)
			if code != exitBadInput || !strings.Contains(errb, p+":5: field \""+f+"\": 0 is not a size (allowed: 1 to ") {
				t.Errorf("%s: 0: exit %d %q", f, code, errb)
			}
		})
	}
	p := writeFile(t, "p.yaml", body(""))
	if code, _, errb := cgtune(t, "preset", "import", p); code != exitOK {
		t.Fatalf("import without tp: exit %d %s", code, errb)
	}
	code, exported, errb := cgtune(t, "preset", "export", "p")
	if code != exitOK {
		t.Fatalf("export: exit %d %s", code, errb)
	}
	back := writeFile(t, "back.yaml", exported)
	if code, out, errb := cgtune(t, "check", "--preset", back); code != exitOK || strings.Contains(exported, "tp: 0") {
		t.Errorf("the exported preset: exit %d %s %s\n%s", code, out, errb, exported)
	}
}
