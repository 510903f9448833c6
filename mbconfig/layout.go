package mbconfig

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"cgtune/presets"
)

// layout reads the parallel layout, the batch, the shipped CUDA-graph
// setting and the settings that move memory. numGPUs 0 takes the GPU
// count from a --dryrun file (comm_overlap.data_parallel_size, which MB's
// runtime_config_update sets).
func (c *Config) layout(numGPUs, mtpLayers int) (presets.Layout, error) {
	var l presets.Layout
	vp := 0
	if err := c.ints(map[string]*int{
		"model.tensor_model_parallel_size": &l.TP, "model.pipeline_model_parallel_size": &l.PP,
		"model.context_parallel_size": &l.CP, "model.expert_model_parallel_size": &l.EP,
		"model.expert_tensor_parallel_size": &l.ETP, "model.virtual_pipeline_model_parallel_size": &vp,
		"train.global_batch_size": &l.GBS, "train.micro_batch_size": &l.MBS, "model.seq_length": &l.Seq,
		"model.recompute_num_layers": &l.RecomputeLayers,
	}); err != nil {
		return l, err
	}
	if vp > 1 {
		l.VP = vp
	}
	var err error
	if l.SequenceParallel, err = c.Bool("model.sequence_parallel"); err != nil {
		return l, err
	}
	if l.Seq == 0 {
		if err := c.ints(map[string]*int{"dataset.seq_length": &l.Seq}); err != nil {
			return l, err
		}
	}
	l.MTPLayers = mtpLayers
	if mtpLayers > 0 {
		// MCore reads mtp_use_repeated_layer only with MTP layers
		// (megatron/core/transformer/multi_token_prediction.py).
		if l.MTPUseRepeatedLayer, err = c.Bool("model.mtp_use_repeated_layer"); err != nil {
			return l, err
		}
	}
	if l.NumGPUs, err = c.numGPUs(numGPUs, l); err != nil {
		return l, err
	}
	for _, step := range []func(*presets.Layout) error{c.precision, c.dispatcher, c.recompute, c.memory, c.pipeline, c.graph} {
		if err := step(&l); err != nil {
			return l, err
		}
	}
	return l, nil
}

func (c *Config) numGPUs(given int, l presets.Layout) (int, error) {
	if given > 0 {
		return given, nil
	}
	dp, ok, err := c.Int("comm_overlap.data_parallel_size")
	if err != nil {
		return 0, err
	}
	if !ok || dp <= 0 {
		return 0, fmt.Errorf("%s: the file does not say how many GPUs the job runs on (comm_overlap.data_parallel_size is set only in a --dryrun file); give it (--num-gpus N)", c.file)
	}
	return dp * l.TPSize() * l.PPSize() * l.CPSize(), nil
}

// precision names the recipe's compute dtype as MB's perf recipes do,
// from the mixed-precision recipe (MB src/megatron/bridge/training/
// mixed_precision.py): its name, or the fp8/fp4 fields it sets.
func (c *Config) precision(l *presets.Layout) error {
	if n := c.node("mixed_precision"); n != nil && n.Kind == yaml.ScalarNode && !isNull(n) {
		p, ok := precisionOfRecipe(n.Value)
		if !ok {
			return c.fieldError(n, "mixed_precision", "%q is not a precision cgtune models (allowed: bf16_mixed and MB's bf16_with_* recipes)", n.Value)
		}
		l.Precision = p
		return nil
	}
	prefix := "mixed_precision"
	if isNull(c.node(prefix)) {
		prefix = "model" // a file written after MB copied the recipe onto the model
	}
	fp16, err := c.Bool(prefix + ".fp16")
	if err != nil {
		return err
	}
	if fp16 {
		return c.fieldError(c.node(prefix+".fp16"), prefix+".fp16", "fp16 training is not a precision cgtune models (allowed: bf16 with or without fp8/fp4)")
	}
	fp4, err := c.String(prefix + ".fp4")
	if err != nil {
		return err
	}
	fp8, err := c.String(prefix + ".fp8")
	if err != nil {
		return err
	}
	recipe, err := c.String(prefix + ".fp8_recipe")
	if err != nil {
		return err
	}
	switch {
	case fp4 != "":
		l.Precision = "nvfp4"
	case fp8 == "":
		l.Precision = "bf16"
	default:
		p, ok := map[string]string{"tensorwise": "fp8cs", "delayed": "fp8ds", "blockwise": "fp8sc", "mxfp8": "fp8mx"}[recipe]
		if !ok {
			return c.fieldError(c.node(prefix+".fp8_recipe"), prefix+".fp8_recipe", "%q is not an fp8 recipe cgtune models (allowed: tensorwise, delayed, blockwise, mxfp8)", recipe)
		}
		l.Precision = p
	}
	return nil
}

