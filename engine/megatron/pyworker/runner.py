"""Runs one candidate on the real Megatron-Core, one rank of a process
group, the way Megatron-LM's training loop drives it
(megatron/training/training.py: get_model / setup_model_and_optimizer /
train / train_step).  Needs torch with CUDA and megatron.core; imported only
in the forked child that owns the GPU."""

import dataclasses
import functools
import gc
import os
import time
import traceback

import torch

import optim
import plan
import results

SEED = 1234
LR = 1e-3  # large enough that a broken graph shows in the loss within a few steps


def versions():
    """torch, megatron.core and transformer_engine versions ('' when absent)."""
    import megatron.core

    v = {"torch": torch.__version__, "mcore": getattr(megatron.core, "__version__", "?"), "te": ""}
    try:
        import transformer_engine

        v["te"] = getattr(transformer_engine, "__version__", "?")
    except Exception:  # any import failure means: no TE here
        pass
    return v


def opt_fields():
    """The fields of Megatron-Core's OptimizerConfig."""
    from megatron.core.optimizer import OptimizerConfig

    return {f.name for f in dataclasses.fields(OptimizerConfig)}


def device_used_mib(index):
    free, total = torch.cuda.mem_get_info(index)
    return (total - free) // (1 << 20)


def outside_allocator_mib(index):
    """What this process holds on the device outside PyTorch's caching
    allocator (the CUDA context, cuBLAS and Transformer Engine workspaces,
    NCCL's buffers, instantiated graphs), in the warm process after its
    steps: the device's used memory less the allocator's reserved memory.
    The worker owns its GPU; another process on it would count here."""
    torch.cuda.synchronize(index)
    return max(0, device_used_mib(index) - torch.cuda.memory_reserved(index) // (1 << 20))


class Slice:
    """One rank's model, DDP wrapper, optimizer and step function."""

    def __init__(self, shapes, cand, te, dev):
        from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
        from megatron.core.distributed.finalize_model_grads import finalize_model_grads
        from megatron.core.models.gpt import GPTModel
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
        from megatron.core.pipeline_parallel import get_forward_backward_func
        from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
        from megatron.core.transformer.module import Float16Module
        from megatron.core.transformer.transformer_config import TransformerConfig

        self.s, self.cand, self.dev = shapes, cand, dev
        self.mode = plan.graph_mode(cand)
        graphed = self.mode != "none"
        # The graph-safe RNG: TE's tracker when TE is there, else Megatron's
        # cudagraphable tracker, which CudaGraphManager asserts on
        # (megatron/core/tensor_parallel/random.py).
        model_parallel_cuda_manual_seed(SEED, te_rng_tracker=te and graphed, use_cudagraphable_rng=graphed and not te,
                                        force_reset_rng=True)
        fields = {f.name for f in dataclasses.fields(TransformerConfig)}
        kw = plan.config_kwargs(shapes, cand, fields, te)
        for k in ("params_dtype", "pipeline_dtype"):
            if k in kw:
                kw[k] = getattr(torch, kw[k])
        if "use_te_rng_tracker" in fields:
            kw["use_te_rng_tracker"] = te and graphed
        if shapes["activation"] == "squared_relu":
            kw["activation_func"] = lambda x: torch.pow(torch.nn.functional.relu(x), 2)
        else:
            kw["activation_func"] = torch.nn.functional.silu
        self.config = TransformerConfig(**kw)
        self.layer_spec = plan.layer_spec_name(te)
        spec = self._layer_spec(te)
        model = GPTModel(self.config, spec, vocab_size=shapes["vocab"], max_sequence_length=shapes["seq"],
                         pre_process=True, post_process=True, position_embedding_type="rope",
                         parallel_output=True, share_embeddings_and_output_weights=False)
        model.cuda(torch.cuda.current_device())
        model = Float16Module(self.config, model)
        # The job's gradient buffer and optimizer: MB's perf recipes reduce
        # gradients in bf16 and use the distributed optimizer
        # (perf_recipes/_common.py), which at a data-parallel size of one
        # shards nothing but keeps its layout (fp32 main parameters and
        # gradients of the shard beside the bf16 buffers).
        dist_opt = bool(shapes.get("distributed_optimizer", True))
        ddp_cfg = DistributedDataParallelConfig(grad_reduce_in_fp32=bool(shapes.get("grad_reduce_in_fp32")),
                                                overlap_grad_reduce=False, use_distributed_optimizer=dist_opt)
        # DDP is built on the full-iteration capture stream for full
        # iteration (its retained AccumulateGrad nodes must not point at
        # another stream), else on a side stream, as
        # megatron/training/models/dist_utils.py::_ddp_wrap does.
        if self.mode == "full_iteration":
            from megatron.core.full_cuda_graph import get_shared_capture_stream

            stream = get_shared_capture_stream()
        else:
            stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self.ddp = DistributedDataParallel(config=self.config, ddp_config=ddp_cfg, module=model)
        torch.cuda.current_stream().wait_stream(stream)
        self.config.finalize_model_grads_func = finalize_model_grads
        self.config.no_sync_func = self.ddp.no_sync
        opt_cfg = OptimizerConfig(optimizer="adam", lr=LR, bf16=True, clip_grad=1.0,
                                  use_distributed_optimizer=dist_opt, **optim.precision_aware_kwargs(shapes, opt_fields(), dist_opt))
        self.optimizer = get_megatron_optimizer(opt_cfg, [self.ddp], use_gloo_process_groups=False)
        self.optimizer_label = optim.job_optimizer(self.optimizer)
        if dist_opt:
            self.optimizer_label += ", distributed optimizer"
        self.dense_params, self.expert_params = param_counts(self.ddp)
        fwd_bwd = self.eager_fwd_bwd = get_forward_backward_func()
        if self.mode == "full_iteration":
            from megatron.core.full_cuda_graph import FullCudaGraphWrapper

            fwd_bwd = FullCudaGraphWrapper(fwd_bwd, cuda_graph_warmup_steps=cand["warmup"],
                                           use_single_mempool=getattr(self.config, "cuda_graph_use_single_mempool", False))
        self.fwd_bwd = fwd_bwd
        self.te_helper = None
        if self.mode == "transformer_engine":
            from megatron.core.transformer.cuda_graphs import TECudaGraphHelper

            self.te_helper = TECudaGraphHelper(model=[self.ddp], config=self.config, seq_length=shapes["seq"],
                                               micro_batch_size=shapes["mbs"], optimizers=[self.optimizer])
        self.batches = self._batches()
        self.steps_done = 0
        # The host's lead-in of a step, for the framework profile: zeroing
        # the gradient buffers, then everything before the first
        # micro-batch reaches the decoder (embedding, rotary tables, the
        # schedule's set-up). With per-layer graphs the GPU waits through
        # it once per step; a full-iteration graph does not.
        self.last_zero_grad_ms = self.last_lead_in_ms = None
        self._t_zeroed = self._t_decoder = None
        self._decoder().register_forward_pre_hook(self._at_decoder)
        # The host's calls of the first micro-batch's layers, for the
        # profile: with per-layer graphs the GPU also waits through the
        # step's first replay, whose host path costs more than the next
        # ones' (docs/emulation-accuracy-2026-12-01.md). A graphed layer is
        # not called through nn.Module (no hooks run), but every call asks
        # _should_call_local_cudagraph first.
        self.last_layer_calls = None
        self._layer_calls = []
        for layer in self._decoder().layers:
            self._time_layer_calls(layer)
        # The decoder's share of a step, so that only its layers' part is
        # scaled to the stage's layers (plan.scaling): CUDA events at its
        # ends, forward and backward. A full-iteration graph replays no
        # Python, so the events recorded while it was captured (external
        # ones: record nodes of the graph) mark its replays.
        self.layer_dense_params = sum(p.numel() for p in self._decoder().layers.parameters()
                                      if getattr(p, "allreduce", True))
        self.last_layer_share = None
        self._marks, self._captured_marks = [], []
        self._decoder().register_forward_pre_hook(self._decoder_in, with_kwargs=True)
        self._decoder().register_forward_hook(self._decoder_out, with_kwargs=True)

    def _mark(self, kind):
        """Records an event of the decoder's edge `kind` (plan.pair_windows)
        on the current stream. A failure leaves the step unsplit rather
        than failing the candidate."""
        try:
            capturing = torch.cuda.is_current_stream_capturing()
            ev = torch.cuda.Event(enable_timing=True, external=True) if capturing else torch.cuda.Event(enable_timing=True)
            ev.record()
        except Exception:  # noqa: BLE001 (an older torch without external events)
            return
        (self._captured_marks if capturing else self._marks).append((kind, ev))

    def _on_grad(self, kind):
        def hook(grad):
            self._mark(kind)
        return hook

    def _decoder_in(self, module, args, kwargs):
        self._mark("fs")
        h = kwargs.get("hidden_states", args[0] if args else None)
        if isinstance(h, torch.Tensor) and h.requires_grad:
            h.register_hook(self._on_grad("be"))  # its gradient ends the decoder's backward

    def _decoder_out(self, module, args, kwargs, output):
        self._mark("fe")
        out = output[0] if isinstance(output, (tuple, list)) else output
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.register_hook(self._on_grad("bs"))  # its gradient starts it

    def _layer_share(self, start, end):
        """The decoder's share of the span start..end (events) of the step
        just run, once the GPU is done with it; None when not timed."""
        marks = self._marks or self._captured_marks
        try:
            span = start.elapsed_time(end)
            windows = [a.elapsed_time(b) for a, b in plan.pair_windows(marks)]
        except Exception:  # noqa: BLE001 (an event the replay did not record)
            return None
        return plan.layer_share(windows, span)

    def _time_layer_calls(self, layer):
        ask = getattr(layer, "_should_call_local_cudagraph", None)
        if ask is None:  # an older Megatron-Core: not measured
            return
        n = len(self._decoder().layers)

        def timed(*args, **kwargs):
            if len(self._layer_calls) < n:
                self._layer_calls.append(time.perf_counter())
            return ask(*args, **kwargs)

        layer._should_call_local_cudagraph = timed

    def _decoder(self):
        m = self.ddp.module
        while not hasattr(m, "decoder") and hasattr(m, "module"):
            m = m.module
        return m.decoder

    def _at_decoder(self, module, args):
        if self._t_decoder is None:
            self._t_decoder = time.perf_counter()

    def _layer_spec(self, te):
        from megatron.core.models.gpt import gpt_layer_specs as specs

        moe = self.s["moe"]
        n = moe["experts"] * self.s["ep_run"] if moe else None
        if te:
            return specs.get_gpt_layer_with_transformer_engine_spec(n, moe_grouped_gemm=False)
        return specs.get_gpt_layer_local_spec(n, moe_grouped_gemm=False, normalization="RMSNorm")

    def _batches(self):
        """Fixed synthetic micro-batches (same seed on every rank of a
        tensor-parallel group, as the data loader broadcast makes them)."""
        g = torch.Generator(device="cpu").manual_seed(SEED)
        out = []
        for _ in range(self.s["microbatches_run"]):
            tokens = torch.randint(0, self.s["vocab"], (self.s["mbs"], self.s["seq"] + 1), generator=g)
            out.append({
                "tokens": tokens[:, :-1].contiguous().cuda(),
                "labels": tokens[:, 1:].contiguous().cuda(),
                "loss_mask": torch.ones(self.s["mbs"], self.s["seq"], device="cuda"),
                "position_ids": torch.arange(self.s["seq"], device="cuda").unsqueeze(0).expand(self.s["mbs"], -1).contiguous(),
            })
        return out

    def _forward_step(self, data_iterator, model):
        b = next(data_iterator)
        out = model(b["tokens"], b["position_ids"], None, labels=b["labels"])

        def loss_func(loss_mask, output_tensor):
            losses = output_tensor.float()
            loss = torch.sum(losses.view(-1) * loss_mask.view(-1)) / loss_mask.sum()
            return loss, {"lm loss": loss.detach()}

        return out, functools.partial(loss_func, b["loss_mask"])

    def maybe_capture_te(self):
        """TE graphs are captured at the top of the iteration where
        step == cuda_graph_warmup_steps (megatron/training/training.py)."""
        if self.te_helper is not None and not self.te_helper.capture_finished() \
                and self.steps_done == self.cand["warmup"]:
            self.te_helper.create_cudagraphs()

    def step(self, forward_only=False, eager=False):
        """One training step; returns (host_fwd_bwd_ms, fwd_bwd_ms, opt_ms, loss tensor).
        The GPU is idle when it starts, so the host time until the schedule
        returns is its enqueue time. eager: the plain schedule without the
        candidate's full-iteration graph and without the optimizer's step
        (the model stays as it was), an eager forward-backward in the
        candidate's own process."""
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        start = torch.cuda.Event(enable_timing=True)
        start.record()
        self.ddp.zero_grad_buffer()
        self.optimizer.zero_grad()
        self._t_zeroed, self._t_decoder, self._layer_calls = time.perf_counter(), None, []
        self._marks = []
        fwd_bwd = self.eager_fwd_bwd if eager else self.fwd_bwd
        losses = fwd_bwd(forward_step_func=self._forward_step, data_iterator=iter(self.batches),
                         model=[self.ddp], num_microbatches=self.s["microbatches_run"],
                         seq_length=self.s["seq"], micro_batch_size=self.s["mbs"], forward_only=forward_only)
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        t1 = time.perf_counter()
        self.last_zero_grad_ms = (self._t_zeroed - t0) * 1e3
        # None when no Python ran the decoder (a full-iteration replay)
        self.last_lead_in_ms = (self._t_decoder - self._t_zeroed) * 1e3 if self._t_decoder else None
        self.last_layer_calls = plan.layer_call_times(self._t_decoder, self._layer_calls)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        self.last_layer_share = None if forward_only else self._layer_share(start, end)
        if not forward_only and not eager:
            self.optimizer.step()
            torch.cuda.synchronize()
        t3 = time.perf_counter()
        if eager:
            return (t1 - t0) * 1e3, (t2 - t0) * 1e3, 0.0, None
        self.steps_done += 1
        # Read now: a full-iteration graph returns the same static tensor
        # every step, overwritten by each replay.
        loss = float(losses[-1]["lm loss"].item()) if losses else None
        return (t1 - t0) * 1e3, (t2 - t0) * 1e3, (t3 - t2) * 1e3, loss

    def count_graphs(self):
        """Graphs the framework really captured (so a scope that silently
        graphs the whole layer shows)."""
        if self.mode == "full_iteration":
            from megatron.core.full_cuda_graph import FullCudaGraphWrapper

            return sum(1 for g in FullCudaGraphWrapper.cuda_graph.values() if g is not None)
        n = 0
        for m in self.ddp.modules():
            for r in getattr(m, "cudagraph_runners", []) or []:
                n += (getattr(r, "fwd_graph", None) is not None) + (getattr(r, "bwd_graph", None) is not None)
            for g in getattr(m, "cuda_graphs", []) or []:
                n += 1 if g is not None else 0
        return n


def param_counts(model):
    """Dense and expert parameters of the built slice (Megatron-Core marks
    expert parameters with allreduce=False: they reduce over expert-DP)."""
    dense = expert = 0
    for p in model.parameters():
        if getattr(p, "allreduce", True):
            dense += p.numel()
        else:
            expert += p.numel()
    return dense, expert


def init_distributed(rank, world, port, gpu, shapes):
    from megatron.core import parallel_state

    torch.cuda.set_device(gpu)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    torch.distributed.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                                         world_size=world, device_id=torch.device("cuda", gpu))
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=shapes["tp_run"],
                                             expert_model_parallel_size=shapes["ep_run"],
                                             create_gloo_process_groups=False)
    try:
        from megatron.core.num_microbatches_calculator import init_num_microbatches_calculator

        dp = world // shapes["tp_run"]
        init_num_microbatches_calculator(rank, None, shapes["microbatches_run"] * shapes["mbs"] * dp,
                                         shapes["mbs"], dp)
    except Exception:  # older cores: the TE helper falls back to its own count
        pass


