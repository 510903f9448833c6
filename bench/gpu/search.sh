#!/usr/bin/env bash
# Headless search on the GPU for qwen3_30b_a3b (h100 layout, one rank
# emulated) with the given strategies, timing each by wall clock.
# Usage: bench/gpu/search.sh OUTDIR "halving exhaustive"
set -uo pipefail
out=${1:?outdir}
strategies=${2:-halving}
root=$(cd "$(dirname "$0")/../.." && pwd)
for s in $strategies; do
	t0=$(date +%s.%N)
	"$root/bin/cgtune" --headless --model qwen3_30b_a3b --gpu-type h100 --strategy "$s" \
		--emit "$out/qwen-$s.yaml" >"$out/qwen-$s.txt" 2>"$out/qwen-$s.log"
	rc=$?
	t1=$(date +%s.%N)
	echo "== $s: exit $rc, wall $(python3 -c "print(round($t1-$t0, 1))") s"
	cut -c1-150 "$out/qwen-$s.txt" | head -14
	grep -E '^(winner|done|note: budget)' "$out/qwen-$s.txt" "$out/qwen-$s.log"
done
