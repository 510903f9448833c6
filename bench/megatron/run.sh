#!/usr/bin/env bash
# Issue-8 acceptance on the GPU machine: headless exhaustive searches on the
# real Megatron-Core (fetched Megatron-LM extracted at ./.mlm, git-ignored;
# cgtune built here at ./bin/cgtune). Everything lands in $OUT/bench.tgz.
#   bench/megatron/run.sh one   dense mbs 1/4, moe drop-and-pad and dropless mbs 1/4
#   bench/megatron/run.sh qwen  qwen3_30b_a3b's h100 and TP2 PP2 EP4 layouts
#   bench/megatron/run.sh multi world size 2 (TP2 dense, EP2 moe)
#   bench/megatron/run.sh callN this repository's session-8 calls (results in
#                               bench/results/megatron-h200/s8-callN)
#   bench/megatron/run.sh s9-callN  session 9's calls (results in s9-callN; call 4 was
#                               not run); s10-callN session 10's (results in s10-callN); s11-callN session 11's (results in s11-callN).
#   DEADLINE=SECONDS (default 560) bounds the s9/s10 calls: steps are cut to fit
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
# profile NAME THREEWAY-MEGATRON-JSON PRESET-ARGS...: the framework profile
# of a preset (cgtune probe --framework), then the three-way comparison of
# the megatron engine's results with the calibrated cuda (this GPU) and
# estimate engines from that profile.
profile() {
  local name=$1 mj=$2; shift 2
  local t0=$(date +%s)
  timeout -s INT 150 bin/cgtune probe --framework "$@" >$R/profile-$name.txt 2>&1
  echo "== profile $name: rc=$? wall $(( $(date +%s) - t0 )) s"; tail -9 $R/profile-$name.txt | cut -c1-300
  local prof=$(sed -n 's/^saved //p' $R/profile-$name.txt)
  [ -n "$prof" ] && cp "$prof" $R/profile-$name.json || return
  local tw=()
  for a in "$@"; do case "$a" in *capacity_factor*) tw+=(--drop-pad);; --set|*=*) ;; *) tw+=("$a");; esac; done
  t0=$(date +%s)
  timeout -s INT 90 bin/threeway --profile "$prof" --megatron "$mj" "${tw[@]}" --gpu 0 \
    --json $R/threeway-$name.json >$R/threeway-$name.txt 2>&1
  echo "== threeway $name: rc=$? wall $(( $(date +%s) - t0 )) s"; cat $R/threeway-$name.txt
}
# Session 9: every step gets what is left of the call's deadline (START +
# DEADLINE seconds) when that is less than its own limit, and is skipped
# when under 20 s are left, so the tarball always comes back.
START=$(date +%s); DEADLINE=${DEADLINE:-560}
left() { local l=$(( START + DEADLINE - $(date +%s) )); (( l < $1 )) && echo $l || echo $1; }
step() { # limit command...: runs command under `timeout` with what is left
  local l=$(left $1); shift
  (( l < 20 )) && { echo "== skipped (deadline): $*" | cut -c1-200; return 1; }
  timeout -s INT -k 10 $l "$@"
}
search9() { # name limit args...: search() under the deadline
  local name=$1 limit=$2; shift 2
  local l=$(left $limit); (( l < 20 )) && { echo "== skipped (deadline): search $name"; return; }
  search $name $l "$@"
  python3 bench/megatron/table.py $R/run-$name/journal.jsonl | grep -v "note: \(collectives\|python gc\|last step\)" | cut -c1-260
}
profile9() { # name megatron-json preset [--drop-pad]: probe --framework, then the three-way table
  local name=$1 mj=$2 preset=$3; shift 3
  local sets=(); [ "$1" = --drop-pad ] && sets=($DROPPAD)
  local t0=$(date +%s)
  step 150 bin/cgtune probe --framework --preset $P/$preset.yaml "${sets[@]}" >$R/profile-$name.txt 2>&1
  echo "== profile $name: rc=$? wall $(( $(date +%s) - t0 )) s"; cut -c1-250 $R/profile-$name.txt
  local prof=$(sed -n 's/^saved //p' $R/profile-$name.txt)
  [ -n "$prof" ] && cp "$prof" $R/profile-$name.json || return
  [ -f "$mj" ] || { echo "== threeway $name: no megatron results"; return; }
  t0=$(date +%s)
  step 90 bin/threeway --profile "$prof" --megatron "$mj" --preset $P/$preset.yaml "$@" --gpu 0 \
    --json $R/threeway-$name.json >$R/threeway-$name.txt 2>&1
  echo "== threeway $name: rc=$? wall $(( $(date +%s) - t0 )) s"; cat $R/threeway-$name.txt
}
# table9 NAME PRESET LIMIT BUDGET [--drop-pad]: one three-way table on a
# halving search and a profile measured one after the other in this call.
table9() {
  local name=$1 preset=$2 limit=$3 budget=$4; shift 4
  local sets=(); [ "$1" = --drop-pad ] && sets=($DROPPAD)
  search9 $name $limit --preset $P/$preset.yaml "${sets[@]}" --strategy halving --budget $budget
  profile9 $name $R/$name.json $preset "$@"
}
# table12 NAME PRESET LIMIT BUDGET [--drop-pad]: a halving search that
# measures the framework profile first (none is cached on a fresh
# machine; its eager runs are the search's eager baseline), then the
# three-way table on the search's results and that profile.
table12() {
  local name=$1 preset=$2 limit=$3 budget=$4; shift 4
  local sets=(); [ "$1" = --drop-pad ] && sets=($DROPPAD)
  search9 $name $limit --preset $P/$preset.yaml "${sets[@]}" --strategy halving --budget $budget
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{\"event\":\"prepare\""): print(json.loads(l)["message"])' $R/$name.err >$R/profile-$name.txt
  cut -c1-250 $R/profile-$name.txt
  local prof=$(sed -n 's/^framework profile: saved //p' $R/profile-$name.txt)
  [ -n "$prof" ] && cp "$prof" $R/profile-$name.json || { echo "== threeway $name: no profile saved"; return; }
  local t0=$(date +%s)
  step 90 bin/threeway --profile "$prof" --megatron $R/$name.json --preset $P/$preset.yaml "$@" --gpu 0 \
    --json $R/threeway-$name.json >$R/threeway-$name.txt 2>&1
  echo "== threeway $name: rc=$? wall $(( $(date +%s) - t0 )) s"; cat $R/threeway-$name.txt
}
F=bench/results/megatron-h200/final
# cudasearch9 LIMIT [LABEL]: the calibrated cuda engine's exhaustive search
# of dense mbs 1 (the tie-break acceptance) under the deadline, with the
# profile cached in $XDG_CACHE_HOME.
cudasearch9() {
  local t0=$(date +%s)
  step $1 bin/cgtune --headless --engine cuda --strategy exhaustive --preset $P/dense-small-mbs1.yaml \
    --run-dir $R/run-cuda-dense-mbs1 >$R/cuda-dense-mbs1.txt 2>$R/cuda-dense-mbs1.err
  echo "== cuda search dense mbs1$2: rc=$? wall $(( $(date +%s) - t0 )) s"; sed -n '1,14p;/^winner/,/^why/p' $R/cuda-dense-mbs1.txt
}
# gputests9 LIMIT: the cuda engine's GPU tests under the deadline.
gputests9() {
  local t0=$(date +%s)
  (cd engine/cuda && step $1 ../../bin/cuda-gpu.test -test.v -test.timeout $(( $1 - 10 ))s) >$R/cuda-gpu-tests.txt 2>&1
  echo "== cuda GPU tests: rc=$? wall $(( $(date +%s) - t0 )) s"
  grep -E "^(--- |ok|FAIL|PASS|panic)" $R/cuda-gpu-tests.txt | tail -40
}
# refit9 CALL LIMIT: a committed call's profiles re-fitted and its
# three-way tables with the cuda engine (bench/megatron/refit.sh), kept in
# refit-CALL.
refit9() {
  step $2 bash bench/megatron/refit.sh $S/$1 0; cp -r $S/$1/refit $R/refit-$1
}
case "$1" in
s9-call1)
  # Session 9, first call: the workers now run with Python's automatic gc
  # off, as Megatron-Bridge's recipes train (manual_gc). Issue 9's
  # three-way tables for the two mbs 4 presets, on megatron results and
  # profiles measured in this call, then issue 8's dense mbs 1 search.
  export XDG_CACHE_HOME=$R/cache
  {
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
  search9 dense-mbs4 75 --preset $P/dense-small-mbs4.yaml
  search9 moe-droppad-mbs4 80 --preset $P/moe-small-mbs4.yaml $DROPPAD
  profile9 dense-mbs4 $R/dense-mbs4.json dense-small-mbs4
  profile9 moe-droppad-mbs4 $R/moe-droppad-mbs4.json moe-small-mbs4 --drop-pad
  search9 dense-mbs1 130 --preset $P/dense-small-mbs1.yaml
  } 2>&1 | tee $OUT/progress.txt
  ;;
