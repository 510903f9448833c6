package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// served is a Serve running on pipes, for tests.
type served struct {
	in   *io.PipeWriter
	out  *bufio.Scanner
	done chan error
}

func serve(t *testing.T, ctx context.Context) *served {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &served{in: inW, out: bufio.NewScanner(outR), done: make(chan error, 1)}
	go func() { s.done <- Serve(ctx, fakeEngine{stepMs: 1}, inR, outW); outW.Close() }()
	t.Cleanup(func() { inW.Close(); go io.Copy(io.Discard, outR) })
	if r := s.next(t); r.Type != TypeHello {
		t.Fatalf("hello: %+v", r)
	}
	return s
}

func (s *served) send(t *testing.T, r Request) {
	t.Helper()
	go json.NewEncoder(s.in).Encode(r) // a stopped Serve reads no more
}

func (s *served) next(t *testing.T) Reply {
	t.Helper()
	if !s.out.Scan() {
		t.Fatal("no reply")
	}
	var r Reply
	if err := json.Unmarshal(s.out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// The worker refuses a candidate with an unknown impl, a negative warm-up
// or a bad scope list, run options out of range and a workload past the
// bounds, each with an error reply naming the field, and then runs a good
// request.
func TestWorkerRefusesInvalidRequests(t *testing.T) {
	s := serve(t, context.Background())
	sp := spec(t)
	huge := sp
	huge.Model.Arch.Layers = 100_000_000
	for _, tc := range []struct {
		cand presets.Candidate
		spec stepmodel.WorkloadSpec
		opts engine.RunOptions
		want string
	}{
		{presets.Candidate{Impl: "banana", Scopes: []string{"attn"}}, sp, engine.RunOptions{}, `invalid candidate: field "impl": unknown impl "banana" (allowed: none, local, transformer_engine)`},
		{presets.Candidate{Impl: "local", Warmup: -7}, sp, engine.RunOptions{}, `invalid candidate: field "warmup": -7 is out of range (allowed: 0 to 1000)`},
		{presets.Candidate{Impl: "local", Scopes: []string{"attn", "bogus"}}, sp, engine.RunOptions{}, `unknown scope "bogus"`},
		{presets.Candidate{Impl: "local", Scopes: []string{"attn", "attn"}}, sp, engine.RunOptions{}, `"attn" listed twice`},
		{presets.Candidate{Impl: "local"}, sp, engine.RunOptions{MeasuredSteps: -1}, `measured_steps -1 is out of range`},
		{presets.Candidate{Impl: "local"}, sp, engine.RunOptions{EagerSteps: 1 << 40}, `eager_steps 1099511627776 is out of range`},
		{presets.Candidate{Impl: "local"}, sp, engine.RunOptions{Layers: -1}, `layers -1 is out of range`},
		{presets.Candidate{Impl: "local"}, huge, engine.RunOptions{}, `field "layers": 100000000 is out of range`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			s.send(t, Request{V: Version, Type: TypeRun, ID: "x", Spec: &tc.spec, Candidate: &tc.cand, Opts: &tc.opts})
			if r := s.next(t); r.Type != TypeError || r.ID != "x" || !strings.Contains(r.Error, tc.want) {
				t.Errorf("%+v %+v: reply %+v; want an error %q", tc.cand, tc.opts, r, tc.want)
			}
		})
	}
	good := presets.Candidate{Impl: "local", Scopes: []string{"attn"}, Warmup: 3}
	s.send(t, Request{V: Version, Type: TypeRun, ID: "g", Spec: &sp, Candidate: &good})
	for {
		if r := s.next(t); r.Type == TypeResult {
			break
		} else if r.Type != TypeSample {
			t.Fatalf("valid candidate: %+v", r)
		}
	}
}

// Serve stops within a second of its context's cancel (SIGTERM), both
// while it waits for a request and while it runs a long candidate.
func TestServeStopsWithinASecondOfCancel(t *testing.T) {
	for _, running := range []bool{false, true} {
		t.Run(fmt.Sprintf("running=%v", running), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			s := serve(t, ctx)
			if running {
				sp := spec(t)
				c := presets.Candidate{Impl: "local", Warmup: hangWarmup}
				s.send(t, Request{V: Version, Type: TypeRun, ID: "h", Spec: &sp, Candidate: &c})
				time.Sleep(100 * time.Millisecond)
			}
			start := time.Now()
			cancel()
			select {
			case err := <-s.done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("running=%v: Serve returned %v", running, err)
				}
				if d := time.Since(start); d > time.Second {
					t.Errorf("running=%v: stopped after %s", running, d)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("running=%v: Serve still going 5 s after cancel", running)
			}
		})
	}
}

// The worker process itself exits within a second of SIGTERM while a
// candidate that ignores cancellation runs: SIGTERM must end it even then.
func TestSIGTERMStopsTheWorkerProcess(t *testing.T) {
	c := selfWorker(t)
	cmd := exec.Command(c.Path)
	cmd.Env = append(cmd.Environ(), c.Env...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"hello"`) {
		t.Fatalf("no hello: %q", sc.Text())
	}
	sp := spec(t)
	cand := presets.Candidate{Impl: "local", Warmup: hangWarmup}
	json.NewEncoder(in).Encode(Request{V: Version, Type: TypeRun, ID: "h", Spec: &sp, Candidate: &cand})
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	select {
	case <-exited:
		if d := time.Since(start); d > time.Second {
			t.Errorf("worker exited %s after SIGTERM", d)
		}
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("worker still running 5 s after SIGTERM")
	}
}

// hugeLine writes n bytes of x and a newline, in pieces.
func hugeLine(w io.Writer, n int) error {
	piece := []byte(strings.Repeat("x", 1<<20))
	for ; n > 0; n -= len(piece) {
		if _, err := w.Write(piece[:min(n, len(piece))]); err != nil {
			return err
		}
	}
	_, err := w.Write([]byte("\n"))
	return err
}

// A 100 MB request line does not end Serve: it is answered with an error
// naming the line and the limit, and the worker keeps serving.
func TestServeAnswersAnOverlongLine(t *testing.T) {
	s := serve(t, context.Background())
	go func() {
		if hugeLine(s.in, 100<<20) == nil {
			json.NewEncoder(s.in).Encode(Request{V: Version, Type: TypePing, ID: "p"})
		}
	}()
	if r := s.next(t); r.Type != TypeError || r.Error != "bad request: stdin line 1 is longer than 16 MiB, the most cgtune reads on one line" {
		t.Errorf("reply %+v", r)
	}
	if r := s.next(t); r.Type != TypePong || r.ID != "p" {
		t.Errorf("after the long line: %+v", r)
	}
}
