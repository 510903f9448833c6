// C reference for cgtune's launch-cost claims: the same kernel, grid and
// arguments as cgtune's no-op launches, called straight through the CUDA
// driver API. Built with nvcc on the GPU machine by bench/launch/run.sh.
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x)                                                                     \
	do {                                                                          \
		CUresult r_ = (x);                                                        \
		if (r_ != CUDA_SUCCESS) {                                                 \
			const char *n_;                                                       \
			cuGetErrorName(r_, &n_);                                              \
			fprintf(stderr, "%s failed: %s (line %d)\n", #x, n_, __LINE__);       \
			exit(1);                                                              \
		}                                                                         \
	} while (0)

static long long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n) {
	qsort(v, n, sizeof(double), cmp);
	return v[n / 2];
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: ref KERNELS.ptx\n");
		return 2;
	}
	FILE *f = fopen(argv[1], "rb");
	if (!f) {
		perror(argv[1]);
		return 2;
	}
	static char ptx[1 << 20];
	size_t len = fread(ptx, 1, sizeof(ptx) - 1, f);
	fclose(f);
	ptx[len] = 0;

	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction fn;
	CUstream s;
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CK(cuModuleLoadData(&mod, ptx));
	CK(cuModuleGetFunction(&fn, mod, "cgt_stream"));
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

	CUdeviceptr p0 = 0, p1 = 0;
	unsigned long long n = 0;
	void *args[3] = {&p0, &p1, &n};
	enum { LAUNCHES = 10000, NODES = 2000, ROUNDS = 7 };
	double per[ROUNDS];

	for (int r = 0; r <= ROUNDS; r++) {
		long long t0 = now_ns();
		for (int i = 0; i < LAUNCHES; i++) CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, 0));
		long long dt = now_ns() - t0;
		CK(cuStreamSynchronize(s));
		if (r > 0) per[r - 1] = (double)dt / LAUNCHES / 1000.0;
	}
	double launch_us = median(per, ROUNDS);

	CUgraph g;
	CUgraphExec x;
	CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	for (int i = 0; i < NODES; i++) CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, 0));
	CK(cuStreamEndCapture(s, &g));
	CK(cuGraphInstantiate(&x, g, 0));
	CUevent e0, e1;
	CK(cuEventCreate(&e0, 0));
	CK(cuEventCreate(&e1, 0));
	double launch[ROUNDS];
	for (int r = 0; r <= ROUNDS; r++) {
		CK(cuEventRecord(e0, s));
		long long t0 = now_ns();
		CK(cuGraphLaunch(x, s));
		long long dt = now_ns() - t0;
		CK(cuEventRecord(e1, s));
		CK(cuEventSynchronize(e1));
		float ms;
		CK(cuEventElapsedTime(&ms, e0, e1));
		if (r > 0) {
			per[r - 1] = ms * 1000.0 / NODES;
			launch[r - 1] = dt / 1000.0;
		}
	}
	printf("{\"launch_us\": %.4f, \"graph_node_us\": %.4f, \"graph_launch_us\": %.3f}\n", launch_us, median(per, ROUNDS),
	       median(launch, ROUNDS));
	return 0;
}
