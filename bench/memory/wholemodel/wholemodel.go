// Package wholemodel builds the memory model's workload for a run of the
// memory benches (bench/memory/peaks.py, inflight.py): a whole model at
// world size 1 on the GPU the runs were measured on, driven through
// Megatron-Core's local spec, its experts dropping and padding at
// capacity 1.0 as the benches configure them.
package wholemodel

import (
	"cgtune/presets"
	"cgtune/stepmodel"
)

// Run is what a bench case says of its run.
type Run struct {
	Name                             string
	Arch                             presets.Arch
	MBS, Seq, MicroBatches           int
	GradReduceInFP32, PrecisionAware bool
	// Env is the run's environment (PYTORCH_CUDA_ALLOC_CONF, say), as a
	// recipe's env_vars.
	Env map[string]string
}

// Workload is the run's workload and layout.
func Workload(r Run) (*stepmodel.Workload, presets.Layout, error) {
	m := presets.Model{Name: r.Name, Arch: r.Arch}
	l := presets.Layout{GPU: "h200", NumGPUs: 1, Precision: "bf16", TP: 1, PP: 1, CP: 1, EP: 1,
		GBS: r.MBS * r.MicroBatches, MBS: r.MBS, Seq: r.Seq, OutsideHarness: true,
		GradReduceInFP32: r.GradReduceInFP32, PrecisionAwareOptimizer: r.PrecisionAware}
	for k, v := range r.Env {
		if l.Settings == nil {
			l.Settings = map[string]string{}
		}
		l.Settings["env."+k] = v
	}
	opts := stepmodel.WorkloadOptions{LayerSpec: "local", RunMicroBatches: r.MicroBatches}
	if m.Arch.MoE != nil {
		dropless := false
		opts.Dropless, opts.MoECapacityFactor = &dropless, 1.0
	}
	w, err := stepmodel.BuildWorkload(m, l, opts)
	return w, l, err
}
