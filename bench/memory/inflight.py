"""Micro-batches in flight on the real Megatron-Core, at world size 1: what
a pipeline rank's warm-up holds (N forwards whose activations wait for
their backwards), and how much memory the caching allocator needs for it.

  PYTHONPATH=<Megatron-LM checkout> python3 bench/memory/inflight.py CASES.json OUT.jsonl

CASES.json is a list of peaks.py's cases with "inflight": [N, ...] and an
optional "env" (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, say;
each case runs in its own interpreter, as the allocator reads it when CUDA
starts). For each N the bench runs N forwards of the eager model, keeps
their autograd graphs, then runs their backwards in order, twice, and
writes one JSON line per N:

- peak_allocated_mib, peak_reserved_mib: the second run's peaks, the
  allocator left as the first run left it (as in a job's steady state);
- need_mib: the least memory the allocator may reserve for the run to
  finish (torch.cuda.set_per_process_memory_fraction, bisected to
  step_mib, the cache emptied before each try): under that cap the
  allocator frees its unused cached blocks and retries before it raises
  out-of-memory, so need less peak allocated is the reserve a run at the
  edge of the device really takes;
- device_used_mib and outside_allocator_mib of the warm process, and the
  same figures at each stage of the start (CUDA context, process groups,
  model and optimizer built), so the memory outside the allocator is
  seen by what adds it.
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "engine", "megatron", "pyworker"))

import peaks  # noqa: E402

MIB = 1 << 20


def used_and_reserved(torch):
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    used = (total - free) // MIB
    reserved = torch.cuda.memory_reserved() // MIB
    return {"device_used_mib": used, "reserved_mib": reserved, "outside_allocator_mib": used - reserved}


def in_flight(sl, n, torch):
    """N forwards kept for their backwards, then the backwards in order:
    the shape of a pipeline rank's warm-up and cool-down."""
    sl.ddp.zero_grad_buffer()
    sl._marks, sl._layer_calls = [], []
    it = iter(sl.batches * (n // len(sl.batches) + 1))
    losses = []
    for _ in range(n):
        out, loss_func = sl._forward_step(it, sl.ddp)
        loss, _ = loss_func(out)
        losses.append(loss)
    for loss in losses:
        loss.backward()
    losses.clear()
    torch.cuda.synchronize()


def fits_under(sl, n, cap_mib, total_mib, torch):
    """Whether n in flight run with the allocator capped at cap_mib."""
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap_mib / total_mib))
    try:
        in_flight(sl, n, torch)
        return True
    except torch.OutOfMemoryError:
        return False
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        sl.ddp.zero_grad_buffer()
        torch.cuda.empty_cache()


def least_memory(sl, n, lo, hi, step, total_mib, torch):
    """The least cap (MiB, to step) under which n in flight run: lo fails
    or is the peak allocated, hi runs."""
    while not fits_under(sl, n, hi, total_mib, torch):
        lo, hi = hi, hi + (hi - lo) + step
    while hi - lo > step:
        mid = (lo + hi) // 2
        if fits_under(sl, n, mid, total_mib, torch):
            hi = mid
        else:
            lo = mid
    return hi


def run_case(case):
    import torch

    import runner

    start = {}
    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda")
    start["context"] = used_and_reserved(torch)
    shapes = peaks.shapes_for(case)
    runner.init_distributed(0, 1, 20000 + os.getpid() % 20000, 0, shapes)
    torch.distributed.barrier()
    start["process_groups"] = used_and_reserved(torch)
    sl = runner.Slice(shapes, peaks.candidate("none"), False, 0)
    start["built"] = used_and_reserved(torch)
    sl.step()
    start["one_step"] = used_and_reserved(torch)
    total_mib = torch.cuda.get_device_properties(0).total_memory // MIB
    rows = []
    for n in case["inflight"]:
        try:
            in_flight(sl, n, torch)
            torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            in_flight(sl, n, torch)
            ms = (time.perf_counter() - t0) * 1e3
        except torch.OutOfMemoryError:
            rows.append({"inflight": n, "oom": True})
            break
        alloc = torch.cuda.max_memory_allocated() // MIB
        reserved = torch.cuda.max_memory_reserved() // MIB
        warm = used_and_reserved(torch)
        step = case.get("step_mib", 128)
        need = least_memory(sl, n, alloc - step, reserved + step, step, total_mib, torch)
        rows.append({"inflight": n, "peak_allocated_mib": alloc, "peak_reserved_mib": reserved,
                     "need_mib": need, "ms": round(ms, 1), "warm": warm})
        print(json.dumps({"name": case["name"], **rows[-1]}), file=sys.stderr, flush=True)
    return {"start": start, "rows": rows, "built_params": {"dense": sl.dense_params, "expert": sl.expert_params}}


def main():
    if sys.argv[1] == "--case":
        return peaks.one_case_main(sys.argv[2], run_case)
    cases = json.load(open(sys.argv[1]))
    deadline = time.time() + float(os.environ.get("DEADLINE", "1e9"))
    with open(sys.argv[2], "a") as out:
        for case in cases:
            if time.time() > deadline:
                out.write(json.dumps({"name": case["name"], "skipped": "deadline"}) + "\n")
                continue
            t0 = time.time()
            res = peaks.in_fresh_process(case, os.path.abspath(__file__))
            res.update(name=case["name"], case=case, wall_s=round(time.time() - t0, 1))
            out.write(json.dumps(res) + "\n")
            out.flush()
            print(json.dumps({k: res.get(k) for k in ("name", "wall_s", "error")}), flush=True)


if __name__ == "__main__":
    main()
