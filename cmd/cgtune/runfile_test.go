package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"cgtune/recipe"
	"cgtune/search"
)

// FuzzRunFile holds run.json to a preset's standard, as the journals are
// held to theirs (search.FuzzJournalReader): no content panics the reader;
// what it refuses is one line naming the file; what it takes has every
// value its flag would take; and taken by a resume it never carries
// --force, a relative path or a job command that needs no trust.
func FuzzRunFile(f *testing.F) {
	seed, _ := json.Marshal(savedRun{Engine: "job", EstimateGPU: "h100", GPUs: "0", Budget: "10m0s", TrainIters: 50, Emit: "/abs/o.yaml",
		Format: "yaml", Tie: "1%", ProfileScale: "host=2", ProfileFile: "/abs/p.yaml", Launcher: "local", Command: "torchrun x.py {flags}", JobIters: 30})
	f.Add(seed)
	f.Add([]byte(`{"engine":"estimate","format":"yaml","gpus":"0","budget":"5m0s","train_iters":50,"emit":"out.yaml","force":true}`))
	f.Add([]byte(`{"engine":"estimate","format":"yaml","budget":"soon"}`))
	f.Add([]byte(`{"engine":"estimate","format":"yaml","unknown":1}`))
	f.Add([]byte(`{"engine":"estimate","format":"yaml"}{"engine":"job"}`))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		const path = "/run/run.json"
		s, err := parseSavedRun(path, data)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, path+": ") {
				t.Fatalf("error %q", msg)
			}
			return
		}
		if !slices.Contains(engines, s.Engine) || !slices.Contains(recipe.Formats, s.Format) {
			t.Fatalf("took engine %q format %q", s.Engine, s.Format)
		}
		if s.Budget != "" {
			if _, err := time.ParseDuration(s.Budget); err != nil {
				t.Fatalf("took budget %q", s.Budget)
			}
		}
		if s.Tie != "" {
			if _, err := search.ParseTie(s.Tie); err != nil {
				t.Fatalf("took tie %q", s.Tie)
			}
		}
		for _, p := range []string{s.Emit, s.ProfileFile} {
			if p != "" && p != "-" && !filepath.IsAbs(p) {
				t.Fatalf("took the relative path %q", p)
			}
		}
		// A resume that gives no flag takes the file as applySaved does.
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, runFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		fl := &rootFlags{cmd: &cobra.Command{}}
		if err := fl.applySaved(dir); err != nil {
			t.Fatalf("applySaved refused what parseSavedRun took: %v", err)
		}
		if fl.force || fl.trustCommand {
			t.Fatal("run.json gave --force or the trust of its command")
		}
		if s.Engine == "job" && s.Command != "" && fl.savedCommand != filepath.Join(dir, runFile) {
			t.Fatal("a job command from run.json is not marked as needing trust")
		}
		if fl.emit != s.Emit || fl.profile.File != s.ProfileFile {
			t.Fatalf("took emit %q profile %q from %q %q", fl.emit, fl.profile.File, s.Emit, s.ProfileFile)
		}
	})
}
