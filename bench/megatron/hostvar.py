"""Host-time questions about one Megatron-Core step (bench only).

  python3 bench/megatron/hostvar.py MODEL MODE LAYERS MICROBATCHES STEPS [OUT.json]
  MODEL: dense | moe  (bench/megatron/presets' dense-small and moe-small, mbs 1,
                       drop-and-pad experts)
  MODE:  none | local | full_iteration

It answers two questions (`bench/megatron/run.sh host-variance OUT_DIR`
runs both; docs/emulation-accuracy-2026-12-01.md has the answers measured on
an H200):
- how far moe-small's host-bound eager step varies between processes on the
  same GPU, against its step-to-step spread inside one process, with the
  process pinned to the GPU's CPUs or not: run it in several processes and
  compare their medians with their own spreads.
- where the GPU waits for the host through a step with per-layer graphs:
  the host's timestamps of every forward layer call (its start; the
  decoder's and the final norm's) per micro-batch, and CUDA events at the
  same points.
"""

import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "engine", "megatron", "pyworker"))

import plan  # noqa: E402

ARCH = {
    "dense": {"layers": 8, "hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_groups": 4, "head_dim": 128,
              "vocab": 32000, "activation": "swiglu"},
    "moe": {"layers": 8, "hidden": 1024, "ffn_hidden": 4096, "heads": 16, "kv_groups": 4, "head_dim": 64,
            "vocab": 32000, "activation": "swiglu", "moe": {"experts": 32, "top_k": 8, "ffn_hidden": 384}},
}


def shapes_for(model, layers, microbatches):
    arch = dict(ARCH[model], layers=layers)
    spec = {"model": {"arch": arch},
            "layout": {"num_gpus": 1, "tp": 1, "pp": 1, "cp": 1, "ep": 1, "etp": 1, "gbs": microbatches,
                       "mbs": 1, "seq": 1024, "dispatcher": "alltoall"},
            "options": {"dropless": False, "moe_capacity_factor": 1.0}}
    return plan.rank_shapes(spec, 1, max_layers=layers, max_microbatches=microbatches)


def candidate(mode):
    if mode == "none":
        return {"impl": "none", "scopes": [], "warmup": 0}
    if mode == "full_iteration":
        return {"impl": "local", "scopes": ["full_iteration"], "warmup": 1}
    return {"impl": "local", "scopes": [], "warmup": 1}


class Marks:
    """Host timestamps and CUDA events at named points of a step."""

    def __init__(self, torch):
        self.torch, self.on = torch, False
        self.host, self.events = [], []

    def mark(self, name):
        if not self.on:
            return
        e = self.torch.cuda.Event(enable_timing=True)
        e.record()
        self.host.append((name, time.perf_counter()))
        self.events.append(e)

    def start(self):
        self.host, self.events, self.on = [], [], True
        self.mark("start")

    def stop(self):
        self.mark("end")
        self.on = False
        self.torch.cuda.synchronize()
        t0, e0 = self.host[0][1], self.events[0]
        return [{"at": n, "host_ms": round((t - t0) * 1e3, 3), "gpu_ms": round(e0.elapsed_time(e), 3)}
                for (n, t), e in zip(self.host, self.events)]


def instrument(sl, marks):
    m = sl.ddp.module
    while not hasattr(m, "decoder") and hasattr(m, "module"):
        m = m.module
    dec = m.decoder
    m.embedding.register_forward_hook(lambda *a: marks.mark("embedded"))
    dec.register_forward_pre_hook(lambda *a: marks.mark("decoder"))
    if getattr(dec, "final_layernorm", None) is not None:
        dec.final_layernorm.register_forward_pre_hook(lambda *a: marks.mark("final_norm"))
    for i, layer in enumerate(dec.layers):
        orig = layer._should_call_local_cudagraph

        def wrapped(*a, _o=orig, _i=i, **kw):
            marks.mark("layer%d" % _i)
            return _o(*a, **kw)

        layer._should_call_local_cudagraph = wrapped


def cpu_of_process():
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def main():
    model, mode, layers, mb, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    out_path = sys.argv[6] if len(sys.argv) > 6 else None
    plan.apply_rank_env(os.environ)
    import gc

    import torch
    import runner

    shapes = shapes_for(model, layers, mb)
    runner.init_distributed(0, 1, 29500 + os.getpid() % 1000, 0, shapes)
    sl = runner.Slice(shapes, candidate(mode), False, 0)
    marks = Marks(torch)
    instrument(sl, marks)
    gc.disable()
    walls, hosts = [], []
    for i in range(steps + 2):
        host, fb, op, _ = sl.step()
        if i >= 2:
            walls.append(fb)
            hosts.append(host)
    orig_fb = sl.fwd_bwd
    traced = []
    for _ in range(2):
        torch.cuda.synchronize()
        sl.ddp.zero_grad_buffer()
        marks.start()
        orig_fb(forward_step_func=sl._forward_step, data_iterator=iter(sl.batches), model=[sl.ddp],
                num_microbatches=shapes["microbatches_run"], seq_length=shapes["seq"], micro_batch_size=shapes["mbs"],
                forward_only=False)
        traced.append(marks.stop())
    med = statistics.median(walls)
    res = {"model": model, "mode": mode, "layers": layers, "microbatches": mb, "pid": os.getpid(),
           "affinity": sorted(os.sched_getaffinity(0)), "cpu_now": cpu_of_process(),
           "fwd_bwd_ms": [round(w, 2) for w in walls], "host_ms": [round(h, 2) for h in hosts],
           "median_ms": round(med, 2), "p10_p90_pct": [round(100 * (min(walls) / med - 1), 1),
                                                      round(100 * (max(walls) / med - 1), 1)],
           "traced_step": traced[-1]}
    print(json.dumps({k: v for k, v in res.items() if k != "traced_step"}))
    if out_path:
        with open(out_path, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    t = time.time()
    main()
    print("hostvar: %.0f s" % (time.time() - t), file=sys.stderr)
