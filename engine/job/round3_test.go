package job

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A re-run does not open its log through a link planted at the log's
// path (cgtune-none.log -> precious.txt): the job fails to start, naming
// the link, and the file it names is kept.
func TestLocalJobLogNeverFollowsALink(t *testing.T) {
	dir := t.TempDir()
	precious := filepath.Join(t.TempDir(), "precious.txt")
	if err := os.WriteFile(precious, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, &Local{}, "bash "+Quote(fakeJob(t))+" --train-iters {iters} {flags}", dir, nil)
	log := filepath.Join(e.JobDir(eager), JobName(eager)+".log")
	if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(precious, log); err != nil {
		t.Fatal(err)
	}
	res := e.RunJob(context.Background(), eager, 0, nil)
	if !res.Failed() || !strings.Contains(res.Err, log) || !strings.Contains(res.Err, "symbolic link") {
		t.Errorf("result: %s %q", res.ErrKind, res.Err)
	}
	if got, _ := os.ReadFile(precious); string(got) != "keep\n" {
		t.Errorf("the link's target holds %q", got)
	}
	// A regular log of an earlier run is started anew.
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, []byte("an earlier run's log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := e.RunJob(context.Background(), eager, 0, nil); res.Failed() {
		t.Fatalf("re-run: %s", res.Err)
	}
	if got, _ := os.ReadFile(log); strings.Contains(string(got), "an earlier run") {
		t.Errorf("the re-run appended to the old log")
	}
}

// A graphed job that logs no eager iteration before its capture (local
// per-layer graphs are captured in iteration 1) has no speed-up, not 0,
// and a note says why.
func TestJobWithoutEagerIterationsHasNoRatio(t *testing.T) {
	e := newEngine(t, &Local{}, "bash "+Quote(fakeJob(t))+" --train-iters {iters} {flags}", t.TempDir(), nil)
	res := e.RunJob(context.Background(), perLayer, 0, nil)
	if res.Failed() || res.Eager.N != 0 {
		t.Fatalf("%s %q, eager %+v: want a job that ran no eager iteration", res.ErrKind, res.Err, res.Eager)
	}
	if res.Speedup != 0 || !strings.Contains(strings.Join(res.Notes, "; "), "no speed-up over eager: the job ran no eager iteration before its graphs were captured (iteration 1)") {
		t.Errorf("speed-up %v, notes %q", res.Speedup, res.Notes)
	}
	full := e.RunJob(context.Background(), fullIter, 0, nil)
	if full.Failed() || full.Speedup <= 1 || strings.Contains(strings.Join(full.Notes, "; "), "no speed-up") {
		t.Errorf("a job with eager iterations: speed-up %v, notes %q", full.Speedup, full.Notes)
	}
}
