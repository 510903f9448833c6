package setup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cgtune/internal/fileio/fileiotest"
	"cgtune/internal/testmodel"
	"cgtune/search"
)

// slowWorker is a stand-in for the Python that runs the megatron worker:
// it records its pid and never says hello, as a framework whose imports
// take minutes. It returns the interpreter's path and the pid file.
func slowWorker(t *testing.T) (python, pidFile string) {
	dir := t.TempDir()
	pidFile = filepath.Join(dir, "pid")
	python = filepath.Join(dir, "python3")
	// Written aside and renamed: the test reads a whole pid or none.
	script := "#!/bin/sh\necho $$ > " + pidFile + ".new && mv " + pidFile + ".new " + pidFile + "\nexec sleep 300\n"
	if err := os.WriteFile(python, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return python, pidFile
}

// openConfig is a search of a built-in model's h100 layout, ready for Open.
func openConfig(t *testing.T) search.Config {
	m, l := testmodel.Builtin(t, "llama3_8b", "h100")
	cfg := search.Config{Model: m, Layout: l, MBridge: "0.6"}
	if err := Workload(&cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Cancelling Open's context while the megatron worker starts (its start
// may take up to megatron's three-minute bound) ends Open at once with an
// error that says so, kills the worker, and opens no other engine in its
// place: with no engine named, a start that was stopped is not a
// framework that cannot run here, so the cuda engine is not tried.
func TestOpenStopsTheMegatronStartWhenCancelled(t *testing.T) {
	for _, name := range []string{EngineMegatron, ""} {
		t.Run("engine "+strconv.Quote(name), func(t *testing.T) {
			fileiotest.IsolateCache(t)
			python, pidFile := slowWorker(t)
			cfg := openConfig(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Cancelled once the worker runs, as a Ctrl-C during its imports.
			go func() {
				for ctx.Err() == nil {
					if _, err := os.Stat(pidFile); err == nil {
						cancel()
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
			o := Options{Engine: name, GPUs: []int{0}, Megatron: Megatron{Python: python, SkipProfile: true},
				devices: func() (int, error) { return 1, nil }}
			type opened struct {
				e   *Engines
				err error
			}
			done := make(chan opened, 1)
			go func() {
				e, err := Open(ctx, &cfg, o)
				done <- opened{e, err}
			}()
			var r opened
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				// The worker's own start bound is minutes: end the worker
				// so that Open returns and the test reports it.
				t.Errorf("Open still waits for the worker 20 s after the cancel")
				syscall.Kill(workerPID(t, pidFile), syscall.SIGKILL)
				r = <-done
			}
			if r.err == nil {
				r.e.Close()
				t.Fatalf("Open returned engine %q after the context was cancelled", r.e.Engine)
			}
			if !errors.Is(r.err, context.Canceled) || !strings.Contains(r.err.Error(), "worker start stopped") {
				t.Errorf("Open: %v; want an error that wraps context.Canceled and says the start stopped", r.err)
			}
			if len(cfg.Engines) != 0 {
				t.Errorf("Open left %d engines in the search after the cancel", len(cfg.Engines))
			}
			if pid := workerPID(t, pidFile); syscall.Kill(pid, 0) == nil {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("the worker (pid %d) still runs after Open returned", pid)
			}
		})
	}
}

// workerPID is the pid slowWorker recorded.
func workerPID(t *testing.T, pidFile string) int {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
