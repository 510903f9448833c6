package main

import "testing"

// The memory model's allocator slack against the reserve the allocator
// really needs with 1 to 12 micro-batches in flight (H100, the data in
// docs/data): within 10% of the least memory the run needs for every case
// and count, and no further off with 12 in flight than with one. A slack
// that grew with the micro-batches in flight, as the activations do,
// fails both.
func TestSlackFollowsTheReserveNeeded(t *testing.T) {
	rows, err := read("../../../docs/data/inflight-h100-2026-12-05.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 16 {
		t.Fatalf("only %d rows", len(rows))
	}
	first := map[string]float64{}
	for _, r := range rows {
		miss := abs(float64(r.slackMB-(r.need-r.allocated)) / float64(r.need))
		if miss > 0.10 {
			t.Errorf("%s with %d in flight: model slack %d MiB, reserve needed %d of %d MiB (%.1f%% off)",
				r.name, r.n, r.slackMB, r.need-r.allocated, r.need, 100*miss)
		}
		f, seen := first[r.name]
		if !seen {
			first[r.name] = miss
		} else if miss > f+0.01 {
			t.Errorf("%s: the slack misses the reserve needed by %.1f%% with %d in flight, %.1f%% with one", r.name, 100*miss, r.n, 100*f)
		}
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