// precisionOfRecipe maps MB's mixed-precision recipe names.
func precisionOfRecipe(name string) (string, bool) {
	if !strings.HasPrefix(name, "bf16_") && !strings.HasPrefix(name, "nemotron_") && !strings.HasPrefix(name, "nanov2_") {
		return "", false
	}
	for _, m := range []struct{ part, p string }{
		{"nvfp4", "nvfp4"}, {"mxfp8", "fp8mx"}, {"fp8_current_scaling", "fp8cs"}, {"fp8_delayed_scaling", "fp8ds"},
		{"fp8_subchannel_scaling", "fp8sc"},
	} {
		if strings.Contains(name, m.part) {
			return m.p, true
		}
	}
	return "bf16", name == "bf16_mixed"
}

func (c *Config) dispatcher(l *presets.Layout) error {
	d, err := c.String("model.moe_token_dispatcher_type")
	if err != nil {
		return err
	}
	experts, _, err := c.Int("model.num_moe_experts")
	if err != nil || experts == 0 {
		return err // a dense model has no dispatcher
	}
	l.Dispatcher = d
	return nil
}

func (c *Config) recompute(l *presets.Layout) (err error) {
	if l.RecomputeGranularity, err = c.String("model.recompute_granularity"); err != nil {
		return err
	}
	if l.RecomputeGranularity != "full" {
		l.RecomputeLayers = 0 // recompute_num_layers is read by full recompute only
	}
	if l.RecomputeGranularity == "selective" {
		l.RecomputeModules, _, err = c.Names("model.recompute_modules")
	}
	return err
}

// memory reads Megatron-FSDP, CPU and fine-grained activation offloading,
// the optimizer's state dtype and the distributed optimizer.
func (c *Config) memory(l *presets.Layout) error {
	fsdp, err := c.Bool("ddp.use_megatron_fsdp")
	if err != nil {
		return err
	}
	if fsdp {
		s, err := c.String("ddp.data_parallel_sharding_strategy")
		if err != nil {
			return err
		}
		if s != "optim_grads_params" {
			return c.fieldError(c.node("ddp.data_parallel_sharding_strategy"), "ddp.data_parallel_sharding_strategy", "Megatron-FSDP with %q sharding is not modelled (allowed: optim_grads_params)", s)
		}
		l.FSDP = true
	}
	if err := c.offloading(l); err != nil {
		return err
	}
	if dt, err := c.String("optimizer.exp_avg_dtype"); err != nil {
		return err
	} else if dt == "bfloat16" {
		l.OptimizerStates = "bf16"
	}
	if l.PrecisionAwareOptimizer, err = c.Bool("optimizer.use_precision_aware_optimizer"); err != nil {
		return err
	}
	if l.Optimizer, err = c.optimizer(); err != nil {
		return err
	}
	dist, err := c.Bool("ddp.use_distributed_optimizer")
	if err != nil {
		return err
	}
	l.NoDistributedOptimizer = !dist && !l.FSDP
	// MB's mixed-precision recipe overrides the DDP field of the same name
	// at start-up (MB src/megatron/bridge/training/mixed_precision.py,
	// MixedPrecisionConfig.setup).
	key := "ddp.grad_reduce_in_fp32"
	if n := c.node("mixed_precision.grad_reduce_in_fp32"); !isNull(n) {
		key = "mixed_precision.grad_reduce_in_fp32"
	}
	l.GradReduceInFP32, err = c.Bool(key)
	return err
}

