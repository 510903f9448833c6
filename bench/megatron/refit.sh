#!/usr/bin/env bash
# Re-fits a call's framework profiles with this cgtune's fit, from the runs
# `cgtune probe --framework` printed in that call (bench/refit), and prints
# the three-way tables against the same call's megatron searches: the
# estimate engine here (no GPU), the cuda engine too with GPU=0 on the GPU
# machine. The re-fitted profiles land in CALL/refit/.
#   bench/megatron/refit.sh bench/results/megatron-h200/s10-call3 [GPU]
set -euo pipefail
cd "$(dirname "$0")/../.."
call=$1 gpu=${2:-}
mkdir -p $call/refit
for name in dense-mbs1 moe-droppad-mbs1 dense-mbs4 moe-droppad-mbs4; do
  [ -f $call/profile-$name.txt ] && [ -f $call/$name.json ] || continue
  preset=$(echo $name | sed 's/^moe-droppad-/moe-small-/; s/^dense-/dense-small-/')
  args=(--preset bench/megatron/presets/$preset.yaml)
  [[ $name == moe-* ]] && args+=(--drop-pad)
  if [ -n "$gpu" ]; then args+=(--gpu $gpu); else args+=(--no-cuda); fi
  cache=$(mktemp -d)
  prof=$(bin/refit --probe-output $call/profile-$name.txt --profile $call/profile-$name.json --cache $cache | sed 's/^saved //')
  cp $prof $call/refit/profile-$name.json
  out=$call/refit/threeway-$name${gpu:+-gpu}
  echo "== $name (profile re-fitted from $call/profile-$name.txt)"
  bin/threeway --profile $prof --megatron $call/$name.json "${args[@]}" --json $out.json >$out.txt 2>&1 || true
  cat $out.txt
  rm -rf $cache
done
