"""Prints the summary of one bench/megatron/gaps.py result (bench only)."""

import json
import sys

r = json.load(open(sys.argv[1]))
print("  unprofiled fwd-bwd ms:", " ".join("%.2f" % x for x in r["unprofiled_fwd_bwd_ms"]))
for s in r["steps"]:
    print("  wall %.2f busy %.2f idle %.2f tail %.2f kernels %d"
          % (s["wall_ms"], s["busy_ms"], s["idle_ms"], s["tail_ms"], s["kernels"]))
    print("   idle by:", "; ".join("%s %.3f" % (k[:70], v) for k, v in list(s["idle_by_ms"].items())[:6]))
    print("   idle by outer op:", "; ".join("%s %.3f" % (k[:60], v) for k, v in list(s["idle_by_outer_ms"].items())[:6]))
    for g in s["largest_gaps"][:4]:
        print("   gap %.0f us %s | %s | after %s | before %s"
              % (g["us"], g["why"][:50], g["stack"][:80], g["after"][:40], g["before"][:40]))
