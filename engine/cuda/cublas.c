#include "cublas.h"

#include <dlfcn.h>
#include <stdio.h>

typedef int (*fn_create)(void **);
typedef int (*fn_destroy)(void *);
typedef int (*fn_setstream)(void *, void *);
typedef int (*fn_version)(void *, int *);
typedef int (*fn_gemmex)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int,
                         int, const void *, void *, int, int, int, int);

static struct {
	void *lib;
	void *handle;
	fn_create create;
	fn_destroy destroy;
	fn_setstream set_stream;
	fn_version version;
	fn_gemmex gemm;
} b;

int cgt_cublas_load(const char *path, char *err, size_t errlen) {
	if (b.lib) return 0;
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return -1;
	}
	b.create = (fn_create)dlsym(lib, "cublasCreate_v2");
	b.destroy = (fn_destroy)dlsym(lib, "cublasDestroy_v2");
	b.set_stream = (fn_setstream)dlsym(lib, "cublasSetStream_v2");
	b.version = (fn_version)dlsym(lib, "cublasGetVersion_v2");
	b.gemm = (fn_gemmex)dlsym(lib, "cublasGemmEx");
	if (!b.create || !b.set_stream || !b.gemm || !b.version) {
		snprintf(err, errlen, "%s lacks cublasCreate_v2/cublasGemmEx", path);
		dlclose(lib);
		return -1;
	}
	int st = b.create(&b.handle);
	if (st != 0) {
		snprintf(err, errlen, "cublasCreate_v2 returned status %d", st);
		dlclose(lib);
		return -1;
	}
	b.lib = lib;
	return 0;
}

int cgt_cublas_version(int *v) { return b.version(b.handle, v); }

int cgt_cublas_bf16_gemm(int m, int n, int k, cgt_devptr a, cgt_devptr bm, cgt_devptr c, cgt_handle s, int reps) {
	const float alpha = 1.0f, beta = 0.0f;
	const int bf16 = 14;        // CUDA_R_16BF
	const int compute32f = 68; // CUBLAS_COMPUTE_32F
	const int algoDefault = -1; // CUBLAS_GEMM_DEFAULT
	int st = b.set_stream(b.handle, s);
	for (int i = 0; st == 0 && i < reps; i++) {
		st = b.gemm(b.handle, 0, 0, m, n, k, &alpha, (const void *)a, bf16, m, (const void *)bm, bf16, k, &beta,
		            (void *)c, bf16, m, compute32f, algoDefault);
	}
	return st;
}