def slowest(values):
    """The slowest rank's value of each step (a MAX all-reduce)."""
    if torch.distributed.get_world_size() == 1:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device="cuda")
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return t.tolist()


def run(req, rank, world, port, gpu, send):
    """Runs one candidate and sends samples and a result through send()."""
    cand, shapes, opts = req["candidate"], req["shapes"], req.get("opts") or {}
    te, eager = req["te"], req.get("eager") or {}
    base = device_used_mib(gpu)
    t_start = time.perf_counter()
    notes = list(shapes.get("notes") or [])
    sl = None
    info = {}
    try:
        init_distributed(rank, world, port, gpu, shapes)
        torch.cuda.reset_peak_memory_stats()
        sl = Slice(shapes, cand, te, gpu)
        notes.extend(n for n in shapes.get("notes") or [] if n not in notes)  # what building the slice said
        info = measure(sl, opts, rank, send, notes)
        info["outside_allocator_mib"] = outside_allocator_mib(gpu)
    except Exception as e:  # a failing candidate is a result, not a crash
        info["error"] = results.explain_capture(first_line(e))
        info["trace"] = traceback.format_exc(limit=6)
    if sl is not None:
        info.update(optimizer=sl.optimizer_label, dense_params=sl.dense_params, expert_params=sl.expert_params,
                    layer_dense_params=sl.layer_dense_params)
    info["peak_allocated_mib"] = torch.cuda.max_memory_allocated() // (1 << 20)
    peak = torch.cuda.max_memory_reserved() // (1 << 20)
    peak_dev = device_used_mib(gpu)
    layer_spec = sl.layer_spec if sl else plan.layer_spec_name(te)
    del sl
    cleanup()
    return finish(req, info, notes, eager, base, peak, peak_dev, gpu, layer_spec, t_start)


