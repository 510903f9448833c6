// cuBLAS through dlopen, for one job: measuring the bf16 matrix rate this
// GPU reaches, which sizes the engine's matrix kernels.
#ifndef CGT_CUBLAS_H
#define CGT_CUBLAS_H
#include "shim.h"
int cgt_cublas_load(const char *path, char *err, size_t errlen);
int cgt_cublas_version(int *v);
// cgt_cublas_bf16_gemm runs reps GEMMs C = A·B of m×k by k×n (bf16 in and
// out, fp32 accumulate) on stream s.
int cgt_cublas_bf16_gemm(int m, int n, int k, cgt_devptr a, cgt_devptr b, cgt_devptr c, cgt_handle s, int reps);
#endif
