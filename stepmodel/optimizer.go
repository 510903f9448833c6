package stepmodel

import (
	"math"
	"strings"

	"cgtune/presets"
)

// adamBytes is what the job's Adam keeps per parameter of its shard, and
// what its step makes and frees, per parameter of its shard.
type adamBytes struct {
	kept        float64 // main parameters, exp_avg and exp_avg_sq
	mainGrads   float64 // fp32 copies of the shard's gradients at the step
	stateCopies float64 // fp32 copies of bf16 states at the step
	// precisionAware, decoupled and gradBuffer describe the path, for the
	// breakdown.
	precisionAware, decoupled bool
	muon                      bool // the layer-wise distributed Muon's state (layerWiseMuon)
	gradBuffer                string
}

// adamOf is the optimizer's bytes per parameter for layout l with a
// gradient buffer of gradBytes per element, following Megatron-Core's
// distributed optimizer (megatron/core/optimizer/distrib_optimizer.py,
// optimizer/__init__.py, optimizer_config.py; Megatron-LM 2a75ac1, the
// commit Megatron-Bridge HEAD pins) and Transformer Engine's FusedAdam
// (transformer_engine/pytorch/optimizers/fused_adam.py):
//
//   - The precision-aware optimizer (Layout.PrecisionAware) lets Adam's
//     states be bf16 (exp_avg_dtype and exp_avg_sq_dtype; fp32 is
//     Megatron-Core's default and the only dtype without it). From
//     Transformer Engine 2.14 (what Megatron-Bridge 0.4 and later pin)
//     FusedAdam's kernel reads and writes bf16 moments in place
//     (fuse_unscale); before it, its step unscales each bf16 state to an
//     fp32 copy (get_unscaled_state) for the whole parameter group before
//     its kernel: 8 bytes per parameter that come and go
//     (WorkloadOptions.BF16MomentCopies).
//   - Its gradients are views of the buffer (decoupled_grad) and the master
//     weights FusedAdam's (int16 remainders beside bf16 weights,
//     store_param_remainders) only when
//     use_precision_aware_optimizer_no_fp8_or_ds_fp8 holds: main_params_dtype
//     not fp32, or fp8_recipe None or "delayed". Megatron-Bridge copies its
//     MixedPrecisionConfig onto the optimizer config before the config is
//     finalised (mixed_precision.py update_config_with_precision_overrides,
//     config.py runtime_config_update and OptimizerConfig.finalize), and
//     fp8_recipe defaults to "tensorwise" there, bf16_mixed included: so a
//     bf16 job keeps Megatron-Core's fp32 main parameters (4 bytes) and
//     copies the shard's gradients to fp32 at the step (`.float()` in
//     _copy_model_grads_to_main_grads, 4 bytes, none when the buffer is
//     fp32 already). Only the fp8 delayed-scaling recipe (fp8ds) takes the
//     decoupled path.
//   - Without it: fp32 main parameters and fp32 states (zeros_like of the
//     fp32 main parameter), and the same fp32 gradient copies.
func adamOf(l presets.Layout, gradBytes float64, momentCopies bool) adamBytes {
	a := adamBytes{precisionAware: l.PrecisionAware(), gradBuffer: "bf16"}
	if gradBytes == fp32GradBytes {
		a.gradBuffer = "fp32"
	}
	states := 2 * 4.0
	if a.precisionAware && l.OptimizerStates == "bf16" {
		states = 2 * 2.0
		if momentCopies {
			a.stateCopies = 2 * 4.0
		}
	}
	a.decoupled = a.precisionAware && fp8RecipeOf(l.Precision) == "delayed"
	if a.decoupled {
		master := mainParamBytes
		if l.Precision == "" || l.Precision == "bf16" {
			master = 2 // the 16 bits an fp32 master has beyond its bf16 weight
		}
		a.kept = master + states
		return a
	}
	a.kept = mainParamBytes + states
	if gradBytes != fp32GradBytes {
		a.mainGrads = fp32GradBytes
	}
	return a
}

