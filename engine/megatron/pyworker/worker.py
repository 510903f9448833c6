#!/usr/bin/env python3
"""cgtune's Megatron-Core worker.

Speaks cgtune's worker protocol v1 (engine/worker/protocol.go) on stdin and
stdout: a hello first, then for every run request samples and one result.
It imports torch and megatron.core once, without touching the GPU, and runs
each candidate in forked children (one per rank) that own the GPU: a
candidate's graphs, model and memory die with its children, so every
candidate starts from the same baseline, and a crash costs one candidate.

Embedded in the cgtune binary (engine/megatron) and written to the user's
cache under its content hash; standard library + torch + megatron.core
(+ transformer_engine when importable) only.
"""

import argparse
import ctypes
import json
import os
import signal
import socket
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import plan  # noqa: E402  (pure modules next to this file)
import results  # noqa: E402

plan.apply_rank_env(os.environ)  # before torch is imported

VERSION = 1
CHILDREN = []


def reply(out, msg):
    msg["v"] = VERSION
    out.write(json.dumps(msg, allow_nan=False) + "\n")
    out.flush()


def log(msg):
    sys.stderr.write("megatron worker: %s\n" % msg)
    sys.stderr.flush()


def die_with_parent():
    """The child gets SIGKILL when the worker dies (Linux prctl
    PR_SET_PDEATHSIG), so a killed worker never leaves a rank on the GPU."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_children(*_):
    for pid in CHILDREN:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def on_term(*_):
    kill_children()
    os._exit(143)


def fork_ranks(world, target):
    """Forks `world` children; target(rank, write_line) runs in each.
    Returns (pids, read file of rank 0, read files of the others)."""
    pipes = []
    for rank in range(world):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(r)
                die_with_parent()
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                out = os.fdopen(w, "w")

                def write_line(msg, out=out):
                    out.write(json.dumps(msg) + "\n")
                    out.flush()

                target(rank, write_line)
            except BaseException:  # the child must never return into the parent's loop
                traceback.print_exc()
                code = 1
            finally:
                sys.stderr.flush()
                os._exit(code)
        os.close(w)
        CHILDREN.append(pid)
        pipes.append((pid, os.fdopen(r)))
    return pipes


def relay(lines, on_msg):
    """Passes rank 0's messages to on_msg until its output ends; returns
    its last "result" message (None if it sent none). Lines that are not
    JSON (a library printing to the wrong stream) are skipped."""
    final = None
    for line in lines:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("type") == "result":
            final = msg
        else:
            on_msg(msg)
    return final


def run_children(world, target, on_msg):
    """Runs target in `world` forked ranks; relays rank 0's messages to
    on_msg; returns rank 0's last "result" message or a crash description."""
    pipes = fork_ranks(world, target)
    final = relay(pipes[0][1], on_msg)
    statuses = []
    for pid, f in pipes:
        f.close()
        _, status = os.waitpid(pid, 0)
        CHILDREN.remove(pid)
        statuses.append(status)
    if final is None:
        st = next((s for s in statuses if s != 0), statuses[0])
        if os.WIFSIGNALED(st):
            why = "signal %d" % os.WTERMSIG(st)
        else:
            why = "exit status %d" % os.WEXITSTATUS(st)
        return {"type": "crash", "error": "candidate process died (%s) before its result" % why}
    return final


def collect(procs, on_msg):
    """Relays rank 0's lines of spawned ranks; returns its result or a
    crash description."""
    final = relay(procs[0].stdout, on_msg)
    codes = []
    for p in procs:
        p.stdout.read()
        codes.append(p.wait())
        CHILDREN.remove(p.pid)
    if final is None:
        return {"type": "crash", "error": "candidate process died (exit %s) before its result" % codes}
    return final


