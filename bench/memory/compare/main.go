// Command compare puts the memory model's per-rank breakdown next to the
// whole-model runs of bench/memory/peaks.py (world size 1, so the job is
// the run):
//
//	go run ./bench/memory/compare PEAKS.jsonl[.gz]
//
// It compares in the two views a fit can be judged in: the device, the
// breakdown's total (memory outside the caching allocator included)
// against NVML's used memory (device_used_mib), which is what runs out;
// and the allocator, the total less the memory outside it against the
// framework's peak reserved memory (torch.cuda.max_memory_reserved).
//
// The runs drive Megatron-Core directly, not through Megatron-Bridge's
// perf harness: each case's gradient buffer and optimizer are its own
// (grad_reduce_in_fp32, precision_aware_optimizer).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"cgtune/bench/memory/wholemodel"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// peakLine is one line of peaks.py's output.
type peakLine struct {
	Name     string `json:"name"`
	Mode     string `json:"mode"`
	Reserved int64  `json:"peak_reserved_mib"`
	Used     int64  `json:"device_used_mib"`
	Error    string `json:"error"`
	Case     struct {
		Arch             presets.Arch      `json:"arch"`
		MBS              int               `json:"mbs"`
		MicroBatches     int               `json:"microbatches"`
		Seq              int               `json:"seq"`
		Optimizer        string            `json:"optimizer"`
		Env              map[string]string `json:"env"` // shown in the shape's name
		GradReduceInFP32 bool              `json:"grad_reduce_in_fp32"`
		PrecisionAware   bool              `json:"precision_aware_optimizer"`
	} `json:"case"`
}

func candidate(mode string) presets.Candidate {
	switch mode {
	case "local":
		return presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{}, Warmup: 1}
	case "full_iteration":
		return presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 1}
	}
	return presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}}
}

// predict is the estimate engine's breakdown for a whole-model run of p
// on the H200 the runs were measured on.
func predict(p peakLine) (*stepmodel.MemoryBreakdown, error) {
	w, l, err := wholemodel.Workload(wholemodel.Run{Name: p.Name, Arch: p.Case.Arch, MBS: p.Case.MBS, Seq: p.Case.Seq,
		MicroBatches: p.Case.MicroBatches, GradReduceInFP32: p.Case.GradReduceInFP32, PrecisionAware: p.Case.PrecisionAware, Env: p.Case.Env})
	if err != nil {
		return nil, err
	}
	plan := stepmodel.PlanCapture(w, candidate(p.Mode), presets.G2)
	return stepmodel.PredictMemory(w, plan, nil, stepmodel.JobGPUMiB(l, 0), stepmodel.MemoryOptions{}), nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: compare PEAKS.jsonl[.gz]")
		os.Exit(2)
	}
	rows, worstDevice, worstAlloc, err := compare(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("| shape | buffer | mode | NVML used MiB | model total MiB | error | peak reserved MiB | model less outside MiB | error | outside measured | outside modelled | persistent | activations | optimizer step | graphs | slack |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	fmt.Println(strings.Join(rows, "\n"))
	fmt.Printf("\nlargest error: %.1f%% against NVML used, %.1f%% against peak reserved\n", worstDevice, worstAlloc)
}

// compare reads the runs of path and returns the table's rows and the
// largest errors in each view.
func compare(path string) (rows []string, worstDevice, worstAlloc float64, err error) {
	err = wholemodel.EachLine(path, func(line []byte) error {
		var p peakLine
		if json.Unmarshal(line, &p) != nil || p.Error != "" || p.Reserved == 0 || p.Case.Optimizer != "job" {
			return nil
		}
		b, err := predict(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, p.Name, err)
			return nil
		}
		eDev := 100 * float64(b.Total-p.Used) / float64(p.Used)
		eAlloc := 100 * float64(b.Reserved()-p.Reserved) / float64(p.Reserved)
		worstDevice, worstAlloc = max(worstDevice, abs(eDev)), max(worstAlloc, abs(eAlloc))
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %d | %d | %+.1f%% | %d | %d | %+.1f%% | %d | %d | %d | %d | %d | %d | %d |",
			wholemodel.ShapeName(p.Name, p.Case.Env), b.GradBuffer, p.Mode, p.Used, b.Total, eDev, p.Reserved, b.Reserved(), eAlloc, p.Used-p.Reserved, b.Context,
			b.Weights+b.Gradients+b.Optimizer+b.ExpertStash, b.Activations, b.MainGrads+b.StateCopies, b.Graphs, b.Slack))
		return nil
	})
	sort.Strings(rows)
	return rows, worstDevice, worstAlloc, err
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
