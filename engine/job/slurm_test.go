package job

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/presets"
)

// needSlurm skips when sbatch is absent; a cluster that does not answer
// while sbatch is there is a failure (CI starts one: .ci/slurm-up.sh).
func needSlurm(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("sbatch"); err != nil {
		t.Skip("sbatch not found: the Slurm tests need a cluster (as root: .ci/slurm-up.sh installs Debian's slurm-wlm and munge and starts a one-node cluster)")
	}
	out, err := exec.Command("scontrol", "ping").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "UP") {
		t.Fatalf("sbatch is installed but no Slurm controller answers (scontrol ping: %v %s); start one with .ci/slurm-up.sh", err, out)
	}
}

// sharedTemplate runs jobs side by side on the test node (one CPU each).
const sharedTemplate = "#!/bin/bash\n{sbatch}\n#SBATCH --cpus-per-task=1\necho \"[cgtune] candidate\" {candidate}\n{command}\n"

func slurmEngine(t *testing.T, tmpl string, opts SlurmOptions, mod func(*Config)) *Engine {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	s, err := NewSlurm(opts, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return newEngine(t, s, "bash "+Quote(fakeJob(t))+" --train-iters {iters} {flags}", t.TempDir(), func(c *Config) {
		c.Poll = 250 * time.Millisecond
		if mod != nil {
			mod(c)
		}
	})
}

// squeueState is the state squeue reports for job id (also finished jobs).
func squeueState(t *testing.T, id string) string {
	t.Helper()
	out, err := exec.Command("squeue", "-h", "-t", "all", "-j", id, "-o", "%T").Output()
	if err != nil {
		t.Fatalf("squeue -j %s: %v", id, err)
	}
	return strings.TrimSpace(string(out))
}

func TestSlurmSubmitFollowFinish(t *testing.T) {
	needSlurm(t)
	e := slurmEngine(t, sharedTemplate, SlurmOptions{Time: "10"}, nil)
	var u updates
	res := e.RunJob(context.Background(), perLayer, 0, u.add)
	if res.Failed() {
		t.Fatalf("%s: %s", res.ErrKind, res.Err)
	}
	if _, err := strconv.Atoi(res.Job.ID); err != nil || res.Job.Launcher != "slurm" || res.Job.State != StateCompleted || res.Job.Nodes != 1 {
		t.Errorf("job %+v", res.Job)
	}
	if res.Step.Median < 30 || res.Step.Median > 30.6 || res.Step.N != 12-FirstMeasured(perLayer)+1 || res.Memory.ProcessPeakMiB != 1200 {
		t.Errorf("step %+v peak %d", res.Step, res.Memory.ProcessPeakMiB)
	}
	if got := squeueState(t, res.Job.ID); got != StateCompleted {
		t.Errorf("squeue says %s", got)
	}
	st := u.states()
	if st[0] != StateSubmitting || !slices.Contains(st, StateRunning) || st[len(st)-1] != StateCompleted {
		t.Errorf("states %v", st)
	}
	script, err := os.ReadFile(filepath.Join(e.JobDir(perLayer), JobName(perLayer)+".sbatch"))
	if err != nil || !strings.Contains(string(script), "#SBATCH --nodes=1\n#SBATCH --time=10\n") {
		t.Errorf("batch script: %v\n%s", err, script)
	}
	// The log says which candidate it ran (the batch script's header).
	f, _ := os.Open(res.Job.Output)
	rep, _ := ParseLog(f)
	f.Close()
	if rep.Candidate == nil || rep.Candidate.Key() != perLayer.Key() {
		t.Errorf("log names candidate %v", rep.Candidate)
	}
}

func TestSlurmFailingJob(t *testing.T) {
	needSlurm(t)
	e := slurmEngine(t, sharedTemplate, SlurmOptions{}, nil)
	res := e.RunJob(context.Background(), oomCand, 0, nil)
	if res.ErrKind != engine.FailureOOM || !strings.Contains(res.Err, "CUDA out of memory") {
		t.Errorf("%s: %s", res.ErrKind, res.Err)
	}
	if res.Job == nil || res.Job.State != StateFailed || res.Job.ExitCode != 1 {
		t.Errorf("job %+v", res.Job)
	}
	if got := squeueState(t, res.Job.ID); got != StateFailed {
		t.Errorf("squeue says %s", got)
	}
}

func TestSlurmJobTimeoutIsCancelled(t *testing.T) {
	needSlurm(t)
	e := slurmEngine(t, sharedTemplate, SlurmOptions{}, func(c *Config) { c.Timeout = 3 * time.Second })
	res := e.RunJob(context.Background(), hangCand, 0, nil)
	if res.ErrKind != engine.FailureTimeout || res.Job == nil {
		t.Fatalf("%s: %s", res.ErrKind, res.Err)
	}
	if got := squeueState(t, res.Job.ID); got != StateCancelled {
		t.Errorf("squeue says %s, want CANCELLED", got)
	}
}

// TestSlurmTimeLimit lets Slurm itself end a job at its --time limit (one
// minute, the smallest; Slurm takes about 70 s to act on it).
func TestSlurmTimeLimit(t *testing.T) {
	needSlurm(t)
	t.Parallel()
	e := slurmEngine(t, sharedTemplate, SlurmOptions{Time: "1"}, nil)
	res := e.RunJob(context.Background(), hangCand, 0, nil)
	if res.ErrKind != engine.FailureTimeout || !strings.Contains(res.Err, "time limit") || res.Job.State != StateTimeout {
		t.Errorf("%s: %s (job %+v)", res.ErrKind, res.Err, res.Job)
	}
}

func TestSlurmCancelQueuedAndRunning(t *testing.T) {
	needSlurm(t)
	// The default template asks for the node exclusively: one job runs,
	// the others wait in the queue.
	e := slurmEngine(t, "", SlurmOptions{}, func(c *Config) { c.Iters = 2000 })
	targets := []Target{{Candidate: eager}, {Candidate: perLayer}, {Candidate: fullIter}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	state := map[string]string{}
	v, err := Validate(ctx, ValidateConfig{Engine: e, Targets: targets, Parallel: 3}, func(ev ValidateEvent) {
		je, ok := ev.(JobEvent)
		if !ok || je.Update.JobID == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		state[je.Update.JobID] = je.Update.State
		var running, pending int
		for _, s := range state {
			switch s {
			case StateRunning:
				running++
			case StatePending:
				pending++
			}
		}
		if running >= 1 && pending >= 1 && len(state) == 3 {
			cancel() // Ctrl-C
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Interrupted || len(v.Rows) != 0 {
		t.Errorf("interrupted %v, %d rows", v.Interrupted, len(v.Rows))
	}
	if len(state) != 3 {
		t.Fatalf("saw jobs %v, want 3", state)
	}
	var ids []string
	for id := range state {
		ids = append(ids, id)
	}
	// squeue's default states are the live ones: nothing may be left.
	out, err := exec.Command("squeue", "-h", "-j", strings.Join(ids, ","), "-o", "%i %T").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(out)) != "" {
		t.Errorf("jobs still queued or running after the cancel:\n%s", out)
	}
	for _, id := range ids {
		if got := squeueState(t, id); got != StateCancelled {
			t.Errorf("job %s is %s, want CANCELLED", id, got)
		}
	}
	// Cancelled jobs are closed in the ledger: a resume submits anew.
	l, err := OpenLedger(e.cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		t.Run(tg.Candidate.Key(), func(t *testing.T) {
			if o, ok := l.Open(tg.Candidate.Key()); ok {
				t.Errorf("%s still open in the ledger: %+v", tg.Candidate.Key(), o)
			}
		})
	}
}

func TestSlurmResumeReattaches(t *testing.T) {
	needSlurm(t)
	c := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{"attn"}, Warmup: 2}
	e := slurmEngine(t, sharedTemplate, SlurmOptions{}, func(cfg *Config) { cfg.Iters = 40 })
	// An earlier cgtune submitted the job, recorded it and died.
	cmd, err := e.commandFor(c, e.JobDir(c), 40)
	if err != nil {
		t.Fatal(err)
	}
	j, err := e.cfg.Launcher.Submit(context.Background(), Request{Name: JobName(c), Command: cmd, Dir: e.JobDir(c), Candidate: c.Key()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ledger.Add(LedgerEntry{Key: c.Key(), Job: j.Ref(), Submitted: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// Wait until it runs, then resume with a new engine on the same folder.
	for i := 0; ; i++ {
		st, err := j.Status(context.Background())
		if err == nil && st.State == StateRunning {
			break
		}
		if i > 200 {
			t.Fatalf("job %s never ran: %+v %v", j.Ref().ID, st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e2, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	var u updates
	res := e2.RunJob(context.Background(), c, 40, u.add)
	if res.Failed() {
		t.Fatalf("%s: %s", res.ErrKind, res.Err)
	}
	if res.Job.ID != j.Ref().ID || !u.us[0].Reattached || u.us[0].State == StateSubmitting {
		t.Errorf("result from job %s (submitted %s), first update %+v", res.Job.ID, j.Ref().ID, u.us[0])
	}
	if res.Step.N != 40-FirstMeasured(c)+1 || !strings.Contains(strings.Join(res.Notes, ";"), "re-attached") {
		t.Errorf("step %+v notes %q", res.Step, res.Notes)
	}
	// No second job was submitted for the candidate.
	out, err := exec.Command("squeue", "-h", "-t", "all", "-n", JobName(c), "-o", "%i").Output()
	if err != nil {
		t.Fatal(err)
	}
	first, _ := strconv.Atoi(j.Ref().ID)
	for _, f := range strings.Fields(string(out)) {
		if n, _ := strconv.Atoi(f); n > first {
			t.Errorf("another job %d was submitted for %s", n, c.Key())
		}
	}
}

func TestSlurmAttachUnknownJob(t *testing.T) {
	needSlurm(t)
	s, _ := NewSlurm(SlurmOptions{Nodes: 1}, "")
	if _, err := s.Attach(context.Background(), Ref{Launcher: "slurm", ID: "999999999"}); err != ErrNotAttachable {
		t.Errorf("attach to a job Slurm never had: %v", err)
	}
	if _, err := s.Attach(context.Background(), Ref{Launcher: "local", ID: "local:1"}); err != ErrNotAttachable {
		t.Errorf("attach to a local job: %v", err)
	}
}
