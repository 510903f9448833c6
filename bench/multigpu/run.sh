#!/usr/bin/env bash
# Benchmarks on two GPUs of one host (NVLink; NCCL with NVLink multicast off).
#
#   bench/multigpu/run.sh nccl OUT_DIR
#       cgtune probe --nccl --gpu 0,1, then plain cgtune probe (NCCL part
#       included): bus bandwidth and latency per collective.
#   bench/multigpu/run.sh worlds OUT_DIR [CASE...]
#       Per case: the megatron engine's exhaustive search at world size 2,
#       the same at world size 1 with the collectives modelled, the
#       framework profile with its collective exposure (probe --framework
#       --gpu 0,1) and the calibrated estimate; then the table of every case
#       in OUT_DIR (bench/multigpu/table.py). CASE: dense-tp2-mbs1
#       dense-tp2-mbs4 moe-ep2-mbs1-droppad moe-ep2-mbs4-droppad
#       moe-ep2-mbs1-dropless moe-ep2-mbs4-dropless (default: all, about 40
#       minutes on two H200s).
#   bench/multigpu/run.sh halve OUT_DIR
#       Single-rank candidates of dense-small mbs 1: --gpu 0 against
#       --gpu 0,1 --ranks 1 (wall time, runs per GPU, winner).
#
# Needs: two GPUs, torch with CUDA and NCCL, Megatron-LM's megatron/ package
# in $MLM (default ./.mlm, git-ignored), and bin/cgtune built in the
# repository root (CGO_ENABLED=1 go build -o bin/cgtune ./cmd/cgtune).
# Results (raw JSON, run folders, probe and profile output) go to OUT_DIR,
# created if missing; its cache/ keeps the NCCL probe the later parts use.
cd "$(dirname "$0")/../.."
usage() { sed -n '2,/^cd /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
part=${1:-}
[ $# -ge 2 ] || usage
case "$part" in nccl | worlds | halve) ;; *) usage ;; esac
[ -x bin/cgtune ] || { echo "run.sh: no bin/cgtune (CGO_ENABLED=1 go build -o bin/cgtune ./cmd/cgtune)" >&2; exit 2; }
mkdir -p "$2" && R=$(cd "$2" && pwd) || exit 2
shift 2
export PYTHONPATH=${MLM:-$PWD/.mlm} PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 XDG_CACHE_HOME=$R/cache
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
  want=" $* "
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
esac
echo "results: $R"
