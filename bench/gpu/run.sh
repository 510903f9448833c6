#!/usr/bin/env bash
# Everything cgtune measures on a GPU machine, in one go (the device lease
# is short): regenerate the kernels' PTX with nvcc, print gpus and probe,
# run the launch-cost benchmark against the C reference, and run the GPU
# tests. Binaries come prebuilt in bin/ (built where Go is):
#   CGO_ENABLED=1 go build -o bin/cgtune ./cmd/cgtune
#   go test -c -tags gpu -o bin/cuda.test ./engine/cuda
# Usage: bench/gpu/run.sh [OUTDIR] [TEST-REGEXP]
set -uo pipefail
out=${1:-${OUT:-/tmp/cgtune-gpu}}
tests=${2:-.}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
nvcc --version | tail -1
engine/cuda/kernels/gen.sh && cp engine/cuda/kernels/kernels.ptx "$out/"
export CGTUNE_PTX=$root/engine/cuda/kernels/kernels.ptx
export XDG_CACHE_HOME=$out/cache
echo "== cgtune gpus"; bin/cgtune gpus; echo "exit $?"
echo "== cgtune probe"; bin/cgtune probe --refresh; echo "exit $?"
echo "== launch benchmark"; bench/launch/run.sh "$root/bin/cgtune" "$CGTUNE_PTX" 2>&1 | tee "$out/launch.txt"
echo "== GPU tests"
CGTUNE_GPU_OUT=$out bin/cuda.test -test.v -test.run "$tests" -test.timeout 9m 2>&1 | tee "$out/gpu-tests.txt" | grep -v '^=== RUN'
