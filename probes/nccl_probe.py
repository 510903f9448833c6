#!/usr/bin/env python3
"""cgtune's NCCL probe: bus bandwidth and small-message latency of the
collectives a training job issues, over this node's GPUs.

Forks one rank per GPU (torch.distributed with NCCL on a TCP store on
127.0.0.1, NVLink multicast off: NCCL_NVLS_ENABLE=0), times all-reduce,
all-gather, reduce-scatter, all-to-all and send/recv at a few message sizes
with CUDA events, keeps the slowest rank's time (a MAX all-reduce), and
prints one JSON line.  Run by cgtune's probes (`cgtune probe --nccl`), which
embed this file; standard library + torch only.

Bandwidths follow the nccl-tests convention (NVIDIA/nccl-tests,
doc/PERFORMANCE.md): algbw = bytes / time, and the bus bandwidth, which is
comparable across rank counts and with the link's speed, is
algbw x 2(n-1)/n for all-reduce, algbw x (n-1)/n for all-gather,
reduce-scatter and all-to-all, and algbw for send/recv.  `bytes` is the
size of the whole buffer: the all-reduce's tensor, the all-gather's output,
the reduce-scatter's input, the all-to-all's per-rank send buffer, and the
message each rank sends for send/recv.
"""

import argparse
import ctypes
import json
import os
import signal
import socket
import sys
import traceback

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
# Message sizes in bytes: the smallest gives the latency, the largest the
# bandwidth.
DEFAULT_SIZES = (1 << 10, 1 << 20, 16 << 20, 256 << 20)
ELEMENT_BYTES = 4  # float32, as nccl-tests' default


def bus_factor(op, n):
    """The nccl-tests bus-bandwidth factor of op over n ranks."""
    if n < 1:
        raise ValueError("rank count %r: want 1 or more" % (n,))
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return float(n - 1) / n
    if op == "send_recv":
        return 1.0
    raise ValueError("unknown collective %r (allowed: %s)" % (op, ", ".join(OPS)))


def alg_gbps(nbytes, seconds):
    """Algorithm bandwidth in GB/s (1e9 bytes per second)."""
    if seconds <= 0:
        raise ValueError("time %r: want a positive number" % (seconds,))
    return nbytes / seconds / 1e9


def bus_gbps(op, n, nbytes, seconds):
    """Bus bandwidth in GB/s of one op moving nbytes in seconds over n ranks."""
    return alg_gbps(nbytes, seconds) * bus_factor(op, n)


def elements(nbytes, n, esize=ELEMENT_BYTES):
    """Element count of a buffer of about nbytes that splits evenly over n
    ranks (a multiple of n, at least n)."""
    count = max(1, nbytes // esize)
    return max(n, count // n * n)


def point(op, n, nbytes, seconds):
    """One measured size as reported."""
    return {"bytes": nbytes, "time_us": seconds * 1e6, "algbw_gbps": alg_gbps(nbytes, seconds),
            "busbw_gbps": bus_gbps(op, n, nbytes, seconds)}


def summarize(op, n, times):
    """The report of one op from {bytes: seconds}: every point, the bus
    bandwidth at the largest size and the time of the smallest (latency)."""
    if not times:
        raise ValueError("%s: no measurement" % op)
    sizes = sorted(times)
    pts = [point(op, n, b, times[b]) for b in sizes]
    return {"op": op, "points": pts, "busbw_gbps": pts[-1]["busbw_gbps"], "latency_us": pts[0]["time_us"]}


def iterations(nbytes):
    """Timed iterations of one size: many for small messages (microseconds
    each), fewer for large ones."""
    if nbytes <= 1 << 20:
        return 200
    if nbytes <= 16 << 20:
        return 50
    return 20


def parse_sizes(text):
    """Comma-separated sizes in bytes, with an optional K/M/G suffix."""
    out = []
    for part in text.split(","):
        p = part.strip().upper()
        mult = 1
        for suffix, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
            if p.endswith(suffix):
                p, mult = p[:-1], m
                break
        if not p.isdigit() or int(p) <= 0:
            raise ValueError("size %r: want a positive number of bytes (e.g. 1024, 1K, 256M)" % part)
        out.append(int(p) * mult)
    return sorted(set(out))


def parse_args(argv):
    p = argparse.ArgumentParser(description="cgtune NCCL probe (one JSON line on stdout)")
    p.add_argument("--gpus", required=True, help="GPU indices, one rank each (comma-separated, 2 or more)")
    p.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES), help="message sizes in bytes")
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args(argv)
    try:
        args.gpus = [int(g) for g in args.gpus.split(",")]
        args.sizes = parse_sizes(args.sizes)
    except ValueError as e:
        p.error(str(e))
    if len(args.gpus) < 2 or len(set(args.gpus)) != len(args.gpus) or min(args.gpus) < 0:
        p.error("--gpus %s: want two or more distinct GPU indices" % ",".join(map(str, args.gpus)))
    return args


