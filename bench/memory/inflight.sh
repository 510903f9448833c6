#!/usr/bin/env bash
# Micro-batches in flight on the real Megatron-Core (bench/memory/inflight.py)
# for the cases in CASES (default bench/memory/cases-inflight.json), one
# JSON line each, into OUT (default /tmp/inflight.jsonl).
#   MLM=<Megatron-LM checkout> bench/memory/inflight.sh [CASES] [OUT]
set -e
cd "$(dirname "$0")/../.."
cases=${1:-bench/memory/cases-inflight.json}; out=${2:-/tmp/inflight.jsonl}
export PYTHONPATH=${MLM:-$PWD/.mlm} PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
: >"$out"
python3 bench/memory/inflight.py "$cases" "$out"
