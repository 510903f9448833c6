package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"cgtune/engine"
)

// fakeLogs writes the logs of engine/job's fake training job, eager and a
// full-iteration graph, into a temporary folder.
func fakeLogs(t *testing.T) (dir, eager, full string) {
	t.Helper()
	dir = t.TempDir()
	fake := filepath.Join("..", "..", "engine", "job", "testdata", "fakejob.sh")
	logOf := func(name string, args ...string) string {
		out, err := exec.Command("bash", append([]string{fake, "--train-iters", "10"}, args...)...).Output()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return dir, logOf("eager.log", "--cuda-graph-impl", "none"), logOf("full.log", "--cuda-graph-impl", "full_iteration", "--no-check-for-nan-in-loss-and-grad")
}

// calibrate refuses, in one line and saving nothing, what would skew every
// later estimate: a log of another model, eager logs alone, a fit at a
// bound of the scale; and inputs that would block or never end.
func TestCalibrateRefuses(t *testing.T) {
	cache := isolate(t)
	dir, eager, full := fakeLogs(t)
	// A graphed step 20 times faster than eager: more than any host cost
	// of llama3_8b's layout explains.
	fastGraph := filepath.Join(dir, "fast.log")
	data := regexp.MustCompile(`elapsed time per iteration \(ms\): 22\.\d`).ReplaceAllString(string(mustRead(os.ReadFile(full))), "elapsed time per iteration (ms): 2.0")
	os.WriteFile(fastGraph, []byte(data), 0o644)
	zeros := filepath.Join(dir, "zeros.log")
	os.WriteFile(zeros, make([]byte, 20<<20), 0o644) // no newline: longer than any line buffer
	fifo := filepath.Join(dir, "fifo.log")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	otherModel := filepath.Join("..", "..", "engine", "job", "testdata", "mlm_pretrain_gpt_full_iteration.log")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a log of another model", []string{"--log", eager, "--log", otherModel}, "ran another model or layout than llama3_8b (h100 layout): hidden_size 2048 in the log, 4096 in llama3_8b"},
		{"eager alone", []string{"--log", eager}, "a fit needs at least one graphed run"},
		{"a fit at the bound", []string{"--log", eager, "--log", fastGraph}, "the fit reached the bound 50 of the host-cost scale"},
		{"a FIFO", []string{"--log", fifo}, fifo + " is a FIFO, not a regular file"},
		{"no newline in 20 MiB", []string{"--log", zeros}, "--log " + zeros + ": the log does not say which configuration it ran"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type result struct {
				code      int
				out, errb string
			}
			done := make(chan result, 1)
			go func() {
				code, out, errb := cgtune(t, append([]string{"calibrate", "--model", "llama3_8b"}, tc.args...)...)
				done <- result{code, out, errb}
			}()
			select {
			case r := <-done:
				if r.code != exitBadInput || strings.Count(r.errb, "\n") != 1 || !strings.Contains(r.errb, tc.want) || strings.Contains(r.errb, "token too long") {
					t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and %q", r.code, r.out, r.errb, tc.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("calibrate did not return: it blocks on its input")
			}
		})
	}
	if cals, _ := filepath.Glob(filepath.Join(cache, "cgtune", "calibration", "*.json")); len(cals) != 0 {
		t.Errorf("a refused fit saved %v", cals)
	}
}

// A saved calibration is listed, shown by every search it changes (a line
// of the headless output and a note on each emulated result), and removed
// by its ID.
func TestCalibrationListedShownRemoved(t *testing.T) {
	isolate(t)
	_, eager, full := fakeLogs(t)
	if code, out, _ := cgtune(t, "calibrate", "--list"); code != exitOK || !strings.HasPrefix(out, "no saved calibration") {
		t.Errorf("empty list: exit %d %q", code, out)
	}
	code, out, errb := cgtune(t, "calibrate", "--log", eager, "--log", full, "--model", "llama3_8b")
	if code != exitOK {
		t.Fatalf("exit %d %s%s", code, out, errb)
	}
	id := regexp.MustCompile(`\(ID (\S+):`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no ID in %q", out)
	}
	code, out, _ = cgtune(t, "calibrate", "--list")
	if code != exitOK || !strings.Contains(out, id[1]+"  llama3_8b  h100") || !strings.Contains(out, "calibrate eager.log full.log") {
		t.Errorf("list: exit %d\n%s", code, out)
	}

	code, out, errb = cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--json")
	if code != exitOK || !strings.Contains(errb, "calibration: the emulated results (cuda, estimate) scale host costs") || !strings.Contains(errb, "cgtune calibrate --rm "+id[1]) {
		t.Errorf("the search does not say it is calibrated: exit %d\n%s", code, errb)
	}
	var res struct {
		Ranking []struct {
			Result engine.Result `json:"result"`
		} `json:"ranking"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Ranking) == 0 {
		t.Fatalf("json: %v", err)
	}
	emulated := 0
	for _, r := range res.Ranking {
		notes := strings.Join(r.Result.Notes, "\n")
		if !strings.Contains(notes, "estimated: rates") {
			continue // derived from the runs' eager baselines
		}
		emulated++
		if !strings.Contains(notes, "calibrated: host costs ×") {
			t.Errorf("%s: no calibration note in %q", r.Result.Candidate.Key(), r.Result.Notes)
		}
	}
	if emulated == 0 {
		t.Error("no estimated result in the ranking")
	}

	if code, out, errb = cgtune(t, "calibrate", "--rm", id[1]); code != exitOK || !strings.HasPrefix(out, "removed ") {
		t.Errorf("rm: exit %d %q %q", code, out, errb)
	}
	if code, _, errb = cgtune(t, "calibrate", "--rm", id[1]); code != exitBadInput || !strings.Contains(errb, "no calibration") {
		t.Errorf("rm again: exit %d %q", code, errb)
	}
	if code, _, errb = cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate"); code != exitOK || strings.Contains(errb, "calibration:") {
		t.Errorf("after rm: exit %d %s", code, errb)
	}
}
