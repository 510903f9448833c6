"""What one rank of the real job holds, and how a candidate maps onto the
installed Megatron-Core.  Pure Python (no torch): unit-tested in CI.

The spec is cgtune's WorkloadSpec as JSON (engine/workload.go): the model
preset (arch), the parallel layout and the workload options.  The candidate
is cgtune's presets.Candidate: impl, scopes and warm-up in the vocabulary of
Megatron-Bridge's perf harness (scripts/performance/utils/overrides.py), where
full iteration is impl "local" with scope "full_iteration".
"""

IMPLS = ("none", "local", "transformer_engine")
SCOPES = ("full_iteration", "attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba")
LAYER_SCOPES = SCOPES[1:]
MAX_WARMUP = 100


class CandidateError(ValueError):
    """A candidate the worker refuses before building anything."""


class SpecError(ValueError):
    """A spec the worker cannot build a model from."""


def validate_candidate(c):
    """Checks a candidate dict and returns it normalised (scopes as a list)."""
    if not isinstance(c, dict):
        raise CandidateError("candidate: want an object")
    impl = c.get("impl") or "none"
    if impl not in IMPLS:
        raise CandidateError("candidate impl %r: allowed: %s" % (impl, ", ".join(IMPLS)))
    scopes = c.get("scopes") or []
    if not isinstance(scopes, list) or any(s not in SCOPES for s in scopes):
        raise CandidateError("candidate scopes %r: allowed: %s" % (scopes, ", ".join(SCOPES)))
    if len(set(scopes)) != len(scopes):
        raise CandidateError("candidate scopes %r: repeated scope" % (scopes,))
    warmup = c.get("warmup", 0)
    if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0 or warmup > MAX_WARMUP:
        raise CandidateError("candidate warmup %r: want an integer 0..%d" % (warmup, MAX_WARMUP))
    if "full_iteration" in scopes and (len(scopes) != 1 or impl != "local"):
        # The perf harness's PERF-03/PERF-04: full_iteration stands alone, with impl local.
        raise CandidateError("candidate scopes %r: full_iteration must be alone, with impl local" % (scopes,))
    if impl == "none":
        scopes = []
    return {"impl": impl, "scopes": list(scopes), "warmup": warmup}


# Warm-ups up to this many steps have their graphed losses compared with the
# eager run's at the same step; the eager baseline runs that long.
COMPARED_WARMUP = 3


def compare_steps(opts):
    """Steps the eager baseline runs: as many as a graphed candidate with
    COMPARED_WARMUP warm-up steps (warm-ups, the capture step, the measured
    steps), so their losses meet at the same step."""
    measured = max(3, int(opts.get("measured_steps") or 8))
    return COMPARED_WARMUP + 1 + measured


# Processes the eager baseline of a slice is first measured in
# (results.median_run); every later eager step of the search joins it
# (the worker's pool).
EAGER_PROCESSES = 3

# Eager passes a full-iteration candidate runs in its own process before
# its capture (runner.own_eager_steps), at most.
OWN_EAGER_STEPS = 8


# Megatron-Bridge's recipes train with Python's automatic garbage collector
# off and a full collection every 100 iterations (recipes/common.py:
# manual_gc=True, manual_gc_interval=100; training/train.py disables gc at
# the start of train() and collects when iteration % interval == 0).  An
# automatic collection in the middle of a step costs the host time of
# walking every live object, which grows with the layers built, and lands
# on random steps; the job does not pay it, so the measured steps must not.
MANUAL_GC_INTERVAL = 100


def apply_rank_env(environ):
    """Sets, where the user has not, the environment torchrun gives each
    rank of a node with several (torch/distributed/run.py: OMP_NUM_THREADS
    = 1 when nproc_per_node > 1), before torch is imported: with a thread
    per core, the CPU-side ops of an eager step wake a pool of spinning
    threads that compete with the Python thread enqueueing the step and
    the autograd thread.  Returns what was set."""
    was = {}
    if not environ.get("OMP_NUM_THREADS"):
        environ["OMP_NUM_THREADS"] = was["OMP_NUM_THREADS"] = "1"
    return was


# The per-step figures layer_call_times gives (runner.Slice).
LAYER_CALL_FIGURES = ("to_first_layer", "first_layer", "layer_call")