s9-call2)
  # Session 9, second call: issue 9's mbs 1 three-way tables, each on a
  # megatron search and a profile measured in this call (the host's speed
  # differs between calls: dense mbs 1's eager host time was 178 ms in
  # session 8 and 232 ms in call 1), dense mbs 4's again with the cuda
  # engine under the overlap tie rule, then issue 8's dropless MoE with the
  # captures predicted to fail run anyway.
  export XDG_CACHE_HOME=$R/cache
  S=bench/results/megatron-h200/s9-call1
  {
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
  search9 dense-mbs1 110 --preset $P/dense-small-mbs1.yaml
  profile9 dense-mbs1 $R/dense-mbs1.json dense-small-mbs1
  search9 moe-droppad-mbs1 60 --preset $P/moe-small-mbs1.yaml $DROPPAD
  profile9 moe-droppad-mbs1 $R/moe-droppad-mbs1.json moe-small-mbs1 --drop-pad
  t0=$(date +%s)
  step 40 bin/threeway --profile $S/profile-dense-mbs4.json --megatron $S/dense-mbs4.json --preset $P/dense-small-mbs4.yaml \
    --gpu 0 --json $R/threeway-dense-mbs4.json >$R/threeway-dense-mbs4.txt 2>&1
  echo "== threeway dense-mbs4 (call 1's profile and results): rc=$? wall $(( $(date +%s) - t0 )) s"; cat $R/threeway-dense-mbs4.txt
  search9 moe-dropless-mbs1 60 --preset $P/moe-small-mbs1.yaml --run-predicted-failures
  search9 moe-dropless-mbs4 70 --preset $P/moe-small-mbs4.yaml --run-predicted-failures
  } 2>&1 | tee $OUT/progress.txt
  ;;