// expertBudget reads the flex dispatcher's per-rank budget and the paged
// stash of the routed experts' saved tensors, with Megatron-Core's
// defaults for the buffer factors a file leaves out (TransformerConfig).
func (c *Config) expertBudget(l *presets.Layout) error {
	const capKey = "model.moe_expert_rank_capacity_factor"
	f, ok, err := c.Float(capKey)
	if err != nil {
		return err
	}
	if ok && f <= 0 {
		return c.fieldError(c.node(capKey), capKey, "%v is not a positive number (allowed: a positive number, or null)", f)
	}
	l.RankCapacityFactor = f
	on, err := c.Bool("model.moe_paged_stash")
	if !on || err != nil {
		return err
	}
	s := presets.PagedStash{CUDAFactor: presets.DefaultPagedStashCUDAFactor, HostFactor: presets.DefaultPagedStashHostFactor}
	for key, v := range map[string]*float64{
		"model.moe_paged_stash_buffer_size_factor_cuda": &s.CUDAFactor,
		"model.moe_paged_stash_buffer_size_factor_cpu":  &s.HostFactor,
	} {
		if x, ok, err := c.Float(key); err != nil {
			return err
		} else if ok {
			*v = x
		}
	}
	l.PagedStash = &s
	return nil
}

// optimizer is the layout's Optimizer: "" for Adam, dist_muon for
// Megatron-Core's layer-wise distributed Muon, which "dist_muon" names
// and "muon" with use_layer_wise_distributed_optimizer (MLM
// megatron/core/optimizer/__init__.py, _get_megatron_emerging_optimizer).
func (c *Config) optimizer() (string, error) {
	const key = "optimizer.optimizer"
	name, err := c.String(key)
	if err != nil {
		return "", err
	}
	layerWise, err := c.Bool("optimizer.use_layer_wise_distributed_optimizer")
	if err != nil {
		return "", err
	}
	switch {
	case name == "" || name == "adam":
		return "", nil
	case name == presets.OptimizerDistMuon || name == "muon" && layerWise:
		return presets.OptimizerDistMuon, nil
	}
	return "", c.fieldError(c.node(key), key, "optimizer %q is not modelled (allowed: adam, dist_muon, muon with use_layer_wise_distributed_optimizer)", name)
}

func (c *Config) offloading(l *presets.Layout) error {
	cpu, err := c.Bool("model.cpu_offloading")
	if err != nil {
		return err
	}
	if cpu {
		weights, err := c.Bool("model.cpu_offloading_weights")
		if err != nil {
			return err
		}
		if weights {
			return c.fieldError(c.node("model.cpu_offloading_weights"), "model.cpu_offloading_weights", "offloading weights to the CPU is not modelled (allowed: false)")
		}
		n, _, err := c.Int("model.cpu_offloading_num_layers")
		if err != nil {
			return err
		}
		l.CPUOffloadLayers = n
	}
	fine, err := c.Bool("model.fine_grained_activation_offloading")
	if err != nil || !fine {
		return err
	}
	mods, _, err := c.Names("model.offload_modules")
	l.OffloadModules = mods
	return err
}

// pipeline reads pipeline_model_parallel_layout (a string in MCore's
// syntax, or the list of stages MB's to_yaml writes for a list) and the
// even split's embedding and loss accounting.
func (c *Config) pipeline(l *presets.Layout) (err error) {
	if l.AccountForEmbedding, err = c.Bool("model.account_for_embedding_in_pipeline_split"); err != nil {
		return err
	}
	if l.AccountForLoss, err = c.Bool("model.account_for_loss_in_pipeline_split"); err != nil {
		return err
	}
	for _, k := range []string{"model.num_layers_in_first_pipeline_stage", "model.num_layers_in_last_pipeline_stage"} {
		if n, ok, err := c.Int(k); err != nil {
			return err
		} else if ok {
			return c.fieldError(c.node(k), k, "%d: an uneven first or last stage is not modelled (allowed: null; pipeline_model_parallel_layout says which layers each stage holds)", n)
		}
	}
	key := "model.pipeline_model_parallel_layout"
	n := c.node(key)
	switch {
	case isNull(n):
	case n.Kind == yaml.ScalarNode:
		l.PipelineLayout = n.Value
	case n.Kind == yaml.SequenceNode:
		l.PipelineLayout, err = layoutString(c, key, n)
	default:
		return c.fieldError(n, key, "want a layout string or a list of stages, got %s", describe(n))
	}
	return err
}

