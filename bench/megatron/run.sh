#!/usr/bin/env bash
# Issue-8 acceptance on the GPU machine: headless exhaustive searches on the
# real Megatron-Core (fetched Megatron-LM extracted at ./.mlm, git-ignored;
# cgtune built here at ./bin/cgtune). Everything lands in $OUT/bench.tgz.
#   bench/megatron/run.sh one   dense mbs 1/4, moe drop-and-pad mbs 1/4, moe dropless mbs 1
#   bench/megatron/run.sh multi world size 2 (TP2 dense, EP2 moe) and qwen3_30b_a3b layouts
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/.mlm PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}; R=/tmp/bench; mkdir -p $OUT $R
P=bench/megatron/presets
DROPPAD="--set model.moe_expert_capacity_factor=1.0 --set model.moe_pad_expert_input_to_capacity=true"
search() { # name limit args...
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout -s INT -k 10 $limit bin/cgtune --headless --json --engine megatron --strategy exhaustive \
    --run-dir $R/run-$name "$@" >$R/$name.json 2>$R/$name.err
  echo "== $name: rc=$? wall $(( $(date +%s) - t0 )) s"
  tail -2 $R/$name.err | cut -c1-300
}
case "$1" in
one)
  nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
  search dense-mbs1 130 --preset $P/dense-small-mbs1.yaml
  search dense-mbs4 75 --preset $P/dense-small-mbs4.yaml
  search moe-droppad-mbs1 55 --preset $P/moe-small-mbs1.yaml $DROPPAD
  search moe-droppad-mbs4 65 --preset $P/moe-small-mbs4.yaml $DROPPAD
  search moe-dropless-mbs1 45 --preset $P/moe-small-mbs1.yaml
  # qwen3_30b_a3b, default strategy (halving), a 4-layer 2-micro-batch slice scaled to the job
  QS="--strategy halving --budget 60s --max-layers 4 --max-microbatches 2"
  search qwen-h100 90 --model qwen3_30b_a3b --gpu-type h100 $QS
  search qwen-tp2pp2ep4 90 --preset $P/qwen3-tp2pp2ep4.yaml $QS
  ;;
multi)
  for p in dense-small-tp2-mbs1 dense-small-tp2-mbs4; do search $p 70 --preset $P/$p.yaml --gpu 0,1; done
  for p in moe-small-ep2-mbs1 moe-small-ep2-mbs4; do search $p-droppad 70 --preset $P/$p.yaml --gpu 0,1 $DROPPAD; done
  search moe-small-ep2-mbs1-dropless 50 --preset $P/moe-small-ep2-mbs1.yaml --gpu 0,1
  ;;
esac
tar -czf $OUT/bench-$1.tgz -C $R .