// fp8RecipeOf is the fp8_recipe Megatron-Bridge's mixed-precision recipe
// of that name leaves on the configs (MB src/megatron/bridge/training/
// mixed_precision.py: MixedPrecisionConfig's default "tensorwise" for bf16
// and nvfp4).
func fp8RecipeOf(precision string) string {
	switch precision {
	case "fp8ds":
		return "delayed"
	case "fp8mx":
		return "mxfp8"
	case "fp8sc":
		return "blockwise"
	}
	return "tensorwise"
}

// stageParams are the parameters a pipeline rank's chunks hold, split as
// Megatron-Core builds its optimizers: one for dense parameters and one
// for expert parameters, which shard over the expert data-parallel group
// (optimizer/__init__.py get_megatron_optimizer). vocab is the dense
// parameters of the embedding and output layers, maxLayer the largest
// layer's.
type stageParams struct {
	dense, expert, vocab, maxLayer float64
	vocabMatrices                  int
}

func (p stageParams) total() float64 { return p.dense + p.expert }

func paramsOf(w *Workload, chunks []Chunk) stageParams {
	l := w.Layout
	a := w.Spec.Model.Arch
	b := &builder{a: a, l: l, tp: l.TPSize(), ep: l.EPSize(), etp: l.ETPSize()}
	var p stageParams
	vocab := float64(a.Vocab) * float64(a.Hidden) / float64(l.TPSize())
	for _, c := range chunks {
		for _, k := range chunkKinds(w, c) {
			d, e := b.layerParamsSplit(k)
			p.dense += d
			p.expert += e
			p.maxLayer = math.Max(p.maxLayer, d+e)
		}
		if c.Embedding {
			p.vocab += vocab
			p.vocabMatrices++
		}
		if c.Loss {
			p.vocab += vocab // output layer (untied in MB's LLM recipes)
			p.vocabMatrices++
		}
		if c.MTP > 0 {
			// The MTP blocks' projections and norms, their own embedding
			// away from the first chunk's, and each repeated layer once.
			d, e := b.repeatedMTPParams(c.MTP)
			p.dense += b.mtpParams(c.MTP, !c.Embedding) - d
			p.expert -= e
		}
	}
	p.dense += p.vocab
	return p
}

// optimizerShares are the parameters whose optimizer state one rank
// holds, per optimizer: the distributed optimizer (and Megatron-FSDP)
// shards dense parameters over DP×CP and expert ones over the expert
// data-parallel group, world / (ETP·EP·PP) (parallel_state.py); without
// it every rank holds all of its chunks'.
type optimizerShares struct{ dense, expert float64 }

func (s optimizerShares) total() float64 { return s.dense + s.expert }

// largest is the larger optimizer's share: FusedAdam makes its fp32 state
// copies for one parameter group at a time and the optimizers step one
// after the other (ChainedOptimizer.step_with_ready_grads), so its
// temporaries peak at the larger one's.
func (s optimizerShares) largest() float64 { return math.Max(s.dense, s.expert) }

func sharesOf(l presets.Layout, p stageParams, sharded bool) optimizerShares {
	if !sharded {
		return optimizerShares{p.dense, p.expert}
	}
	dDense, dExpert := dataParallelSizes(l)
	return optimizerShares{p.dense / dDense, p.expert / dExpert}
}

// dataParallelSizes are the groups the optimizer state shards over: DP×CP
// for dense parameters, the expert data-parallel group for expert ones.
func dataParallelSizes(l presets.Layout) (dense, expert float64) {
	pp := l.PPSize()
	return float64(max(1, l.NumGPUs/(l.TPSize()*pp))), float64(max(1, l.NumGPUs/(l.ETPSize()*l.EPSize()*pp)))
}

