package search

import (
	"fmt"
	"maps"
	"slices"

	"cgtune/engine"
	"cgtune/presets"
)

// predictOptions are the workload options the capture prediction uses: the
// search's, with the MoE mode the recipe asks for when the search leaves
// it to the model (drop-and-pad from --set, else Megatron's dropless
// default), so a recipe with padded experts is not predicted to fail.
func predictOptions(cfg Config, mbridge string) engine.WorkloadOptions {
	opts := cfg.Workload
	if opts.Dropless != nil || cfg.Model.Arch.MoE == nil {
		return opts
	}
	r, err := NewRecipe(cfg.Model, cfg.Layout, mbridge)
	if err != nil {
		return opts
	}
	for _, k := range slices.Sorted(maps.Keys(cfg.Sets)) {
		if r.ApplySet(k+"="+cfg.Sets[k]) != nil {
			return opts
		}
	}
	s, err := stateFor(r, mbridge)
	if err != nil {
		return opts
	}
	d := s.dropless()
	opts.Dropless = &d
	return opts
}

// CaptureFailure predicts, before anything runs, that capturing candidate
// c on workload w fails, and says why ("" when nothing is known to fail).
// A graph cannot hold an op the host waits for: dropless MoE copies the
// tokens per expert to the host to size the dispatch, so a whole-layer
// graph (and impl local's whole-layer graphs) over an MoE layer fails
// capture with cudaErrorStreamCaptureInvalidated, as the engines and
// Megatron-Core do. A full-iteration graph runs with padded experts
// (search.WinnerOverrides sets moe_pad_experts_for_cuda_graph_inference,
// as MB's full-iteration MoE perf recipes do), so it holds no such op.
// c is a canonical candidate (Canonical).
func CaptureFailure(w *engine.Workload, c presets.Candidate) string {
	if !c.Graphed() {
		return ""
	}
	if c.FullIteration() {
		fw := w.FullIterationVariant()
		if op, ok := hostSync(fw.MicroBatchOps()); ok {
			return fmt.Sprintf("the full-iteration graph would hold %s, which waits for the host; stream capture fails", op)
		}
		return ""
	}
	for _, l := range w.Layers {
		for _, ops := range [][]engine.Op{l.Fwd, l.Bwd} {
			for _, s := range engine.SplitScopes(ops, c.Scopes) {
				if !s.Graphed {
					continue
				}
				if op, ok := hostSync(s.Ops); ok {
					return fmt.Sprintf("%s graph of layer %d (%s) would hold %s: dropless MoE copies the tokens per expert to the host to size the dispatch, "+
						"which stream capture forbids (cudaErrorStreamCaptureInvalidated); drop-and-pad MoE "+
						"(model.moe_expert_capacity_factor=1.0, model.moe_pad_expert_input_to_capacity=true) captures",
						regionName(c), l.Index, l.Kind, op)
				}
			}
		}
	}
	return ""
}

func hostSync(ops []engine.Op) (string, bool) {
	for _, o := range ops {
		if o.HostSync {
			return o.Name, true
		}
	}
	return "", false
}

// regionName says what a candidate's graph covers, for messages.
func regionName(c presets.Candidate) string {
	if len(c.Scopes) == 0 {
		return "the whole-layer"
	}
	return "the " + c.ScopeString()
}
