#!/usr/bin/env bash
# The cuda engine on a GPU machine: regenerates the kernels' PTX with nvcc
# (engine/cuda/kernels/kernels.ptx), prints `cgtune gpus` and `cgtune probe`,
# runs the launch-cost benchmark against the C reference (bench/launch) and
# the GPU tests (engine/cuda, build tag gpu), whose table of qwen3_30b_a3b
# and llama3_8b (measured steps beside the estimate engine's: the two share
# one model, so it is self-consistency, not accuracy) is also written as
# OUT_DIR/acceptance.json.
#
#   bench/gpu/run.sh OUT_DIR [TEST-REGEXP]
#
# Needs: an NVIDIA GPU with its driver, nvcc, and, built where Go is,
#   CGO_ENABLED=1 go build -o bin/cgtune ./cmd/cgtune
#   go test -c -tags gpu -o bin/cuda.test ./engine/cuda
# Output in OUT_DIR: kernels.ptx, launch.txt, gpu-tests.txt, acceptance.json
# and the probe cache (cache/).
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: bench/gpu/run.sh OUT_DIR [TEST-REGEXP]" >&2; exit 2; }
out=$1
tests=${2:-.}
mkdir -p "$out" && out=$(cd "$out" && pwd)
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
