package setup

import (
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
	"cgtune/stepmodel"
)

// Workload fills what cfg's model, layout, Megatron-Bridge release and
// --set values decide for the engines, so that they build the model the
// rules judged: the MoE mode and layer spec (recipe.MoEWorkload), the
// generation whose fields the capture plan names, and the job GPU's
// memory (the layout's GPU type: the real job's limit). An error is the
// recipe's (a --set it refuses); cfg.Workload then keeps its options.
func Workload(cfg *search.Config) error {
	w, err := recipe.MoEWorkload(cfg.Workload, cfg.Model, cfg.Layout, cfg.MBridge, cfg.Sets)
	if err == nil {
		cfg.Workload = w
	}
	cfg.Workload.Generation, _ = presets.ParseMBridge(cfg.MBridge)
	if spec, ok := stepmodel.SpecFor(cfg.Layout.GPU); ok {
		cfg.JobGPUMemoryMiB = spec.MemoryMiB
	}
	return err
}