def first_line(e):
    text = "%s: %s" % (type(e).__name__, e)
    # The first exception of a failed capture is the informative one; keep
    # it whole but on one line.
    return " ".join(text.split())[:600]


def measure(sl, opts, rank, send, notes):
    """Warm-up, capture and measured steps; returns the measured figures."""
    cand, mode = sl.cand, sl.mode
    measured = max(int(opts.get("measured_steps") or 8), 3)
    eager_steps = max(int(opts.get("eager_steps") or 5), 3)
    info = {"steps": [], "host": [], "fwd_bwd": [], "opt": []}
    # Steps before the first graphed one: local captures at the end of the
    # first step (schedules.py calls create_cudagraphs()); full iteration
    # and TE capture in the step numbered `warmup`.
    before = 1 if mode in ("none", "local") else cand["warmup"] + 1
    # The eager baseline runs as many steps as a graphed candidate with the
    # longest warm-up, so their losses can be compared at the same step.
    total = before + measured if mode != "none" else max(before + eager_steps, int(opts.get("compare_steps") or 0))
    warm_ms = cap_ms = 0.0
    collect_before = set(plan.manual_gc_steps(total))
    gc.disable()  # as Megatron-Bridge's train(); cleanup() turns it back on
    notes.append("python gc: manual, a collection every %d steps (Megatron-Bridge recipes' manual_gc); OMP_NUM_THREADS=%s"
                 % (plan.MANUAL_GC_INTERVAL, os.environ.get("OMP_NUM_THREADS", "unset")))
    if mode == "full_iteration":
        info["own_eager"] = own_eager_steps(sl, min(eager_steps, plan.OWN_EAGER_STEPS))
    for i in range(total):
        if i in collect_before:
            gc.collect()
        sl.maybe_capture_te()
        t0 = time.perf_counter()
        host, fb, op, loss = sl.step()
        wall = (time.perf_counter() - t0) * 1e3
        phase = phase_of(mode, i, before)
        if phase == "capture" or (mode == "local" and i == 0):
            cap_ms += wall
        elif phase == "warmup":
            warm_ms += wall
        if i >= before:
            info["steps"].append(fb + op)
            info["host"].append(host)
            info["fwd_bwd"].append(fb)
            info["opt"].append(op)
            info.setdefault("zero_grad", []).append(sl.last_zero_grad_ms)
            if sl.last_layer_share is not None:
                info.setdefault("layer_share", []).append(sl.last_layer_share)
            if sl.last_lead_in_ms is not None:
                info.setdefault("lead_in", []).append(sl.last_lead_in_ms)
            for k, v in (sl.last_layer_calls or {}).items():
                info.setdefault(k, []).append(v)
        info.setdefault("losses", []).append(loss)
        if rank == 0:
            send({"type": "sample", "sample": {"candidate": "", "phase": phase, "step": i, "step_ms": fb + op,
                                               "device_mib": device_used_mib(sl.dev)}})
    info["all_losses"] = list(info.get("losses", []))
    del info["losses"]
    # Losses are compared at the first graphed step: one optimizer update
    # after the capture, before MoE routing (which bf16 rounding can flip)
    # has had steps to diverge.
    info["loss_step"] = min(first_graphed_step(mode, before), total - 1)
    info["loss"] = info["all_losses"][info["loss_step"]] if info["all_losses"] else None
    if mode != "none" and info["all_losses"]:
        notes.append("last step's loss %.6g (step %d)" % (info["all_losses"][-1], total - 1))
    info["graphs"] = sl.count_graphs()
    info["capture_ms"], info["warmup_ms"] = cap_ms, warm_ms
    if mode == "none":
        # Forward-only enqueue time, for the profile's forward/backward split.
        fwd = [sl.step(forward_only=True)[0] for _ in range(3)]
        info["host_fwd"] = slowest([results.summarise(fwd)["median_ms"]])[0]
    for k in ("steps", "host", "fwd_bwd", "opt", "zero_grad", "lead_in") + plan.LAYER_CALL_FIGURES:
        if k in info:  # lead_in: not when no Python ran the decoder (a full-iteration replay)
            info[k] = slowest(info[k])
    if info.get("own_eager"):
        info["own_eager"]["fwd_bwd"] = slowest(info["own_eager"]["fwd_bwd"])
    if mode == "local" and info["graphs"] == 0:
        notes.append("local impl captured no graph")
    return info


