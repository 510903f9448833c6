#!/usr/bin/env bash
# Issue-13 acceptance on a machine with 2 GPUs (nvidia-h200-x2): Megatron-LM
# extracted at ./.mlm (git-ignored, as for bench/megatron/run.sh), cgtune built
# at ./bin/cgtune. Each part fits one device call; results land in
# $OUT/bench-multigpu-PART.tgz (raw JSON, journals, probe and profile output).
#   bench/multigpu/run.sh nccl     cgtune probe --nccl --gpu 0,1, then plain cgtune probe (NCCL part included)
#   bench/multigpu/run.sh worlds [CASE...]   dense-small TP2 mbs 1/4, moe-small EP2 mbs 1/4 (drop-and-pad,
#                                  dropless): world size 2, world size 1 with modelled collectives, the
#                                  framework profile with its collective exposure, the calibrated emulation;
#                                  table of every case run so far. CASE: dense-tp2-mbs1 dense-tp2-mbs4
#                                  moe-ep2-mbs1-droppad moe-ep2-mbs4-droppad moe-ep2-mbs1-dropless
#                                  moe-ep2-mbs4-dropless (default all; two per call fit a 10-minute call)
#   bench/multigpu/run.sh halve    single-rank candidates: --gpu 0 against --gpu 0,1 --ranks 1 (wall, winner)
cd "$(dirname "$0")/../.."
part=$1
export PYTHONPATH=$PWD/.mlm PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}; R=/tmp/bench13; mkdir -p $OUT $R
# One cache for the whole session: the NCCL probe and the profiles the later parts read.
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/bench13-cache}
P=bench/megatron/presets
DROPPAD="--set model.moe_expert_capacity_factor=1.0 --set model.moe_pad_expert_input_to_capacity=true"
search() { # name limit args...
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s%N)
  timeout -s INT -k 10 $limit bin/cgtune --headless --json --strategy exhaustive \
    --run-dir $R/run-$name "$@" >$R/$name.json 2>$R/$name.err
  local rc=$? ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo $ms >$R/$name.wall_ms
  echo "== $name: rc=$rc wall $ms ms"
  tail -2 $R/$name.err | cut -c1-300
}
case "$part" in
nccl)
  nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
  timeout 300 bin/cgtune probe --nccl --gpu 0,1 --refresh | tee $R/probe-nccl.txt; echo "rc=${PIPESTATUS[0]}"
  timeout 300 bin/cgtune probe | tee $R/probe.txt; echo "rc=${PIPESTATUS[0]}"
  ;;
worlds)
  nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
  shift; want=" $* "
  for c in "dense-tp2-mbs1 dense-small-tp2-mbs1" "dense-tp2-mbs4 dense-small-tp2-mbs4" \
           "moe-ep2-mbs1-droppad moe-small-ep2-mbs1 DROPPAD" "moe-ep2-mbs4-droppad moe-small-ep2-mbs4 DROPPAD" \
           "moe-ep2-mbs1-dropless moe-small-ep2-mbs1" "moe-ep2-mbs4-dropless moe-small-ep2-mbs4"; do
    set -- $c; name=$1; preset=$P/$2.yaml; sets=""; [ "$3" = DROPPAD ] && sets=$DROPPAD
    [ "$want" = "  " ] || [[ "$want" == *" $name "* ]] || continue
    search $name-ws2 90 --engine megatron --preset $preset --gpu 0,1 $sets
    search $name-ws1 90 --engine megatron --preset $preset --gpu 0 --ranks 1 $sets
    timeout -s INT 120 bin/cgtune probe --framework --preset $preset --gpu 0,1 $sets >$R/profile-$name.txt 2>&1
    echo "== profile $name: rc=$?"; grep -E "collective exposure|saved" $R/profile-$name.txt
    prof=$(sed -n 's/^saved //p' $R/profile-$name.txt); [ -n "$prof" ] && cp "$prof" $R/profile-$name.json
    search $name-emulated 60 --engine estimate --estimate-gpu h200 --preset $preset $sets
  done
  python3 bench/multigpu/table.py $R | tee $R/table.txt
  ;;
halve)
  nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
  search single-gpu0 240 --engine megatron --preset $P/dense-small-mbs1.yaml --gpu 0
  search single-gpu01 240 --engine megatron --preset $P/dense-small-mbs1.yaml --gpu 0,1 --ranks 1
  python3 bench/multigpu/table.py --halve $R | tee $R/halve.txt
  ;;
*) echo "usage: $0 nccl|worlds|halve" >&2; exit 2 ;;
esac
tar -czf $OUT/bench-multigpu-$part.tgz -C $R .
