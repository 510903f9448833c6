// Package probes measures what the engine needs to know about a GPU node:
// launch and graph costs, copy bandwidth, the bf16 matrix rate, the
// framework's per-op host cost, and NVML memory and utilisation over time.
// Results are cached per GPU and driver and always carry their source.
package probes

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"cgtune/engine"
	"cgtune/engine/cuda"
	"cgtune/internal/fileio"
	"cgtune/stepmodel"
)

// Item is one probe's result as printed.
type Item struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Source string  `json:"source"`
}

// Report is everything the probes found on one GPU.
type Report struct {
	Device     engine.DeviceInfo   `json:"device"`
	Rates      stepmodel.Rates     `json:"rates"`
	Host       stepmodel.HostCosts `json:"host"`
	Items      []Item              `json:"items"`
	MeasuredAt time.Time           `json:"measured_at"`
	Cached     bool                `json:"-"`
}

// Options choose what the probes run.
type Options struct {
	// Python is the interpreter of the PyTorch probe ("" = python3 on PATH;
	// "-" = skip it and use the default host costs).
	Python string
	// CuBLAS is the library to dlopen ("" = search the usual places).
	CuBLAS string
	// LaunchOnly runs just the launch and graph-node probes.
	LaunchOnly bool
}

// LaunchCosts are the launch-path probes.
type LaunchCosts struct {
	LaunchUs          float64 // host cost of one eager launch
	KernelUs          float64 // GPU time of a minimal full-grid kernel queued back to back
	GraphNodeUs       float64 // GPU time per node of a replayed graph
	GraphLaunchUs     float64 // host cost of cuGraphLaunch of a 16-node graph
	GraphLaunchNodeUs float64 // its growth per node (from a 2000-node graph)
}

// Launch measures the eager launch cost and the graph per-node cost on the
// engine's own paths.
func Launch(e *cuda.Engine) (LaunchCosts, error) {
	var c LaunchCosts
	var err error
	if c.LaunchUs, err = e.LaunchCostUs(10000, 7); err != nil {
		return c, err
	}
	if c.KernelUs, err = e.QueuedKernelUs(500); err != nil {
		return c, err
	}
	var bigLaunch float64
	if c.GraphNodeUs, bigLaunch, err = e.GraphNodeUs(2000, 7); err != nil {
		return c, err
	}
	if _, c.GraphLaunchUs, err = e.GraphNodeUs(16, 7); err != nil {
		return c, err
	}
	c.GraphLaunchNodeUs = max(0, (bigLaunch-c.GraphLaunchUs)/(2000-16))
	return c, nil
}

// Run probes the engine's GPU and sets the engine's rates to the result.
func Run(ctx context.Context, e *cuda.Engine, opts Options) (Report, error) {
	dev := e.Device()
	rep := Report{Device: dev, MeasuredAt: time.Now().UTC()}
	spec, ok := stepmodel.SpecFor(dev.Name)
	if !ok {
		spec, _ = stepmodel.SpecFor("h100")
		spec.Source = "spec table: H100 SXM (no entry for " + dev.Name + ")"
	}
	rates := spec
	add := func(name string, v float64, unit, source string) {
		rep.Items = append(rep.Items, Item{Name: name, Value: v, Unit: unit, Source: source})
	}
	lc, err := Launch(e)
	if err != nil {
		return rep, fmt.Errorf("launch probe: %w", err)
	}
	rates.LaunchUs, rates.KernelUs, rates.GraphNodeUs = lc.LaunchUs, lc.KernelUs, lc.GraphNodeUs
	rates.GraphLaunchUs, rates.GraphLaunchNodeUs = lc.GraphLaunchUs, lc.GraphLaunchNodeUs
	add("eager launch cost", lc.LaunchUs, "us/launch", "measured: cuLaunchKernel through the executor's C loop, 10000 launches")
	add("queued kernel cost", lc.KernelUs, "us/kernel", "measured: 500 minimal full-grid kernels back to back, CUDA events")
	add("graph per-node cost", lc.GraphNodeUs, "us/node", "measured: replay of a 2000-node graph, CUDA events")
	add("graph launch host cost", lc.GraphLaunchUs, "us/launch", "measured: cuGraphLaunch of a 16-node graph")
	add("graph launch per node", lc.GraphLaunchNodeUs, "us/node", "measured: cuGraphLaunch of 2000 vs 16 nodes")
	if opts.LaunchOnly {
		rep.Rates = rates
		return rep, nil
	}
	bw, err := e.CopyGBps(2 << 30)
	if err != nil {
		return rep, fmt.Errorf("copy probe: %w", err)
	}
	rates.CopyGBps = bw
	add("copy bandwidth", bw, "GB/s", "measured: streaming kernel over 2 GiB (read+write)")

	if lib, where := findCuBLAS(opts.CuBLAS, opts.Python); lib != "" {
		tf, ver, err := e.MatrixTFLOPS(lib, 8192, 20)
		if err == nil {
			rates.MatrixTFLOPS = tf
			add("bf16 matrix rate", tf, "TFLOP/s", fmt.Sprintf("measured: cuBLAS %d (%s, %s) 8192³ GemmEx on random data", ver, lib, where))
		} else {
			add("bf16 matrix rate", rates.MatrixTFLOPS, "TFLOP/s", spec.Source+" (cuBLAS failed: "+err.Error()+")")
		}
	} else {
		add("bf16 matrix rate", rates.MatrixTFLOPS, "TFLOP/s", spec.Source+" (no cuBLAS found)")
	}
	add("NVLink bandwidth", rates.NVLinkGBps, "GB/s", spec.Source)
	add("network bandwidth", rates.NetworkGBps, "GB/s", spec.Source)
	rates.Source = fmt.Sprintf("probe of %s", dev.Name)
	rep.Rates = rates
	e.SetRates(rates)

	rep.Host = stepmodel.DefaultHostCosts()
	if opts.Python != "-" {
		if h, err := TorchHostCosts(ctx, opts.Python); err == nil {
			rep.Host = h
		} else {
			rep.Host.Source += " (PyTorch probe: " + err.Error() + ")"
		}
	}
	h := rep.Host
	for _, it := range []struct {
		name string
		v    float64
	}{{"host cost: elementwise op", h.ElementwiseUs}, {"host cost: GEMM module", h.GEMMUs}, {"host cost: norm", h.NormUs},
		{"host cost: attention", h.AttentionUs}, {"host cost: host sync (.item)", h.SyncUs}, {"host cost: graph replay", h.GraphReplayUs}} {
		add(it.name, it.v, "us/op", h.Source)
	}
	hz, err := SamplerRate(2 * time.Second)
	if err == nil {
		add("NVML sampler", hz, "Hz", "measured: memory and utilisation reads for 2 s")
	}
	return rep, nil
}

