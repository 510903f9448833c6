package stepmodel

import (
	"fmt"
	"strings"
)

// Rates are what a GPU sustains; they size the CUDA engine's kernels and
// drive the estimate engine. Source says where they came from.
type Rates struct {
	Source       string  `json:"source"`
	MatrixTFLOPS float64 `json:"matrix_tflops"` // dense bf16 GEMM rate reached on random data
	// AttentionEff is the fraction of the matrix rate fused attention and
	// SSM scans reach (FlashAttention-2/3 forward on Hopper: about 0.6).
	AttentionEff  float64 `json:"attention_eff"`
	CopyGBps      float64 `json:"copy_gbps"`    // device-to-device, bytes read plus written per second
	NVLinkGBps    float64 `json:"nvlink_gbps"`  // collective bus bandwidth per GPU inside a node
	NetworkGBps   float64 `json:"network_gbps"` // per GPU across nodes
	CollLatUs     float64 `json:"collective_latency_us"`
	KernelUs      float64 `json:"kernel_overhead_us"` // fixed GPU time of any kernel (ramp up and drain)
	LaunchUs      float64 `json:"launch_us"`          // host cost of one cuLaunchKernel
	GraphLaunchUs float64 `json:"graph_launch_us"`    // host cost of one cuGraphLaunch
	// GraphLaunchNodeUs is the extra host cost of cuGraphLaunch per node.
	GraphLaunchNodeUs float64 `json:"graph_launch_node_us"`
	GraphNodeUs       float64 `json:"graph_node_us"` // GPU time per node of a replayed graph of empty kernels
	MemoryMiB         int64   `json:"memory_mib"`
}

// OpGPUUs is the GPU time of one op in microseconds.
func (r Rates) OpGPUUs(o Op) float64 {
	var work float64
	switch o.Kind {
	case KindGEMM:
		scale := o.RateScale
		if scale == 0 {
			scale = 1
		}
		work = max(o.FLOPs/(r.MatrixTFLOPS*1e6*scale), o.Bytes/(r.CopyGBps*1e3))
	case KindAttention:
		work = o.FLOPs / (r.MatrixTFLOPS * 1e6 * r.AttentionEff)
	case KindElementwise, KindNorm, KindOptimizer:
		work = o.Bytes / (r.CopyGBps * 1e3)
	case KindCollective:
		net := o.NetFrac
		if o.Link == LinkNetwork {
			net = 1
		}
		work = r.CollLatUs + max(o.Bytes*(1-net)/(r.NVLinkGBps*1e3), o.Bytes*net/(r.NetworkGBps*1e3))
	case KindSync:
		work = o.Bytes / (r.CopyGBps * 1e3)
	}
	return work + r.KernelUs
}

// HostCosts are the framework's per-op host costs, the part of eager
// execution graphs remove. Source says whether they were measured
// (PyTorch probe on this node) or are the documented defaults.
type HostCosts struct {
	Source        string  `json:"source"`
	ElementwiseUs float64 `json:"elementwise_us"` // torch.add
	GEMMUs        float64 `json:"gemm_us"`        // nn.Linear forward
	NormUs        float64 `json:"norm_us"`        // rms_norm
	AttentionUs   float64 `json:"attention_us"`   // scaled_dot_product_attention
	CollectiveUs  float64 `json:"collective_us"`  // a torch.distributed call
	SyncUs        float64 `json:"sync_us"`        // .item() after the wait
	// BackwardScale multiplies costs of backward ops: autograd issues them
	// from C++, without the module's Python forward.
	BackwardScale float64 `json:"backward_scale"`
	// GraphReplayUs is the host cost of replaying one graphed callable
	// (MCore's replay path and TE's graphed autograd function), on top of
	// cuGraphLaunch.
	GraphReplayUs float64 `json:"graph_replay_us"`
}

// DefaultHostCosts are PyTorch 2.11 per-op host costs of the order the
// probes found on an H200 (the per-probe figures, which vary widely
// between runs, are in docs/cuda-engine-h200-2026-11-29.md). They are
// used only where the PyTorch probe cannot run; it replaces all of them
// when torch is there.
func DefaultHostCosts() HostCosts {
	return HostCosts{
		Source:        "default (PyTorch 2.11 on an H200)",
		ElementwiseUs: 8, GEMMUs: 36, NormUs: 20, AttentionUs: 45, CollectiveUs: 15, SyncUs: 10,
		BackwardScale: 0.5, GraphReplayUs: 20,
	}
}

