#!/usr/bin/env bash
# Re-fits framework profiles with this cgtune's fit, from the runs that
# `cgtune probe --framework` printed (bench/refit), and prints the
# three-way tables against the megatron searches measured with them: the
# estimate engine anywhere, the cuda engine too when GPU is given (on a GPU
# machine).
#
#   bench/megatron/refit.sh DATA_DIR OUT_DIR [GPU]
#
# DATA_DIR holds, per case NAME (a bench/megatron/run.sh three-way case),
# what `bench/megatron/run.sh three-way NAME` writes: profile-NAME.txt
# (what probe printed), profile-NAME.json (the profile it saved) and
# NAME.json (the megatron search); so does the three-way folder of
# docs/data/emulation-accuracy-2026-12-01.tgz, for every case.
# OUT_DIR (created) receives each re-fitted profile-NAME.json and
# threeway-NAME.txt/.json (threeway-NAME-gpu.* with GPU).
#
# Needs, built in the repository root: go build -o bin/refit ./bench/refit
# and go build -o bin/threeway ./bench/threeway (CGO_ENABLED=1 for GPU).
set -euo pipefail
[ $# -ge 2 ] && [ $# -le 3 ] || { sed -n '8p' "$0" | sed 's/^# *//' >&2; exit 2; }
data=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
gpu=${3:-}
cd "$(dirname "$0")/../.."
for b in refit threeway; do
	[ -x bin/$b ] || { echo "refit.sh: no bin/$b (go build -o bin/$b ./bench/$b)" >&2; exit 2; }
done
found=0
for txt in "$data"/profile-*.txt; do
	name=$(basename "$txt" .txt)
	name=${name#profile-}
	[ -f "$data/profile-$name.json" ] && [ -f "$data/$name.json" ] || continue
	found=$((found + 1))
	case $name in
	qwen-h100-droppad) args=(--model qwen3_30b_a3b --gpu-type h100 --drop-pad) ;;
	moe-small-*-droppad) args=(--preset "bench/megatron/presets/${name%-droppad}.yaml" --drop-pad) ;;
	dense-small-*) args=(--preset "bench/megatron/presets/$name.yaml") ;;
	*) echo "refit.sh: $txt: not a three-way case (dense-small-mbs1, dense-small-mbs4, moe-small-mbs1-droppad, moe-small-mbs4-droppad, qwen-h100-droppad)" >&2; exit 2 ;;
	esac
	if [ -n "$gpu" ]; then args+=(--gpu "$gpu"); else args+=(--no-cuda); fi
	cache=$(mktemp -d)
	prof=$(bin/refit --probe-output "$data/profile-$name.txt" --profile "$data/profile-$name.json" --cache "$cache" | sed 's/^saved //')
	cp "$prof" "$out/profile-$name.json"
	table=$out/threeway-$name${gpu:+-gpu}
	echo "== $name (profile re-fitted from $data/profile-$name.txt)"
	bin/threeway --profile "$prof" --megatron "$data/$name.json" "${args[@]}" --json "$table.json" >"$table.txt" 2>&1 || true
	cat "$table.txt"
	rm -rf "$cache"
done
[ $found -gt 0 ] || { echo "refit.sh: no profile-NAME.txt, profile-NAME.json and NAME.json in $data" >&2; exit 2; }
