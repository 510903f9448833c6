package recipe

import (
	"slices"
	"strconv"
	"strings"

	"cgtune/presets"
	"cgtune/stepmodel"
)

// stage is a point in Megatron-Bridge's start-up where a group of checks
// runs. Check runs them in MB's order (MB src/megatron/bridge/training/
// config.py runtime_config_update → ConfigContainer.validate), because
// auto-fixes made in one stage are what the next one sees.
type stage int

const (
	// stageHarness: scripts/performance _set_cuda_graph_overrides (PERF-*),
	// only for the perf-harness flags (ApplyHarnessFlags).
	stageHarness stage = iota
	// stageArgs: Megatron-LM's validate_args (MLM megatron/training/
	// arguments.py), which its launcher runs before it builds the
	// TransformerConfig; only for LauncherMLM.
	stageArgs
	// stageCommOverlap: CommOverlapConfig.setup, which runs before
	// validate() and copies comm_overlap.* onto the model.
	stageCommOverlap
	// stagePreFinalize: MB ≥ 0.6 checks in validate() before model.finalize().
	stagePreFinalize
	// stageMCore: MCore TransformerConfig.__post_init__ (model.finalize()).
	stageMCore
	// stageMB: the rest of ConfigContainer.validate().
	stageMB
	// stageProvide: GPTModelProvider.provide.
	stageProvide
	// stageRuntime: checks made when the graphs are built or the step runs
	// (TECudaGraphHelper, MLM's launcher checks, MB's forward step).
	stageRuntime
)

// state is the recipe as one stage of MB sees it, plus what has been
// reported so far.
type state struct {
	c        *Recipe
	gen      presets.Generation
	mb       int
	stage    stage
	te       []int
	launcher Launcher

	fired      map[string]bool
	violations []Violation
	notes      []string

	// Perf-harness inputs (stageHarness only).
	cand       presets.Candidate
	scopeGiven bool
}

func newState(c *Recipe, mb int) *state {
	return &state{c: c, gen: c.gen, mb: mb, te: parseVersion(c.vals["te_version"].Str), launcher: LauncherMB, fired: map[string]bool{}}
}

func parseVersion(v string) []int {
	parts := strings.Split(v, ".")
	out := make([]int, 3)
	for i := 0; i < len(parts) && i < 3; i++ {
		out[i], _ = strconv.Atoi(parts[i])
	}
	return out
}

// teBelow is `not is_te_min_version(v)`.
func (s *state) teBelow(v string) bool {
	return slices.Compare(s.te, parseVersion(v)) < 0
}

func (s *state) v(k string) Value   { v, _ := s.c.Get(k); return v }
func (s *state) b(k string) bool    { return s.v(k).Bool && !s.v(k).Null }
func (s *state) i(k string) int     { return s.v(k).Int }
func (s *state) null(k string) bool { return s.v(k).Null }
func (s *state) str(k string) string {
	return s.v(k).Str
}
func (s *state) f(k string) float64    { return s.v(k).Float }
func (s *state) set(k string, v Value) { s.c.vals[k] = v }
func (s *state) impl() string          { return s.str("model.cuda_graph_impl") }

// modsKey is the field MCore reads the per-layer scope from.
func (s *state) modsKey() string {
	if s.gen == presets.G2 {
		return "model.cuda_graph_scope"
	}
	return "model.cuda_graph_modules"
}

// names is a list field as Python code iterating it sees it: None is
// empty, a string is split on commas.
func names(v Value) []string {
	switch {
	case v.Null:
		return nil
	case v.Scalar:
		return splitScope(v.Str)
	}
	return v.List
}

// rawMods is the scope list before MCore normalises it.
func (s *state) rawMods() []string { return names(s.v(s.modsKey())) }

// mods is the per-layer capture list as MCore's checks see it ("full" is
// the whole layer, which MCore turns into the empty list).
func (s *state) mods() []string {
	raw := s.rawMods()
	out := make([]string, 0, len(raw))
	for _, m := range raw {
		if m != "full" {
			out = append(out, m)
		}
	}
	return out
}

func (s *state) has(m string) bool { return slices.Contains(s.mods(), m) }

func (s *state) setMods(list []string) {
	s.set(s.modsKey(), Value{List: list})
}

// layerImpl is the gate of MCore's per-layer scope checks (TC-17..TC-23):
// G3 checks them for local and transformer_engine, G2 for any impl.
func (s *state) layerImpl() bool {
	if s.gen == presets.G2 {
		return s.impl() != presets.ImplNone
	}
	return s.impl() == presets.ImplLocal || s.impl() == presets.ImplTE
}

// fullCG is MCore's `full_cudagraph` in the recompute checks: the whole
// layer or the whole iteration is captured.
func (s *state) fullCG() bool {
	if s.gen == presets.G2 {
		return len(s.mods()) == 0 || s.has(presets.ScopeFullIteration)
	}
	return s.impl() == "full_iteration" || len(s.mods()) == 0
}