// persistentMemory is what pipeline rank's chunks hold for the whole run,
// and the optimizer step's temporaries. Weights are bf16 (Float16Module),
// or the recipe's quantized primary weights (weightBytesOf); the gradient
// buffer has one element per parameter, bf16 as MB's performance recipes
// set it (grad_reduce_in_fp32 False, perf_recipes/_common.py
// _benchmark_common) or fp32 (param_and_grad_buffer.py). The optimizer
// state is Adam's (adamOf) on its shares (sharesOf), or the layer-wise
// distributed Muon's (layerWiseMuon). With Megatron-FSDP
// (optim_grads_params) weights and gradients shard too, and two layers'
// weights are gathered at a time (fsdp_double_buffer).
func persistentMemory(w *Workload, chunks []Chunk, opt MemoryOptions) (stageFigures, adamBytes) {
	l := w.Layout
	p := paramsOf(w, chunks)
	params := p.total()
	distributed := !opt.NoDistributedOptimizer && !l.NoDistributedOptimizer
	gradBytes := bf16GradBytes
	if opt.GradReduceInFP32 || l.GradReduceInFP32 {
		gradBytes = fp32GradBytes
	}
	var f stageFigures
	f.weights = weightBytesOf(l.Precision, l.GPU) * params
	f.grads = gradBytes * params
	if l.LayerWiseMuon() {
		return layerWiseMuon(l, p, f, gradBytes, distributed)
	}
	shares := sharesOf(l, p, distributed || l.FSDP)
	adam := adamOf(l, gradBytes, w.Spec.Options.BF16MomentCopies)
	f.optim = adam.kept * shares.total()
	f.copies = adam.stateCopies * shares.largest()
	if l.FSDP {
		// optim_grads_params: weights and gradients shard like the
		// optimizer state; the units being gathered (two layers with
		// fsdp_double_buffer) hold their whole weights and gradients.
		// Its sharded gradient buffer is the optimizer's gradient: the
		// distributed optimizer copies nothing
		// (_copy_model_grads_to_main_grads returns for use_megatron_fsdp).
		// The embedding and the output layer are no FSDP units: gathered
		// once, their whole bf16 weights stay (AllGatherPipeline.reset
		// with preserve_non_fsdp_units; only unit modules release their
		// parameters; megatron/core/distributed/fsdp/src/megatron_fsdp/
		// param_and_grad_buffer.py, Megatron-LM 2a75ac1).
		gathered := 2 * p.maxLayer * (weightBytes + gradBytes)
		dDense, _ := dataParallelSizes(l)
		f.weights = f.weights/params*shares.total() + gathered/2 + weightBytes*p.vocab*(1-1/dDense)
		f.grads = gradBytes*shares.total() + gathered/2
	} else {
		// The distributed optimizer copies its shard's gradients,
		// Float16Optimizer every gradient of the rank.
		f.mainGrads = adam.mainGrads * shares.total()
	}
	return f, adam
}

// layerWiseMuon is the state of Megatron-Core's layer-wise distributed
// Muon (optimizer "dist_muon"; MLM 2a75ac1 megatron/core/optimizer/
// __init__.py _get_megatron_emerging_optimizer, layer_wise_optimizer.py,
// emerging_optimizers.py):
//
//   - LayerWiseDistributedOptimizer deals whole parameters to the
//     data-parallel ranks (dense ones over DP×CP, expert ones over the
//     expert data-parallel group; _shard_params_ping_pong without the
//     distributed optimizer, the buffer layout with it) and wraps each
//     rank's share in Float16OptimizerWithFloat16Params afterwards: fp32
//     main parameters (4 bytes) and, at the step, fp32 copies of the
//     share's gradients (4; none with an fp32 buffer). Without the
//     distributed optimizer it deals the embedding and the output layer
//     too, whole, to one rank each: the fullest rank holds one of them
//     whole beside its share of the rest. With it, a DistributedOptimizer
//     shards them byte by byte like the rest.
//   - 2-D weights other than the embedding and output layer are Muon's:
//     one momentum buffer, zeros_like the fp32 main parameter (4 bytes;
//     Emerging-Optimizers v0.2.0 OrthogonalizedOptimizer.step); the rest are
//     Adam's, two fp32 states (8). Norm weights and biases, a few
//     thousandths of a layer, count with their layer.
//   - DDP keeps the whole gradient buffer on every rank.
func layerWiseMuon(l presets.Layout, p stageParams, f stageFigures, gradBytes float64, distributed bool) (stageFigures, adamBytes) {
	a := adamBytes{muon: true, gradBuffer: "bf16"}
	if gradBytes == fp32GradBytes {
		a.gradBuffer = "fp32"
	} else {
		a.mainGrads = fp32GradBytes
	}
	const muonKept, adamKept = mainParamBytes + 4, mainParamBytes + 8
	dDense, dExpert := dataParallelSizes(l)
	layers := (p.dense-p.vocab)/dDense + p.expert/dExpert
	vocab := p.vocab / dDense
	if p.vocabMatrices > 0 && !distributed {
		one := p.vocab / float64(p.vocabMatrices)
		vocab = one + (p.vocab-one)/dDense
	}
	f.optim = muonKept*layers + adamKept*vocab
	f.mainGrads = a.mainGrads * (layers + vocab)
	return f, a
}

