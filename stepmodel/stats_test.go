package stepmodel

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// summaryCases are testdata/summarise_cases.json: the cases of a summary
// that the megatron worker's Python (results.summarise, tested on the same
// file by engine/megatron/pyworker/test_plan.py) must compute as Summarise
// does.
type summaryCases struct {
	Cases []struct {
		Name string    `json:"name"`
		Ms   []float64 `json:"ms"`
		Want Stats     `json:"want"`
	} `json:"cases"`
}

func TestSummariseSharedCases(t *testing.T) {
	data, err := os.ReadFile("testdata/summarise_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var sc summaryCases
	if err := json.Unmarshal(data, &sc); err != nil {
		t.Fatal(err)
	}
	if len(sc.Cases) < 8 {
		t.Fatalf("%d cases read, want the whole table", len(sc.Cases))
	}
	for _, c := range sc.Cases {
		got := Summarise(c.Ms)
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9 }
		if got.N != c.Want.N || !near(got.Median, c.Want.Median) || !near(got.P10, c.Want.P10) || !near(got.P90, c.Want.P90) {
			t.Errorf("%s: Summarise(%v) = %+v, want %+v", c.Name, c.Ms, got, c.Want)
		}
	}
}
