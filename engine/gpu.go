package engine

// ProcessUse is one process's memory on a GPU.
type ProcessUse struct {
	PID     int    `json:"pid"`
	Name    string `json:"name"`
	UsedMiB int64  `json:"used_mib"`
}

// GPUStatus is one NVML device as cgtune shows it.
type GPUStatus struct {
	Index     int          `json:"index"`
	Name      string       `json:"name"`
	UUID      string       `json:"uuid"`
	UsedMiB   int64        `json:"used_mib"`
	TotalMiB  int64        `json:"total_mib"`
	UtilGPU   int          `json:"util_gpu_pct"`
	UtilMem   int          `json:"util_mem_pct"`
	Processes []ProcessUse `json:"processes"`
}
