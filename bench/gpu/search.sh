#!/usr/bin/env bash
# Wall time of the cuda engine's headless search of qwen3_30b_a3b (h100
# layout, one rank emulated) with each strategy given (default halving),
# with its ranking, winner and emitted overrides in OUT_DIR.
#
#   bench/gpu/search.sh OUT_DIR ["halving exhaustive"]
#
# Needs: an NVIDIA GPU and bin/cgtune (CGO_ENABLED=1 go build -o bin/cgtune
# ./cmd/cgtune).
set -uo pipefail
out=${1:?usage: bench/gpu/search.sh OUT_DIR ["halving exhaustive"]}
mkdir -p "$out" && out=$(cd "$out" && pwd)
strategies=${2:-halving}
root=$(cd "$(dirname "$0")/../.." && pwd)
for s in $strategies; do
	t0=$(date +%s.%N)
	"$root/bin/cgtune" --headless --engine cuda --model qwen3_30b_a3b --gpu-type h100 --strategy "$s" \
		--emit "$out/qwen-$s.yaml" >"$out/qwen-$s.txt" 2>"$out/qwen-$s.log"
	rc=$?
	t1=$(date +%s.%N)
	echo "== $s: exit $rc, wall $(python3 -c "print(round($t1-$t0, 1))") s"
	cut -c1-150 "$out/qwen-$s.txt" | head -14
	grep -E '^(winner|done|note: budget)' "$out/qwen-$s.txt" "$out/qwen-$s.log"
done