def layer_call_times(t_decoder, calls):
    """From the host's times (s) of the decoder's start and of its first
    micro-batch's layer calls, in ms: the decoder's own work before the
    first layer (to_first_layer), the first layer's call (first_layer: the
    time to the second one's) and the median of the later layers' calls
    (layer_call: each to the next); a figure needs two or three layers and
    is left out without them."""
    out = {}
    if t_decoder is not None and calls:
        out["to_first_layer"] = (calls[0] - t_decoder) * 1e3
    if len(calls) >= 2:
        out["first_layer"] = (calls[1] - calls[0]) * 1e3
    if len(calls) >= 3:
        gaps = sorted((b - a) * 1e3 for a, b in zip(calls[1:], calls[2:]))
        n = len(gaps)
        out["layer_call"] = gaps[n // 2] if n % 2 else (gaps[n // 2 - 1] + gaps[n // 2]) / 2.0
    return out


def manual_gc_steps(total, interval=MANUAL_GC_INTERVAL):
    """The steps (0-based) before which the training loop collects, of
    `total` steps: those whose number is a multiple of interval."""
    if interval <= 0:
        return []
    return [i for i in range(total) if i % interval == 0]


def graph_mode(c):
    """How the training loop drives the candidate: none, local, full_iteration
    or transformer_engine (Megatron-LM megatron/training/training.py)."""
    if c["impl"] == "none":
        return "none"
    if "full_iteration" in c["scopes"]:
        return "full_iteration"
    return c["impl"]


def graph_config(c, config_fields):
    """TransformerConfig keyword arguments for the candidate on the installed
    Megatron-Core, whose dataclass fields are config_fields.

    G3 cores (core_v0.18+) have cuda_graph_modules and impl full_iteration;
    G2 cores (core_v0.16/0.17) spell the same with cuda_graph_scope and
    impl local + scope full_iteration (megatron/core/transformer/transformer_config.py).
    """
    mode = graph_mode(c)
    kw = {"cuda_graph_warmup_steps": c["warmup"]}
    g3 = "cuda_graph_modules" in config_fields
    if mode == "none":
        kw["cuda_graph_impl"] = "none"
    elif mode == "full_iteration":
        if g3:
            kw.update(cuda_graph_impl="full_iteration", cuda_graph_modules=[])
        else:
            kw.update(cuda_graph_impl="local", cuda_graph_scope=["full_iteration"])
    else:
        kw["cuda_graph_impl"] = c["impl"]
        kw["cuda_graph_modules" if g3 else "cuda_graph_scope"] = list(c["scopes"])
    return kw


def _pos(d, key, where, default=None, minimum=1, maximum=1 << 24):
    v = d.get(key, default)
    if v is None or v == 0:
        v = default
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum or v > maximum:
        raise SpecError("%s.%s = %r: want an integer %d..%d" % (where, key, v, minimum, maximum))
    return v


def _split(n, k, what):
    if n % k:
        raise SpecError("%s %d is not divisible by %d" % (what, n, k))
    return n // k


def precision_aware(layout):
    """Whether the job's Adam is the precision-aware optimizer: the
    recipe's own setting, or the perf harness's for a bf16 run
    (Megatron-Bridge scripts/performance/run_script.py); presets.Layout's
    PrecisionAware."""
    bf16_run = layout.get("precision") in (None, "", "bf16")
    return bool(layout.get("precision_aware_optimizer")) or (not layout.get("outside_harness") and bf16_run)


def run_degrees(job, world):
    """Which of the job's parallel degrees run for real on `world` ranks.

    Tensor parallelism first (its collectives sit on the critical path of
    every layer), then expert parallelism over the remaining ranks; what is
    left of the job's degrees is modelled.  Returns (tp_run, ep_run).
    """
    tp_run = max(d for d in range(1, world + 1) if job["tp"] % d == 0 and world % d == 0)
    rest = world // tp_run
    ep_run = max(d for d in range(1, rest + 1) if job["ep"] % d == 0 and rest % d == 0)
    return tp_run, ep_run


def rank_shapes(spec, world=1, max_layers=8, max_microbatches=4):
    """The per-rank slice one rank of the real job holds, and what runs.

    Heads, query groups and FFN are divided by TP, experts by EP (with the
    job's top-k), the sequence by CP, and the layers are those of one
    pipeline stage.  When `world` ranks run tensor or expert parallelism for
    real, the built model keeps that part of the degree (its global shapes are
    the per-rank shapes times the degree that runs).  At most max_layers
    layers and max_microbatches micro-batches run; the rest is scaled.
    """
    if not isinstance(spec, dict):
        raise SpecError("spec: want an object")
    model, layout = spec.get("model") or {}, spec.get("layout") or {}
    arch = model.get("arch") or {}
    opts = spec.get("options") or {}
    if arch.get("hybrid_pattern"):
        raise SpecError("hybrid (Mamba) models need HybridModel and mamba_ssm; this worker builds GPTModel only")
    if arch.get("mla"):
        raise SpecError("multi-latent attention is not built by this worker")
    for field, what in (("experimental_attention_variant", "experimental attention (the gated delta-net, DeepSeek-V4's)"),
                        ("attention_output_gate", "gated attention"), ("hyper_connections", "hyper-connections")):
        if arch.get(field):
            raise SpecError(what + " is not built by this worker")
    if (arch.get("moe") or {}).get("moe_latent_size"):
        raise SpecError("latent MoE (moe_latent_size) is not built by this worker")
    job = {k: _pos(layout, k, "layout", 1) for k in ("tp", "pp", "cp", "ep", "etp")}
    num_gpus = _pos(layout, "num_gpus", "layout", 1)
    mbs = _pos(layout, "mbs", "layout", 1)
    seq = _pos(layout, "seq", "layout", None)
    gbs = _pos(layout, "gbs", "layout", mbs)
    dp = max(1, num_gpus // (job["tp"] * job["pp"] * job["cp"]))
    microbatches = max(1, gbs // (mbs * dp))
    layers = _pos(arch, "layers", "arch")
    hidden = _pos(arch, "hidden", "arch")
    heads = _pos(arch, "heads", "arch")
    kv = arch.get("kv_groups") or heads
    head_dim = arch.get("head_dim") or hidden // heads
    ffn = _pos(arch, "ffn_hidden", "arch")
    vocab = _pos(arch, "vocab", "arch")
    world = _pos({"w": world}, "w", "world size", 1, 1, 1024)
    tp_run, ep_run = run_degrees(job, world)
    stage_layers = _split(layers, job["pp"], "layers")
    s = {
        "hidden": hidden,
        # Per-rank shapes of the real job; the model built multiplies them
        # by the degrees that run for real (config_kwargs).
        "heads": _split(heads, job["tp"], "heads"),
        "kv_groups": _split(kv, job["tp"], "query groups"),
        "head_dim": head_dim,
        "ffn_hidden": _split(ffn, job["tp"], "ffn_hidden"),
        "vocab": vocab,
        "seq": _split(seq, job["cp"], "sequence"),
        "mbs": mbs,
        "stage_layers": stage_layers,
        "layers_built": min(stage_layers, max(1, max_layers)),
        "microbatches": microbatches,
        "microbatches_run": min(microbatches, max(1, opts.get("run_microbatches") or max_microbatches)),
        "tp_run": tp_run,
        "ep_run": ep_run,
        "world": world,
        # The distributed optimizer shards dense parameters' state over the
        # job's DP x CP ranks and experts' over the expert data-parallel
        # group, world / (ETP x EP x PP) (megatron/core/parallel_state.py);
        # MB's perf recipes turn it on and reduce gradients in bf16
        # (perf_recipes/_common.py _benchmark_common).
        "distributed_optimizer": not layout.get("no_distributed_optimizer"),
        "grad_reduce_in_fp32": bool(layout.get("grad_reduce_in_fp32")),
        "precision_aware_optimizer": precision_aware(layout),
        "dense_shard": dp * job["cp"],
        "expert_shard": max(1, num_gpus // (job["etp"] * job["ep"] * job["pp"])),
        "activation": arch.get("activation") or "swiglu",
        "add_bias_linear": bool(arch.get("add_bias_linear")),
        "moe": None,
        "notes": [],
    }
    moe = arch.get("moe")
    if moe:
        experts = _pos(moe, "experts", "arch.moe")
        local = _split(experts, job["ep"], "experts")
        dropless = opts.get("dropless")
        s["moe"] = {
            "experts": local,
            "topk": min(_pos(moe, "top_k", "arch.moe"), local),
            "ffn_hidden": _split(_pos(moe, "ffn_hidden", "arch.moe"), job["etp"], "moe ffn_hidden"),
            "shared_ffn": moe.get("shared_expert_ffn") or 0,
            "first_dense_layers": moe.get("first_dense_layers") or 0,
            "dropless": True if dropless is None else bool(dropless),
            "capacity_factor": opts.get("moe_capacity_factor") or 1.0,
            "dispatcher": layout.get("dispatcher") or "alltoall",
        }
        if s["moe"]["dispatcher"] == "flex":
            # The flex dispatcher needs DeepEP or HybridEP kernels, which a
            # node with plain torch does not have; alltoall moves the same
            # tokens (megatron/core/transformer/moe/token_dispatcher.py).
            s["moe"]["dispatcher"] = "alltoall"
            s["notes"].append("layout's flex dispatcher (DeepEP/HybridEP) run as alltoall")
    s["modelled"] = modelled_degrees(job, dp, tp_run, ep_run)
    return s


def modelled_degrees(job, dp, tp_run, ep_run):
    """The job's parallel degrees this run does not execute (their
    collectives are added from cgtune's workload model)."""
    out = []
    for name, job_deg, run in (("TP", job["tp"], tp_run), ("EP", job["ep"], ep_run)):
        if job_deg > run:
            out.append("%s %d" % (name, job_deg) if run == 1 else "%s %d (%d run)" % (name, job_deg, run))
    for name, deg in (("PP", job["pp"]), ("CP", job["cp"]), ("DP", dp)):
        if deg > 1:
            out.append("%s %d" % (name, deg))
    return out


def optimizer_factor(s, dense_params, expert_params, layer_dense_params=None):
    """The optimizer work of one rank of the job over the built slice's.
    The job's stage holds the slice's parameters outside the decoder's
    layers (embedding, output layer, final norm) once and its layers'
    stage_layers / layers_built times; with the distributed
    optimizer a rank steps only its shard of them (dense parameters over
    DP x CP, experts, all inside the layers, over expert-DP).  The run
    itself is one rank of a data-parallel size of one, which shards
    nothing.  layer_dense_params None: every dense parameter is taken as a
    layer's."""
    total = dense_params + expert_params
    lf = s["stage_layers"] / float(s["layers_built"])
    if total <= 0:
        return lf
    layer_dense = dense_params if layer_dense_params is None else min(layer_dense_params, dense_params)
    dense = (dense_params - layer_dense) + lf * layer_dense
    expert = lf * expert_params
    if s.get("distributed_optimizer", True):
        dense /= float(s.get("dense_shard", 1))
        expert /= float(s.get("expert_shard", 1))
    return (dense + expert) / total


def graph_memory(cand, peak_reserved_mib, eager_peak_reserved_mib):
    """What a graphed candidate's graphs add over eager, in MiB: its peak
    reserved memory less the eager baseline's on the same slice (0 for
    eager, or when the baseline's peak is not known)."""
    if (cand.get("impl") or "none") == "none" or not eager_peak_reserved_mib:
        return 0
    return max(0, int(peak_reserved_mib) - int(eager_peak_reserved_mib))


def scaling(s, opt_factor=None, layer_share=None):
    """Factors from what ran to the real job's step.  Forward-backward
    time: the decoder's layers' part (layer_share of it, measured in the
    run) scales with the layers, the rest (embedding, output layer, loss,
    the schedule's own work) does not; all of it scales with the
    micro-batches.  Without a measured layer_share the whole of it scales
    with the layers, which counts the rest once per built layer's worth
    (on an H200 a 4-layer slice of an 8-layer dense model put its eager
    forward-backward 24-29% above the whole model's).  The optimizer:
    opt_factor times the slice's work (optimizer_factor; None: the
    layers' factor).  Returns (fwd_bwd_factor, optimizer_factor, text)."""
    lf = s["stage_layers"] / float(s["layers_built"])
    mf = s["microbatches"] / float(s["microbatches_run"])
    opt = lf if opt_factor is None else opt_factor
    fb = mf * (lf if layer_share is None else (1.0 - layer_share) + layer_share * lf)
    parts = []
    if lf != 1:
        parts.append("built %d of the stage's %d layers" % (s["layers_built"], s["stage_layers"]))
        if layer_share is not None:
            parts.append("the layers took %.0f%% of forward-backward (CUDA events at the decoder's ends), "
                         "the rest is not scaled with them" % (100 * layer_share))
        else:
            parts.append("the layers' share of forward-backward was not measured: all of it scaled with them")
    if mf != 1:
        parts.append("ran %d of %d micro-batches per step" % (s["microbatches_run"], s["microbatches"]))
    if opt != lf:
        parts.append("one rank's optimizer does %.3g times the slice's work (the job's parameters, "
                     "the distributed optimizer's shard)" % opt)
    text = ""
    if parts:
        text = "; ".join(parts) + "; forward-backward time scaled x%.3g, optimizer x%.3g" % (fb, opt)
    return fb, opt, text


def layer_share(windows_ms, span_ms):
    """The decoder's layers' share of a forward-backward pass: the summed
    GPU-timeline windows (ms) between the decoder's ends, forward and
    backward, over the pass's span; None when nothing was timed."""
    if not windows_ms or not span_ms or span_ms <= 0:
        return None
    return min(1.0, max(0.0, sum(windows_ms) / span_ms))


def pair_windows(marks):
    """Pairs the decoder's marks of one step, [(kind, t)] in the order they
    were recorded, kind one of fs/fe (forward start/end) and bs/be
    (backward start/end), into (start, end) pairs: each end with the
    earliest unpaired start of its direction."""
    open_ = {"f": [], "b": []}
    out = []
    for kind, t in marks:
        d, edge = kind[0], kind[1]
        if edge == "s":
            open_[d].append(t)
        elif open_[d]:
            out.append((open_[d].pop(0), t))
    return out


def config_kwargs(s, cand, config_fields, te):
    """All TransformerConfig keyword arguments for the slice and candidate."""
    kw = dict(
        num_layers=s["layers_built"],
        hidden_size=s["hidden"],
        num_attention_heads=s["heads"] * s["tp_run"],
        num_query_groups=s["kv_groups"] * s["tp_run"],
        kv_channels=s["head_dim"],
        ffn_hidden_size=s["ffn_hidden"] * s["tp_run"],
        tensor_model_parallel_size=s["tp_run"],
        expert_model_parallel_size=s["ep_run"],
        # Megatron's local spec builds torch norms, which refuse sequence
        # parallelism (megatron/core/transformer/torch_norm.py).
        sequence_parallel=s["tp_run"] > 1 and te,
        normalization="RMSNorm",
        gated_linear_unit=s["activation"] == "swiglu",
        add_bias_linear=s["add_bias_linear"],
        hidden_dropout=0.0,
        attention_dropout=0.0,
        bf16=True,
        pipeline_dtype="bfloat16",
        params_dtype="bfloat16",
        # Fusions that need apex or Transformer Engine kernels are off
        # unless TE is there (Megatron-LM megatron/training/arguments.py
        # turns them off the same way when the kernels are missing).
        gradient_accumulation_fusion=False,
        masked_softmax_fusion=te,
        bias_activation_fusion=te,
        bias_dropout_fusion=te,
        apply_rope_fusion=False,
        persist_layer_norm=False,
    )
    if s["activation"] == "squared_relu":
        kw["gated_linear_unit"] = False
    moe = s["moe"]
    if moe:
        kw.update(
            num_moe_experts=moe["experts"] * s["ep_run"],
            moe_router_topk=moe["topk"],
            moe_ffn_hidden_size=moe["ffn_hidden"],
            moe_token_dispatcher_type=moe["dispatcher"],
            moe_grouped_gemm=False,
            moe_router_load_balancing_type="aux_loss",
            moe_aux_loss_coeff=1e-2,
        )
        if moe["shared_ffn"]:
            kw["moe_shared_expert_intermediate_size"] = moe["shared_ffn"]
        if moe["first_dense_layers"]:
            n = s["layers_built"]
            d = min(moe["first_dense_layers"], n - 1) if n > 1 else 0
            kw["moe_layer_freq"] = [0] * d + [1] * (n - d)
        if not moe["dropless"]:
            kw.update(moe_expert_capacity_factor=moe["capacity_factor"], moe_pad_expert_input_to_capacity=True)
    kw.update(graph_config(cand, config_fields))
    return {k: v for k, v in kw.items() if k in config_fields}


def layer_spec_name(te):
    return "transformer_engine" if te else "local"
