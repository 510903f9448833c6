package probes

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"cgtune/engine"
	"cgtune/internal/fileio"
	"cgtune/stepmodel"
)

// The NCCL probe (nccl_probe.py, run with the node's Python and torch)
// measures the collectives over several GPUs of this node. Its bus
// bandwidths follow the nccl-tests convention, so they compare with the
// link's figure and across rank counts.

//go:embed nccl_probe.py
var ncclProbe string

// NCCLOps are the collectives the probe measures, in its order.
var NCCLOps = []string{"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"}

// NCCLPoint is one message size of one collective.
type NCCLPoint struct {
	Bytes   int64   `json:"bytes"`
	TimeUs  float64 `json:"time_us"` // the slowest rank's time per op
	AlgGBps float64 `json:"algbw_gbps"`
	BusGBps float64 `json:"busbw_gbps"`
}

// NCCLOp is one collective's measurement: every size, the bus bandwidth
// at the largest and the time of the smallest (its latency).
type NCCLOp struct {
	Op        string      `json:"op"`
	Points    []NCCLPoint `json:"points"`
	BusGBps   float64     `json:"busbw_gbps"`
	LatencyUs float64     `json:"latency_us"`
}

// NCCLReport is the NCCL probe's result over a set of GPUs.
type NCCLReport struct {
	Device     engine.DeviceInfo `json:"device"` // the first GPU (name and driver key the cache)
	GPUs       []int             `json:"gpus"`
	WorldSize  int               `json:"world_size"`
	NCCL       string            `json:"nccl"`
	Torch      string            `json:"torch"`
	DType      string            `json:"dtype"`
	Ops        []NCCLOp          `json:"ops"`
	MeasuredAt time.Time         `json:"measured_at"`
	Cached     bool              `json:"-"`
}

// Source names the measurement, for every figure taken from it.
func (r NCCLReport) Source() string {
	return fmt.Sprintf("measured: NCCL %s over %d GPUs, torch %s", r.NCCL, r.WorldSize, r.Torch)
}

// Op is the measurement of one collective.
func (r NCCLReport) Op(name string) (NCCLOp, bool) {
	i := slices.IndexFunc(r.Ops, func(o NCCLOp) bool { return o.Op == name })
	if i < 0 {
		return NCCLOp{}, false
	}
	return r.Ops[i], true
}

// linkOps are the collectives whose figures stand for the rates' NVLink
// bandwidth and collective latency: tensor parallelism with sequence
// parallelism issues all-gathers and reduce-scatters, and the workload
// model counts their bytes the way their bus bandwidth does ((n-1)/n of
// the buffer).
var linkOps = []string{"all_gather", "reduce_scatter"}

// LinkGBps is the bus bandwidth the rates' NVLinkGBps takes: the mean of
// the all-gather and reduce-scatter bus bandwidths at the largest size.
func (r NCCLReport) LinkGBps() float64 { return r.mean(func(o NCCLOp) float64 { return o.BusGBps }) }

// LatencyUs is the rates' collective latency: the mean small-message time
// of all-gather and reduce-scatter.
func (r NCCLReport) LatencyUs() float64 { return r.mean(func(o NCCLOp) float64 { return o.LatencyUs }) }

func (r NCCLReport) mean(f func(NCCLOp) float64) float64 {
	var sum float64
	for _, name := range linkOps {
		o, ok := r.Op(name)
		if !ok {
			return 0
		}
		sum += f(o)
	}
	return sum / float64(len(linkOps))
}

// Validate checks a report read from the probe or the cache: two or more
// ranks, one per GPU, every collective with finite, positive figures.
func (r NCCLReport) Validate() error {
	if r.WorldSize < 2 || len(r.GPUs) != r.WorldSize {
		return fmt.Errorf("world_size %d over gpus %v: want one rank per GPU, 2 or more", r.WorldSize, r.GPUs)
	}
	if r.NCCL == "" || r.Torch == "" {
		return fmt.Errorf("nccl %q, torch %q: want both versions", r.NCCL, r.Torch)
	}
	pos := func(field string, v float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return fmt.Errorf("%s: %v (want a finite number > 0)", field, v)
		}
		return nil
	}
	for _, name := range NCCLOps {
		o, ok := r.Op(name)
		if !ok {
			return fmt.Errorf("ops: no %s (want %s)", name, strings.Join(NCCLOps, ", "))
		}
		if len(o.Points) == 0 {
			return fmt.Errorf("ops.%s: no message sizes", name)
		}
		if err := pos("ops."+name+".busbw_gbps", o.BusGBps); err != nil {
			return err
		}
		if err := pos("ops."+name+".latency_us", o.LatencyUs); err != nil {
			return err
		}
		for _, p := range o.Points {
			if p.Bytes <= 0 {
				return fmt.Errorf("ops.%s.points.bytes: %d (want > 0)", name, p.Bytes)
			}
			if err := pos("ops."+name+".points.time_us", p.TimeUs); err != nil {
				return err
			}
		}
	}
	return nil
}

// WithNCCL returns rates whose NVLink bandwidth and collective latency are
// the measurement's, with the source saying so. A report without the
// link collectives leaves the rates as they are.
func WithNCCL(rates stepmodel.Rates, r NCCLReport) stepmodel.Rates {
	bw, lat := r.LinkGBps(), r.LatencyUs()
	if bw <= 0 || lat <= 0 {
		return rates
	}
	rates.NVLinkGBps, rates.CollLatUs = bw, lat
	rates.Source += "; NVLink bandwidth and collective latency " + r.Source() + " (all-gather and reduce-scatter bus bandwidth)"
	return rates
}

