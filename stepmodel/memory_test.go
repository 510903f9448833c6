package stepmodel

import (
	"math"
	"testing"

	"cgtune/presets"
)

// The figures below are computed by hand from the architecture (Llama 3 8B:
// 32 layers, hidden 4096, FFN 14336, 32 heads, 8 KV groups of 128, vocab
// 128256, untied embedding and output layer), independently of the model's
// code.
const (
	llamaLayerParams = 4096*(32+2*8)*128 + 32*128*4096 + 3*4096*14336 // QKV, output projection, SwiGLU MLP
	llamaParams      = 32*llamaLayerParams + 2*128256*4096            // + embedding and output layer = 8.03e9
	// Saved activations per token and layer, bf16, flash attention, no SP:
	// attention: norm input 2h, QKV input 2h, Q K V 2·(32+16)·128, output
	// 2·32·128, LSE 4·32; MLP: norm input 2h, fc1 input 2h, fc1 output
	// 2·2·14336, activation output 2·14336.
	llamaAttnPerToken = 2*4096 + 2*4096 + 2*(32+16)*128 + 2*32*128 + 4*32
	llamaMLPPerToken  = 2*4096 + 2*4096 + 2*2*14336 + 2*14336
	// The loss: final norm input and output-layer input 2h each, bf16 logits.
	llamaHeadPerToken = 4*4096 + 2*128256
)

func mibOf(b float64) int64 { return int64(math.Ceil(b / (1 << 20))) }

