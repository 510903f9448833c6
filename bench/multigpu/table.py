"""Tables of bench/multigpu/run.sh's results (standard library only):
   python3 bench/multigpu/table.py DIR            world size 2 | world size 1 (modelled) | emulated, per case
   python3 bench/multigpu/table.py --halve DIR    --gpu 0 against --gpu 0,1: wall time and winner"""
import json
import os
import sys

CASES = ["dense-tp2-mbs1", "dense-tp2-mbs4", "moe-ep2-mbs1-droppad", "moe-ep2-mbs4-droppad",
         "moe-ep2-mbs1-dropless", "moe-ep2-mbs4-dropless"]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def label(c):
    scopes = ",".join(c.get("scopes") or []) or ("-" if c["impl"] == "none" else "layer")
    return "%s %s" % (c["impl"], scopes)


def by_candidate(done):
    out = {}
    for r in (done or {}).get("ranking") or []:
        res = r["result"]
        out.setdefault(label(res["candidate"]), res)
    return out


def cell(res):
    if res is None:
        return "-"
    if res.get("error"):
        return "failed (%s)" % res.get("error_kind", "")
    return "%8.2f ms %6.3fx" % (res["step"]["median_ms"], res.get("speedup") or 0)


def worlds(d):
    for case in CASES:
        runs = {k: by_candidate(load(os.path.join(d, "%s-%s.json" % (case, k)))) for k in ("ws2", "ws1", "emulated")}
        print("== %s" % case)
        print("  %-28s %-22s %-22s %-22s" % ("candidate", "world size 2", "world size 1 +model", "emulated (profile)"))
        for cand in sorted(set().union(*[set(v) for v in runs.values()])):
            print("  %-28s %-22s %-22s %-22s" % (cand, cell(runs["ws2"].get(cand)), cell(runs["ws1"].get(cand)),
                                                 cell(runs["emulated"].get(cand))))
        prof = load(os.path.join(d, "profile-%s.json" % case)) or {}
        for c in prof.get("collectives") or []:
            print("  exposure at world size %d: eager %.3f ms, graphed %.3f ms per layer and micro-batch" % (
                c["world_size"], c["eager_exposed_host_ms_per_layer"], c["graphed_exposed_host_ms_per_layer"]))
        notes = set()
        for res in runs["emulated"].values():
            notes.update(n for n in res.get("notes") or [] if n.startswith("collective effect"))
        for n in sorted(notes):
            print("  note: " + n[:200])


def halve(d):
    for name in ("single-gpu0", "single-gpu01"):
        done = load(os.path.join(d, name + ".json")) or {}
        try:
            wall = int(open(os.path.join(d, name + ".wall_ms")).read())
        except (OSError, ValueError):
            wall = -1
        w = (done.get("winner") or {}).get("result")
        print("%-14s wall %8.1f s  runs %3s  winner %s" % (name, wall / 1e3, done.get("runs"), label(w["candidate"]) if w else "-"))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--halve":
        halve(sys.argv[2])
    elif len(sys.argv) == 2:
        worlds(sys.argv[1])
    else:
        sys.exit(__doc__)
