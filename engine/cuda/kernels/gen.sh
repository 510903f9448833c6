#!/usr/bin/env bash
# Regenerates kernels.ptx from kernels.cu. Needs nvcc (CUDA 12 or newer).
# compute_80 PTX runs on Ampere and every later GPU: the driver compiles it
# for the GPU at hand when the module is loaded.
set -euo pipefail
cd "$(dirname "$0")"
nvcc -ptx -arch=compute_80 -O3 -o kernels.ptx kernels.cu
echo "wrote $(pwd)/kernels.ptx ($(wc -c <kernels.ptx) bytes, $(nvcc --version | tail -1))"
