package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// hangWarmup marks a candidate the fake engine never returns from.
const hangWarmup = 999

// longReplyWarmup marks a candidate whose result is a reply line longer
// than MaxLineBytes.
const longReplyWarmup = 998

// fakeEngine stands in for the CUDA engine: each step sleeps stepMs and
// emits a sample; a candidate with warm-up hangWarmup never returns, even
// when cancelled (a wedged GPU call).
type fakeEngine struct{ stepMs int }

func (f fakeEngine) Name() string { return "fake" }
func (f fakeEngine) Device() engine.DeviceInfo {
	return engine.DeviceInfo{Name: "Fake GPU", MemoryMiB: 1024}
}
func (f fakeEngine) Close() error { return nil }
func (f fakeEngine) Run(ctx context.Context, w *stepmodel.Workload, c presets.Candidate, opts engine.RunOptions, emit func(engine.StepSample)) engine.Result {
	if c.Warmup == hangWarmup {
		time.Sleep(time.Hour) // a wedged GPU call: the process lives, nothing answers
	}
	if c.Warmup == longReplyWarmup {
		return engine.Result{Candidate: c, Notes: []string{strings.Repeat("x", MaxLineBytes)}}
	}
	var ms []float64
	for i := range 3 {
		time.Sleep(time.Duration(f.stepMs) * time.Millisecond)
		emit(engine.StepSample{Candidate: c.Key(), Phase: engine.PhaseMeasure, Step: i, StepMs: float64(f.stepMs)})
		ms = append(ms, float64(f.stepMs))
	}
	return engine.Result{Candidate: c, Source: engine.SourceMeasured, Step: stepmodel.Summarise(ms), Notes: []string{"layers " + strings.Repeat("x", len(w.Layers))}}
}

