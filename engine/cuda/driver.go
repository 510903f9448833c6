// Package cuda is cgtune's measuring engine: a small cgo shim over the CUDA
// driver API, loaded with dlopen at run time, the embedded kernels, and the
// executor that runs a workload eagerly or from CUDA graphs.
package cuda

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// ErrNoDriver is returned by every entry point where libcuda.so.1 cannot be loaded.
var ErrNoDriver = errors.New("no CUDA driver (libcuda.so.1 not found)")

// Error is a CUDA driver error with the call that returned it.
type Error struct {
	Code int
	Name string // CUDA_ERROR_OUT_OF_MEMORY
	Call string // cuMemAlloc
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d) in %s", e.Name, e.Code, e.Call) }

// IsOOM reports whether err is CUDA's out-of-memory error.
func IsOOM(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == C.CGT_ERROR_OUT_OF_MEMORY
}

func check(r C.cgt_result, call string) error {
	if r == C.CGT_SUCCESS {
		return nil
	}
	return &Error{Code: int(r), Name: C.GoString(C.cgt_error_name(r)), Call: call}
}

// Load opens the driver library and initialises it. It is safe to call
// more than once; without a driver it returns ErrNoDriver.
func Load() error {
	var buf [256]C.char
	switch r := C.cgt_load(&buf[0], C.size_t(len(buf))); r {
	case C.CGT_SUCCESS:
	case C.CGT_NO_DRIVER:
		return ErrNoDriver
	case C.CGT_NO_SYMBOL:
		return fmt.Errorf("CUDA driver too old: libcuda.so.1 lacks %s", C.GoString(C.cgt_missing_symbol()))
	}
	return check(C.cgt_init(), "cuInit")
}

// DriverVersion is the CUDA version the driver supports, e.g. "13.0".
func DriverVersion() (string, error) {
	if err := Load(); err != nil {
		return "", err
	}
	var v C.int
	if err := check(C.cgt_driver_version(&v), "cuDriverGetVersion"); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%d", v/1000, (v%1000)/10), nil
}

// DeviceCount is the number of CUDA devices.
func DeviceCount() (int, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	var n C.int
	err := check(C.cgt_device_count(&n), "cuDeviceGetCount")
	return int(n), err
}

// Device attributes (CUdevice_attribute values).
const (
	attrSMCount      = 16
	attrClockKHz     = 13
	attrComputeMajor = 75
	attrComputeMinor = 76
)

// Device is an opened GPU with its primary context.
type Device struct {
	Ordinal int
	Name    string
	SMs     int
	Major   int
	Minor   int
	Memory  int64 // bytes
	dev     C.int
	ctx     C.cgt_handle
}

// Open retains device ordinal's primary context.
func Open(ordinal int) (*Device, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	d := &Device{Ordinal: ordinal}
	if err := check(C.cgt_device_get(&d.dev, C.int(ordinal)), "cuDeviceGet"); err != nil {
		return nil, err
	}
	var name [256]C.char
	if err := check(C.cgt_device_name(&name[0], 256, d.dev), "cuDeviceGetName"); err != nil {
		return nil, err
	}
	d.Name = C.GoString(&name[0])
	for _, a := range []struct {
		attr int
		dst  *int
	}{{attrSMCount, &d.SMs}, {attrComputeMajor, &d.Major}, {attrComputeMinor, &d.Minor}} {
		var v C.int
		if err := check(C.cgt_device_attribute(&v, C.int(a.attr), d.dev), "cuDeviceGetAttribute"); err != nil {
			return nil, err
		}
		*a.dst = int(v)
	}
	var total C.size_t
	if err := check(C.cgt_device_total_mem(&total, d.dev), "cuDeviceTotalMem"); err != nil {
		return nil, err
	}
	d.Memory = int64(total)
	if err := check(C.cgt_primary_ctx_retain(&d.ctx, d.dev), "cuDevicePrimaryCtxRetain"); err != nil {
		return nil, err
	}
	return d, nil
}

// Bind pins the calling goroutine to its OS thread and makes the device's
// context current there: CUDA contexts are per thread. Call the returned
// function to unpin.
func (d *Device) Bind() (func(), error) {
	runtime.LockOSThread()
	if err := check(C.cgt_ctx_set_current(d.ctx), "cuCtxSetCurrent"); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return runtime.UnlockOSThread, nil
}

// Close releases the primary context.
func (d *Device) Close() error {
	return check(C.cgt_primary_ctx_release(d.dev), "cuDevicePrimaryCtxRelease")
}

// Synchronize waits for all work of the current context.
func Synchronize() error { return check(C.cgt_ctx_synchronize(), "cuCtxSynchronize") }

// MemInfo is the free and total memory of the current context's device.
func MemInfo() (free, total int64, err error) {
	var f, t C.size_t
	err = check(C.cgt_mem_get_info(&f, &t), "cuMemGetInfo")
	return int64(f), int64(t), err
}

// DevPtr is a device address.
type DevPtr uint64

// Alloc allocates device memory.
func Alloc(bytes int64) (DevPtr, error) {
	var p C.cgt_devptr
	if bytes <= 0 {
		bytes = 1
	}
	if err := check(C.cgt_mem_alloc(&p, C.size_t(bytes)), "cuMemAlloc"); err != nil {
		return 0, err
	}
	return DevPtr(p), nil
}

// Free releases device memory.
func Free(p DevPtr) error { return check(C.cgt_mem_free(C.cgt_devptr(p)), "cuMemFree") }

// Memset sets bytes of device memory to v.
func Memset(p DevPtr, v byte, bytes int64) error {
	return check(C.cgt_memset_d8(C.cgt_devptr(p), C.uchar(v), C.size_t(bytes)), "cuMemsetD8")
}

