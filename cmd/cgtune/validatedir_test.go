package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cgtune/engine/job"
)

// validate --dir refuses a folder that holds files other than a
// validation's (naming them), dry run or not, and leaves them as they
// were: it writes validation.json and the jobs' logs there.
func TestValidateDirRefusesOtherFiles(t *testing.T) {
	isolate(t)
	run := searchRun(t)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, job.ValidationFile), []byte("mine\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine\n"), 0o644))
	for _, dry := range []bool{false, true} {
		t.Run(fmt.Sprintf("dry-run=%v", dry), func(t *testing.T) {
			args := []string{"validate", run, "--dir", dir, "--launcher", "local", "--command", "bash x.sh {flags} --out {yaml_file}", "--iters", "12"}
			if dry {
				args = append(args, "--dry-run")
			}
			code, out, errb := cgtune(t, args...)
			if code != exitBadInput || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, "--dir "+dir+" holds files that are not a cgtune validation (notes.txt)") {
				t.Errorf("dry run %v: exit %d, %q %q", dry, code, out, errb)
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("the folder holds %d entries after the refusals", len(entries))
	}
	if got, _ := os.ReadFile(filepath.Join(dir, job.ValidationFile)); string(got) != "mine\n" {
		t.Errorf("validation.json holds %q", got)
	}
}

// A validation folder is locked while a validation runs: a validate
// --resume started meanwhile is refused, instead of taking the running
// job for a lost one and starting it again.
func TestValidateFolderIsLocked(t *testing.T) {
	cache := isolate(t)
	run := searchRun(t)
	args := []string{"validate", run, "--launcher", "local", "--command", fakeJobCommand(t), "--top", "1", "--iters", "200", "--poll", "100ms"}
	first := asMain(t, cache, append(args, "--json")...)
	stderr, err := first.StderrPipe()
	must(t, err)
	must(t, first.Start())
	defer func() {
		first.Process.Signal(syscall.SIGINT)
		first.Wait()
	}()
	running := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		seen := false
		for sc.Scan() {
			var ev struct {
				Event  string
				Update job.Update
			}
			if !seen && json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == "job" && ev.Update.State == job.StateRunning {
				seen = true
				running <- true
			}
		}
		if !seen {
			running <- false
		}
	}()
	select {
	case ok := <-running:
		if !ok {
			t.Fatal("the first validation ended without a running job")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no job running after 30 s")
	}
	vdir := filepath.Join(run, "validate")
	ledger, _ := os.ReadFile(filepath.Join(vdir, job.LedgerFile))
	code, out, errb := cgtune(t, append(args, "--resume")...)
	if code != exitBadInput || !strings.Contains(errb, "in use by another cgtune (pid "+strconv.Itoa(first.Process.Pid)+")") || strings.Contains(errb, "RUNNING") {
		t.Errorf("a second validation while one runs: exit %d, %q %q", code, out, errb)
	}
	if after, _ := os.ReadFile(filepath.Join(vdir, job.LedgerFile)); !bytes.Equal(after, ledger) || bytes.Contains(after, []byte(job.StateUnknown)) {
		t.Errorf("the job ledger changed under the running validation:\n%s\n%s", ledger, after)
	}
}
