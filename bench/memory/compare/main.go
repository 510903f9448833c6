// Command compare puts the memory model's per-rank total next to the
// framework's measured peak reserved memory for the whole-model runs of
// bench/memory/peaks.py (world size 1, so the job is the run).
//
//	go run ./bench/memory/compare PEAKS.jsonl[.gz]
//
// The model's figure compared is the breakdown's total less its context
// (the CUDA context and NCCL buffers lie outside the caching allocator,
// which torch.cuda.max_memory_reserved counts).
package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"cgtune/internal/fileio"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// peakLine is one line of peaks.py's output.
type peakLine struct {
	Name     string `json:"name"`
	Mode     string `json:"mode"`
	Reserved int64  `json:"peak_reserved_mib"`
	Error    string `json:"error"`
	Case     struct {
		Arch         presets.Arch      `json:"arch"`
		MBS          int               `json:"mbs"`
		MicroBatches int               `json:"microbatches"`
		Seq          int               `json:"seq"`
		Optimizer    string            `json:"optimizer"`
		Env          map[string]string `json:"env"` // shown in the shape's name
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

// predict is the estimate engine's breakdown for a whole-model run of p.
func predict(p peakLine) (*stepmodel.MemoryBreakdown, error) {
	m := presets.Model{Name: p.Name, Arch: p.Case.Arch}
	l := presets.Layout{GPU: "h200", NumGPUs: 1, Precision: "bf16", TP: 1, PP: 1, CP: 1, EP: 1,
		GBS: p.Case.MBS * p.Case.MicroBatches, MBS: p.Case.MBS, Seq: p.Case.Seq}
	opts := stepmodel.WorkloadOptions{LayerSpec: "local", RunMicroBatches: p.Case.MicroBatches}
	if m.Arch.MoE != nil {
		dropless := false
		opts.Dropless, opts.MoECapacityFactor = &dropless, 1.0
	}
	w, err := stepmodel.BuildWorkload(m, l, opts)
	if err != nil {
		return nil, err
	}
	plan := stepmodel.PlanCapture(w, candidate(p.Mode), presets.G2)
	return stepmodel.PredictMemory(w, plan, nil, stepmodel.JobGPUMiB(l, 0), stepmodel.MemoryOptions{}), nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: compare PEAKS.jsonl")
		os.Exit(2)
	}
	f, err := fileio.OpenFileLimited(os.Args[1], fileio.Unbounded)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer f.Close()
	var in io.Reader = f
	if strings.HasSuffix(os.Args[1], ".gz") {
		if in, err = gzip.NewReader(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	var rows []string
	var worst float64
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var p peakLine
		if json.Unmarshal(sc.Bytes(), &p) != nil || p.Error != "" || p.Reserved == 0 || p.Case.Optimizer != "job" {
			continue
		}
		b, err := predict(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, p.Name, err)
			continue
		}
		e := 100 * float64(b.Reserved()-p.Reserved) / float64(p.Reserved)
		worst = max(worst, abs(e))
		name := p.Name
		if v := p.Case.Env["PYTORCH_CUDA_ALLOC_CONF"]; v != "" && !strings.Contains(name, "expandable") {
			name += " (" + v + ")"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %d | %d | %+.1f%% | %d | %d | %d | %d | %d |",
			name, p.Mode, p.Reserved, b.Reserved(), e, b.Weights+b.Gradients+b.Optimizer, b.Activations, b.MainGrads, b.Graphs, b.Slack))
	}
	sort.Strings(rows)
	fmt.Println("| shape | mode | measured peak reserved MiB | model MiB | error | persistent | activations | fp32 main grads | graphs | slack |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	fmt.Println(strings.Join(rows, "\n"))
	fmt.Printf("\nlargest error: %.1f%%\n", worst)
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
