package cuda

import (
	"errors"
	"testing"
)

// On a machine without the NVIDIA driver every entry point must fail with
// the "no CUDA driver" / "no NVIDIA driver" errors, never crash.
func TestNoDriver(t *testing.T) {
	if Load() == nil {
		t.Skip("a CUDA driver is present here; the GPU tests (-tags gpu) cover this machine")
	}
	if err := Load(); !errors.Is(err, ErrNoDriver) || err.Error() != "no CUDA driver (libcuda.so.1 not found)" {
		t.Fatalf("Load: %v", err)
	}
	if _, err := Open(0); !errors.Is(err, ErrNoDriver) {
		t.Errorf("Open: %v", err)
	}
	if _, err := New(Options{}); !errors.Is(err, ErrNoDriver) {
		t.Errorf("New: %v", err)
	}
	if _, err := DeviceCount(); !errors.Is(err, ErrNoDriver) {
		t.Errorf("DeviceCount: %v", err)
	}
	if _, err := OpenNVML(); !errors.Is(err, ErrNoNVML) {
		t.Errorf("OpenNVML: %v", err)
	}
}

func TestErrorNames(t *testing.T) {
	e := &Error{Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Call: "cuMemAlloc"}
	if e.Error() != "CUDA_ERROR_OUT_OF_MEMORY (2) in cuMemAlloc" || !IsOOM(e) {
		t.Errorf("%v", e)
	}
	if IsOOM(&Error{Code: 900}) || IsOOM(errors.New("x")) {
		t.Error("IsOOM true for other errors")
	}
}