// OpGraphGPUUs is the GPU time of op as a node of a replayed graph: the
// same work, with the graph's per-node cost instead of a stream launch's.
func (r Rates) OpGraphGPUUs(o Op) float64 {
	return r.OpGPUUs(o) - r.KernelUs + r.GraphNodeUs
}

// GraphLaunchHostUs is the host cost of launching a graph of n nodes.
func (r Rates) GraphLaunchHostUs(n int) float64 {
	return r.GraphLaunchUs + r.GraphLaunchNodeUs*float64(n)
}

// Scaled multiplies every cost by f: a way to model a framework slower or
// faster than the probe's plain PyTorch ops (Megatron's module hooks and
// Transformer Engine's Python wrappers cost more per op).
func (h HostCosts) Scaled(f float64) HostCosts {
	if f == 1 {
		return h
	}
	h.ElementwiseUs *= f
	h.GEMMUs *= f
	h.NormUs *= f
	h.AttentionUs *= f
	h.CollectiveUs *= f
	h.SyncUs *= f
	h.GraphReplayUs *= f
	h.Source = fmt.Sprintf("%s ×%g", h.Source, f)
	return h
}

// OpHostUs is the host cost the framework spends before launching op.
func (h HostCosts) OpHostUs(o Op) float64 {
	var c float64
	switch o.Kind {
	case KindGEMM:
		c = h.GEMMUs
	case KindAttention:
		c = h.AttentionUs
	case KindNorm:
		c = h.NormUs
	case KindCollective:
		c = h.CollectiveUs
	case KindSync:
		c = h.SyncUs
	default:
		c = h.ElementwiseUs
	}
	if o.Backward {
		c *= h.BackwardScale
	}
	return c
}

// Spec is a GPU's datasheet-derived rates, for estimates without a probe.
type Spec struct {
	Names []string // lower-case substrings of the NVML name that select it
	Rates Rates
	// StandIn is set when the row has no datasheet rates of its own: it
	// says whose rates it borrows and why, and every estimate for it says
	// so.
	StandIn string
}