// NCCLTimeout bounds the probe: NCCL's start on every rank, then five
// collectives at four sizes.
const NCCLTimeout = 5 * time.Minute

// RunNCCL runs the NCCL probe with python over gpus (two or more) and
// returns its report; dev (the first GPU's name and driver, from NVML)
// keys the cache. NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
func RunNCCL(ctx context.Context, python string, gpus []int, dev engine.DeviceInfo) (NCCLReport, error) {
	if len(gpus) < 2 {
		return NCCLReport{}, fmt.Errorf("the NCCL probe needs two or more GPUs (have %v)", gpus)
	}
	if python == "" {
		python = "python3"
	}
	ctx, cancel := context.WithTimeout(ctx, NCCLTimeout)
	defer cancel()
	list := make([]string, len(gpus))
	for i, g := range gpus {
		list[i] = strconv.Itoa(g)
	}
	cmd := exec.CommandContext(ctx, python, "-B", "-c", ncclProbe, "--gpus", strings.Join(list, ","))
	cmd.Env = append(os.Environ(), "NCCL_NVLS_ENABLE=0", "PYTHONUNBUFFERED=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return NCCLReport{}, fmt.Errorf("NCCL probe: no result within %s", NCCLTimeout)
		}
		return NCCLReport{}, fmt.Errorf("NCCL probe (%s): %w: %s", python, err, lastLineOf(stderr.String()))
	}
	var r NCCLReport
	if err := json.Unmarshal([]byte(lastLineOf(string(out))), &r); err != nil {
		return NCCLReport{}, fmt.Errorf("NCCL probe output: %w", err)
	}
	if err := r.Validate(); err != nil {
		return NCCLReport{}, fmt.Errorf("NCCL probe output: %w", err)
	}
	if !slices.Equal(r.GPUs, gpus) {
		return NCCLReport{}, fmt.Errorf("NCCL probe output: gpus %v, asked for %v", r.GPUs, gpus)
	}
	name := r.Device.Name
	r.Device = dev
	if r.Device.Name == "" {
		r.Device.Name = name
	}
	r.MeasuredAt = time.Now().UTC()
	return r, nil
}

// lastLineOf is the last non-empty line of s.
func lastLineOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// UnmarshalJSON reads the probe's output, whose "device" is the first
// GPU's name, as well as the cache's, where it is a DeviceInfo.
func (r *NCCLReport) UnmarshalJSON(b []byte) error {
	type plain NCCLReport
	var raw struct {
		plain
		Device json.RawMessage `json:"device"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*r = NCCLReport(raw.plain)
	if len(raw.Device) == 0 {
		return nil
	}
	var name string
	if json.Unmarshal(raw.Device, &name) == nil {
		r.Device = engine.DeviceInfo{Name: name}
		return nil
	}
	return json.Unmarshal(raw.Device, &r.Device)
}

// ncclDir is where NCCL reports are cached: a folder inside the probe
// cache, apart from the per-GPU reports.
func ncclDir(dir string) string { return filepath.Join(dir, "nccl") }

var unsafeFile = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// ncclFile is the cache file of a GPU model, driver and set of GPUs.
func ncclFile(dir string, dev engine.DeviceInfo, gpus []int) string {
	list := make([]string, len(gpus))
	for i, g := range gpus {
		list[i] = strconv.Itoa(g)
	}
	return filepath.Join(ncclDir(dir), unsafeFile.ReplaceAllString(dev.Name+"-"+dev.Driver+"-gpus"+strings.Join(list, "_"), "_")+".json")
}

// SaveNCCL writes the report to the cache atomically.
func SaveNCCL(dir string, r NCCLReport) error {
	if err := r.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(ncclDir(dir), ncclFile(dir, r.Device, r.GPUs), b)
}

// LoadNCCL is the cached report of exactly these GPUs of this model and
// driver, if any.
func LoadNCCL(dir string, dev engine.DeviceInfo, gpus []int) (NCCLReport, bool) {
	r, err := readNCCL(ncclFile(dir, dev, gpus))
	if err != nil || r.Device.Name != dev.Name || r.Device.Driver != dev.Driver || !slices.Equal(r.GPUs, gpus) {
		return NCCLReport{}, false
	}
	return r, true
}

// FindNCCL is the cached report, for a GPU whose name contains gpu
// (case-insensitive), that the engines' rates take: the one over the most
// GPUs, the newest among those.
func FindNCCL(dir, gpu string) (NCCLReport, bool) {
	files, _ := filepath.Glob(filepath.Join(ncclDir(dir), "*.json"))
	var best NCCLReport
	found := false
	for _, f := range files {
		r, err := readNCCL(f)
		if err != nil || !strings.Contains(strings.ToLower(r.Device.Name), strings.ToLower(gpu)) {
			continue
		}
		if !found || r.WorldSize > best.WorldSize || r.WorldSize == best.WorldSize && r.MeasuredAt.After(best.MeasuredAt) {
			best, found = r, true
		}
	}
	return best, found
}

func readNCCL(path string) (NCCLReport, error) {
	b, err := fileio.ReadFileLimited(path, maxCacheBytes)
	if err != nil {
		return NCCLReport{}, err
	}
	var r NCCLReport
	if err := json.Unmarshal(b, &r); err != nil {
		return NCCLReport{}, err
	}
	if err := r.Validate(); err != nil {
		return NCCLReport{}, err
	}
	r.Cached = true
	return r, nil
}

// writeAtomic writes b to path (inside dir, created if need be) so a
// reader never sees half a file (fileio.WriteFileAtomic).
func writeAtomic(dir, path string, b []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return fileio.WriteFileAtomic(path, b, 0o644)
}