# --- the ranks (torch) --------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent():
    """The rank gets SIGKILL when the probe's process dies (Linux
    PR_SET_PDEATHSIG), so a killed probe never leaves a rank on a GPU."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def nccl_version(torch):
    v = torch.cuda.nccl.version()
    if isinstance(v, tuple):
        return ".".join(str(x) for x in v)
    # older torch: one integer, e.g. 21805 or 2805
    v = int(v)
    if v >= 10000:
        return "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)
    return "%d.%d.%d" % (v // 1000, v // 100 % 10, v % 100)


def rank_main(rank, args, port, send):
    import torch
    import torch.distributed as dist

    n = len(args.gpus)
    gpu = args.gpus[rank]
    torch.cuda.set_device(gpu)
    dev = torch.device("cuda", gpu)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=n)
    try:
        nxt, prv = (rank + 1) % n, (rank - 1) % n

        def make(op, count):
            x = torch.ones(count, dtype=torch.float32, device=dev)
            part = torch.empty(count // n, dtype=torch.float32, device=dev)
            full = torch.empty(count, dtype=torch.float32, device=dev)
            if op == "all_reduce":
                return lambda: dist.all_reduce(x)
            if op == "all_gather":
                return lambda: dist.all_gather_into_tensor(full, x[: count // n])
            if op == "reduce_scatter":
                return lambda: dist.reduce_scatter_tensor(part, x)
            if op == "all_to_all":
                return lambda: dist.all_to_all_single(full, x)

            def send_recv():
                ops = [dist.P2POp(dist.isend, x, nxt), dist.P2POp(dist.irecv, full, prv)]
                for req in dist.batch_isend_irecv(ops):
                    req.wait()
            return send_recv

        report = []
        for op in OPS:
            times = {}
            for size in args.sizes:
                count = elements(size, n)
                fn = make(op, count)
                for _ in range(args.warmup):
                    fn()
                torch.cuda.synchronize()
                iters = iterations(size)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(iters):
                    fn()
                end.record()
                end.synchronize()
                t = torch.tensor([start.elapsed_time(end) / 1e3 / iters], dtype=torch.float64, device=dev)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's time
                times[count * ELEMENT_BYTES] = float(t.item())
                del fn
                torch.cuda.empty_cache()
            report.append(summarize(op, n, times))
        if rank == 0:
            send({"torch": torch.__version__, "nccl": nccl_version(torch), "world_size": n, "gpus": args.gpus,
                  "device": torch.cuda.get_device_name(gpu), "dtype": "float32", "ops": report})
    finally:
        dist.destroy_process_group()


def run_ranks(args, port):
    """Forks one rank per GPU and waits for all of them; a rank that fails
    takes the others down (they would wait for it in NCCL forever).
    Returns rank 0's report, or raises RankError with the ranks' errors."""
    children = {}
    for rank in range(len(args.gpus)):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 0
            out = None
            try:
                os.close(r)
                die_with_parent()
                out = os.fdopen(w, "w")

                def send(msg, out=out):
                    out.write(json.dumps(msg) + "\n")
                    out.flush()

                rank_main(rank, args, port, send)
            except BaseException as e:  # a rank must never return into the parent
                traceback.print_exc()
                code = 1
                if out is not None:
                    out.write(json.dumps({"error": "rank %d: %s" % (rank, " ".join(str(e).split())[:300])}) + "\n")
                    out.flush()
            finally:
                sys.stderr.flush()
                os._exit(code)
        os.close(w)
        children[pid] = (rank, os.fdopen(r))
    failed = False
    left = set(children)
    while left:
        pid, status = os.waitpid(-1, 0)
        if pid not in left:
            continue
        left.discard(pid)
        if status != 0 and not failed:
            failed = True
            for other in left:
                try:
                    os.kill(other, signal.SIGKILL)
                except OSError:
                    pass
    result, errors = None, []
    for pid, (rank, f) in sorted(children.items(), key=lambda kv: kv[1][0]):
        for line in f:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "error" in msg:
                errors.append(msg["error"])
            elif rank == 0:
                result = msg
        f.close()
    if result is None or failed:
        raise RankError("; ".join(errors) or "a rank died without a message")
    return result


class RankError(RuntimeError):
    """A rank failed; the message holds each rank's first error."""


def retry_port(err):
    """Whether a failure is the rendezvous port taken by someone else."""
    text = str(err)
    return "EADDRINUSE" in text or "Address already in use" in text


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    out = sys.stdout
    sys.stdout = sys.stderr  # stdout carries the one JSON line only
    import torch  # noqa: F401  (imported once; CUDA stays uninitialised here so ranks can fork)

    for attempt in range(3):  # the free port can be taken before rank 0 binds it
        try:
            res = run_ranks(args, free_port())
        except RankError as e:
            if retry_port(e) and attempt < 2:
                continue
            sys.stderr.write("nccl probe: %s\n" % e)
            return 1
        out.write(json.dumps(res, allow_nan=False) + "\n")
        out.flush()
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