//go:embed torch_probe.py
var torchProbe string

// TorchHostCosts runs the PyTorch probe and turns it into host costs.
func TorchHostCosts(ctx context.Context, python string) (stepmodel.HostCosts, error) {
	if python == "" {
		python = "python3"
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", torchProbe)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		return stepmodel.HostCosts{}, fmt.Errorf("%s: %w %s", python, err, msg)
	}
	var r struct {
		Torch   string  `json:"torch"`
		Add     float64 `json:"add_us"`
		MM      float64 `json:"mm_us"`
		Linear  float64 `json:"linear_us"`
		RMSNorm float64 `json:"rms_norm_us"`
		SDPA    float64 `json:"sdpa_us"`
		Item    float64 `json:"item_us"`
		Replay  float64 `json:"graph_replay_us"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return stepmodel.HostCosts{}, fmt.Errorf("PyTorch probe output: %w", err)
	}
	def := stepmodel.DefaultHostCosts()
	return stepmodel.HostCosts{
		Source:        "measured: PyTorch " + r.Torch + " probe",
		ElementwiseUs: r.Add,
		GEMMUs:        r.Linear,
		NormUs:        r.RMSNorm,
		AttentionUs:   r.SDPA,
		CollectiveUs:  def.CollectiveUs,
		SyncUs:        r.Item,
		BackwardScale: def.BackwardScale,
		// A graphed callable's replay is a module call (like nn.Linear's
		// Python path) around CUDAGraph.replay().
		GraphReplayUs: r.Replay + r.Linear - r.MM,
	}, nil
}

// findCuBLAS returns a cuBLAS library to dlopen and where it was found.
func findCuBLAS(explicit, python string) (string, string) {
	if explicit != "" {
		return explicit, "--cublas"
	}
	var dirs []string
	if python != "-" {
		if python == "" {
			python = "python3"
		}
		out, err := exec.Command(python, "-c", "import nvidia.cublas, os; print(list(nvidia.cublas.__path__)[0])").Output()
		if err == nil {
			dirs = append(dirs, filepath.Join(strings.TrimSpace(string(out)), "lib"))
		}
	}
	globs, _ := filepath.Glob("/usr/local/cuda*/lib64")
	dirs = append(dirs, globs...)
	dirs = append(dirs, "/usr/lib/x86_64-linux-gnu")
	for _, d := range dirs {
		for _, v := range []string{"13", "12"} {
			p := filepath.Join(d, "libcublas.so."+v)
			if _, err := os.Stat(p); err == nil {
				return p, "found in " + d
			}
		}
	}
	return "", ""
}

// cacheFile is where a GPU's probe results are kept.
func cacheFile(dir string, dev engine.DeviceInfo) string {
	clean := regexp.MustCompile(`[^A-Za-z0-9._-]+`)
	return filepath.Join(dir, clean.ReplaceAllString(dev.Name+"-"+dev.Driver, "_")+".json")
}

// DefaultCacheDir is the user cache folder for probe results.
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "cgtune", "probes"), nil
}

// maxCacheBytes bounds a cached probe report: a few KiB of rates; a FIFO
// or a huge file put in the cache is skipped, not read.
const maxCacheBytes = 16 << 20

// LoadCached returns the cached report for dev, if any.
func LoadCached(dir string, dev engine.DeviceInfo) (Report, bool) {
	b, err := fileio.ReadFileLimited(cacheFile(dir, dev), maxCacheBytes)
	if err != nil {
		return Report{}, false
	}
	var r Report
	if json.Unmarshal(b, &r) != nil || r.Device.Name != dev.Name || r.Device.Driver != dev.Driver {
		return Report{}, false
	}
	r.Cached = true
	return r, true
}

// FindCached returns any cached report whose GPU name contains gpu
// (case-insensitive), for estimates of a GPU this machine has measured.
func FindCached(dir, gpu string) (Report, bool) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		b, err := fileio.ReadFileLimited(f, maxCacheBytes)
		if err != nil {
			continue
		}
		var r Report
		if json.Unmarshal(b, &r) == nil && r.Device.Name != "" && strings.Contains(strings.ToLower(r.Device.Name), strings.ToLower(gpu)) {
			r.Cached = true
			return r, true
		}
	}
	return Report{}, false
}

// SaveCached writes the report atomically.
func SaveCached(dir string, r Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(dir, cacheFile(dir, r.Device), b)
}
