package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// preset export -o onto an existing file needs --force; without it the
// file is left as it was and the one-line error says --force.
func TestPresetExportNeedsForce(t *testing.T) {
	presetEnv(t, "")
	if code, _, errb := cgtune(t, "preset", "save", "p", "--model", "llama3_8b"); code != exitOK {
		t.Fatal(errb)
	}
	file := filepath.Join(t.TempDir(), "p.yaml")
	must(t, os.WriteFile(file, []byte("mine\n"), 0o644))
	code, _, errb := cgtune(t, "preset", "export", "p", "-o", file)
	if code != exitBadInput || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, file) || !strings.Contains(errb, "--force") {
		t.Errorf("export over a file: exit %d, %q", code, errb)
	}
	if got, _ := os.ReadFile(file); string(got) != "mine\n" {
		t.Errorf("the file holds %q", got)
	}
	if code, _, errb := cgtune(t, "preset", "export", "p", "-o", file, "--force"); code != exitOK {
		t.Errorf("export --force: exit %d %s", code, errb)
	}
	if got, _ := os.ReadFile(file); !strings.Contains(string(got), "name: p") {
		t.Errorf("--force left %q", got)
	}
}

// Of eight `preset save race` started at once without --force, exactly
// one succeeds and the others are refused (exit 2), in every trial: the
// check for an existing preset and the write are one step.
func TestPresetSaveRaceHasOneWinner(t *testing.T) {
	cache := t.TempDir()
	const savers, trials = 8, 5
	for trial := range trials {
		var wg sync.WaitGroup
		codes := make([]int, savers)
		for i := range savers {
			cmd := asMain(t, cache, "preset", "save", fmt.Sprintf("race%d", trial), "--model", "llama3_8b", "--description", fmt.Sprintf("saver %d", i))
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd.Run()
				codes[i] = cmd.ProcessState.ExitCode()
			}()
		}
		wg.Wait()
		saved := 0
		for _, c := range codes {
			switch c {
			case exitOK:
				saved++
			case exitBadInput:
			default:
				t.Fatalf("trial %d: exit codes %v", trial, codes)
			}
		}
		if saved != 1 {
			t.Errorf("trial %d: %d of %d saves succeeded (exit codes %v), want 1", trial, saved, savers, codes)
		}
	}
}
