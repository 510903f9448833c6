package cuda

import (
	"errors"
	"fmt"

	"cgtune/engine"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrNoNVML is returned where NVML (libnvidia-ml.so.1) cannot be loaded.
var ErrNoNVML = errors.New("no NVIDIA driver (libnvidia-ml.so.1 not found)")

// NVML reads device memory, utilisation and processes. It never touches
// a CUDA context, so it can sample while the engine runs.
type NVML struct{ lib nvml.Interface }

// OpenNVML loads and initialises NVML.
func OpenNVML() (*NVML, error) {
	lib := nvml.New()
	switch r := lib.Init(); r {
	case nvml.SUCCESS:
		return &NVML{lib: lib}, nil
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
		return nil, ErrNoNVML
	default:
		return nil, fmt.Errorf("NVML init: %s", lib.ErrorString(r))
	}
}

// Close shuts NVML down.
func (n *NVML) Close() { n.lib.Shutdown() }

func (n *NVML) err(call string, r nvml.Return) error {
	if r == nvml.SUCCESS {
		return nil
	}
	return fmt.Errorf("NVML %s: %s", call, n.lib.ErrorString(r))
}

// Driver is the driver version and the CUDA version it supports.
func (n *NVML) Driver() (driver, cudaVersion string) {
	driver, _ = n.lib.SystemGetDriverVersion()
	if v, r := n.lib.SystemGetCudaDriverVersion(); r == nvml.SUCCESS {
		cudaVersion = fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
	}
	return driver, cudaVersion
}

// Count is the number of NVML devices.
func (n *NVML) Count() (int, error) {
	c, r := n.lib.DeviceGetCount()
	return c, n.err("DeviceGetCount", r)
}

// GPUStatus and ProcessUse are engine types, so that the TUI can show
// GPUs without linking NVML.
type (
	GPUStatus  = engine.GPUStatus
	ProcessUse = engine.ProcessUse
)

func (n *NVML) device(i int) (nvml.Device, error) {
	d, r := n.lib.DeviceGetHandleByIndex(i)
	return d, n.err("DeviceGetHandleByIndex", r)
}

// Status reads one device.
func (n *NVML) Status(i int) (GPUStatus, error) {
	d, err := n.device(i)
	if err != nil {
		return GPUStatus{}, err
	}
	s := GPUStatus{Index: i}
	s.Name, _ = d.GetName()
	s.UUID, _ = d.GetUUID()
	mem, r := d.GetMemoryInfo()
	if err := n.err("GetMemoryInfo", r); err != nil {
		return s, err
	}
	s.UsedMiB, s.TotalMiB = int64(mem.Used>>20), int64(mem.Total>>20)
	if u, r := d.GetUtilizationRates(); r == nvml.SUCCESS {
		s.UtilGPU, s.UtilMem = int(u.Gpu), int(u.Memory)
	}
	procs, _ := d.GetComputeRunningProcesses()
	for _, p := range procs {
		name, _ := n.lib.SystemGetProcessName(int(p.Pid))
		s.Processes = append(s.Processes, ProcessUse{PID: int(p.Pid), Name: name, UsedMiB: int64(p.UsedGpuMemory >> 20)})
	}
	return s, nil
}

// Memory is the device's used and total memory in bytes.
func (n *NVML) Memory(i int) (used, total int64, err error) {
	d, err := n.device(i)
	if err != nil {
		return 0, 0, err
	}
	mem, r := d.GetMemoryInfo()
	return int64(mem.Used), int64(mem.Total), n.err("GetMemoryInfo", r)
}

// ProcessMemory is the memory process pid holds on device i (0 if none).
func (n *NVML) ProcessMemory(i, pid int) (int64, error) {
	d, err := n.device(i)
	if err != nil {
		return 0, err
	}
	procs, r := d.GetComputeRunningProcesses()
	if err := n.err("GetComputeRunningProcesses", r); err != nil {
		return 0, err
	}
	for _, p := range procs {
		if int(p.Pid) == pid {
			return int64(p.UsedGpuMemory), nil
		}
	}
	return 0, nil
}
