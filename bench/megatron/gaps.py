"""Where the GPU waits in one Megatron-Core training step (bench only).

Builds dense-small's slice with the worker's own runner.Slice, runs a few
steps of one graph mode, then profiles the forward-backward of two steps
with torch.profiler and prints, per step: its wall time, the GPU's busy time
(the union of its kernels), the idle time, and the idle time by what the GPU
waited for (the host's launch of the next kernel, by the host op that made
it, or the previous kernel's copy/sync), with the largest gaps.

  python3 bench/megatron/gaps.py MODE LAYERS MICROBATCHES [OUT.json]
  MODE: none | local | full_iteration

Per-layer graphs cost Megatron-Core 0.6-1.6 ms per step more than the full
iteration on dense-small (docs/emulation-accuracy-2026-12-01.md); this says
where that time goes. `bench/megatron/run.sh gaps OUT_DIR` runs every mode.
"""

import collections
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "engine", "megatron", "pyworker"))

import plan  # noqa: E402
from hostvar import candidate, shapes_for  # noqa: E402  (dense-small's slice, the mode's candidate)


def window(events, name):
    return sorted((e for e in events if e.get("name") == name and e.get("ph") == "X"), key=lambda e: e["ts"])


def enclosing_ops(cpu_ops, launches):
    """For each launch (by correlation id), the names of the host ops open
    around it on its thread, outermost first (one sweep per thread)."""
    by_tid = collections.defaultdict(list)
    for c in cpu_ops:
        by_tid[c.get("tid")].append((c["ts"], 0, c))
    for corr, l in launches.items():
        by_tid[l.get("tid")].append((l["ts"], 1, corr))
    found = {}
    for items in by_tid.values():
        items.sort(key=lambda x: (x[0], x[1]))
        stack = []
        for ts, kind, x in items:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] < ts:
                stack.pop()
            if kind == 0:
                stack.append(x)
            else:
                found[x] = [c["name"] for c in stack]
    return found


def analyse(trace, steps):
    ev = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    kernels = sorted((e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")), key=lambda e: e["ts"])
    runtime = {e["args"].get("correlation"): e for e in ev if e.get("cat") == "cuda_runtime" and "args" in e}
    cpu_ops = sorted((e for e in ev if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    stacks = enclosing_ops(cpu_ops, runtime)
    out = []
    for w in window(ev, "fwd_bwd"):
        t0, t1 = w["ts"], w["ts"] + w["dur"]
        ks = [k for k in kernels if t0 <= k["ts"] < t1]
        busy, idle_by, idle_outer = 0.0, collections.Counter(), collections.Counter()
        gaps = []
        end = t0
        prev = None
        for k in ks:
            gap = k["ts"] - end
            if gap > 1.0:
                corr = k.get("args", {}).get("correlation")
                launch = runtime.get(corr)
                why, why_top = ("first kernel" if prev is None else "gpu"), ""
                if launch is not None and launch["ts"] + launch["dur"] > end - 1.0:
                    # the host launched it after the GPU went idle: the host's op
                    host = stacks.get(corr) or []
                    why = "host: " + (host[-1] if host else launch["name"])
                    why_top = " > ".join(host[:2] + host[-1:]) if host else launch["name"]
                idle_by[why] += gap
                idle_outer[why_top.split(" > ")[0] if why_top else why] += gap
                gaps.append((gap, why, why_top, prev["name"][:60] if prev else "", k["name"][:60]))
            busy += max(0.0, k["ts"] + k["dur"] - max(end, k["ts"]))
            if k["ts"] + k["dur"] > end:
                end = k["ts"] + k["dur"]
            prev = k
        tail = t1 - end
        out.append({"wall_ms": (t1 - t0) / 1e3, "busy_ms": busy / 1e3, "idle_ms": (t1 - t0 - busy) / 1e3,
                    "tail_ms": tail / 1e3, "kernels": len(ks),
                    "idle_by_ms": {k: round(v / 1e3, 3) for k, v in idle_by.most_common(12)},
                    "idle_by_outer_ms": {k: round(v / 1e3, 3) for k, v in idle_outer.most_common(12)},
                    "gaps_over_50us": sum(1 for g in gaps if g[0] > 50),
                    "largest_gaps": [{"us": round(g[0], 1), "why": g[1], "stack": g[2], "after": g[3], "before": g[4]}
                                     for g in sorted(gaps, reverse=True)[:12]]})
    return out[-steps:]


def main():
    mode, layers, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    out_path = sys.argv[4] if len(sys.argv) > 4 else None
    plan.apply_rank_env(os.environ)
    import torch
    import runner

    shapes = shapes_for("dense", layers, mb)
    runner.init_distributed(0, 1, 29500 + os.getpid() % 1000, 0, shapes)
    sl = runner.Slice(shapes, candidate(mode), False, 0)
    import gc

    gc.disable()
    walls = []
    for _ in range(6):
        host, fb, op, _ = sl.step()
        walls.append(fb)
    orig = sl.fwd_bwd

    def marked(*a, **kw):
        with torch.profiler.record_function("fwd_bwd"):
            r = orig(*a, **kw)
            torch.cuda.synchronize()
            return r

    sl.fwd_bwd = marked
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(3):
            sl.step()
    path = "/tmp/gaps-%s-%d-%d.json" % (mode, layers, mb)
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    res = {"mode": mode, "layers": layers, "microbatches": mb, "unprofiled_fwd_bwd_ms": walls[2:],
           "steps": analyse(trace, 2)}
    text = json.dumps(res, indent=1)
    print(text)
    if out_path:
        with open(out_path, "w") as f:
            f.write(text)


if __name__ == "__main__":
    t = time.time()
    main()
    print("gaps: %.0f s" % (time.time() - t), file=sys.stderr)