// TestMain turns the test binary into a worker when asked: the tests start
// it as a child process, as cgtune starts `cgtune worker`.
func TestMain(m *testing.M) {
	if os.Getenv("CGTUNE_TEST_WORKER") == "fake" {
		// As cmd/cgtune's worker: SIGTERM cancels the context.
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		if err := Serve(ctx, fakeEngine{stepMs: 100}, os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func spec(t *testing.T) stepmodel.WorkloadSpec {
	m := presets.Model{Name: "tiny", Arch: presets.Arch{Layers: 2, Hidden: 256, FFNHidden: 1024, Heads: 4, KVGroups: 4, HeadDim: 64, Vocab: 1000}}
	l := presets.Layout{NumGPUs: 1, GBS: 2, MBS: 1, Seq: 128}
	w, err := stepmodel.BuildWorkload(m, l, stepmodel.WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return w.Spec
}

func TestProtocolRoundTrip(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), fakeEngine{stepMs: 1}, inR, outW); outW.Close() }()
	dec := bufio.NewScanner(outR)
	next := func() Reply {
		t.Helper()
		if !dec.Scan() {
			t.Fatal("no reply")
		}
		var r Reply
		if err := json.Unmarshal(dec.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.V != Version {
			t.Fatalf("reply version %d", r.V)
		}
		return r
	}
	enc := json.NewEncoder(inW)
	if r := next(); r.Type != TypeHello || r.Engine != "fake" || r.Device.Name != "Fake GPU" || r.PID == 0 {
		t.Fatalf("hello: %+v", r)
	}
	sp := spec(t)
	c := presets.Candidate{Impl: "transformer_engine", Scopes: []string{"attn"}, Warmup: 2}
	enc.Encode(Request{V: Version, Type: TypeRun, ID: "a", Spec: &sp, Candidate: &c, Opts: &engine.RunOptions{MeasuredSteps: 3}})
	for i := range 3 {
		r := next()
		if r.Type != TypeSample || r.ID != "a" || r.Sample.Step != i {
			t.Fatalf("sample %d: %+v", i, r)
		}
	}
	r := next()
	if r.Type != TypeResult || r.Result.Candidate.Key() != c.Key() || r.Result.Step.N != 3 || r.Result.Notes[0] != "layers xx" {
		t.Fatalf("result: %+v", r)
	}
	enc.Encode(Request{V: Version, Type: TypePing, ID: "p"})
	if r := next(); r.Type != TypePong || r.ID != "p" {
		t.Fatalf("pong: %+v", r)
	}
	inW.Write([]byte("not json\n"))
	if r := next(); r.Type != TypeError || !strings.Contains(r.Error, "bad request") {
		t.Fatalf("bad request: %+v", r)
	}
	enc.Encode(Request{V: 99, Type: TypePing, ID: "v"})
	if r := next(); r.Type != TypeError || !strings.Contains(r.Error, "protocol version 99") {
		t.Fatalf("version: %+v", r)
	}
	enc.Encode(Request{V: Version, Type: "dance", ID: "d"})
	if r := next(); r.Type != TypeError || !strings.Contains(r.Error, "unknown request type") {
		t.Fatalf("unknown: %+v", r)
	}
	enc.Encode(Request{V: Version, Type: TypeQuit})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func selfWorker(t *testing.T) Command {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Command{Path: exe, Env: []string{"CGTUNE_TEST_WORKER=fake"}}
}

func TestKilledWorkerIsReportedAndReplaced(t *testing.T) {
	sup, err := NewSupervisor(context.Background(), selfWorker(t), 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	w, _ := spec(t).Build()
	c := presets.Candidate{Impl: "transformer_engine", Scopes: []string{"attn"}, Warmup: 1}
	pid := sup.Current().PID()
	killed := false
	res := sup.Run(context.Background(), w, c, engine.RunOptions{}, func(engine.StepSample) {
		if !killed {
			killed = true
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if res.ErrKind != engine.FailureCrash || !strings.Contains(res.Err, "worker died during the candidate") || !strings.Contains(res.Err, "killed") {
		t.Fatalf("killed worker: kind %q err %q", res.ErrKind, res.Err)
	}
	next := sup.Run(context.Background(), w, c, engine.RunOptions{}, nil)
	if next.Failed() || next.Step.N != 3 {
		t.Fatalf("next candidate: %+v", next)
	}
	if sup.Restarts != 1 || sup.Current().PID() == pid {
		t.Errorf("restarts %d, pid %d (was %d)", sup.Restarts, sup.Current().PID(), pid)
	}
}

func TestHungWorkerIsKilledAtItsDeadline(t *testing.T) {
	deadline := func(*stepmodel.Workload, presets.Candidate) time.Duration { return 700 * time.Millisecond }
	sup, err := NewSupervisor(context.Background(), selfWorker(t), 10*time.Second, deadline)
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	w, _ := spec(t).Build()
	pid := sup.Current().PID()
	start := time.Now()
	res := sup.Run(context.Background(), w, presets.Candidate{Impl: "transformer_engine", Scopes: []string{"attn"}, Warmup: hangWarmup}, engine.RunOptions{}, nil)
	took := time.Since(start)
	if res.ErrKind != engine.FailureTimeout || !strings.Contains(res.Err, "700ms deadline") {
		t.Fatalf("hung worker: kind %q err %q", res.ErrKind, res.Err)
	}
	if took < 700*time.Millisecond || took > 5*time.Second {
		t.Errorf("killed after %s, deadline 700ms", took)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("hung worker %d still alive", pid)
	}
	next := sup.Run(context.Background(), w, presets.Candidate{Impl: "none"}, engine.RunOptions{}, nil)
	if next.Failed() {
		t.Fatalf("after the hang: %s", next.Err)
	}
}

func TestWorkerThatCannotStart(t *testing.T) {
	_, err := Start(context.Background(), Command{Path: "/bin/sh", Args: []string{"-c", "echo no CUDA driver >&2; exit 3"}}, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "no CUDA driver") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("%v", err)
	}
}

// A worker that has not said hello yet is stopped by a cancelled context
// at once, not at the start bound, and a candidate whose worker start
// was stopped that way fails as cancelled, not as a crash.
func TestCancelStopsAWorkerThatIsStarting(t *testing.T) {
	silent := Command{Path: "/bin/sh", Args: []string{"-c", "exec sleep 300"}}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Start(ctx, silent, time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Fatalf("Start: %v after %s; want the context's error within seconds", err, time.Since(start))
	}
	sup := &Supervisor{Cmd: silent, StartTimeout: time.Minute}
	w, _ := spec(t).Build()
	res := sup.Run(ctx, w, presets.Candidate{Impl: "none"}, engine.RunOptions{}, nil)
	if res.ErrKind != engine.FailureCancel {
		t.Errorf("a candidate whose worker start was cancelled: kind %q err %q, want %q", res.ErrKind, res.Err, engine.FailureCancel)
	}
}

func TestCancelKillsTheWorker(t *testing.T) {
	sup, err := NewSupervisor(context.Background(), selfWorker(t), 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	w, _ := spec(t).Build()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	res := sup.Run(ctx, w, presets.Candidate{Impl: "none"}, engine.RunOptions{}, nil)
	if res.ErrKind != engine.FailureCancel {
		t.Fatalf("%+v", res)
	}
}

// A reply line longer than MaxLineBytes kills the (broken) worker and
// fails the candidate at once, naming the line, and the next candidate
// gets a new worker.
func TestLongReplyLineFailsTheCandidate(t *testing.T) {
	sup, err := NewSupervisor(context.Background(), selfWorker(t), 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	w, _ := spec(t).Build()
	pid := sup.Current().PID()
	res := sup.Run(context.Background(), w, presets.Candidate{Impl: "local", Warmup: longReplyWarmup}, engine.RunOptions{}, nil)
	want := fmt.Sprintf("worker %d stdout line 2 is longer than 16 MiB", pid)
	if res.ErrKind != engine.FailureCrash || !strings.Contains(res.Err, want) {
		t.Fatalf("kind %q err %q, want %q", res.ErrKind, res.Err, want)
	}
	if next := sup.Run(context.Background(), w, presets.Candidate{Impl: "none"}, engine.RunOptions{}, nil); next.Failed() {
		t.Fatalf("after the long line: %s", next.Err)
	}
}
