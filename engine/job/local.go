package job

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"cgtune/internal/fileio"
)

// Local runs each job on this node: `bash -c COMMAND` in a process group
// of its own (so the terminal's Ctrl-C reaches cgtune, not the job, and
// cgtune stops the whole group: SIGTERM, then SIGKILL after Grace), with
// stdout and stderr in a log file in the job's folder.
type Local struct {
	// Grace is how long a job may take to exit after SIGTERM (torchrun
	// forwards it to its workers) before the group is killed; default 10 s.
	Grace time.Duration
	// NodeGPUs is the number of GPUs the command uses, for the record.
	NodeGPUs int
}

// Name is "local".
func (l *Local) Name() string { return "local" }

// Nodes is 1.
func (l *Local) Nodes() int { return 1 }

// GPUs is NodeGPUs.
func (l *Local) GPUs() int { return l.NodeGPUs }

func (l *Local) grace() time.Duration {
	if l.Grace <= 0 {
		return 10 * time.Second
	}
	return l.Grace
}

// Submit starts the command.
func (l *Local) Submit(_ context.Context, r Request) (Job, error) {
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return nil, err
	}
	out := filepath.Join(r.Dir, r.Name+".log")
	// A re-run starts its log anew; a link planted at the log's path is
	// refused, never followed to truncate what it names.
	f, err := fileio.CreateFresh(out, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fmt.Fprintf(f, "%s%s\n[cgtune] command: %s\n", HeaderPrefix, r.Candidate, oneLine(r.Command))
	shell := "bash"
	if _, err := exec.LookPath(shell); err != nil {
		shell = "/bin/sh"
	}
	cmd := exec.Command(shell, "-c", r.Command)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// If cgtune itself dies, the job's first process hears of it
		// (bash -c with a single command execs it, so that is torchrun).
		Pdeathsig: syscall.SIGTERM,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", shell, err)
	}
	j := &localJob{ref: Ref{Launcher: "local", ID: "local:" + strconv.Itoa(cmd.Process.Pid), Output: out},
		cmd: cmd, pgid: cmd.Process.Pid, grace: l.grace(), done: make(chan struct{})}
	go j.wait()
	return j, nil
}

// Attach cannot follow a local job of an earlier cgtune: it is not this
// process's child, so its exit status is lost; the caller runs the
// candidate again. (A job whose cgtune died got SIGTERM then: Pdeathsig.)
func (l *Local) Attach(context.Context, Ref) (Job, error) { return nil, ErrNotAttachable }

type localJob struct {
	ref   Ref
	cmd   *exec.Cmd
	pgid  int
	grace time.Duration
	done  chan struct{}

	mu        sync.Mutex
	exit      int
	cancelled bool
}

func (j *localJob) wait() {
	err := j.cmd.Wait()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		} else {
			code = -1
		}
	}
	// Processes the command left behind in its group (a background
	// helper, a worker torchrun did not reap) would hold the GPUs.
	killGroup(j.pgid, j.grace)
	j.mu.Lock()
	j.exit = code
	j.mu.Unlock()
	close(j.done)
}

func (j *localJob) Ref() Ref { return j.ref }

func (j *localJob) Status(context.Context) (Status, error) {
	select {
	case <-j.done:
	default:
		return Status{State: StateRunning}, nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	st := Status{ExitCode: j.exit, Done: true}
	switch {
	case j.cancelled:
		st.State = StateCancelled
	case j.exit == 0:
		st.State = StateCompleted
	default:
		st.State = StateFailed
	}
	return st, nil
}

// Cancel sends SIGTERM to the job's process group, SIGKILL after the
// grace period, and returns once the command has exited.
func (j *localJob) Cancel(ctx context.Context) error {
	j.mu.Lock()
	select {
	case <-j.done:
		j.mu.Unlock()
		return nil
	default:
	}
	j.cancelled = true
	j.mu.Unlock()
	syscall.Kill(-j.pgid, syscall.SIGTERM)
	t := time.NewTimer(j.grace)
	defer t.Stop()
	select {
	case <-j.done:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	syscall.Kill(-j.pgid, syscall.SIGKILL)
	<-j.done
	return nil
}

// killGroup stops what is left of process group pgid: SIGTERM, and
// SIGKILL to whatever is still there after grace.
func killGroup(pgid int, grace time.Duration) {
	if !groupAlive(pgid) {
		return
	}
	syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !groupAlive(pgid) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
}

// groupAlive reports whether process group pgid has a process that is not
// a zombie (an orphan's zombie waits for init, which may take a while, and
// holds nothing). Without /proc it asks kill(-pgid, 0).
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	ents, err := fileio.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := fileio.ReadFileLimited("/proc/"+e.Name()+"/stat", 1<<16)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			return true
		}
	}
	return false
}

func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}
