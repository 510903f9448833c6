#!/usr/bin/env python3
"""A stand-in for the Megatron-Core worker in Go tests (no torch): speaks
protocol v1 and behaves as FAKE_MODE says: ok, crash, hang, version.
A graphed candidate reports FAKE_GRAPH_MIB ("SLICE,JOB": what its graphs
took over eager on the slice, and that scaled to the stage; default
640,2560); FAKE_RAN ("LAYERS,MICROBATCHES") reports the slice as run;
FAKE_OOM_ABOVE=N runs out of memory on a slice of more than N layers
(8 unless the request says), and FAKE_LOG names a file each request's
candidate and layers are appended to."""
import json, os, sys, time

mode = os.environ.get("FAKE_MODE", "ok")
out = sys.stdout

def send(m):
    out.write(json.dumps(m) + "\n"); out.flush()

if mode == "noimport":
    sys.stderr.write("megatron worker: cannot start: No module named 'megatron'\n")
    sys.exit(3)
send({"v": 2 if mode == "version" else 1, "type": "hello", "engine": "megatron",
      "device": {"index": 0, "name": "Fake GPU", "memory_mib": 1000},
      "framework": {"torch": "2.11", "mcore": "0.20.0", "layer_spec": "local", "world_size": 1},
      "notes": ["fake worker"], "pid": os.getpid()})
for line in sys.stdin:
    req = json.loads(line)
    if req["type"] == "quit":
        break
    if req["type"] != "run":
        continue
    c = req["candidate"]
    if mode == "crash" and c["impl"] != "none":
        os._exit(9)
    if mode == "hang" and c["impl"] != "none":
        time.sleep(60)
    layers = (req.get("opts") or {}).get("layers") or 8
    if os.environ.get("FAKE_LOG"):
        with open(os.environ["FAKE_LOG"], "a") as f:
            f.write("%s %d\n" % (c["impl"], layers))
    if os.environ.get("FAKE_OOM_ABOVE") and layers > int(os.environ["FAKE_OOM_ABOVE"]):
        send({"v": 1, "type": "result", "id": req["id"], "result": {"candidate": c, "source": "framework",
              "error": "the eager baseline failed: OutOfMemoryError: CUDA out of memory.", "error_kind": "oom"}})
        continue
    send({"v": 1, "type": "sample", "id": req["id"], "sample": {"candidate": c["impl"], "phase": "measure", "step": 1, "step_ms": 10}})
    if c["impl"] == "transformer_engine":
        res = {"candidate": c, "source": "framework", "error": "transformer_engine is not importable on this node",
               "error_kind": "unsupported"}
    else:
        step = 100.0 if c["impl"] == "none" else 50.0
        st = {"median_ms": step, "p10_ms": step, "p90_ms": step, "n": 8}
        ea = {"median_ms": 100.0, "p10_ms": 100.0, "p90_ms": 100.0, "n": 8}
        modelled = req["spec"].get("modelled_hint", ["TP 2"])
        if "FAKE_MODELLED" in os.environ:  # e.g. "" at world size 2: TP ran for real
            modelled = [m for m in os.environ["FAKE_MODELLED"].split(",") if m]
        res = {"candidate": c, "source": "framework", "step": st, "eager": ea, "speedup": 100.0 / step,
               "framework": {"torch": "2.11", "mcore": "0.20.0", "layer_spec": "local", "world_size": 1,
                             "modelled": modelled},
               "memory": {"device_base_mib": 500}}
        if c["impl"] != "none":
            graph, job = map(int, os.environ.get("FAKE_GRAPH_MIB", "640,2560").split(","))
            res["memory"].update({"graph_mib": graph, "graph_full_job_mib": job})
        if os.environ.get("FAKE_RAN"):
            ran, mbs = map(int, os.environ["FAKE_RAN"].split(","))
            res["raw"] = {"layers_built": ran, "microbatches_run": mbs}
        if os.environ.get("FAKE_LAYER_MS"):
            # Raw times of a slice whose layer costs EAGER,GRAPHED ms per
            # micro-batch (forward-backward wall), 4 micro-batches, 2 ms outside.
            eager_l, graphed_l = map(float, os.environ["FAKE_LAYER_MS"].split(","))
            n = (req.get("opts") or {}).get("layers") or 1
            per = eager_l if c["impl"] == "none" else graphed_l
            res["raw"] = {"layers_built": n, "microbatches_run": 4, "fwd_bwd_ms": 4 * (2 + n * per),
                          "host_ms": 4 * (1 + n * per), "host_fwd_ms": 2 * (1 + n * per), "opt_ms": 1}
    send({"v": 1, "type": "result", "id": req["id"], "result": res})