// CopyToHost copies device memory into dst.
func CopyToHost(dst []byte, src DevPtr) error {
	if len(dst) == 0 {
		return nil
	}
	return check(C.cgt_memcpy_dtoh(unsafe.Pointer(&dst[0]), C.cgt_devptr(src), C.size_t(len(dst))), "cuMemcpyDtoH")
}

// HostBuffer is pinned host memory, the target of emulated host syncs.
type HostBuffer struct {
	p    unsafe.Pointer
	size int64
}

// AllocHost allocates pinned host memory.
func AllocHost(bytes int64) (*HostBuffer, error) {
	var p unsafe.Pointer
	if err := check(C.cgt_mem_alloc_host(&p, C.size_t(bytes)), "cuMemAllocHost"); err != nil {
		return nil, err
	}
	return &HostBuffer{p: p, size: bytes}, nil
}

// Free releases the pinned memory.
func (h *HostBuffer) Free() error { return check(C.cgt_mem_free_host(h.p), "cuMemFreeHost") }

// Module is a loaded PTX module.
type Module struct{ h C.cgt_handle }

// LoadModule JIT-compiles PTX for the current device.
func LoadModule(ptx []byte) (*Module, error) {
	img := C.CBytes(append(append([]byte(nil), ptx...), 0))
	defer C.free(img)
	m := &Module{}
	if err := check(C.cgt_module_load_data(&m.h, img), "cuModuleLoadDataEx"); err != nil {
		return nil, err
	}
	return m, nil
}

// Function is a kernel entry point.
type Function struct{ h C.cgt_handle }

// Function looks up a kernel by name.
func (m *Module) Function(name string) (Function, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f Function
	err := check(C.cgt_module_get_function(&f.h, m.h, cs), "cuModuleGetFunction("+name+")")
	return f, err
}

// Unload releases the module.
func (m *Module) Unload() error { return check(C.cgt_module_unload(m.h), "cuModuleUnload") }

// Stream is a CUDA stream.
type Stream struct{ h C.cgt_handle }

// NewStream creates a non-blocking stream.
func NewStream() (Stream, error) {
	var s Stream
	err := check(C.cgt_stream_create(&s.h), "cuStreamCreate")
	return s, err
}

// Sync waits for the stream.
func (s Stream) Sync() error { return check(C.cgt_stream_synchronize(s.h), "cuStreamSynchronize") }

// Destroy releases the stream.
func (s Stream) Destroy() error { return check(C.cgt_stream_destroy(s.h), "cuStreamDestroy") }

// BeginCapture starts capturing s into a graph (thread-local mode).
func (s Stream) BeginCapture() error {
	return check(C.cgt_stream_begin_capture(s.h), "cuStreamBeginCapture")
}

// EndCapture ends the capture and returns the graph.
func (s Stream) EndCapture() (Graph, error) {
	var g Graph
	err := check(C.cgt_stream_end_capture(s.h, &g.h), "cuStreamEndCapture")
	return g, err
}

// Event is a timing event.
type Event struct{ h C.cgt_handle }

// NewEvent creates a timing event.
func NewEvent() (Event, error) {
	var e Event
	err := check(C.cgt_event_create(&e.h), "cuEventCreate")
	return e, err
}

// Record records the event on s.
func (e Event) Record(s Stream) error { return check(C.cgt_event_record(e.h, s.h), "cuEventRecord") }

// Sync waits for the event.
func (e Event) Sync() error { return check(C.cgt_event_synchronize(e.h), "cuEventSynchronize") }

// Destroy releases the event.
func (e Event) Destroy() error { return check(C.cgt_event_destroy(e.h), "cuEventDestroy") }

// Elapsed is the time between two recorded events in milliseconds.
func Elapsed(start, end Event) (float64, error) {
	var ms C.float
	err := check(C.cgt_event_elapsed(&ms, start.h, end.h), "cuEventElapsedTime")
	return float64(ms), err
}

// Graph is a captured CUDA graph.
type Graph struct{ h C.cgt_handle }

// Nodes is the number of nodes in the graph.
func (g Graph) Nodes() (int, error) {
	var n C.size_t
	err := check(C.cgt_graph_node_count(g.h, &n), "cuGraphGetNodes")
	return int(n), err
}

// Instantiate makes an executable graph.
func (g Graph) Instantiate() (GraphExec, error) {
	var x GraphExec
	err := check(C.cgt_graph_instantiate(&x.h, g.h), "cuGraphInstantiate")
	return x, err
}

// Destroy releases the graph.
func (g Graph) Destroy() error { return check(C.cgt_graph_destroy(g.h), "cuGraphDestroy") }

// GraphExec is an instantiated graph.
type GraphExec struct{ h C.cgt_handle }

// Launch replays the graph on s.
func (x GraphExec) Launch(s Stream) error {
	return check(C.cgt_graph_launch(x.h, s.h), "cuGraphLaunch")
}

// Destroy releases the executable graph.
func (x GraphExec) Destroy() error { return check(C.cgt_graph_exec_destroy(x.h), "cuGraphExecDestroy") }

// LaunchLoop launches an argument-less kernel count times with one block
// of 32 threads and returns the host nanoseconds it took.
func LaunchLoop(f Function, count int, s Stream) (int64, error) {
	var ns C.int64_t
	err := check(C.cgt_launch_loop(f.h, C.int(count), s.h, &ns), "cuLaunchKernel")
	return int64(ns), err
}

// SpinHost busy-waits on the host.
func SpinHost(ns int64) { C.cgt_spin_ns(C.int64_t(ns)) }

// NowNs is the monotonic clock the executor spins on.
func NowNs() int64 { return int64(C.cgt_now_ns()) }
