#!/usr/bin/env bash
# Launch-cost benchmark: cgtune's eager launch path and graph replay against
# the C reference (ref.c), measured in the same run, interleaved five times
# each; prints medians and the ratios cgtune/C (PASS when both are at most
# 1.05).
#
#   bench/launch/run.sh bin/cgtune engine/cuda/kernels/kernels.ptx
#
# Needs: an NVIDIA GPU, nvcc, and bin/cgtune (CGO_ENABLED=1 go build -o
# bin/cgtune ./cmd/cgtune). Prints to stdout (bench/gpu/run.sh keeps it).
set -euo pipefail
cgtune=${1:?cgtune binary}
ptx=${2:?kernels.ptx}
here=$(cd "$(dirname "$0")" && pwd)
ref=$(mktemp -d)/ref
nvcc -O2 -o "$ref" "$here/ref.c" -lcuda
out=$(mktemp)
for i in 1 2 3 4 5; do
	echo "C $("$ref" "$ptx")" >>"$out"
	echo "cgtune $(CGTUNE_PTX=$ptx "$cgtune" probe --launch-only --json)" >>"$out"
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = {"C": [], "cgtune": []}
for line in open(sys.argv[1]):
    who, js = line.split(" ", 1)
    rows[who].append(json.loads(js))
def med(who, key):
    return statistics.median(r[key] for r in rows[who])
print(f"{'metric':<16}{'C (us)':>10}{'cgtune (us)':>13}{'ratio':>8}")
worst = 0
for key in ("launch_us", "graph_node_us"):
    c, g = med("C", key), med("cgtune", key)
    worst = max(worst, g / c)
    print(f"{key:<16}{c:>10.3f}{g:>13.3f}{g / c:>8.3f}")
print("PASS" if worst <= 1.05 else "FAIL", f"(worst ratio {worst:.3f}, limit 1.05)")
PY