def own_eager_steps(sl, n):
    """Eager forward-backward passes of the candidate's own model before
    its graphs exist: Megatron-Core's eager step is host-bound on small
    layers and its speed drifts from minute to minute and process to
    process (an H200 node's dense-small eager medians ran 120-180 ms in
    runs an hour apart), so eager steps of the same process, seconds
    from its graphed ones, join the search's eager baseline (the
    worker's pool). They run without the optimizer's step, so the model
    and the losses compared with eager's stay those of a fresh model;
    what they allocated is returned to the device and the peaks restart,
    so the graphed run's memory is its own. Returns their forward-backward
    times and the decoder's shares of them."""
    out = {"fwd_bwd": [], "layer_share": []}
    for _ in range(n):
        _, fb, _, _ = sl.step(eager=True)
        out["fwd_bwd"].append(fb)
        if sl.last_layer_share is not None:
            out["layer_share"].append(sl.last_layer_share)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return out


def first_graphed_step(mode, before):
    """The first step whose work ran from graphs: local graphs replay from
    the second step, full-iteration and TE graphs from the capture step."""
    if mode == "none":
        return before
    if mode == "local":
        return 1
    return before - 1


def phase_of(mode, i, before):
    if mode == "none":
        return "eager" if i >= before else "warmup"
    if mode == "local":
        return "capture" if i == 0 else "measure"
    if i < before - 1:
        return "warmup"
    if i == before - 1:
        return "capture"
    return "measure"