s9-call3)
  # Session 9, third call: issue 9's four three-way tables with profiles
  # fitted at 1 layer and at the 8 the engine builds, each on a megatron
  # search (halving: every impl×scope measured, warm-ups derived) and a
  # profile measured in this call, one preset after the other.
  export XDG_CACHE_HOME=$R/cache
  {
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
  table9 dense-mbs1 dense-small-mbs1 50 30s
  table9 moe-droppad-mbs4 moe-small-mbs4 70 45s --drop-pad
  table9 moe-droppad-mbs1 moe-small-mbs1 60 35s --drop-pad
  table9 dense-mbs4 dense-small-mbs4 55 30s
  } 2>&1 | tee $OUT/progress.txt
  ;;
s9-call4)
  # Session 9, fourth call: issue 8's qwen3_30b_a3b searches (default
  # strategy) with the final ranking code, then, as far as the call's time
  # goes, issue 9's qwen table on what this node can run: without
  # Transformer Engine no local graph captures qwen's dropless dispatch,
  # so the three-way runs qwen's h100 layout with drop-and-pad experts.
  export XDG_CACHE_HOME=$R/cache
  Q="--model qwen3_30b_a3b --gpu-type h100"
  {
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
  search9 qwen-h100 100 $Q --strategy halving --budget 60s
  search9 qwen-tp2pp2ep4 80 --preset $P/qwen3-tp2pp2ep4.yaml --strategy halving --budget 40s
  search9 qwen-h100-droppad 100 $Q $DROPPAD --strategy halving --budget 60s
  t0=$(date +%s)
  step 150 bin/cgtune probe --framework $Q $DROPPAD >$R/profile-qwen-h100-droppad.txt 2>&1
  echo "== profile qwen-h100-droppad: rc=$? wall $(( $(date +%s) - t0 )) s"; cut -c1-250 $R/profile-qwen-h100-droppad.txt
  prof=$(sed -n 's/^saved //p' $R/profile-qwen-h100-droppad.txt)
  if [ -n "$prof" ]; then
    cp "$prof" $R/profile-qwen-h100-droppad.json; t0=$(date +%s)
    step 120 bin/threeway --profile "$prof" --megatron $R/qwen-h100-droppad.json $Q --drop-pad --gpu 0 \
      --json $R/threeway-qwen-h100-droppad.json >$R/threeway-qwen-h100-droppad.txt 2>&1
    echo "== threeway qwen-h100-droppad: rc=$? wall $(( $(date +%s) - t0 )) s"; cat $R/threeway-qwen-h100-droppad.txt
  fi
  } 2>&1 | tee $OUT/progress.txt
  ;;
