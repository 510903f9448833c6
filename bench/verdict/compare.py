"""Sets each verdict search's winner against the framework's own
whole-model runs of the same preset measured before and after it
(bench/verdict/run.sh): the winner's speed-up on the slice, the whole
model's (the mean of the runs' eager steps over the mean of the winner
mode's), the error, and how far the whole model's own runs moved.

  python3 bench/verdict/compare.py OUT_DIR [PRESET...]
"""

import glob
import json
import os
import sys


def mode_of(cand):
    if cand.get("impl") == "none":
        return "none"
    if "full_iteration" in (cand.get("scopes") or []):
        return "full_iteration"
    return "local" if not cand.get("scopes") else None


def reference_steps(path):
    """Whole-model step times (forward-backward + optimizer) by mode."""
    out = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("error") or r.get("skipped") or not r.get("fwd_bwd_ms"):
            continue
        out.setdefault(r["mode"], []).append(r["fwd_bwd_ms"] + r["opt_ms"])
    return out


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


def row(out_dir, preset):
    d = json.load(open(os.path.join(out_dir, preset + ".json")))
    win = (d.get("winner") or {}).get("result") or {}
    cand = win.get("candidate") or {}
    mode = mode_of(cand)
    ref = {}
    for p in sorted(glob.glob(os.path.join(out_dir, "reference-%s-*.jsonl" % preset))):
        for m, xs in reference_steps(p).items():
            ref.setdefault(m, []).extend(xs)
    eager, graphed = ref.get("none", []), ref.get(mode, [])
    whole = mean(eager) / mean(graphed) if eager and graphed else 0.0
    sp = win.get("speedup", 0.0)
    return {
        "preset": preset,
        "winner": "%s %s w%d" % (cand.get("impl"), ",".join(cand.get("scopes") or []) or "layer", cand.get("warmup", 0)),
        "slice_speedup": sp, "slice_eager_ms": (win.get("eager") or {}).get("median_ms"),
        "slice_step_ms": (win.get("step") or {}).get("median_ms"),
        "whole_eager_ms": eager, "whole_step_ms": graphed, "whole_speedup": whole,
        "error": sp / whole - 1 if whole else None,
    }


def main(argv):
    out_dir = argv[1]
    presets = argv[2:] or sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(out_dir, "*.json"))
                                 if not os.path.basename(p).startswith("cases-"))
    print("%-18s %-26s %8s %8s %9s %s" % ("preset", "winner", "slice", "whole", "error", "whole-model runs (eager | winner mode), ms"))
    for p in presets:
        try:
            r = row(out_dir, p)
        except (OSError, ValueError, KeyError) as e:
            print("%-18s no result: %s" % (p, e))
            continue
        err = "%+.1f%%" % (100 * r["error"]) if r["error"] is not None else "-"
        print("%-18s %-26s %7.3fx %7.3fx %9s %s | %s" % (
            p, r["winner"], r["slice_speedup"], r["whole_speedup"], err,
            " ".join("%.1f" % x for x in r["whole_eager_ms"]), " ".join("%.1f" % x for x in r["whole_step_ms"])))


if __name__ == "__main__":
    main(sys.argv)
