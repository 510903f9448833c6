"""Writes worker protocol requests for a smoke run of the Megatron-Core
worker without the Go binary (bench/megatron/smoke.sh)."""
import json, sys

def spec(moe=None, mbs=1, tp=1, ep=1, num_gpus=1):
    arch = {"layers": 8, "hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_groups": 4, "head_dim": 128,
            "vocab": 32000, "activation": "swiglu"}
    opts = {}
    if moe:
        arch.update(hidden=1024, heads=16, kv_groups=4, head_dim=64, ffn_hidden=4096,
                    moe={"experts": 32, "top_k": 8, "ffn_hidden": 384})
        opts["dropless"] = moe == "dropless"
    return {"model": {"name": "moe-small" if moe else "dense-small", "arch": arch},
            "layout": {"num_gpus": num_gpus, "tp": tp, "pp": 1, "cp": 1, "ep": ep, "gbs": 4 * mbs * max(1, num_gpus // tp),
                       "mbs": mbs, "seq": 1024, "dispatcher": "alltoall", "precision": "bf16"},
            "options": opts}

cands = [("none", [], 0), ("local", [], 1), ("local", ["attn"], 1), ("local", ["full_iteration"], 1)]
which = sys.argv[1] if len(sys.argv) > 1 else "dense"
n = 0
def out(s, c):
    global n
    n += 1
    print(json.dumps({"v": 1, "type": "run", "id": "c%d" % n, "spec": s,
                      "candidate": {"impl": c[0], "scopes": c[1], "warmup": c[2]}, "opts": {"measured_steps": 6}}))
if which == "dense":
    for c in cands: out(spec(), c)
elif which == "moe":
    for c in cands: out(spec("droppad"), c)
    for c in cands[:2] + [("local", ["full_iteration"], 1)]: out(spec("dropless"), c)
elif which == "tp2":
    for c in [cands[0], cands[1], cands[3]]: out(spec(tp=2, num_gpus=2), c)
elif which == "bad":
    out(spec(), ("banana", [], 0))
    out(spec(), ("transformer_engine", ["attn"], 1))
print(json.dumps({"v": 1, "type": "quit"}))
