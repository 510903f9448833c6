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
//     Megatron-Core's default and the only dtype without it). FusedAdam's
//     step then unscales each bf16 state to an fp32 copy (get_unscaled_state)
//     for the whole parameter group before its kernel: 8 bytes per
//     parameter that come and go.
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
func adamOf(l presets.Layout, gradBytes float64) adamBytes {
	a := adamBytes{precisionAware: l.PrecisionAware(), gradBuffer: "bf16"}
	if gradBytes == fp32GradBytes {
		a.gradBuffer = "fp32"
	}
	states := 2 * 4.0
	if a.precisionAware && l.OptimizerStates == "bf16" {
		states, a.stateCopies = 2*2.0, 2*4.0
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

// persistentMemory is what pipeline rank's chunks hold for the whole run,
// and the optimizer step's temporaries. Weights are bf16 (Float16Module),
// or the recipe's quantized primary weights (weightBytesOf); the gradient
// buffer has one element per parameter, bf16 as MB's performance recipes
// set it (grad_reduce_in_fp32 False, perf_recipes/_common.py
// _benchmark_common) or fp32 (param_and_grad_buffer.py). The distributed
// optimizer shards its state: dense parameters over DP×CP, expert ones over
// the expert data-parallel group, world / (ETP·EP·PP) (parallel_state.py).
// With Megatron-FSDP (optim_grads_params) weights and gradients shard too,
// and two layers' weights are gathered at a time (fsdp_double_buffer).
func persistentMemory(w *Workload, chunks []Chunk, opt MemoryOptions) (stageFigures, adamBytes) {
	l := w.Layout
	a := w.Spec.Model.Arch
	pp := l.PPSize()
	b := &builder{a: a, l: l, tp: l.TPSize(), ep: l.EPSize(), etp: l.ETPSize()}
	dense, expert, maxLayer := 0.0, 0.0, 0.0
	vocab := float64(a.Vocab) * float64(a.Hidden) / float64(l.TPSize())
	for _, c := range chunks {
		for _, k := range chunkKinds(w, c) {
			d, e := b.layerParamsSplit(k)
			dense += d
			expert += e
			maxLayer = math.Max(maxLayer, d+e)
		}
		if c.Embedding {
			dense += vocab
		}
		if c.Loss {
			dense += vocab // output layer (untied in MB's LLM recipes)
		}
		if c.MTP > 0 {
			// The MTP blocks' projections and norms, their own embedding
			// away from the first chunk's, and each repeated layer once.
			d, e := b.repeatedMTPParams(c.MTP)
			dense += b.mtpParams(c.MTP, !c.Embedding) - d
			expert -= e
		}
	}
	params := dense + expert
	dDense := float64(max(1, l.NumGPUs/(l.TPSize()*pp)))              // DP×CP
	dExpert := float64(max(1, l.NumGPUs/(l.ETPSize()*l.EPSize()*pp))) // expert data-parallel
	distributed := !opt.NoDistributedOptimizer && !l.NoDistributedOptimizer
	shard := func(bytes float64) float64 { return bytes * (dense/dDense + expert/dExpert) }
	if !distributed && !l.FSDP {
		shard = func(bytes float64) float64 { return bytes * params }
	}
	gradBytes := bf16GradBytes
	if opt.GradReduceInFP32 || l.GradReduceInFP32 {
		gradBytes = fp32GradBytes
	}
	adam := adamOf(l, gradBytes)
	var f stageFigures
	f.weights = weightBytesOf(l.Precision, l.GPU) * params
	f.grads = gradBytes * params
	f.optim = shard(adam.kept)
	f.copies = shard(adam.stateCopies)
	switch {
	case l.FSDP:
		// Megatron-FSDP's sharded gradient buffer is the optimizer's
		// gradient: the distributed optimizer copies nothing
		// (_copy_model_grads_to_main_grads returns for use_megatron_fsdp).
	case distributed:
		f.mainGrads = shard(adam.mainGrads)
	default:
		f.mainGrads = adam.mainGrads * params // Float16Optimizer's fp32 copy of every gradient
	}
	if l.FSDP {
		// optim_grads_params: weights and gradients shard like the
		// optimizer state; the units being gathered (two layers with
		// fsdp_double_buffer) hold their whole weights and gradients.
		gathered := 2 * maxLayer * (weightBytes + gradBytes)
		f.weights = shard(f.weights/params) + gathered/2
		f.grads = shard(gradBytes) + gathered/2
	}
	return f, adam
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
// the recipe computes in fp8 or fp4.
func gemmInputBytes(precision string) float64 {
	switch {
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