func llama(t *testing.T) presets.Model {
	t.Helper()
	m, err := presets.LookupModel("llama3_8b")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func breakdown(t *testing.T, m presets.Model, l presets.Layout, c presets.Candidate) *MemoryBreakdown {
	t.Helper()
	w, err := BuildWorkload(m, l, WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return PredictMemory(w, PlanCapture(w, c, presets.G3), nil, JobGPUMiB(l, 0), MemoryOptions{})
}

var eagerCand = presets.Candidate{Impl: presets.ImplNone}

// slackOf is the allocator slack the model adds for activations and main
// gradients of a and g bytes.
// Llama 3 8B on one 80 GB GPU cannot train: bf16 weights and gradient
// buffer (2 + 2 bytes per parameter) and the optimizer's fp32 main
// parameters and Adam state (12), unsharded with DP = 1, are 16 bytes per
// parameter, 128 GB before any activation; the optimizer step's fp32
// gradients (4) come after the activations.
func TestLlama8BOnOneGPUDoesNotFit(t *testing.T) {
	l := presets.Layout{GPU: "h100", NumGPUs: 1, TP: 1, PP: 1, CP: 1, GBS: 8, MBS: 1, Seq: 8192, Precision: "bf16"}
	m := breakdown(t, llama(t), l, eagerCand)
	if m.Weights != mibOf(2*llamaParams) || m.Gradients != mibOf(2*llamaParams) || m.Optimizer != mibOf(12*llamaParams) ||
		m.MainGrads != mibOf(4*llamaParams) {
		t.Errorf("weights %d gradients %d optimizer %d main gradients %d MiB; want %d, %d, %d, %d", m.Weights, m.Gradients,
			m.Optimizer, m.MainGrads, mibOf(2*llamaParams), mibOf(2*llamaParams), mibOf(12*llamaParams), mibOf(4*llamaParams))
	}
	wantAct := mibOf(8192 * (32*(llamaAttnPerToken+llamaMLPPerToken) + llamaHeadPerToken))
	if m.Activations != wantAct {
		t.Errorf("activations %d MiB, want %d", m.Activations, wantAct)
	}
	if m.Fits || m.GPUMiB != 81559 || m.Total <= m.GPUMiB {
		t.Errorf("llama3_8b TP1 on one H100 fits: %s", m.Describe())
	}
	t.Log(m.Describe())
}

func TestLlama70BOnOneGPUDoesNotFit(t *testing.T) {
	m70, err := presets.LookupModel("llama3_70b")
	if err != nil {
		t.Fatal(err)
	}
	for _, gpu := range []string{"h100", "h200", "b200"} {
		t.Run(gpu, func(t *testing.T) {
			l := presets.Layout{GPU: gpu, NumGPUs: 1, TP: 1, PP: 1, CP: 1, GBS: 8, MBS: 1, Seq: 8192, Precision: "bf16"}
			m := breakdown(t, m70, l, eagerCand)
			if m.Fits || m.Weights < 130_000 { // 70.6e9 parameters × 2 bytes
				t.Errorf("llama3_70b on one %s: %s", gpu, m.Describe())
			}
		})
	}
}

// The default H100 layout (8 GPUs, CP 2: DP×CP = 8 shards the optimizer,
// 4096 tokens per rank and micro-batch) fits: 2 + 2 + 12/8 bytes per
// parameter, then the larger of one micro-batch of activations and the
// optimizer step's fp32 gradients (4/8), and the allocator's reserve.
func TestLlama8BDefaultLayoutFits(t *testing.T) {
	mod := llama(t)
	l := presets.Layout{GPU: "h100", NumGPUs: 8, TP: 1, PP: 1, CP: 2, GBS: 128, MBS: 1, Seq: 8192, Precision: "bf16"}
	m := breakdown(t, mod, l, eagerCand)
	tokens := 8192.0 / 2
	act := tokens * (32*(llamaAttnPerToken+llamaMLPPerToken) + llamaHeadPerToken)
	want := MemoryBreakdown{
		Weights:     mibOf(2 * llamaParams),
		Gradients:   mibOf(2 * llamaParams),
		Optimizer:   mibOf(12 * llamaParams / 8.0),
		MainGrads:   mibOf(4 * llamaParams / 8.0),
		Activations: mibOf(act),
		Context:     OutsideAllocatorFor("h100").MiB,
	}
	// The default allocator's reserve over the activations: a share of
	// one layer and the loss, however many layers there are.
	want.Slack = mibOf(reserveShare * tokens * (llamaAttnPerToken + llamaMLPPerToken + llamaHeadPerToken))
	want.SlackOverActivations = want.Slack
	want.Total = want.Weights + want.Gradients + want.Optimizer + max(want.Activations, want.MainGrads) + want.Slack + want.Context
	want.GPUMiB, want.Fits = 81559, true
	// What the breakdown says of itself: the rank, the optimizer's path (a
	// bf16 run through the perf harness: precision-aware, fp32 masters and
	// gradient copies) and where the figure outside the allocator is from.
	want.ContextSource, want.StageLayers, want.PrecisionAware, want.GradBuffer = OutsideAllocatorFor("h100").Source, 32, true, "bf16"
	if *m != want {
		t.Errorf("got  %+v\nwant %+v", *m, want)
	}
	t.Log(m.Describe())
}

// Graphs cost what capturing adds over eager: the pool holds the
// activations of the regions it covers in place of eager's, beside the
// static buffers; what the pool holds cannot be lent to the optimizer
// step's fp32 gradients, as eager's freed activations are.
func TestGraphMemory(t *testing.T) {
	mod := llama(t)
	l := presets.Layout{GPU: "h100", NumGPUs: 8, TP: 1, PP: 1, CP: 2, GBS: 128, MBS: 1, Seq: 8192, Precision: "bf16"}
	none := breakdown(t, mod, l, eagerCand)
	whole := breakdown(t, mod, l, presets.Candidate{Impl: presets.ImplTE, Warmup: 3})
	attn := breakdown(t, mod, l, presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}, Warmup: 3})
	full := breakdown(t, mod, l, presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{"full_iteration"}, Warmup: 3})
	tokens := 8192.0 / 2
	mainGrads := 4 * llamaParams / 8.0
	head := tokens * llamaHeadPerToken
	layers := tokens * 32 * (llamaAttnPerToken + llamaMLPPerToken)
	// Transformer Engine's graphs share one set of static gradient outputs
	// and keep the last backward's gradient inputs; each graph's static
	// input is the tensor its first norm saves, in the pool already
	// (make_graphed_callables with _reuse_graph_input_output_buffers).
	static := 2 * tokens * 4096 * 2
	for _, b := range []*MemoryBreakdown{whole, attn, full} {
		if b.Activations != none.Activations || b.Weights != none.Weights || b.Optimizer != none.Optimizer {
			t.Errorf("graphs changed the eager figures: %s vs %s", b.Describe(), none.Describe())
		}
		if b.Total != none.Total+b.Graphs {
			t.Errorf("total %d is not eager's %d + graphs %d", b.Total, none.Total, b.Graphs)
		}
	}
	// Whole-layer graphs hold every layer's activations; the step then
	// needs the larger of the loss's and the main gradients beside them.
	if want := mibOf(static + math.Max(head, mainGrads) - head); absMiB(whole.Graphs-want) > 1 {
		t.Errorf("TE whole layer: graphs %d MiB, want %d", whole.Graphs, want)
	}
	// Attention graphs leave the MLPs' activations outside, more than the
	// main gradients: only the static buffers are added.
	if want := mibOf(static); absMiB(attn.Graphs-want) > 1 {
		t.Errorf("TE attn: graphs %d MiB, want %d", attn.Graphs, want)
	}
	// A full-iteration graph: every activation beside the main gradients,
	// and the static inputs of every micro-batch.
	w, err := BuildWorkload(mod, l, WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := mibOf(math.Min(layers+head, mainGrads) + float64(l.MicroBatches())*w.StaticInputBytes()); absMiB(full.Graphs-want) > 1 {
		t.Errorf("full iteration: graphs %d MiB, want %d", full.Graphs, want)
	}
}