s9-call5)
  # Session 9, last call: the workers now also run with OMP_NUM_THREADS=1
  # (as torchrun gives the ranks of a node). Issue 9's two tables that
  # failed in call 3 (dense mbs 1, drop-and-pad moe mbs 1), each on a
  # search and a profile measured here, then issue 8's qwen3_30b_a3b
  # searches with the final code.
  export XDG_CACHE_HOME=$R/cache
  Q="--model qwen3_30b_a3b --gpu-type h100"
  {
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
  table9 dense-mbs1 dense-small-mbs1 50 30s
  table9 moe-droppad-mbs1 moe-small-mbs1 60 35s --drop-pad
  search9 qwen-h100 100 $Q --strategy halving --budget 60s
  search9 qwen-tp2pp2ep4 80 --preset $P/qwen3-tp2pp2ep4.yaml --strategy halving --budget 40s
  } 2>&1 | tee $OUT/progress.txt
  ;;
s10-call1|s10-call3)
  # Session 10, first call: the workers' eager baseline is now the median
  # of three processes. Issue 9's mbs 1 three-way tables, each on a
  # search and a profile measured in this call, then a calibrated
  # cuda-engine search of dense mbs 1 (the tie-break acceptance).
  # Third call: the same after profiles keep the framework's step spread
  # and the emulated p10-p90 carry it (engine.WithFrameworkSpread).
  export XDG_CACHE_HOME=$R/cache
  {
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
  table9 dense-mbs1 dense-small-mbs1 90 40s
  table9 moe-droppad-mbs1 moe-small-mbs1 150 50s --drop-pad
  cudasearch9 70
  } 2>&1 | tee $OUT/progress.txt
  ;;
s10-call2)
  # Session 10, second call: issue 9's mbs 4 three-way tables, as call 1.
  export XDG_CACHE_HOME=$R/cache
  {
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
  table9 dense-mbs4 dense-small-mbs4 100 40s
  table9 moe-droppad-mbs4 moe-small-mbs4 170 70s --drop-pad
  } 2>&1 | tee $OUT/progress.txt
  ;;
s10-call4)
  # Session 10, fourth call, after the fit's version 2 (the optimizer as
  # host time from an idle GPU, the full iteration's launch counted once)
  # and the framework's step spread: the cuda engine on call 3's mbs 1
  # searches with call 3's profiles re-fitted (bench/megatron/refit.sh),
  # the mbs 4 tables measured afresh, the calibrated cuda search of dense
  # mbs 1 on call 3's re-fitted profile, the cuda engine on call 2's mbs 4
  # searches re-fitted, then the cuda engine's GPU tests with what is left.
  export XDG_CACHE_HOME=$R/cache
  S=bench/results/megatron-h200
  {
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
  refit9 s10-call3 90
  table9 dense-mbs4 dense-small-mbs4 100 40s
  table9 moe-droppad-mbs4 moe-small-mbs4 170 70s --drop-pad
  mkdir -p $R/c3cache/cgtune/profiles
  bin/refit --probe-output $S/s10-call3/profile-dense-mbs1.txt --profile $S/s10-call3/profile-dense-mbs1.json --cache $R/c3cache/cgtune/profiles
  XDG_CACHE_HOME=$R/c3cache cudasearch9 60 " (call 3's profile re-fitted)"
  refit9 s10-call2 90
  gputests9 200
  } 2>&1 | tee $OUT/progress.txt
  ;;
s11-call2)
  # Session 11, second call, after profile version 3 (the step's start and
  # the host's lead-in before the first layer measured; s11-call1 showed
  # per-layer graphs waiting through the lead-in once per step): the
  # three-way tables of dense mbs 1 (with a calibrated cuda search of it:
  # the tie-break acceptance), dense mbs 4 and drop-and-pad MoE mbs 1.
  export XDG_CACHE_HOME=$R/cache
  {
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
  table9 dense-mbs1 dense-small-mbs1 90 40s
  cudasearch9 70
  table9 dense-mbs4 dense-small-mbs4 100 40s
  table9 moe-droppad-mbs1 moe-small-mbs1 150 50s --drop-pad
  } 2>&1 | tee $OUT/progress.txt
  ;;