// weightBytesOf is the bytes a weight holds per parameter on the job's
// GPU: bf16, or with Megatron-Bridge's fp8 and fp4 recipes, which make the
// low-precision copy the primary weight (mixed_precision.py sets
// fp8_param_gather / fp4_param_gather; the fp32 master copy is the
// optimizer's), the quantized data the GEMMs read with their scales.
// Tensor-scaled fp8 keeps a transposed copy for the backward only where
// the GPU has no fp8 GEMM in non-TN layouts: Hopper (Transformer Engine
// is_non_tn_fp8_gemm_supported is compute capability 10.x or 13+;
// Float8Quantizer::create_tensor in transformer_engine/pytorch/csrc/
// quantizer.cpp builds the transpose otherwise). MXFP8 and the block
// recipes keep row-wise and column-wise data on every GPU.
func weightBytesOf(precision, gpu string) float64 {
	switch {
	case precision == "fp8cs" || precision == "fp8ds":
		if hopperOrUnknown(gpu) {
			return 2
		}
		return 1
	case precision == "fp8mx":
		return 2 * (1 + 1.0/32)
	case strings.HasPrefix(precision, "fp8"):
		return 2
	case strings.HasPrefix(precision, "nvfp4"), strings.HasPrefix(precision, "fp4"):
		return 2 * (0.5 + 1.0/16)
	}
	return weightBytes
}

// hopperOrUnknown reports whether gpu is a Hopper (h100, h200) or not a
// known GPU type (taken as Hopper: the transposed copy is the larger case).
func hopperOrUnknown(gpu string) bool {
	switch GPUType(gpu) {
	case "h100", "h200", "":
		return true
	}
	return false
}

// gemmInputBytes is the bytes per element of a GEMM input saved for the
// backward's weight gradient: Transformer Engine saves it quantized when
// the recipe computes in fp8 or fp4, with its scales: MXFP8 one E8M0 byte
// per 32 elements, the blockwise recipe one fp32 per 128 (MXFP8Tensor and
// Float8BlockwiseQTensor in transformer_engine/pytorch/tensor/), tensor
// scaling one scale per tensor.
func gemmInputBytes(precision string) float64 {
	switch {
	case precision == "fp8mx":
		return 1 + 1.0/32
	case precision == "fp8sc":
		return 1 + 4.0/128
	case strings.HasPrefix(precision, "fp8"):
		return 1
	case strings.HasPrefix(precision, "nvfp4"), strings.HasPrefix(precision, "fp4"):
		return 0.5 + 1.0/16
	}
	return 2
}

// layerParamsSplit is layerParams split into dense parameters and expert
// parameters (which shard over the expert data-parallel group).
func (b *builder) layerParamsSplit(k presets.LayerKind) (dense, expert float64) {
	all := b.layerParams(k)
	if b.a.MoE != nil && k.FFN() == presets.FFNMoE {
		expert = b.expertParams()
	}
	return all - expert, expert
}
