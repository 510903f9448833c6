package cuda

/*
#include <stdlib.h>
#include "cublas.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// LoadCuBLAS opens libcublas at path (a soname or a file) on the bound
// context and returns its version.
func LoadCuBLAS(path string) (int, error) {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	var buf [512]C.char
	if C.cgt_cublas_load(cs, &buf[0], C.size_t(len(buf))) != 0 {
		return 0, fmt.Errorf("cuBLAS: %s", C.GoString(&buf[0]))
	}
	var v C.int
	C.cgt_cublas_version(&v)
	return int(v), nil
}

// MatrixRate times reps bf16 GEMMs of size n³ on random data through
// cuBLAS (loaded with LoadCuBLAS first) and returns TFLOP/s.
func (k *Kernels) MatrixRate(s Stream, n, reps int) (float64, error) {
	bytes := int64(n) * int64(n) * 2
	var bufs [3]DevPtr
	for i := range bufs {
		p, err := Alloc(bytes)
		if err != nil {
			for _, q := range bufs[:i] {
				Free(q)
			}
			return 0, err
		}
		bufs[i] = p
		defer Free(p)
	}
	if err := k.FillRandom(s, bufs[0], bytes, 1); err != nil {
		return 0, err
	}
	if err := k.FillRandom(s, bufs[1], bytes, 2); err != nil {
		return 0, err
	}
	gemm := func(r int) error {
		if st := C.cgt_cublas_bf16_gemm(C.int(n), C.int(n), C.int(n), C.cgt_devptr(bufs[0]), C.cgt_devptr(bufs[1]), C.cgt_devptr(bufs[2]), s.h, C.int(r)); st != 0 {
			return fmt.Errorf("cublasGemmEx returned status %d", int(st))
		}
		return nil
	}
	if err := gemm(3); err != nil { // warm-up: heuristics, clocks
		return 0, err
	}
	t, err := newEventTimer()
	if err != nil {
		return 0, err
	}
	defer t.destroy()
	ms, err := t.timeMs(s, func() error { return gemm(reps) })
	if err != nil {
		return 0, err
	}
	return 2 * float64(n) * float64(n) * float64(n) * float64(reps) / (ms * 1e-3) / 1e12, nil
}