func absMiB(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// 1F1B keeps PP micro-batches in flight on the first stage: its
// activations are PP times one micro-batch's.
func TestPipelineInFlight(t *testing.T) {
	mod := llama(t)
	l := presets.Layout{GPU: "h100", NumGPUs: 32, TP: 1, PP: 4, CP: 1, GBS: 64, MBS: 1, Seq: 8192, Precision: "bf16"}
	m := breakdown(t, mod, l, eagerCand)
	perMB := 8192.0 * 8 * (llamaAttnPerToken + llamaMLPPerToken) // 8 layers per stage
	if want := mibOf(4 * perMB); m.Activations != want {
		t.Errorf("first stage activations %d MiB, want 4 micro-batches: %d", m.Activations, want)
	}
	// With VP 2 the first stage holds (PP−1)·2 + (VP−1)·PP + 1 = 11 chunks of 4 layers.
	l.VP = 2
	m = breakdown(t, mod, l, eagerCand)
	if want := mibOf(11 * perMB / 2); m.Activations != want {
		t.Errorf("interleaved first stage activations %d MiB, want 11 chunks: %d", m.Activations, want)
	}
}

// Recompute drops what it recomputes: recomputing the MLP keeps its input only.
func TestRecomputeModules(t *testing.T) {
	mod := llama(t)
	l := presets.Layout{GPU: "h100", NumGPUs: 8, TP: 1, PP: 1, CP: 1, GBS: 8, MBS: 1, Seq: 8192, Precision: "bf16", RecomputeModules: []string{"mlp"}}
	m := breakdown(t, mod, l, eagerCand)
	if want := mibOf(8192 * (32*(llamaAttnPerToken+2*4096) + llamaHeadPerToken)); m.Activations != want {
		t.Errorf("recomputed MLP: activations %d MiB, want %d", m.Activations, want)
	}
}

// Expert parameters shard over the expert data-parallel group
// (world / (ETP·EP·PP)), dense ones over DP×CP.
func TestExpertOptimizerSharding(t *testing.T) {
	m, err := presets.LookupModel("qwen3_30b_a3b")
	if err != nil {
		t.Fatal(err)
	}
	l, _ := m.Layout("h100") // 16 GPUs, EP 16: every expert on one rank
	b := breakdown(t, m, l, eagerCand)
	h, e, f := 2048.0, 128.0, 768.0
	expert := 48 * (e / 16) * 3 * h * f                                 // 8 local experts per layer
	dense := 48*(h*(32+8)*128+32*128*h+h*e) + 2*151936*h                // attention, router, embedding, output layer
	if want := mibOf(12 * (dense/16 + expert/1)); b.Optimizer != want { // dense DP×CP = 16, expert DP = 1
		t.Errorf("optimizer %d MiB, want %d", b.Optimizer, want)
	}
}
