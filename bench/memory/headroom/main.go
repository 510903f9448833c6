// Command headroom puts the allocator's reserve above what is allocated,
// measured with many micro-batches in flight (bench/memory/inflight.py),
// next to the memory model's allocator slack for the same activations:
//
//	go run ./bench/memory/headroom INFLIGHT.jsonl[.gz]
//
// need is the least memory the allocator may reserve for the run to finish
// (the cap bisected under torch.cuda.set_per_process_memory_fraction), so
// need − allocated is the reserve a run at the edge of the device takes;
// reserved − allocated is what an unpressed allocator keeps. The model's
// slack is its figure for the case's model at one micro-batch in flight,
// which it keeps for any number in flight.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"cgtune/bench/memory/wholemodel"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// inflightLine is one case of inflight.py's output.
type inflightLine struct {
	Name  string `json:"name"`
	Error string `json:"error"`
	Rows  []struct {
		InFlight  int   `json:"inflight"`
		OOM       bool  `json:"oom"`
		Allocated int64 `json:"peak_allocated_mib"`
		Reserved  int64 `json:"peak_reserved_mib"`
		Need      int64 `json:"need_mib"`
	} `json:"rows"`
	Case struct {
		Arch presets.Arch      `json:"arch"`
		MBS  int               `json:"mbs"`
		Seq  int               `json:"seq"`
		Env  map[string]string `json:"env"`
	} `json:"case"`
}

// oneMicroBatch is the model's breakdown of the case's model at world
// size 1 with one micro-batch in flight.
func oneMicroBatch(c inflightLine) (*stepmodel.MemoryBreakdown, error) {
	w, l, err := wholemodel.Workload(wholemodel.Run{Name: c.Name, Arch: c.Case.Arch, MBS: c.Case.MBS, Seq: c.Case.Seq, MicroBatches: 1, Env: c.Case.Env})
	if err != nil {
		return nil, err
	}
	eager := stepmodel.PlanCapture(w, presets.Candidate{Impl: presets.ImplNone}, presets.G2)
	return stepmodel.PredictMemory(w, eager, nil, stepmodel.JobGPUMiB(l, 0), stepmodel.MemoryOptions{}), nil
}

// row is one table row: a case with n micro-batches in flight.
type row struct {
	name                               string
	n                                  int
	allocated, reserved, need          int64
	measuredPerMB, modelPerMB, slackMB int64
}

func (r row) String() string {
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d |", r.name, r.n, r.allocated, r.reserved, r.need,
		r.reserved-r.allocated, r.need-r.allocated, r.measuredPerMB, r.modelPerMB, r.slackMB)
}

func rowsOf(c inflightLine) ([]row, error) {
	b, err := oneMicroBatch(c)
	if err != nil {
		return nil, err
	}
	name := wholemodel.ShapeName(c.Name, c.Case.Env)
	var out []row
	for i, r := range c.Rows {
		if r.OOM {
			break
		}
		x := row{name: name, n: r.InFlight, allocated: r.Allocated, reserved: r.Reserved, need: r.Need,
			modelPerMB: b.Activations, slackMB: b.SlackOverActivations}
		if i > 0 && r.InFlight > c.Rows[i-1].InFlight {
			x.measuredPerMB = (r.Allocated - c.Rows[i-1].Allocated) / int64(r.InFlight-c.Rows[i-1].InFlight)
		}
		out = append(out, x)
	}
	return out, nil
}

func read(path string) ([]row, error) {
	var out []row
	err := wholemodel.EachLine(path, func(line []byte) error {
		var c inflightLine
		if json.Unmarshal(line, &c) != nil || c.Error != "" || len(c.Rows) == 0 {
			return nil
		}
		rs, err := rowsOf(c)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, c.Name, err)
		}
		out = append(out, rs...)
		return nil
	})
	return out, err
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: headroom INFLIGHT.jsonl[.gz]")
		os.Exit(2)
	}
	rows, err := read(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("| shape | in flight | allocated MiB | reserved MiB | need MiB | reserved − allocated | need − allocated | measured per micro-batch | model per micro-batch | model reserve |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Println(r)
	}
}
