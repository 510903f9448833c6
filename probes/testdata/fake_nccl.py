#!/usr/bin/env python3
"""A stand-in for the NCCL probe in Go tests (no torch, no GPU): it is run
as `python -B -c SCRIPT --gpus LIST` and behaves as FAKE_NCCL says:
ok (a report over the asked GPUs), fail (a rank error), garbage, nan."""
import json, os, sys

mode = os.environ.get("FAKE_NCCL", "ok")
args = sys.argv[1:]
gpus = [int(g) for g in args[args.index("--gpus") + 1].split(",")]
n = len(gpus)
if mode == "fail":
    sys.stderr.write("Traceback ...\nnccl probe: rank 1: NCCL error: unhandled system error\n")
    sys.exit(1)
if mode == "garbage":
    print("not json")
    sys.exit(0)
# Times chosen so the bandwidths are round: 256 MiB in 1 ms, 1 KiB in 10 us
# (20 us for all-gather and reduce-scatter).
factor = {"all_reduce": 2.0 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
          "all_to_all": (n - 1) / n, "send_recv": 1.0}
ops = []
for op, f in factor.items():
    small = 20.0 if op in ("all_gather", "reduce_scatter") else 10.0
    big_s = 2e-3 if op == "reduce_scatter" else 1e-3
    pts = [{"bytes": 1024, "time_us": small, "algbw_gbps": 1024 / small / 1e3, "busbw_gbps": 1024 / small / 1e3 * f},
           {"bytes": 256 << 20, "time_us": big_s * 1e6, "algbw_gbps": (256 << 20) / big_s / 1e9,
            "busbw_gbps": (256 << 20) / big_s / 1e9 * f}]
    ops.append({"op": op, "points": pts, "busbw_gbps": pts[-1]["busbw_gbps"], "latency_us": pts[0]["time_us"]})
if mode == "nan":
    ops[1]["busbw_gbps"] = 0
sys.stderr.write("NCCL INFO chatter on stderr\n")
print(json.dumps({"torch": "2.11.0", "nccl": "2.27.3", "world_size": n, "gpus": gpus,
                  "device": "NVIDIA H200", "dtype": "float32", "ops": ops,
                  "env_nvls": os.environ.get("NCCL_NVLS_ENABLE", "unset")}))