s12-call4)
  # Session 12, fourth call: the emulating engines now run a slice of a
  # stage that does not fit the GPU (engine.SliceWhenTooBig, 8 layers as
  # the megatron engine builds) and the three-way runs the micro-batches
  # the megatron engine ran: call 2's tables re-fitted again with the cuda
  # engine, then qwen3_30b_a3b's h100 drop-and-pad table on s11-call4's
  # profile and s11-call1's megatron search.
  export XDG_CACHE_HOME=$R/cache
  S=bench/results/megatron-h200
  {
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
  refit9 s12-call2 120
  refit9 s12-call3 60
  t0=$(date +%s)
  step 300 bin/threeway --profile $S/s11-call4/profile-qwen-h100-droppad.json --megatron $S/s11-call1/qwen-h100-droppad.json \
    --model qwen3_30b_a3b --gpu-type h100 --drop-pad --gpu 0 --json $R/threeway-qwen-h100-droppad.json >$R/threeway-qwen-h100-droppad.txt 2>&1
  echo "== threeway qwen-h100-droppad: rc=$? wall $(( $(date +%s) - t0 )) s"; cat $R/threeway-qwen-h100-droppad.txt
  } 2>&1 | tee $OUT/progress.txt
  ;;
s12-call3)
  # Session 12, third call, after the fit takes the first micro-batch's
  # host-bound forward out of GPU-bound eager walls and splits a layer's
  # host time by the training step's own layer calls: call 2's tables
  # re-fitted with the cuda engine too, the drop-and-pad MoE mbs 4 table
  # (search that measures the profile first), then the calibrated cuda
  # engine's dense mbs 1 search (the tie-break acceptance).
  export XDG_CACHE_HOME=$R/cache
  S=bench/results/megatron-h200
  {
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
  refit9 s12-call2 100
  table12 moe-droppad-mbs4 moe-small-mbs4 300 45s --drop-pad
  # the calibrated cuda search uses call 2's dense mbs 1 profile, re-fitted
  mkdir -p $R/cache/cgtune/profiles && cp -r $S/s12-call2/profiles/. $R/cache/cgtune/profiles/
  cp $S/s12-call2/refit/profile-dense-mbs1.json "$(find $R/cache/cgtune/profiles -path '*dense-small*mbs1-gbs4*' -name '*.json' | head -1)"
  cudasearch9 60
  } 2>&1 | tee $OUT/progress.txt
  ;;
s12-call2)
  # Session 12, second call: the megatron search now measures the
  # framework profile first when none is cached, and its eager baseline is
  # the profile's eager runs: issue 9's three-way tables for moe mbs 1
  # (whose eager baseline differed by 11% between the profile and the
  # search in s11-call2) and dense mbs 1 and 4, then the cuda GPU tests.
  export XDG_CACHE_HOME=$R/cache
  {
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
  table12 moe-droppad-mbs1 moe-small-mbs1 260 35s --drop-pad
  table12 dense-mbs1 dense-small-mbs1 130 30s
  table12 dense-mbs4 dense-small-mbs4 130 30s
  gputests9 130
  } 2>&1 | tee $OUT/progress.txt
  ;;
s12-call1)
  # Session 12, first call (bench/megatron/hostvar.py): is moe-small's eager
  # step (866-1178 ms in different processes, s9..s11) a per-process
  # effect, and does pinning a process to the GPU's CPUs remove it; and
  # where the host is, against the GPU, through a step with per-layer
  # graphs (dense and moe, mbs 1, 8 layers, 4 micro-batches).
  {
  nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader
  lscpu | grep -E "^(CPU\(s\)|Model name|Thread|Core|Socket|NUMA|CPU max|CPU MHz)"
  bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr 'A-F' 'a-f' | sed 's/^0000//')
  local_cpus=$(cat /sys/bus/pci/devices/$bus/local_cpulist 2>/dev/null || echo "?")
  echo "GPU $bus local cpus: $local_cpus; numa node $(cat /sys/bus/pci/devices/$bus/numa_node 2>/dev/null)"
  pin=$(python3 -c "import sys; s=sys.argv[1]; a=[int(x) for p in s.split(',') for x in range(int(p.split('-')[0]), int(p.split('-')[-1])+1)]; print(','.join(map(str,a[:4])))" "$local_cpus" 2>/dev/null || echo 0-3)
  echo "pinned runs: taskset -c $pin"
  mkdir -p $R/hostvar
  hv() { # label prefix... model mode layers mb steps
    local label=$1; shift
    local t0=$(date +%s)
    step 80 "$@" $R/hostvar/$label.json 2>$R/hostvar/$label.err | tail -1 | cut -c1-400
    echo "== hostvar $label: rc=$? wall $(( $(date +%s) - t0 )) s"
  }
  for i in 1 2 3; do
    hv moe-none-free$i python3 bench/megatron/hostvar.py moe none 8 4 5
    hv moe-none-pinned$i taskset -c $pin python3 bench/megatron/hostvar.py moe none 8 4 5
  done
  for m in local full_iteration none; do hv dense-$m python3 bench/megatron/hostvar.py dense $m 8 4 8; done
  hv moe-local python3 bench/megatron/hostvar.py moe local 8 4 8
  } 2>&1 | tee $OUT/progress.txt
  ;;
