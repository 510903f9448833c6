"""Peak device memory of whole models on the real Megatron-Core, at world
size 1, by phase: what the memory model (engine/memory.go) is checked
against.

  PYTHONPATH=<Megatron-LM checkout> python3 bench/memory/peaks.py CASES.json OUT.jsonl

CASES.json is a list of {"name", "arch", "mbs", "microbatches", "seq",
"mode", "optimizer", "env", "grad_reduce_in_fp32",
"precision_aware_optimizer"}: arch as cgtune's preset arch (layers,
hidden, ffn_hidden, heads, kv_groups, head_dim, vocab, activation, moe),
mode none | local | full_iteration, optimizer "job" (the worker's: the
job's FusedAdam or its stand-in) or "fallback" (Megatron-Core's own
fallback without Transformer Engine and apex), env extra environment
variables (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, say),
grad_reduce_in_fp32 an fp32 gradient buffer (default bf16, as MB's perf
recipes), precision_aware_optimizer the precision-aware optimizer as
Megatron-Bridge configures it (needs Transformer Engine's FusedAdam;
without it the run says so and uses the default optimizer).  Every case runs in its own process,
forked after one import of megatron.core, and writes one JSON line: the
parameter counts, memory after the model and optimizer are built, the
peak allocated and reserved memory of every step's forward-backward and
optimizer phases, the pools holding reserved memory at the end, and the
step times.
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "engine", "megatron", "pyworker"))

import plan  # noqa: E402

MIB = 1 << 20


def shapes_for(case):
    moe = case["arch"].get("moe")
    # The bench drives Megatron-Core itself, not Megatron-Bridge's perf
    # harness: the optimizer is the case's.
    spec = {"model": {"arch": case["arch"]},
            "layout": {"num_gpus": 1, "tp": 1, "pp": 1, "cp": 1, "ep": 1, "etp": 1,
                       "gbs": case["mbs"] * case["microbatches"], "mbs": case["mbs"], "seq": case["seq"],
                       "dispatcher": "alltoall", "outside_harness": True,
                       "grad_reduce_in_fp32": bool(case.get("grad_reduce_in_fp32")),
                       "precision_aware_optimizer": bool(case.get("precision_aware_optimizer"))},
            "options": {"dropless": False, "moe_capacity_factor": 1.0} if moe else {}}
    return plan.rank_shapes(spec, 1, max_layers=case["arch"]["layers"], max_microbatches=case["microbatches"])


def candidate(mode):
    if mode == "none":
        return {"impl": "none", "scopes": [], "warmup": 0}
    if mode == "full_iteration":
        return {"impl": "local", "scopes": ["full_iteration"], "warmup": 1}
    return {"impl": "local", "scopes": [], "warmup": 1}


def pools(torch):
    """Reserved MiB by memory pool: the caching allocator's own pool and
    the graphs' private pools."""
    out = {"general": 0, "graph": 0}
    for seg in torch.cuda.memory_snapshot():
        pool = tuple(seg.get("segment_pool_id") or (0, 0))
        out["general" if pool == (0, 0) else "graph"] += seg["total_size"]
    return {k: v // MIB for k, v in out.items()}


def run_case(case):
    import torch

    import optim
    import runner

    if case.get("optimizer") == "fallback":
        optim.job_optimizer = lambda o: "Megatron-Core's fallback (torch AdamW, per-tensor norms)"
    shapes = shapes_for(case)
    runner.init_distributed(0, 1, 20000 + os.getpid() % 20000, 0, shapes)
    torch.cuda.reset_peak_memory_stats()
    sl = runner.Slice(shapes, candidate(case["mode"]), False, 0)
    built = {"allocated": torch.cuda.memory_allocated() // MIB, "reserved": torch.cuda.memory_reserved() // MIB}
    phases = []
    orig_step = sl.optimizer.step

    def opt_step(*a, **kw):
        torch.cuda.synchronize()
        phases[-1]["fwd_bwd"] = {"allocated": torch.cuda.max_memory_allocated() // MIB,
                                 "reserved": torch.cuda.max_memory_reserved() // MIB}
        torch.cuda.reset_peak_memory_stats()
        r = orig_step(*a, **kw)
        torch.cuda.synchronize()
        phases[-1]["optimizer"] = {"allocated": torch.cuda.max_memory_allocated() // MIB,
                                   "reserved": torch.cuda.max_memory_reserved() // MIB}
        return r

    sl.optimizer.step = opt_step
    steps = case.get("steps", 5)
    times = []
    for i in range(steps):
        torch.cuda.reset_peak_memory_stats()
        phases.append({"step": i})
        host, fb, op, loss = sl.step()
        phases[-1].update(fwd_bwd_ms=round(fb, 2), opt_ms=round(op, 2), loss=loss)
        times.append((fb, op))
    steady = times[2:] if len(times) > 2 else times
    med = lambda xs: sorted(xs)[len(xs) // 2]
    return {"name": case["name"], "mode": case["mode"], "optimizer_run": sl.optimizer_label,
            "dense_params": sl.dense_params, "expert_params": sl.expert_params,
            "built": built, "phases": phases, "pools_end": pools(torch),
            "peak_reserved_mib": max(max(p.get("fwd_bwd", {}).get("reserved", 0), p.get("optimizer", {}).get("reserved", 0))
                                     for p in phases),
            "peak_allocated_mib": max(max(p.get("fwd_bwd", {}).get("allocated", 0), p.get("optimizer", {}).get("allocated", 0))
                                      for p in phases),
            "fwd_bwd_ms": round(med([t[0] for t in steady]), 2), "opt_ms": round(med([t[1] for t in steady]), 2),
            "device_used_mib": runner.device_used_mib(0), "outside_allocator_mib": runner.outside_allocator_mib(0),
            "notes": shapes.get("notes") or []}


def in_child(fn):
    """Runs fn() in a forked child and returns its JSON answer."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            res = fn()
        except Exception as e:  # a failing case is a line of the table
            res = {"error": "%s: %s" % (type(e).__name__, e)}
        os.write(w, (json.dumps(res) + "\n").encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.waitpid(pid, 0)
    return json.loads(data.decode().strip() or '{"error": "no result"}')


def device_properties():
    import torch

    p = torch.cuda.get_device_properties(0)
    return {k: getattr(p, k) for k in dir(p) if not k.startswith("_") and isinstance(getattr(p, k), (bool, int, float, str))}


def one_case_main(case_json, run=None):
    """--case JSON: one case in this fresh interpreter (used where the
    framework cannot be forked after its import), run by run (run_case by
    default)."""
    plan.apply_rank_env(os.environ)
    import megatron.core  # noqa: F401

    case = json.loads(case_json)
    try:
        res = (run or run_case)(case)
    except Exception as e:  # a failing case is a line of the table
        res = {"error": "%s: %s" % (type(e).__name__, e)}
    print("RESULT " + json.dumps(res), flush=True)


def in_fresh_process(case, script=None):
    """Runs the case in a fresh interpreter of script (this file by
    default) with the case's environment; its RESULT line's JSON."""
    import subprocess

    env = dict(os.environ, **(case.get("env") or {}))
    p = subprocess.run([sys.executable, script or os.path.abspath(__file__), "--case", json.dumps(case)],
                       capture_output=True, text=True, env=env)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": "no result: " + " | ".join(p.stderr.strip().splitlines()[-3:])}


def main():
    if sys.argv[1] == "--case":
        return one_case_main(sys.argv[2])
    cases = json.load(open(sys.argv[1]))
    out = open(sys.argv[2], "a")
    deadline = time.time() + float(os.environ.get("DEADLINE", "1e9"))
    plan.apply_rank_env(os.environ)
    import torch  # as the worker does: imported before the first fork, CUDA untouched here

    import worker  # the worker's way to import megatron.core without a CUDA context, so cases fork

    culprit = worker.import_framework(in_child(device_properties))
    if culprit or torch.cuda.is_initialized():
        print("CUDA initialised while importing:\n" + (culprit[0] if culprit else "?"), file=sys.stderr)
    fresh = False
    for case in cases:
        if time.time() > deadline:
            print(json.dumps({"name": case["name"], "mode": case["mode"], "skipped": "deadline"}), flush=True)
            continue
        t0 = time.time()
        # A case with its own environment (the allocator's settings are
        # read when CUDA starts) runs in a fresh interpreter.
        res = None if fresh or case.get("env") else in_child(lambda: run_case(case))
        if res is None or "re-initialize CUDA in forked" in (res.get("error") or ""):
            fresh = True  # the framework touched CUDA at import: a fresh interpreter per case
            res = in_fresh_process(case)
        res.update(name=case["name"], mode=case["mode"], case=case)
        res["wall_s"] = round(time.time() - t0, 1)
        out.write(json.dumps(res) + "\n")
        out.flush()
        print(json.dumps({k: res.get(k) for k in ("name", "mode", "peak_reserved_mib", "peak_allocated_mib",
                                                    "fwd_bwd_ms", "opt_ms", "pools_end", "wall_s", "error")}),
              flush=True)


if __name__ == "__main__":
    main()