// Specs is the spec table; a probe on a real GPU replaces it. Matrix rates
// are the dense bf16 datasheet figure times 0.8, the fraction cuBLAS
// reached on random data; copy bandwidth is 0.9 of the datasheet HBM
// figure, near what cgtune's streaming kernel reached; launch and node
// costs are the probe's (all in docs/cuda-engine-h200-2026-11-29.md).
// NVLink is the per-GPU one-direction figure; network is one 400 Gb/s NIC
// per GPU.
//
// Sources: NVIDIA H100 Tensor Core GPU datasheet (SXM5); NVIDIA H200
// Tensor Core GPU datasheet; NVIDIA DGX B200 / HGX B200 datasheet; NVIDIA
// GB200 NVL72 datasheet. The datasheet figures each row is built from are
// listed in docs/sources.md.
//
// Blackwell Ultra (b300, gb300) and Rubin (vr200, r100) have no dense bf16
// figure cgtune can cite: their rows borrow B200's and GB200's rates (see
// StandIn) with their own memory (NVIDIA's Blackwell Ultra and Vera Rubin
// announcements, GTC 2025; docs/sources.md), so an estimate
// for them is a Blackwell-class estimate and says so.
var Specs = []Spec{
	{Names: []string{"h100"}, Rates: Rates{Source: "spec table: H100 SXM", MatrixTFLOPS: 790, AttentionEff: 0.6, CopyGBps: 3000, NVLinkGBps: 450, NetworkGBps: 50, CollLatUs: 10, KernelUs: 1.5, LaunchUs: 3.9, GraphLaunchUs: 2.5, GraphLaunchNodeUs: 0.004, GraphNodeUs: 0.5, MemoryMiB: 81559}},
	{Names: []string{"h200"}, Rates: Rates{Source: "spec table: H200", MatrixTFLOPS: 790, AttentionEff: 0.6, CopyGBps: 4300, NVLinkGBps: 450, NetworkGBps: 50, CollLatUs: 10, KernelUs: 1.5, LaunchUs: 3.9, GraphLaunchUs: 2.5, GraphLaunchNodeUs: 0.004, GraphNodeUs: 0.5, MemoryMiB: 143771}},
	{Names: []string{"gb300"}, Rates: Rates{Source: "spec table: GB300 (GB200's rates, 288 GB)", MatrixTFLOPS: 2000, AttentionEff: 0.6, CopyGBps: 7200, NVLinkGBps: 900, NetworkGBps: 50, CollLatUs: 10, KernelUs: 1.5, LaunchUs: 3.9, GraphLaunchUs: 2.5, GraphLaunchNodeUs: 0.004, GraphNodeUs: 0.5, MemoryMiB: 274658},
		StandIn: "GB300 is estimated with GB200's rates (no Blackwell Ultra bf16 datasheet figure in cgtune's table) and GB300's 288 GB"},
	{Names: []string{"b300"}, Rates: Rates{Source: "spec table: B300 (B200's rates, 288 GB)", MatrixTFLOPS: 1800, AttentionEff: 0.6, CopyGBps: 7200, NVLinkGBps: 900, NetworkGBps: 50, CollLatUs: 10, KernelUs: 1.5, LaunchUs: 3.9, GraphLaunchUs: 2.5, GraphLaunchNodeUs: 0.004, GraphNodeUs: 0.5, MemoryMiB: 274658},
		StandIn: "B300 is estimated with B200's rates (no Blackwell Ultra bf16 datasheet figure in cgtune's table) and B300's 288 GB"},
	{Names: []string{"gb200"}, Rates: Rates{Source: "spec table: GB200", MatrixTFLOPS: 2000, AttentionEff: 0.6, CopyGBps: 7200, NVLinkGBps: 900, NetworkGBps: 50, CollLatUs: 10, KernelUs: 1.5, LaunchUs: 3.9, GraphLaunchUs: 2.5, GraphLaunchNodeUs: 0.004, GraphNodeUs: 0.5, MemoryMiB: 189471}},
	{Names: []string{"b200"}, Rates: Rates{Source: "spec table: B200", MatrixTFLOPS: 1800, AttentionEff: 0.6, CopyGBps: 7200, NVLinkGBps: 900, NetworkGBps: 50, CollLatUs: 10, KernelUs: 1.5, LaunchUs: 3.9, GraphLaunchUs: 2.5, GraphLaunchNodeUs: 0.004, GraphNodeUs: 0.5, MemoryMiB: 183359}},
	{Names: []string{"vr200"}, Rates: Rates{Source: "spec table: VR200 (GB200's rates, 288 GB)", MatrixTFLOPS: 2000, AttentionEff: 0.6, CopyGBps: 7200, NVLinkGBps: 900, NetworkGBps: 50, CollLatUs: 10, KernelUs: 1.5, LaunchUs: 3.9, GraphLaunchUs: 2.5, GraphLaunchNodeUs: 0.004, GraphNodeUs: 0.5, MemoryMiB: 274658},
		StandIn: "VR200 (Rubin) is estimated with GB200's rates (no Rubin datasheet rates in cgtune's table; a Rubin GPU is faster) and Rubin's 288 GB"},
	{Names: []string{"r100"}, Rates: Rates{Source: "spec table: R100 (B200's rates, 288 GB)", MatrixTFLOPS: 1800, AttentionEff: 0.6, CopyGBps: 7200, NVLinkGBps: 900, NetworkGBps: 50, CollLatUs: 10, KernelUs: 1.5, LaunchUs: 3.9, GraphLaunchUs: 2.5, GraphLaunchNodeUs: 0.004, GraphNodeUs: 0.5, MemoryMiB: 274658},
		StandIn: "R100 (Rubin) is estimated with B200's rates (no Rubin datasheet rates in cgtune's table; a Rubin GPU is faster) and Rubin's 288 GB"},
}

// SpecStandIn says whose rates the spec row of name borrows, "" when the
// row has datasheet rates of its own (or there is no row).
func SpecStandIn(name string) string {
	n := strings.ToLower(name)
	for _, s := range Specs {
		for _, k := range s.Names {
			if strings.Contains(n, k) {
				return s.StandIn
			}
		}
	}
	return ""
}

// SpecFor finds the spec of a GPU by a name such as "h100", "NVIDIA H200"
// or "NVIDIA GB200"; ok is false when none matches.
func SpecFor(name string) (Rates, bool) {
	n := strings.ToLower(name)
	for _, s := range Specs {
		for _, k := range s.Names {
			if strings.Contains(n, k) {
				return s.Rates, true
			}
		}
	}
	return Rates{}, false
}

// SpecNames lists the GPUs of the spec table.
func SpecNames() []string {
	var out []string
	for _, s := range Specs {
		out = append(out, s.Names[0])
	}
	return out
}