def cleanup():
    """Frees graphs and the model; the child exits after this anyway."""
    try:
        from megatron.core.transformer.cuda_graphs import delete_cuda_graphs

        delete_cuda_graphs()
    except Exception:
        pass
    gc.enable()
    gc.collect()
    torch.cuda.empty_cache()


def median_or_none(values):
    return results.summarise(values)["median_ms"] if values else None


def finish(req, info, notes, eager, base, peak, peak_dev, gpu, layer_spec, t_start):
    shapes, cand = req["shapes"], req["candidate"]
    opt_f = plan.optimizer_factor(shapes, info.get("dense_params", 0), info.get("expert_params", 0),
                                  info.get("layer_dense_params"))
    share = median_or_none(info.get("layer_share"))
    fb_f, opt_f, scale_text = plan.scaling(shapes, opt_f, share)
    # What capturing adds: the graphed run's peak reserved memory less the
    # eager run's on the same slice (a graph pool holds the activations its
    # region saves in place of eager's, so the difference, not the pool, is
    # what the graphs cost).
    graph_mib = plan.graph_memory(cand, peak, (eager or {}).get("peak_reserved_mib"))
    steps = [fb * fb_f + op * opt_f for fb, op in zip(info.get("fwd_bwd", []), info.get("opt", []))]
    host = [h * fb_f for h in info.get("host", [])]
    # Eager steps of this process for the search's eager baseline: an
    # eager run's own, or the eager passes before a graphed one's capture
    # with its optimizer's time.
    own = steps if cand["impl"] == "none" else []
    pre = info.get("own_eager") or {}
    if pre.get("fwd_bwd") and info.get("opt"):
        pre_f, _, _ = plan.scaling(shapes, opt_f, median_or_none(pre.get("layer_share")))
        opt_ms = median_or_none(info["opt"]) * opt_f
        own = [fb * pre_f + opt_ms for fb in pre["fwd_bwd"]]
    framework = dict(req["versions"])
    framework["layer_spec"] = layer_spec
    framework["world_size"] = shapes["world"]
    if info.get("optimizer"):
        framework["optimizer"] = info["optimizer"]
        notes.append("optimizer: " + info["optimizer"])
    if shapes["modelled"]:
        framework["modelled"] = shapes["modelled"]
    err = info.get("error")
    loss, eager_loss = info.get("loss"), None
    k = info.get("loss_step")
    if eager and eager.get("losses") and k is not None and loss is not None:
        if k < len(eager["losses"]):
            eager_loss = eager["losses"][k]
        else:
            notes.append("loss not compared: the eager baseline ran %d steps, this run %d" % (len(eager["losses"]), k + 1))
        drift, tol = results.loss_drift(loss, eager_loss, shapes["moe"] is not None)
        if not err and drift is not None and drift > tol:
            err = "loss drifted from eager: %.6g vs %.6g at step %d (relative %.2g > %.2g)" % (
                loss, eager_loss, k, drift, tol)
            info["error_kind"] = "drift"
    mem = {
        "device_base_mib": base,
        "device_peak_mib": peak_dev,
        "device_after_mib": device_used_mib(gpu),
        "process_peak_mib": peak,
        "process_peak_allocated_mib": info.get("peak_allocated_mib", 0),
        "graph_mib": graph_mib,
        "graph_full_job_mib": int(graph_mib * shapes["stage_layers"] / shapes["layers_built"]),
    }
    if info.get("outside_allocator_mib"):
        mem["outside_allocator_mib"] = info["outside_allocator_mib"]
    if info.get("trace"):
        notes.append("trace: " + " | ".join(info["trace"].strip().splitlines()[-3:]))
    r = results.result(cand, req["device"], steps, eager.get("stats") if eager else None,
                       capture_ms=info.get("capture_ms", 0.0) * fb_f, warmup_ms=info.get("warmup_ms", 0.0) * fb_f,
                       graphs=info.get("graphs", 0), memory=mem, notes=notes,
                       wall_ms=(time.perf_counter() - t_start) * 1e3, scaling=scale_text or None,
                       framework=framework, host_enqueue_ms=results.summarise(host)["median_ms"] if host else None,
                       loss=loss, eager_loss=eager_loss, error=err, error_kind=info.get("error_kind"))
    if own and not err:
        r["eager_samples"] = own
    if info.get("fwd_bwd"):
        med = lambda k: results.summarise(info.get(k) or [])["median_ms"]
        r["raw"] = {"layers_built": shapes["layers_built"], "microbatches_run": shapes["microbatches_run"],
                    "host_ms": med("host"), "host_fwd_ms": info.get("host_fwd", 0.0), "fwd_bwd_ms": med("fwd_bwd"),
                    "opt_ms": med("opt"), "graph_mib": graph_mib}
        if share is not None:
            r["raw"]["layer_share"] = share
        for k in ("zero_grad", "lead_in") + plan.LAYER_CALL_FIGURES:
            if info.get(k):
                r["raw"][k + "_ms"] = med(k)
    if cand["impl"] == "none" and not err:
        r["losses"] = info.get("all_losses")
    return r