s11-call3)
  # Session 11, third call, after the fit takes the layers' eager GPU time
  # from GPU-bound eager runs: call 2's tables re-fitted with the cuda
  # engine too, the drop-and-pad MoE mbs 4 three-way table, then the cuda
  # engine's GPU tests with what is left.
  export XDG_CACHE_HOME=$R/cache
  S=bench/results/megatron-h200
  {
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
  refit9 s11-call2 100
  table9 moe-droppad-mbs4 moe-small-mbs4 170 70s --drop-pad
  gputests9 220
  } 2>&1 | tee $OUT/progress.txt
  ;;
s11-call1)
  # Session 11, first call: where the ~1.3 ms per step that Megatron-Core's
  # per-layer graphs cost beyond the full iteration goes (dense-small mbs 1,
  # s10-call3): a torch.profiler trace of the forward-backward in each
  # mode at 1 and 8 layers and 1, 2 and 4 micro-batches
  # (bench/megatron/gaps.py), then the qwen drop-and-pad stand-in as far as
  # time goes.
  export XDG_CACHE_HOME=$R/cache
  {
  nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader
  mkdir -p $R/gaps
  for run in "none 8 4" "local 8 4" "full_iteration 8 4" "none 1 4" "local 1 4" "full_iteration 1 4" \
             "local 8 1" "full_iteration 8 1" "local 8 2" "full_iteration 8 2"; do
    read -r gm gl gb <<<"$run"; g=$gm-$gl-$gb
    t0=$(date +%s)
    step 90 python3 bench/megatron/gaps.py $gm $gl $gb $R/gaps/$g.json >$R/gaps/$g.txt 2>$R/gaps/$g.err
    echo "== gaps $run: rc=$? wall $(( $(date +%s) - t0 )) s"
    python3 bench/megatron/gaps_show.py $R/gaps/$g.json || tail -3 $R/gaps/$g.err
  done
  search9 qwen-h100-droppad 100 --model qwen3_30b_a3b --gpu-type h100 $DROPPAD --strategy halving --budget 60s
  } 2>&1 | tee $OUT/progress.txt
  ;;
call1)
  # Session 8, first call: issue 10's real pretrain_gpt.py jobs, then
  # issue 9's profiles (fitted at 1 and 4 layers) against the megatron
  # results of bench/results/megatron-h200/final, then issue 8's missing
  # drop-and-pad mbs 4 candidates.
  export XDG_CACHE_HOME=$R/cache
  nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
  t0=$(date +%s); timeout -s INT -k 10 230 bench/job/run.sh $R/job >/dev/null 2>&1
  echo "== job: rc=$? wall $(( $(date +%s) - t0 )) s"; cat $R/job/summary.txt; tail -5 $R/job/calibrate.txt
  search moe-droppad-mbs4 100 --preset $P/moe-small-mbs4.yaml $DROPPAD
  profile moe-droppad-mbs1 $F/moe-droppad-mbs1.json --preset $P/moe-small-mbs1.yaml $DROPPAD
  profile dense-mbs1 $F/dense-mbs1.json --preset $P/dense-small-mbs1.yaml
  ;;
call2)
  # Session 8, second call: issue 10's real jobs again (with the flags
  # torch's norm needs), then issue 8's qwen3_30b_a3b searches with the
  # default strategy (halving) at the engine's default slice.
  export XDG_CACHE_HOME=$R/cache
  nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
  t0=$(date +%s); timeout -s INT -k 10 230 bench/job/run.sh $R/job >/dev/null 2>&1
  echo "== job: rc=$? wall $(( $(date +%s) - t0 )) s"; cat $R/job/summary.txt; tail -5 $R/job/calibrate.txt
  QS="--strategy halving --budget 100s"
  search qwen-h100 150 --model qwen3_30b_a3b --gpu-type h100 $QS
  search qwen-tp2pp2ep4 150 --preset $P/qwen3-tp2pp2ep4.yaml $QS
  ;;