class Worker:
    def __init__(self, args, out):
        self.args, self.out = args, out
        self.gpus = [int(g) for g in args.gpus.split(",")]
        self.world = args.world_size
        self.eager = {}
        import torch  # noqa: F401  (CUDA stays uninitialised in this process)

        probe = run_children(1, self._probe, lambda m: None)
        if probe.get("type") != "result":
            raise RuntimeError("no usable GPU: " + probe.get("error", "probe failed"))
        self.device = probe["device"]
        culprit = import_framework(probe["properties"])
        import runner

        self.runner = runner
        self.versions = runner.versions()
        self.te = bool(self.versions["te"])
        # Forking after the imports shares them with every rank; a framework
        # that initialises CUDA while it is imported cannot be forked, and
        # each rank is then a fresh interpreter that imports it again.
        self.spawn = torch.cuda.is_initialized()
        self.notes = []
        if self.spawn:
            self.notes.append("megatron.core initialised CUDA while it was imported, so every candidate imports it "
                              "again in fresh processes (slower); first CUDA use: "
                              + (" | ".join(culprit[0].strip().splitlines()[-4:]) if culprit else "unknown"))
            log(self.notes[-1])

    def _probe(self, rank, send):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        gpu = self.gpus[0]
        p = torch.cuda.get_device_properties(gpu)
        props = {k: getattr(p, k) for k in dir(p) if not k.startswith("_")
                 and isinstance(getattr(p, k), (bool, int, float, str))}
        send({"type": "result", "device": device_info(gpu), "properties": props})

    def hello(self):
        reply(self.out, {"type": "hello", "engine": "megatron", "device": self.device, "pid": os.getpid(),
                         "framework": dict(self.versions, layer_spec=plan.layer_spec_name(self.te),
                                           world_size=self.world), "notes": self.notes})

    def serve(self, lines):
        for line in lines:
            line = line.strip()
            if not line:
                continue
            try:
                req = json.loads(line)
            except ValueError as e:
                reply(self.out, {"type": "error", "error": "bad request: %s" % e})
                continue
            if req.get("v") != VERSION:
                reply(self.out, {"type": "error", "id": req.get("id", ""),
                                 "error": "protocol version %r, want %d" % (req.get("v"), VERSION)})
                continue
            kind = req.get("type")
            if kind == "quit":
                return
            if kind == "ping":
                reply(self.out, {"type": "pong", "id": req.get("id", "")})
            elif kind == "run":
                self.run(req)
            else:
                reply(self.out, {"type": "error", "id": req.get("id", ""), "error": "unknown request %r" % kind})

    def run(self, req):
        rid = req.get("id", "")
        try:
            cand = plan.validate_candidate(req.get("candidate"))
        except plan.CandidateError as e:
            reply(self.out, {"type": "error", "id": rid, "error": str(e)})
            return
        res = self.result_for(req.get("spec") or {}, cand, req.get("opts") or {}, rid)
        res.pop("losses", None)
        reply(self.out, {"type": "result", "id": rid, "result": res})

    def result_for(self, spec, cand, opts, rid):
        try:
            layers = int(opts.get("layers") or 0)
            shapes = plan.rank_shapes(spec, self.world, layers or self.args.max_layers, self.args.max_microbatches)
            if layers:
                shapes["layers_built"] = min(layers, shapes["stage_layers"])
        except plan.SpecError as e:
            return results.result(cand, self.device, [], None, error=str(e), error_kind="unsupported")
        if cand["impl"] == "transformer_engine" and not self.te:
            return results.result(cand, self.device, [], None, error_kind="unsupported",
                                  error="transformer_engine is not importable on this node")
        key = json.dumps([spec, shapes["layers_built"]], sort_keys=True)
        opts = dict(opts, compare_steps=plan.compare_steps(opts))
        if key not in self.eager:
            r, runs = self.eager_run(shapes, opts, rid)
            self.eager[key] = {"stats": r.get("step"), "losses": r.get("losses"), "error": r.get("error"),
                               "host": r.get("host_enqueue_ms"),
                               "peak_reserved_mib": (r.get("memory") or {}).get("process_peak_mib"),
                               "pool": results.EagerPool(results.pool_id(key))}
            for run in runs:
                self.eager[key]["pool"].add(run, "eager")
            if cand["impl"] == "none":
                r["eager_host_enqueue_ms"] = r.get("host_enqueue_ms")
                return self.eager[key]["pool"].apply(r)
        eager = self.eager[key]
        if eager.get("error"):
            # An eager baseline out of memory is the slice's: the engine
            # runs a smaller one.
            return results.result(cand, self.device, [], None, error_kind=results.classify_error(eager["error"]),
                                  error="the eager baseline failed: " + eager["error"])
        baseline = {k: v for k, v in eager.items() if k != "pool"}
        baseline["stats"] = eager["pool"].stats()
        r = self.child_run(shapes, cand, opts, baseline, rid)
        r["eager_host_enqueue_ms"] = eager.get("host")
        eager["pool"].add(r, plan.graph_mode(cand))
        return eager["pool"].apply(r)

    def eager_run(self, shapes, opts, rid):
        """The eager baseline: EAGER_PROCESSES runs, each in its own
        processes; one when the first fails. Returns the median one
        (results.median_run) and them all."""
        eager_cand = {"impl": "none", "scopes": [], "warmup": 0}
        runs = [self.child_run(shapes, eager_cand, opts, None, rid)]
        while len(runs) < plan.EAGER_PROCESSES and not runs[0].get("error"):
            runs.append(self.child_run(shapes, eager_cand, opts, None, rid))
        return results.median_run(runs), runs

    def child_run(self, shapes, cand, opts, eager, rid):
        """Runs the candidate on forked (or spawned) ranks. The free port
        picked for the ranks' rendezvous can be taken by someone else before
        rank 0 binds it; that start is retried on another port."""
        for _ in range(3):
            r = self.child_run_once(shapes, cand, opts, eager, rid)
            if "EADDRINUSE" not in (r.get("error") or ""):
                return r
        return r

    def child_run_once(self, shapes, cand, opts, eager, rid):
        port = free_port()
        req = {"candidate": cand, "shapes": shapes, "opts": opts, "te": self.te, "eager": eager,
               "versions": self.versions, "device": self.device}
        label = plan.graph_mode(cand)

        def target(rank, send):
            gpu = self.gpus[rank % len(self.gpus)]
            send({"type": "result", "result": self.runner.run(req, rank, self.world, port, gpu, send)})

        def relay(msg):
            if msg.get("type") == "sample":
                s = msg["sample"]
                s["candidate"] = label
                reply(self.out, {"type": "sample", "id": rid, "sample": s})

        t0 = time.perf_counter()
        if self.spawn:
            msg = collect(spawn_ranks(self.world, json.dumps(req), self.gpus, port), relay)
        else:
            msg = run_children(self.world, target, relay)
        if msg.get("type") != "result":
            return results.result(cand, self.device, [], None, error=msg["error"], error_kind="crash",
                                  wall_ms=(time.perf_counter() - t0) * 1e3)
        return msg["result"]