// layoutString writes a list of stages (lists of embedding, decoder, mtp,
// loss) in MCore's layout string syntax.
func layoutString(c *Config, key string, n *yaml.Node) (string, error) {
	letter := map[string]string{"embedding": "E", "decoder": "t", "mtp": "m", "loss": "L"}
	var stages []string
	for _, st := range n.Content {
		if st.Kind != yaml.SequenceNode {
			return "", c.fieldError(st, key, "want a list of stages, each a list of layer names, got %s", describe(st))
		}
		var b strings.Builder
		for _, e := range st.Content {
			nm, ok := name(e)
			ch, known := letter[strings.ToLower(nm)]
			if !ok || !known {
				return "", c.fieldError(e, key, "layer %s (allowed: embedding, decoder, mtp, loss)", describe(e))
			}
			b.WriteString(ch)
		}
		stages = append(stages, b.String())
	}
	return strings.Join(stages, "|"), nil
}

// graph reads the recipe's CUDA-graph setting in the perf harness's
// vocabulary: a full-iteration graph (G3's impl full_iteration, or
// full_iteration among the scopes) is impl local with scope
// full_iteration; otherwise the scopes are cuda_graph_scope, else G3's
// cuda_graph_modules, "full" or empty meaning the whole layer (MLM
// megatron/core/transformer/cuda_graph_config.py).
func (c *Config) graph(l *presets.Layout) error {
	impl, err := c.String("model.cuda_graph_impl")
	if err != nil {
		return err
	}
	if impl == "" || impl == presets.ImplNone {
		if impl, err = c.deprecatedImpl(); err != nil {
			return err
		}
	}
	warmup, ok, err := c.Int("model.cuda_graph_warmup_steps")
	if err != nil {
		return err
	}
	if !ok {
		warmup = presets.DefaultWarmup
	}
	g := &presets.Candidate{Impl: impl, Scopes: []string{}, Warmup: warmup}
	l.CUDAGraph = g
	if impl == presets.ImplNone {
		return nil
	}
	scopes, err := c.graphScopes()
	if err != nil {
		return err
	}
	if impl == "full_iteration" || slices.Contains(scopes, presets.ScopeFullIteration) {
		g.Impl, g.Scopes = presets.ImplLocal, []string{presets.ScopeFullIteration}
		return nil
	}
	if impl != presets.ImplLocal && impl != presets.ImplTE {
		return c.fieldError(c.node("model.cuda_graph_impl"), "model.cuda_graph_impl", "%q (allowed: none, local, transformer_engine, full_iteration)", impl)
	}
	g.Scopes = presets.CanonicalScopes(scopes)
	return nil
}

// deprecatedImpl reads MCore's enable_cuda_graph (local) and
// external_cuda_graph (transformer_engine), which older recipes set.
func (c *Config) deprecatedImpl() (string, error) {
	for _, f := range []struct{ key, impl string }{{"model.enable_cuda_graph", presets.ImplLocal}, {"model.external_cuda_graph", presets.ImplTE}} {
		on, err := c.Bool(f.key)
		if err != nil || on {
			return f.impl, err
		}
	}
	return presets.ImplNone, nil
}

func (c *Config) graphScopes() ([]string, error) {
	scope, _, err := c.Names("model.cuda_graph_scope")
	if err != nil {
		return nil, err
	}
	modules, _, err := c.Names("model.cuda_graph_modules")
	if err != nil {
		return nil, err
	}
	scope, modules = withoutFull(scope), withoutFull(modules)
	if len(scope) > 0 && len(modules) > 0 && !slices.Equal(presets.CanonicalScopes(scope), presets.CanonicalScopes(modules)) {
		return nil, c.fieldError(c.node("model.cuda_graph_scope"), "model.cuda_graph_scope", "%v and cuda_graph_modules %v are both set; MCore accepts one of them", scope, modules)
	}
	if len(scope) > 0 {
		return scope, nil
	}
	return modules, nil
}

// withoutFull drops "full", MCore's name for the whole layer.
func withoutFull(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(s string) bool { return s == "full" })
}