call3)
  # Session 8, third call: issue 8's qwen3_30b_a3b searches again, the
  # default strategy (halving) now measuring Megatron-Core's own candidates
  # before the transformer_engine ones it hands to the cuda engine.
  export XDG_CACHE_HOME=$R/cache
  nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
  QS="--strategy halving --budget 200s"
  search qwen-h100 255 --model qwen3_30b_a3b --gpu-type h100 $QS
  search qwen-tp2pp2ep4 255 --preset $P/qwen3-tp2pp2ep4.yaml $QS
  ;;
call4)
  # Session 8, fourth call: issue 9's three-way tables for dense mbs 4 and
  # drop-and-pad MoE mbs 4 (megatron results of the previous session and
  # of call 1, committed), issue 8's qwen3_30b_a3b searches with none run
  # on Megatron-Core, and the dropless MoE searches.
  export XDG_CACHE_HOME=$R/cache
  S=bench/results/megatron-h200
  nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
  profile dense-mbs4 $F/dense-mbs4.json --preset $P/dense-small-mbs4.yaml
  profile moe-droppad-mbs4 $S/s8-call1/moe-droppad-mbs4.json --preset $P/moe-small-mbs4.yaml $DROPPAD
  QS="--strategy halving --budget 120s"
  search qwen-h100 170 --model qwen3_30b_a3b --gpu-type h100 $QS
  search qwen-tp2pp2ep4 170 --preset $P/qwen3-tp2pp2ep4.yaml $QS
  search moe-dropless-mbs1 80 --preset $P/moe-small-mbs1.yaml
  ;;
