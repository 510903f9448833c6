package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"cgtune/search"
)

// --gpu 0,1 opens one engine per GPU and the headless search runs them at
// once: on engines that take a fixed time per candidate (the estimate
// engine slowed by --estimate-delay) it takes about half the wall time of
// --gpu 0, with the same winner, and both GPUs report results.
func TestHeadlessTwoGPUsHalveTheWallTime(t *testing.T) {
	isolate(t)
	search1 := func(gpus, delay string) (string, time.Duration, string) {
		t.Helper()
		start := time.Now()
		code, out, errb := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--strategy", "exhaustive",
			"--estimate-delay", delay, "--gpu", gpus, "--json")
		wall := time.Since(start)
		if code != exitOK {
			t.Fatalf("--gpu %s: exit %d: %s", gpus, code, errb)
		}
		var d struct {
			Winner *search.Ranked
			Runs   int
		}
		if err := json.Unmarshal([]byte(out), &d); err != nil || d.Winner == nil || d.Runs < 8 {
			t.Fatalf("--gpu %s: %v %+v", gpus, err, d)
		}
		return d.Winner.Result.Candidate.Key(), wall, errb
	}
	// The search's own work (planning, the estimator) is the same with one
	// GPU or two: measured without the delay and taken off both.
	_, t0, _ := search1("0", "0s")
	w1, t1, _ := search1("0", "100ms")
	w2, t2, progress := search1("0,1", "100ms")
	if w1 != w2 {
		t.Errorf("winner %s on one GPU, %s on two", w1, w2)
	}
	for _, gpu := range []string{`"gpu":0`, `"gpu":1`} {
		if !strings.Contains(progress, `"event":"result"`) || !strings.Contains(progress, gpu) {
			t.Errorf("no result event from %s in the progress", gpu)
		}
	}
	if ratio := float64(t2-t0) / float64(t1-t0); ratio > 0.75 {
		t.Errorf("--gpu 0,1 took %s, --gpu 0 %s, the search's own work %s (ratio %.2f); want about half", t2, t1, t0, ratio)
	}
	t.Logf("--gpu 0: %s, --gpu 0,1: %s (the search's own work %s), winner %s", t1.Round(time.Millisecond), t2.Round(time.Millisecond), t0.Round(time.Millisecond), w1)
}
