#!/usr/bin/env bash
# Smoke run of the Megatron-Core worker without Go: the worker protocol's
# requests of bench/megatron/smoke_requests.py piped into
# engine/megatron/pyworker/worker.py, one line per result.
#
#   bench/megatron/smoke.sh OUT_DIR dense|moe|tp2|bad...
#
# dense and moe: dense-small and moe-small (drop-and-pad and dropless) in
# eager, whole-layer, attention and full-iteration modes; tp2: dense-small
# at TP 2 on GPUs 0 and 1; bad: requests the worker must refuse.
# Needs: torch with CUDA and Megatron-LM's megatron/ package in $MLM (default
# ./.mlm, git-ignored). Output: OUT_DIR/smoke-WHICH.jsonl and .err.
[ $# -ge 2 ] || { sed -n '6p' "$0" | sed 's/^# *//' >&2; exit 2; }
mkdir -p "$1" && OUT=$(cd "$1" && pwd) || exit 2
shift
cd "$(dirname "$0")/../.."
export PYTHONPATH=${MLM:-$PWD/.mlm} PYTHONUNBUFFERED=1
W=engine/megatron/pyworker/worker.py
for which in "$@"; do
  ws=1; gpus=0
  [ "$which" = tp2 ] && ws=2 && gpus=0,1
  echo "== $which"
  start=$(date +%s)
  python3 bench/megatron/smoke_requests.py $which | timeout 300 python3 -B $W --gpus $gpus --world-size $ws \
    >$OUT/smoke-$which.jsonl 2>$OUT/smoke-$which.err
  echo "rc=$? in $(( $(date +%s) - start )) s"
  grep '"result"\|"error"\|"hello"' $OUT/smoke-$which.jsonl | python3 -c '
import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m["type"]=="hello": print("hello", m.get("device"), m.get("framework")); continue
    if m["type"]=="error": print("ERROR", m); continue
    r=m["result"]; c=r["candidate"]
    print("%-40s step %8.2f eager %8.2f x%.3f graphs %3d cap %7.0f host %s loss %s/%s mem %s err %s %s" % (
      c, r["step"]["median_ms"], r["eager"]["median_ms"], r["speedup"], r["graphs"], r["capture_ms"],
      r.get("host_enqueue_ms"), r.get("loss"), r.get("eager_loss"), r["memory"], r.get("error_kind"), (r.get("error") or "")[:300]))
    for n in r.get("notes") or []: print("   note:", n[:400])
'
  tail -5 $OUT/smoke-$which.err
done