def device_info(index):
    import torch

    p = torch.cuda.get_device_properties(index)
    free, total = torch.cuda.mem_get_info(index)
    return {"index": index, "name": p.name, "cuda": torch.version.cuda or "",
            "memory_mib": total // (1 << 20), "sms": p.multi_processor_count}


def import_framework(props):
    """Imports megatron.core and the runner without creating a CUDA context
    here, so that ranks can be forked from this process. Some modules ask
    the device's properties while they are imported (e.g. Megatron-LM
    megatron/core/ssm/ops/gdp/common.py and chunk_o.py); they get the
    probe child's answers. Returns where CUDA was first initialised, if it
    was."""
    import types

    import torch

    names = ("get_device_properties", "get_device_capability", "get_device_name", "_lazy_init")
    orig = {n: getattr(torch.cuda, n) for n in names}
    first = []
    ns = types.SimpleNamespace(**props)

    def traced_init():
        if not first:
            first.append("".join(traceback.format_stack(limit=10)[:-1]))
        return orig["_lazy_init"]()

    torch.cuda.get_device_properties = lambda device=None: ns
    torch.cuda.get_device_capability = lambda device=None: (props["major"], props["minor"])
    torch.cuda.get_device_name = lambda device=None: props["name"]
    torch.cuda._lazy_init = traced_init
    try:
        import megatron.core  # noqa: F401  (10-15 s: once per worker)
        import runner  # noqa: F401

        try:
            import transformer_engine  # noqa: F401  (asks the device at import too)
        except Exception:  # absent or broken: the local spec is used
            pass
    finally:
        for n, f in orig.items():
            setattr(torch.cuda, n, f)
    return first


def spawn_ranks(world, req_json, gpus, port):
    """Starts `world` fresh interpreters running one rank each (used when
    the framework cannot be forked). Returns [(pid-like Popen, stdout)]."""
    import subprocess

    procs = []
    for rank in range(world):
        p = subprocess.Popen([sys.executable, "-B", os.path.abspath(__file__), "--rank", str(rank),
                              "--world-size", str(world), "--port", str(port),
                              "--gpus", str(gpus[rank % len(gpus)])],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             preexec_fn=die_with_parent)
        p.stdin.write(req_json)
        p.stdin.close()
        CHILDREN.append(p.pid)
        procs.append(p)
    return procs


def rank_main(args):
    """One spawned rank: reads the run request on stdin, writes lines."""
    req = json.loads(sys.stdin.read())
    out = sys.stdout
    sys.stdout = sys.stderr
    import runner

    def send(msg):
        out.write(json.dumps(msg) + "\n")
        out.flush()

    send({"type": "result", "result": runner.run(req, args.rank, args.world_size, args.port, int(args.gpus), send)})
    return 0


def parse_args(argv):
    p = argparse.ArgumentParser(description="cgtune Megatron-Core worker (protocol v1 on stdin/stdout)")
    p.add_argument("--gpus", default="0", help="GPU indices, one per rank (comma-separated)")
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--max-layers", type=int, default=8)
    p.add_argument("--max-microbatches", type=int, default=4)
    p.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.rank >= 0:
        return rank_main(args)
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    signal.signal(signal.SIGTERM, on_term)
    out = sys.stdout
    # Everything else the framework prints goes to stderr: stdout is the protocol.
    sys.stdout = sys.stderr
    try:
        w = Worker(args, out)
    except Exception as e:
        log("cannot start: %s" % e)
        return 3
    w.hello()
    w.serve(sys.stdin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
