package setup

import (
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
	"cgtune/stepmodel"
)

// Workload fills what cfg's model, layout, Megatron-Bridge release and
// --set values decide for the engines, so that they build the model the
// rules judged: the layout fields that move memory as the --set values
// leave them (recipe.LayoutWithSets: a recompute, offload, pipeline split
// or optimizer setting given with --set reaches the memory model as the
// TUI's layout editor's does), the MoE mode, EP overlap and layer spec
// (recipe.MoEWorkload), the generation whose fields the capture plan
// names, and the job GPU's memory (the layout's GPU type: the real job's
// limit). An error is the recipe's (a --set it refuses); cfg then keeps
// its layout and options.
func Workload(cfg *search.Config) error {
	l, err := recipe.LayoutWithSets(cfg.Model, cfg.Layout, cfg.MBridge, cfg.Sets)
	if err == nil {
		cfg.Layout = l
	}
	w, werr := recipe.MoEWorkload(cfg.Workload, cfg.Model, cfg.Layout, cfg.MBridge, cfg.Sets)
	if werr == nil {
		cfg.Workload = w
	} else if err == nil {
		err = werr
	}
	cfg.Workload.Generation, _ = presets.ParseMBridge(cfg.MBridge)
	if spec, ok := stepmodel.SpecFor(cfg.Layout.GPU); ok {
		cfg.JobGPUMemoryMiB = spec.MemoryMiB
	}
	return err
}
