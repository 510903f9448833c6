#!/usr/bin/env bash
# Whole-model peak memory on the real Megatron-Core (bench/memory/peaks.py)
# for the cases in CASES (default bench/memory/cases.json), one JSON line
# each, into OUT (default /tmp/peaks.jsonl).
#   MLM=<Megatron-LM checkout> bench/memory/run.sh [CASES] [OUT]
set -e
cd "$(dirname "$0")/../.."
cases=${1:-bench/memory/cases.json}; out=${2:-/tmp/peaks.jsonl}
export PYTHONPATH=${MLM:-$PWD/.mlm} PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
: >"$out"
python3 bench/memory/peaks.py "$cases" "$out"
