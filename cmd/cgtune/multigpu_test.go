package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"cgtune/search"
)

// gpuWork is what the --json progress of a search says each GPU did: how
// many runs it finished, and the most runs in flight at once over all
// GPUs (a start event opens a run, its GPU's result event closes it).
type gpuWork struct {
	results     map[int]int
	maxInFlight int
}

func workOf(t *testing.T, progress string) gpuWork {
	t.Helper()
	w := gpuWork{results: map[int]int{}}
	running := map[int]int{}
	inFlight := 0
	sc := bufio.NewScanner(strings.NewReader(progress))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct {
			Event   string `json:"event"`
			GPU     int    `json:"gpu"`
			Resumed any    `json:"resumed"` // a result's flag, the done event's count
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("progress line %.200q: %v", sc.Text(), err)
		}
		switch {
		case ev.Event == "start":
			running[ev.GPU]++
			inFlight++
			w.maxInFlight = max(w.maxInFlight, inFlight)
		case ev.Event == "result" && ev.Resumed != true:
			if running[ev.GPU] == 0 {
				t.Fatalf("a result on GPU %d without a start", ev.GPU)
			}
			running[ev.GPU]--
			inFlight--
			w.results[ev.GPU]++
		}
	}
	return w
}

// --gpu 0,1 opens one engine per GPU and the headless search runs them at
// once: both GPUs run candidates, their runs overlap (on engines that take
// a fixed time per candidate, the estimate engine slowed by
// --estimate-delay), every run is reported once, and the winner is the
// one of --gpu 0. The wall time this saves is not asserted: it depends on
// the machine's load.
func TestHeadlessTwoGPUsRunCandidatesAtOnce(t *testing.T) {
	isolate(t)
	search1 := func(args ...string) (string, int, string) {
		t.Helper()
		args = append([]string{"--headless", "--model", "llama3_8b", "--engine", "estimate", "--strategy", "exhaustive", "--json"}, args...)
		code, out, errb := cgtune(t, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errb)
		}
		var d struct {
			Winner *search.Ranked
			Runs   int
		}
		if err := json.Unmarshal([]byte(out), &d); err != nil || d.Winner == nil || d.Runs < 8 {
			t.Fatalf("%v: %v %+v", args, err, d)
		}
		return d.Winner.Result.Candidate.Key(), d.Runs, errb
	}
	w1, _, _ := search1("--gpu", "0")
	w2, runs, progress := search1("--gpu", "0,1", "--estimate-delay", "100ms")
	if w1 != w2 {
		t.Errorf("winner %s on one GPU, %s on two", w1, w2)
	}
	work := workOf(t, progress)
	if work.results[0] == 0 || work.results[1] == 0 {
		t.Errorf("results per GPU %v; want both GPUs to run candidates", work.results)
	}
	if got := work.results[0] + work.results[1]; got != runs || len(work.results) != 2 {
		t.Errorf("results per GPU %v, %d runs; want every run on GPU 0 or 1, once", work.results, runs)
	}
	if work.maxInFlight != 2 {
		t.Errorf("at most %d candidate(s) ran at once on two GPUs; want 2", work.maxInFlight)
	}
}
