package stepmodel

import (
	"fmt"
	"strings"
)

// OutsideFigure is the device memory a rank's process holds outside
// PyTorch's caching allocator (the CUDA context, cuBLAS and Transformer
// Engine workspaces, NCCL's buffers, instantiated graphs): NVML's used
// memory less torch.cuda.memory_reserved() in a warm process. A fit is
// decided against the device, so it is part of the total.
type OutsideFigure struct {
	MiB    int64
	Source string
	// Measured is false where the figure was measured on another GPU type
	// and is assumed for this one.
	Measured bool
}

// measuredOutside are the figures measured per GPU type, each with the
// document that holds the measurement. The H200's is device used less
// peak reserved memory over warm whole-model runs at world size 1
// (docs/engines.md, docs/data/memory-peaks-2026-12-02.jsonl.gz); graphed
// runs give more than eager ones (graph instantiations live outside the
// allocator), and the model takes the largest.
var measuredOutside = []struct {
	gpu    string // a Specs name
	mib    int64
	source string
}{
	{"h200", 9242, "NVML used − torch reserved on an NVIDIA H200, the largest of 9090–9242 MiB over 19 warm whole-model runs " +
		"at world size 1 (docs/data/memory-peaks-2026-12-02.jsonl.gz)"},
	{"h100", 9108, "NVML used − torch reserved on an NVIDIA H100 80GB HBM3, the largest of 9096–9108 MiB over 4 warm whole-model runs " +
		"at world size 1 (docs/data/h100-buffers-2026-12-05.jsonl.gz)"},
}

// OutsideAllocatorFor is the figure for a GPU (a layout's GPU type or a
// device name): the one measured on that type, or, where none was, the
// first measured GPU's, labelled as an assumption.
func OutsideAllocatorFor(gpu string) OutsideFigure {
	t := GPUType(gpu)
	for _, m := range measuredOutside {
		if m.gpu == t {
			return OutsideFigure{MiB: m.mib, Source: m.source, Measured: true}
		}
	}
	m := measuredOutside[0]
	what := "this GPU type"
	if t != "" {
		what = strings.ToUpper(t)
	}
	return OutsideFigure{MiB: m.mib, Source: fmt.Sprintf("not measured on %s: assumed from the %s's: %s", what, strings.ToUpper(m.gpu), m.source)}
}

// GPUType is the spec-table name a GPU name matches ("h200" for "NVIDIA
// H200"), "" when it matches none.
func GPUType(name string) string {
	n := strings.ToLower(name)
	for _, s := range Specs {
		for _, k := range s.Names {
			if strings.Contains(n, k) {
				return s.Names[0]
			}
		}
	}
	return ""
}