call5)
  # Session 8, fifth call: the three-way tables with the cuda engine's
  # column (profiles and megatron results committed), qwen3_30b_a3b's
  # searches again (none measured on Megatron-Core and ranked with the
  # finalists), the cuda engine's GPU tests and a calibrated cuda-engine
  # search of dense mbs 1. Progress also goes to $OUT/progress.txt.
  export XDG_CACHE_HOME=$R/cache
  S=bench/results/megatron-h200
  mkdir -p $R/cache/cgtune && cp -r $S/s8-call1/profiles $S/s8-call4/profiles $R/cache/cgtune/ 2>/dev/null
  cp -r $S/s8-call4/profiles/* $R/cache/cgtune/profiles/
  tw() { # name profile megatron-json preset [--drop-pad]
    local t0=$(date +%s) name=$1; shift
    timeout -s INT 60 bin/threeway --profile $1 --megatron $2 --preset $P/$3.yaml "${@:4}" --gpu 0 --json $R/threeway-$name.json >$R/threeway-$name.txt 2>&1
    echo "== threeway $name: rc=$? wall $(( $(date +%s) - t0 )) s"; cat $R/threeway-$name.txt
  }
  {
  tw dense-mbs1 $S/s8-call1/profile-dense-mbs1.json $F/dense-mbs1.json dense-small-mbs1
  tw moe-droppad-mbs1 $S/s8-call1/profile-moe-droppad-mbs1.json $F/moe-droppad-mbs1.json moe-small-mbs1 --drop-pad
  tw dense-mbs4 $S/s8-call4/profile-dense-mbs4.json $F/dense-mbs4.json dense-small-mbs4
  tw moe-droppad-mbs4 $S/s8-call4/profile-moe-droppad-mbs4.json $S/s8-call1/moe-droppad-mbs4.json moe-small-mbs4 --drop-pad
  search qwen-h100 120 --model qwen3_30b_a3b --gpu-type h100 --strategy halving --budget 80s
  python3 bench/megatron/table.py $R/run-qwen-h100/journal.jsonl | grep -v note | cut -c1-200
  search qwen-tp2pp2ep4 80 --preset $P/qwen3-tp2pp2ep4.yaml --strategy halving --budget 45s
  python3 bench/megatron/table.py $R/run-qwen-tp2pp2ep4/journal.jsonl | grep -v note | cut -c1-200
  t0=$(date +%s); (cd engine/cuda && timeout -s INT 90 ../../bin/cuda-gpu.test -test.v >$R/cuda-gpu-tests.txt 2>&1)
  echo "== cuda gpu tests: rc=$? wall $(( $(date +%s) - t0 )) s"; grep -E '^(--- |ok|FAIL|PASS)' $R/cuda-gpu-tests.txt | head -30
  t0=$(date +%s)
  timeout -s INT 60 bin/cgtune --headless --engine cuda --strategy exhaustive --preset $P/dense-small-mbs1.yaml \
    --run-dir $R/run-cuda-dense-mbs1 >$R/cuda-dense-mbs1.txt 2>$R/cuda-dense-mbs1.err
  echo "== cuda search dense mbs1: rc=$? wall $(( $(date +%s) - t0 )) s"; sed -n '1,12p;/^winner/,/^why/p' $R/cuda-dense-mbs1.txt
  } 2>&1 | tee $OUT/progress.txt
  ;;
final)
  # The one call this session's device time allows: issue 8's searches
  # (most important first), one framework profile with the three-way
  # comparison of issue 9, then qwen3_30b_a3b's h100 layout.
  nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
  search dense-mbs1 110 --preset $P/dense-small-mbs1.yaml
  search moe-droppad-mbs1 50 --preset $P/moe-small-mbs1.yaml $DROPPAD
  search moe-dropless-mbs1 40 --preset $P/moe-small-mbs1.yaml
  t0=$(date +%s)
  timeout -s INT 70 bin/cgtune probe --framework --preset $P/moe-small-mbs1.yaml $DROPPAD >$R/profile-moe-droppad-mbs1.txt 2>&1
  echo "== profile: rc=$? wall $(( $(date +%s) - t0 )) s"; tail -12 $R/profile-moe-droppad-mbs1.txt
  prof=$(sed -n 's/^saved //p' $R/profile-moe-droppad-mbs1.txt); cp "$prof" $R/ 2>/dev/null
  [ -n "$prof" ] && timeout -s INT 40 bin/threeway --profile "$prof" --megatron $R/moe-droppad-mbs1.json \
    --preset $P/moe-small-mbs1.yaml --drop-pad --gpu 0 --json $R/threeway-moe-droppad-mbs1.json >$R/threeway.txt 2>&1
  echo "== threeway: rc=$?"; cat $R/threeway.txt | tail -15
  search dense-mbs4 55 --preset $P/dense-small-mbs4.yaml
  search moe-droppad-mbs4 50 --preset $P/moe-small-mbs4.yaml $DROPPAD
  search qwen-h100 75 --model qwen3_30b_a3b --gpu-type h100 --strategy halving --budget 45s --max-layers 4 --max-microbatches 2
  ;;
one)
  # Issue 8's presets in one call (about 7 minutes on the H200): dense and
  # moe-small at mbs 1 and 4, drop-and-pad and dropless; the dropless
  # searches also run the captures cgtune predicts will fail, so that
  # Megatron-Core's own capture error is in the ranking.
  nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
  search dense-mbs1 130 --preset $P/dense-small-mbs1.yaml
  search dense-mbs4 75 --preset $P/dense-small-mbs4.yaml
  search moe-droppad-mbs1 60 --preset $P/moe-small-mbs1.yaml $DROPPAD
  search moe-droppad-mbs4 70 --preset $P/moe-small-mbs4.yaml $DROPPAD
  search moe-dropless-mbs1 55 --preset $P/moe-small-mbs1.yaml --run-predicted-failures
  search moe-dropless-mbs4 60 --preset $P/moe-small-mbs4.yaml --run-predicted-failures
  ;;
qwen)
  # qwen3_30b_a3b's two layouts, default strategy (halving), default slice.
  search qwen-h100 170 --model qwen3_30b_a3b --gpu-type h100 --strategy halving --budget 120s
  search qwen-tp2pp2ep4 130 --preset $P/qwen3-tp2pp2ep4.yaml --strategy halving --budget 90s
  ;;
multi)
  for p in dense-small-tp2-mbs1 dense-small-tp2-mbs4; do search $p 70 --preset $P/$p.yaml --gpu 0,1; done
  for p in moe-small-ep2-mbs1 moe-small-ep2-mbs4; do search $p-droppad 70 --preset $P/$p.yaml --gpu 0,1 $DROPPAD; done
  search moe-small-ep2-mbs1-dropless 50 --preset $P/moe-small-ep2-mbs1.yaml --gpu 0,1
  ;;
esac
tar -czf $OUT/bench-$1.tgz -C $R .