// moduleNames is MB's cuda_graph_module_names: the per-layer modules from
// both fields, without the special values.
func (s *state) moduleNames() []string {
	var all []string
	if s.gen == presets.G3 {
		all = append(all, names(s.v("model.cuda_graph_modules"))...)
	}
	all = append(all, names(s.v("model.cuda_graph_scope"))...)
	out := make([]string, 0, len(all))
	for _, n := range all {
		if n == "full" || n == presets.ScopeFullIteration || n == "full_iteration_inference" || slices.Contains(out, n) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// hasModule is MB's has_cuda_graph_module (either field, any impl).
func (s *state) hasModule(m string) bool {
	if s.gen == presets.G3 && slices.Contains(names(s.v("model.cuda_graph_modules")), m) {
		return true
	}
	return slices.Contains(names(s.v("model.cuda_graph_scope")), m)
}

// fullIteration is MB's is_full_iteration_cuda_graph.
func (s *state) fullIteration() bool {
	switch s.impl() {
	case "full_iteration":
		return true
	case presets.ImplLocal:
		return s.hasModule(presets.ScopeFullIteration)
	}
	return false
}

// recompute is recompute_modules as MCore uses it (None reads as ["core_attn"]).
func (s *state) recompute() []string {
	v := s.v("model.recompute_modules")
	if v.Null {
		return []string{"core_attn"}
	}
	return names(v)
}

func (s *state) recomputes(m string) bool { return slices.Contains(s.recompute(), m) }

func (s *state) selective() bool {
	return s.str("model.recompute_granularity") == "selective" && !s.null("model.recompute_granularity")
}

// moe is MCore's "num_moe_experts is not None and > 1".
func (s *state) moe() bool {
	return !s.null("model.num_moe_experts") && s.i("model.num_moe_experts") > 1
}

// graphlessRank returns a pipeline rank none of whose layers
// TECudaGraphHelper graphs with the state's modules, or -1. Megatron-Core
// splits the layers evenly: with virtual pipelining rank r holds model
// chunks r, r+PP, ... of layers/(PP*VP) layers each
// (transformer_block.py get_num_layers_to_build). MB's uneven pipeline
// settings and the MTP layers on the last stage are not modelled.
func (s *state) graphlessRank() int {
	kinds := s.c.model.Arch.LayerKinds()
	pp, vp := max(s.i("model.pipeline_model_parallel_size"), 1), 1
	if !s.null("model.virtual_pipeline_model_parallel_size") {
		vp = max(s.i("model.virtual_pipeline_model_parallel_size"), 1)
	}
	chunks := pp * vp
	mods := s.mods()
	for r := range pp {
		graphed := false
		for c := r; c < chunks && !graphed; c += pp {
			for _, k := range kinds[c*len(kinds)/chunks : (c+1)*len(kinds)/chunks] {
				graphed = graphed || stepmodel.TEGraphable(k, mods)
			}
		}
		if !graphed {
			return r
		}
	}
	return -1
}

// padToMaxLength is the padding MB's offline-packing checks read: the
// dataset's pad_to_max_length or its dataset_kwargs entry.
func (s *state) padToMaxLength() bool {
	return s.b("dataset.pad_to_max_length") || s.b("dataset.dataset_kwargs.pad_to_max_length")
}

// hybrid reports whether MB builds the model with its hybrid (Mamba)
// provider rather than the GPT one: the model has a hybrid layer pattern.
func (s *state) hybrid() bool { return s.c.model.Arch.HybridPattern != "" }

// allLayersMoE is TC-21's test on moe_layer_freq.
func (s *state) allLayersMoE() bool {
	v := s.v("model.moe_layer_freq")
	if v.IsList {
		return !slices.Contains(v.Ints, 0)
	}
	return v.Int == 1
}

// dropless is MCore's "moe_expert_capacity_factor is None or not
// moe_pad_expert_input_to_capacity".
func (s *state) dropless() bool {
	return s.null("model.moe_expert_capacity_factor") || !s.b("model.moe_pad_expert_input_to_capacity")
}

// staticDispatch reports whether the MoE token dispatch has static shapes,
// so that no token count goes to the host before the experts and a graph
// can hold the dispatch: drop-and-pad (not dropless), or the flex
// dispatcher on the hybridep or ncclep backend with
// moe_expert_rank_capacity_factor set, a static per-rank token budget
// (MLM megatron/core/transformer/moe/token_dispatcher.py,
// _HybridEPManager.setup_metadata and _NCCLEPManager, core 0.18 to HEAD).
// moe_pad_experts_for_cuda_graph_inference, which MB's full-iteration MoE
// recipes also set, does not count: only inference reads it (MLM
// megatron/core/inference/text_generation_controllers/
// text_generation_controller.py); a training step's router and
// dispatcher never do.
func (s *state) staticDispatch() bool {
	if !s.dropless() {
		return true
	}
	budget, ok := s.c.Get("model.moe_expert_rank_capacity_factor") // G3 only
	backend := s.v("model.moe_flex_dispatcher_backend")
	return ok && !budget.Null && s.str("model.moe_token_dispatcher_type") == "flex" &&
		!backend.Null && (backend.Str == "hybridep" || backend.Str == "ncclep")
}

// wgradInGraph is the delayed-wgrad test shared by MB-13..15 and ARG-08..10:
// attn captured, or moe_router captured with a shared expert that is not
// overlapped (its wgrad then sits in the graph).
func (s *state) wgradInGraph() bool {
	return s.hasModule(presets.ScopeAttn) || (s.hasModule(presets.ScopeMoERouter) &&
		!s.null("model.moe_shared_expert_intermediate_size") && !s.b("model.moe_shared_expert_overlap"))
}

func (s *state) env(name string) string { return s.str(envPrefix + name) }

// offloadSet is set(offload_modules or []).
func (s *state) offloadSet() []string {
	out := slices.Clone(names(s.v("model.offload_modules")))
	slices.Sort(out)
	return slices.Compact(out)
}
