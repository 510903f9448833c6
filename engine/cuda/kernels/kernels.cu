// Kernels of cgtune's CUDA engine. They do real work on every SM so that a
// step's GPU time and launch pattern are those of the real training step:
// memory-bound ops stream their bytes; matrix ops spin FMA chains for the
// time the op's FLOPs take at the matrix rate measured on this GPU.
//
// Regenerate kernels.ptx with ./gen.sh on a machine with nvcc (compute_80
// PTX, JIT-compiled by the driver for the GPU at hand).

extern "C" __global__ void cgt_empty() {}

// cgt_stream reads n 16-byte vectors from src and writes them to dst:
// 32·n bytes of traffic, grid-stride over the whole grid.
extern "C" __global__ void cgt_stream(const uint4 *__restrict__ src, uint4 *__restrict__ dst,
                                      unsigned long long n) {
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		uint4 v = src[i];
		v.x ^= 0x9e3779b9u;
		dst[i] = v;
	}
}

// cgt_spin runs iters rounds of four independent FMA chains per thread.
// Its time is linear in iters (calibrated at start-up); the result is
// stored only when impossible, so the compiler cannot drop the loop.
extern "C" __global__ void cgt_spin(float *out, int iters) {
	float a = threadIdx.x * 1e-3f, b = blockIdx.x * 1e-3f, c = 0.5f, d = 0.25f;
	for (int i = 0; i < iters; i++) {
		a = fmaf(a, 0.9999f, 1e-4f);
		b = fmaf(b, 0.9999f, 1e-4f);
		c = fmaf(c, 0.9999f, 1e-4f);
		d = fmaf(d, 0.9999f, 1e-4f);
	}
	if (a + b + c + d < -1.0f) out[blockIdx.x * blockDim.x + threadIdx.x] = a + b + c + d;
}

// cgt_fill writes pseudo-random bf16 values in [-1, 1) (as raw 16-bit
// words), so matrix probes never run on zeros.
extern "C" __global__ void cgt_fill(unsigned short *p, unsigned long long n, unsigned int seed) {
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		unsigned int x = (unsigned int)i * 2654435761u ^ seed;
		x ^= x >> 13;
		x *= 0x5bd1e995u;
		x ^= x >> 15;
		float f = (float)(x & 0xffffff) / 8388608.0f - 1.0f;
		p[i] = (unsigned short)(__float_as_uint(f) >> 16);
	}
}
