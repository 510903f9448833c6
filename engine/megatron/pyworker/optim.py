"""The optimizer a measured step runs: the job's, not the framework's
last-resort fallback.

Megatron-Core takes Adam from Transformer Engine (FusedAdam), else from
apex, and its gradient norm and scaling from their multi-tensor kernels
(megatron/core/optimizer/__init__.py, clip_grads.py, optimizer.py).  With
neither installed it falls back to torch.optim.AdamW and to per-tensor
Python loops for the norm (megatron/core/utils.py
local_multi_tensor_l2_norm: a device-to-host read per tensor) and the
copies.  No production job runs that path; on an H200 it took 35 ms for
8 layers of a 3072-wide dense model and 92 ms for a 64-expert MoE, time
that is the same in every candidate and dilutes every speed-up.  Where
both are missing, the step runs torch's fused AdamW and foreach norms and
copies instead: the same GPU work as FusedAdam and the multi-tensor
kernels, in a few launches.

The choice (choose) is pure Python and unit-tested; stand_in needs torch.
"""

TE = "Transformer Engine FusedAdam"
APEX = "apex FusedAdam"
STAND_IN = "torch fused AdamW + foreach norms (standing in for FusedAdam: neither Transformer Engine nor apex is importable)"


def choose(have_te, have_apex):
    """The optimizer Megatron-Core builds with these packages, or the
    stand-in this worker puts in place of its fallback."""
    if have_te:
        return TE
    if have_apex:
        return APEX
    return STAND_IN


def importable(name):
    try:
        __import__(name)
        return True
    except Exception:  # any import failure: not usable here
        return False


def job_optimizer(optimizer):
    """Makes optimizer (a MegatronOptimizer, possibly chained) run what the
    job runs; returns the label of what it runs."""
    label = choose(importable("transformer_engine.pytorch.optimizers"), importable("apex.optimizers"))
    if label == STAND_IN:
        stand_in(optimizer)
    return label


def _inner(optimizer):
    """The torch optimizers inside Megatron-Core's wrappers."""
    chained = getattr(optimizer, "chained_optimizers", None)
    if chained:
        out = []
        for o in chained:
            out.extend(_inner(o))
        return out
    inner = getattr(optimizer, "optimizer", None)
    return [inner] if inner is not None else []


def stand_in(optimizer):
    """Fused AdamW on every parameter group, and foreach multi-tensor
    functions in place of the per-tensor fallbacks."""
    for opt in _inner(optimizer):
        for g in opt.param_groups:
            g["fused"], g["foreach"] = True, False
    import megatron.core.optimizer.clip_grads as clip
    import megatron.core.optimizer.optimizer as base

    for mod in (clip, base):
        if hasattr(mod, "multi_tensor_applier"):
            mod.multi_tensor_applier = applier
        if hasattr(mod, "multi_tensor_scale_impl"):
            mod.multi_tensor_scale_impl = foreach_scale
    if hasattr(clip, "l2_norm_impl"):
        clip.l2_norm_impl = foreach_l2_norm


def applier(op, noop_flag, tensor_lists, *args):
    """multi_tensor_applier's signature (megatron/core/utils.py)."""
    return op(2048 * 32, noop_flag, tensor_lists, *args)


def foreach_l2_norm(chunk_size, noop_flag, tensor_lists, per_tensor, *args):
    """amp_C.multi_tensor_l2norm's result: the fp32 L2 norm of all tensors,
    as a one-element CUDA tensor, without a host read."""
    import torch

    tensors = tensor_lists[0]
    if not tensors:
        return torch.zeros(1, dtype=torch.float, device="cuda"), None
    norms = torch._foreach_norm(tensors)
    total = torch.linalg.vector_norm(torch.stack([n.float() for n in norms]))
    return total.reshape(1), None


def foreach_scale(chunk_size, noop_flag, tensor_lists, scale):
    """amp_C.multi_tensor_scale: dst = src * scale, tensor by tensor."""
    import torch

    src, dst = tensor_lists[0], tensor_lists[1]
    if torch.is_tensor(scale):
        scale = scale.reshape(())
    if all(a is b for a, b in zip(src, dst)):
        torch._foreach_mul_(dst, scale)
        return
    torch._foreach_copy_(dst, torch._foreach_mul(src, scale))


PRECISION_AWARE_NEEDS_TE = ("the precision-aware optimizer needs Transformer Engine's FusedAdam, which is not importable: "
                            "the run uses Megatron-Core's default optimizer; the job's is modelled from the source")


def precision_aware_kwargs(shapes, fields, distributed, have_te=None):
    """OptimizerConfig arguments for the job's precision-aware optimizer,
    as Megatron-Bridge configures it: MB copies its MixedPrecisionConfig's
    fp8_recipe ("tensorwise" by default, bf16 recipes included) onto the
    optimizer config before finalising it (mixed_precision.py
    update_config_with_precision_overrides), which keeps Megatron-Core's fp32
    main parameters and gradients (optimizer_config.py
    use_precision_aware_optimizer_no_fp8_or_ds_fp8). It needs Transformer
    Engine's FusedAdam and the distributed optimizer; without them it is
    left off and shapes' notes say so."""
    if not shapes.get("precision_aware_optimizer"):
        return {}
    if have_te is None:
        have_te = importable("transformer_engine.pytorch.optimizers")
    if not have_te or not distributed or "use_precision_aware_optimizer" not in fields:
        shapes.setdefault("notes", []).append(PRECISION_AWARE_NEEDS_TE)
        return {}
    kw = {"use_precision_aware_optimizer": True}
    if "fp8_recipe" in fields:
        kw["fp8_recipe"] = "tensorwise"
    return kw
