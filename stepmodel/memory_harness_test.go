package stepmodel

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"cgtune/internal/testmodel"
	"cgtune/presets"
)

// One rank of Llama 3 8B at DP 8, as Megatron-Bridge's perf harness runs
// a bf16 recipe: the figures below are bytes per parameter of the
// optimizer's shard, read off the allocating code (see adamOf).
func harnessLayout() presets.Layout {
	return presets.Layout{GPU: "h100", NumGPUs: 8, TP: 1, PP: 1, CP: 1, GBS: 64, MBS: 1, Seq: 4096, Precision: "bf16"}
}

// (a) The harness turns the precision-aware optimizer on for bf16 Adam;
// Megatron-Bridge's fp8_recipe default ("tensorwise", copied onto the
// optimizer config) keeps Megatron-Core's fp32 main parameters and fp32
// gradient copies; only bf16 states change the bytes: 4 instead of 8,
// and, with a Transformer Engine older than 2.14, their fp32 copies (8)
// at the step. The delayed-scaling fp8 recipe takes the decoupled path:
// no gradient copies.
func TestPrecisionAwareOptimizerBytes(t *testing.T) {
	m := llama(t)
	shard := float64(llamaParams) / 8
	for _, tc := range []struct {
		name                    string
		edit                    func(*presets.Layout)
		oldTE                   bool
		aware, decoupled        bool
		kept, mainGrads, copies float64
	}{
		{"bf16 through the harness", func(*presets.Layout) {}, false, true, false, 12, 4, 0},
		{"bf16 states through the harness", func(l *presets.Layout) { l.OptimizerStates = "bf16" }, false, true, false, 8, 4, 0},
		{"bf16 states with Transformer Engine before 2.14", func(l *presets.Layout) { l.OptimizerStates = "bf16" }, true, true, false, 8, 4, 8},
		{"bf16 states outside the harness, the recipe's flag off", func(l *presets.Layout) { l.OptimizerStates, l.OutsideHarness = "bf16", true }, true, false, false, 12, 4, 0},
		{"fp8 delayed scaling with the recipe's flag", func(l *presets.Layout) { l.Precision, l.PrecisionAwareOptimizer = "fp8ds", true }, true, true, true, 12, 0, 0},
		{"fp32 gradient buffer", func(l *presets.Layout) { l.GradReduceInFP32 = true }, false, true, false, 12, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := harnessLayout()
			tc.edit(&l)
			w, err := BuildWorkload(m, l, WorkloadOptions{BF16MomentCopies: tc.oldTE})
			if err != nil {
				t.Fatal(err)
			}
			b := PredictMemory(w, PlanCapture(w, eagerCand, presets.G3), nil, JobGPUMiB(l, 0), MemoryOptions{})
			if b.PrecisionAware != tc.aware || b.Decoupled != tc.decoupled {
				t.Errorf("precision-aware %v decoupled %v, want %v %v", b.PrecisionAware, b.Decoupled, tc.aware, tc.decoupled)
			}
			if b.Optimizer != mibOf(tc.kept*shard) || b.MainGrads != mibOf(tc.mainGrads*shard) || b.StateCopies != mibOf(tc.copies*shard) {
				t.Errorf("optimizer %d, main grads %d, state copies %d MiB; want %d, %d, %d", b.Optimizer, b.MainGrads, b.StateCopies,
					mibOf(tc.kept*shard), mibOf(tc.mainGrads*shard), mibOf(tc.copies*shard))
			}
		})
	}
}

// (a) A full-iteration graph's pool holds the step's activations, so
// what the optimizer step allocates after them is what the graph adds:
// the fp32 gradient copies, the fp32 copies of bf16 states, or, on the
// decoupled path, neither (only the static inputs of each micro-batch).
func TestFullIterationAddsTheOptimizerStepsTemporaries(t *testing.T) {
	m := llama(t)
	full := presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 3}
	for _, edit := range []func(*presets.Layout){
		func(*presets.Layout) {},
		func(l *presets.Layout) { l.OptimizerStates = "bf16" },
		func(l *presets.Layout) { l.Precision, l.PrecisionAwareOptimizer = "fp8ds", true },
	} {
		l := harnessLayout()
		edit(&l)
		w, err := BuildWorkload(m, l, WorkloadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b := PredictMemory(w, PlanCapture(w, full, presets.G3), nil, 0, MemoryOptions{})
		want := b.MainGrads + b.StateCopies + mibOf(float64(w.MicroBatches)*w.StaticInputBytes())
		if absMiB(b.Graphs-want) > 2 {
			t.Errorf("%s: graphs %d MiB, want the step's temporaries %d + %d and the static inputs: %d", l.Precision, b.Graphs, b.MainGrads, b.StateCopies, want)
		}
	}
}

// (b) With an fp32 gradient buffer the optimizer reads the buffer: the
// eager peak has no gradient copy after the activations, and a
// full-iteration graph adds only its static inputs, not the 12–17% the
// bf16 buffer's copies would.
func TestFP32GradientBuffer(t *testing.T) {
	m := llama(t)
	l := harnessLayout()
	l.GradReduceInFP32 = true
	none := breakdown(t, m, l, eagerCand)
	full := breakdown(t, m, l, presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 3})
	if none.Gradients != mibOf(4*llamaParams) || none.MainGrads != 0 || none.GradBuffer != "fp32" {
		t.Errorf("fp32 buffer: %s", none.Describe())
	}
	if d := float64(full.Total-none.Total) / float64(none.Reserved()); d > 0.01 {
		t.Errorf("full iteration adds %.1f%% over eager's reserved memory with an fp32 buffer: %s", 100*d, full.Describe())
	}
}

// (c) The memory outside the allocator is the measured one: the H200's
// figure is the largest NVML-used-less-peak-reserved of the whole-model
// runs in the data the docs cite, and a GPU type never measured says it
// borrows it.
func TestOutsideAllocatorIsMeasured(t *testing.T) {
	for _, c := range []struct{ gpu, data string }{
		{"NVIDIA H200", "docs/data/memory-peaks-2026-12-02.jsonl.gz"},
		{"NVIDIA H100 80GB HBM3", "docs/data/h100-buffers-2026-12-05.jsonl.gz"},
	} {
		got, largest := OutsideAllocatorFor(c.gpu), largestOutsideIn(t, "../"+c.data)
		if !got.Measured || got.MiB != largest || !strings.Contains(got.Source, c.data) {
			t.Errorf("%s: %+v, want the data's largest %d MiB", c.gpu, got, largest)
		}
	}
	h200 := OutsideAllocatorFor("NVIDIA H200")
	b200 := OutsideAllocatorFor("b200")
	if b200.Measured || b200.MiB != h200.MiB || !strings.HasPrefix(b200.Source, "not measured on B200: assumed from the H200's") {
		t.Errorf("B200: %+v", b200)
	}
	// The total is judged against the device with it; a figure measured on
	// the node (a framework profile's) replaces the table's.
	w, err := BuildWorkload(llama(t), harnessLayout(), WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	table := PredictMemory(w, PlanCapture(w, eagerCand, presets.G3), nil, 0, MemoryOptions{})
	prof := &FrameworkProfile{Source: "test", Key: ProfileKey{GPU: "NVIDIA H100 80GB HBM3"}, OutsideAllocatorMiB: 5000}
	node := PredictMemory(w, PlanCapture(w, eagerCand, presets.G3), prof, 0, MemoryOptions{})
	if table.Context != OutsideAllocatorFor("h100").MiB || node.Context != 5000 || node.Total-table.Total != 5000-table.Context ||
		!strings.Contains(node.ContextSource, "measured on this node") {
		t.Errorf("table %d (%s), node %d (%s)", table.Context, table.ContextSource, node.Context, node.ContextSource)
	}
}

// (e) Layers per pipeline rank as Megatron-Core builds them: with the
// embedding and loss counted in the split, the first rank builds one
// layer fewer (Llama 3.1 405B: 15 at PP 8 VP 8, 7 at PP 16 VP 8; Qwen3
// 235B: 11 at PP 8 VP 4); DeepSeek-V3's layout string puts 7 on the first
// h100 rank and the MTP layer with the loss.
func TestPipelineSplitAsMCoreBuildsIt(t *testing.T) {
	for _, tc := range []struct {
		model, gpu         string
		first, next, mtpAt int
	}{
		{"llama31_405b", "h100", 15, 16, -1},
		{"llama31_405b", "b200", 7, 8, -1},
		{"qwen3_235b_a22b", "h100", 11, 12, -1},
		{"deepseek_v3", "h100", 7, 8, 7},
	} {
		m, err := presets.LookupModel(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.Layout(tc.gpu)
		if err != nil {
			t.Fatal(err)
		}
		s, err := SplitPipeline(m.Arch, l)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for r := range s.Ranks {
			total += len(s.RankLayers(r))
		}
		if got := len(s.RankLayers(0)); got != tc.first || len(s.RankLayers(1)) != tc.next || total != len(m.Arch.LayerKinds()) || s.Note != "" {
			t.Errorf("%s %s: rank 0 builds %d layers, rank 1 %d, %d in all (%s); want %d, %d", tc.model, tc.gpu, got, len(s.RankLayers(1)), total, s.Note, tc.first, tc.next)
		}
		if tc.mtpAt >= 0 && s.MTP(tc.mtpAt) != 1 {
			t.Errorf("%s: the MTP layer is not on rank %d", tc.model, tc.mtpAt)
		}
	}
}

// (e) The memory judge is the fullest rank: Llama 3.1 405B's first rank on
// b200 builds one layer fewer than the next, whose 8 layers hold the
// interleaved schedule's 141 chunks in flight.
func TestMemoryJudgesTheFullestRank(t *testing.T) {
	m, err := presets.LookupModel("llama31_405b")
	if err != nil {
		t.Fatal(err)
	}
	l, _ := m.Layout("b200")
	b := breakdown(t, m, l, eagerCand)
	if b.Stage != 1 || b.StageLayers != 8 {
		t.Errorf("judged rank %d with %d layers, want rank 1 with 8", b.Stage, b.StageLayers)
	}
	// One chunk is one layer: (PP − 1 − 1)·2 + (VP − 1)·PP + 1 = 141 of
	// them in flight on rank 1 (get_pp_rank_microbatches).
	perLayer := 8192.0 * (33920 + 96256) // TP 4 with sequence parallelism, bytes per token as the test's Llama figures
	if got, want := float64(b.Activations), 141*perLayer/(1<<20); math.Abs(got-want)/want > 0.01 {
		t.Errorf("activations %.0f MiB, want %.0f", got, want)
	}
}

// (f) With EP communication overlap Transformer Engine's graphs are
// captured per micro-batch even without pipelining
// (_get_cuda_graph_input_data); the local implementation keeps one
// runner per layer.
func TestEPOverlapCapturesPerMicroBatch(t *testing.T) {
	m, err := presets.LookupModel("qwen3_30b_a3b")
	if err != nil {
		t.Fatal(err)
	}
	l, _ := m.Layout("h100")
	if l.PPSize() != 1 {
		t.Fatalf("the test needs PP 1, the layout has %d", l.PPSize())
	}
	te := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{presets.ScopeAttn}, Warmup: 3}
	for _, overlap := range []bool{false, true} {
		w, err := BuildWorkload(m, l, WorkloadOptions{EPOverlap: overlap})
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if overlap {
			want = w.MicroBatches
		}
		if p := PlanCapture(w, te, presets.G3); p.RealCaptured != want {
			t.Errorf("EP overlap %v: TE captures %d micro-batches, want %d", overlap, p.RealCaptured, want)
		}
		if p := PlanCapture(w, presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeAttn}, Warmup: 3}, presets.G3); p.RealCaptured != 1 {
			t.Errorf("EP overlap %v: local captures %d micro-batches, want 1", overlap, p.RealCaptured)
		}
	}
	// The combined 1F1B schedule saves the next micro-batch's layers as it
	// frees the previous one's: one micro-batch and one layer in flight.
	w, err := BuildWorkload(m, l, WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plain := PredictMemory(w, PlanCapture(w, eagerCand, presets.G3), nil, 0, MemoryOptions{})
	w, err = BuildWorkload(m, l, WorkloadOptions{EPOverlap: true})
	if err != nil {
		t.Fatal(err)
	}
	overlap := PredictMemory(w, PlanCapture(w, eagerCand, presets.G3), nil, 0, MemoryOptions{})
	layer := mibOf(newActivations(w).layer(presets.LayerMoE))
	if d := overlap.Activations - plain.Activations; absMiB(d-layer) > 1 {
		t.Errorf("EP overlap at PP 1 adds %d MiB of activations, want one MoE layer's %d", d, layer)
	}
	// Interleaved: one more warm-up forward, each 1F1B step freeing as it
	// saves: as many chunks in flight at the peak as without.
	for _, overlap := range []bool{false, true} {
		if got := inFlightMicroBatches(4, 2, 0, 16, overlap); got != 11.0/2 {
			t.Errorf("EP overlap %v, PP 4 VP 2 rank 0: %v stage-equivalents in flight, want 11 chunks of 2", overlap, got)
		}
	}
}

// The routed experts run on the rank's sequence-parallel share of the
// tokens: at TP 2 (ETP 1) they save half of what they save at TP 1, and
// an expert-TP group of 2 gathers its members' tokens for half an FFN
// each.
func TestExpertsSeeTheSequenceParallelShare(t *testing.T) {
	m, err := presets.LookupModel("qwen3_30b_a3b")
	if err != nil {
		t.Fatal(err)
	}
	per := func(tp, etp int) float64 {
		l := presets.Layout{GPU: "h100", NumGPUs: 16, TP: tp, ETP: etp, EP: 8 / max(tp, etp), PP: 1, CP: 1, GBS: 16, MBS: 1, Seq: 4096, Precision: "bf16"}
		w, err := BuildWorkload(m, l, WorkloadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return newActivations(w).expertsPerToken()
	}
	h, f, k := 2048.0, 768.0, 8.0
	tp1 := k * (2*h + 4 + 2*2*f + 2*f) // input, probability, fc1 output (SwiGLU), activation output
	if got := per(1, 1); math.Abs(got-tp1) > 1e-6 {
		t.Errorf("TP 1: %v bytes per token, want %v", got, tp1)
	}
	if got := per(2, 1); math.Abs(got-tp1/2) > 1e-6 {
		t.Errorf("TP 2, ETP 1: %v, want half of TP 1's: %v", got, tp1/2)
	}
	if got, want := per(2, 2), k*(2*h+4)+k*(2*2*f+2*f)/2; math.Abs(got-want) > 1e-6 {
		t.Errorf("TP 2, ETP 2: %v, want %v", got, want)
	}
}

// Tensor-scaled fp8 weights keep their transpose only on Hopper.
func TestFP8WeightsPerGPU(t *testing.T) {
	for gpu, want := range map[string]float64{"h100": 2, "h200": 2, "b200": 1, "gb300": 1} {
		if got := weightBytesOf("fp8cs", gpu); got != want {
			t.Errorf("fp8cs on %s: %v bytes per parameter, want %v", gpu, got, want)
		}
	}
}

// Full recompute keeps each group's input (uniform) or the first layers'
// inputs and the rest whole (block, what the harness's -rl sets); the
// backward recomputes uniform's last group beside every group's input,
// block's layers after the rest of the chunk has freed its activations.
func TestFullRecomputeMethods(t *testing.T) {
	m := llama(t)
	l := harnessLayout()
	tokens := 4096.0
	layer := tokens * (llamaAttnPerToken + llamaMLPPerToken)
	input := tokens * 2 * 4096
	head := tokens * llamaHeadPerToken
	for _, tc := range []struct {
		method string
		n      int
		want   float64
	}{
		{"uniform", 1, 32*input + layer + head},
		{"uniform", 4, 8*input + 4*layer + head},
		{"block", 4, 4*input + 28*layer + head},
		{"block", 32, 32*input + layer + head},
	} {
		l.RecomputeGranularity, l.RecomputeMethod, l.RecomputeLayers = "full", tc.method, tc.n
		if got := breakdown(t, m, l, eagerCand).Activations; absMiB(got-mibOf(tc.want)) > 1 {
			t.Errorf("%s %d: activations %d MiB, want %d", tc.method, tc.n, got, mibOf(tc.want))
		}
	}
}

// Offloading the first N of a chunk's L layers to the host leaves the
// other L−N layers' activations on the device at the peak (Transformer
// Engine's offload synchronizer frees layer i's copy when layer L−N+i
// starts), beside the loss's.
func TestCPUOffloadKeepsTheOtherLayers(t *testing.T) {
	m := llama(t)
	l := harnessLayout()
	tokens := 4096.0
	layer := tokens * (llamaAttnPerToken + llamaMLPPerToken)
	head := tokens * llamaHeadPerToken
	for _, n := range []int{1, 8, 20, 31} {
		l.CPUOffloadLayers = n
		want := float64(32-n)*layer + head
		if got := breakdown(t, m, l, eagerCand).Activations; absMiB(got-mibOf(want)) > 1 {
			t.Errorf("%d of 32 layers offloaded: activations %d MiB, want %d", n, got, mibOf(want))
		}
	}
}

// Megatron-FSDP shards every parameter, but the embedding and the output
// layer are no FSDP units: their whole bf16 weights stay gathered beside
// the shards and the two gathered layers of fsdp_double_buffer.
func TestFSDPKeepsTheVocabularyLayersGathered(t *testing.T) {
	m := llama(t)
	l := harnessLayout()
	l.FSDP, l.NumGPUs = true, 32
	a := m.Arch
	h, q, kv, f := float64(a.Hidden), float64(a.Heads*a.HeadDim), float64(a.KVGroups*a.HeadDim), float64(a.FFNHidden)
	layer := h*(q+2*kv) + q*h + 3*h*f + 2*h // QKV, output projection, SwiGLU MLP, two norms
	vocab := 2 * float64(a.Vocab) * h       // embedding and untied output layer
	total := float64(a.Layers)*layer + vocab + h
	want := 2*total/32 + 2*2*layer + 2*vocab*(1-1.0/32) // bf16 bytes
	if got := breakdown(t, m, l, eagerCand).Weights; absMiB(got-mibOf(want)) > 2 {
		t.Errorf("FSDP weights %d MiB, want %d (shard, two gathered layers, the whole embedding and output layer)", got, mibOf(want))
	}
}

// MXFP8 saves each quantized GEMM input with one scale byte per 32
// elements, where tensor-scaled fp8 saves one scale per tensor: the
// activations differ by 1/32 byte per saved GEMM-input element (QKV,
// output projection, fc1 and fc2 inputs of every layer).
func TestMXFP8InputsKeepTheirScales(t *testing.T) {
	m := llama(t)
	l := harnessLayout()
	a := m.Arch
	perLayer := float64(a.Hidden + a.Heads*a.HeadDim + a.Hidden + a.FFNHidden)
	want := float64(a.Layers) * perLayer * float64(l.Seq) / 32
	l.Precision = "fp8cs"
	cs := breakdown(t, m, l, eagerCand).Activations
	l.Precision = "fp8mx"
	mx := breakdown(t, m, l, eagerCand).Activations
	if absMiB(mx-cs-mibOf(want)) > 1 {
		t.Errorf("MXFP8 activations %d MiB, tensor-scaled fp8 %d: difference %d, want %d", mx, cs, mx-cs, mibOf(want))
	}
}

// With a per-rank expert budget and no paged stash, the experts save
// tensors of the budget's rows: factor × the average routed tokens, so
// each step of the factor adds the same activations, and factor 1 is the
// unbudgeted figure.
func TestExpertBudgetPadsTheSavedTensors(t *testing.T) {
	m, l := testmodel.Builtin(t, "gpt_oss_20b", "b300")
	act := func(f float64) int64 {
		l.RankCapacityFactor, l.PagedStash = f, nil
		return breakdown(t, m, l, eagerCand).Activations
	}
	none, one, two, three := act(0), act(1), act(2), act(3)
	if none != one {
		t.Errorf("factor 1 holds %d MiB, no budget %d: the budget of the average is the tokens routed", one, none)
	}
	if two <= one || absMiB((three-two)-(two-one)) > 1 {
		t.Errorf("activations at factors 1, 2, 3: %d, %d, %d MiB: want equal positive steps", one, two, three)
	}
}

// The allocator's reserve above what is allocated does not grow with the
// micro-batches in flight (their activations are blocks of the sizes the
// allocator hands out again): fewer micro-batches per step, fewer in
// flight on an interleaved pipeline rank (the same rank the fullest),
// less activation memory, the same slack.
func TestSlackDoesNotGrowWithMicroBatchesInFlight(t *testing.T) {
	m, l := testmodel.Builtin(t, "llama3_70b", "h100")
	many := breakdown(t, m, l, eagerCand)
	l.GBS = l.MBS * l.NumGPUs / (l.TPSize() * l.PPSize() * l.CPSize()) * 4 // four micro-batches per rank: 20 chunk-forwards, not 23, on rank 0
	few := breakdown(t, m, l, eagerCand)
	if few.Activations >= many.Activations {
		t.Fatalf("activations %d MiB with 4 micro-batches, %d with %d: want fewer in flight", few.Activations, many.Activations, l.GBS)
	}
	if few.Slack != many.Slack {
		t.Errorf("slack %d MiB with 4 micro-batches per rank (rank %d), %d with more (rank %d): want the same", few.Slack, few.Stage, many.Slack, many.Stage)
	}
}

// largestOutsideIn is the largest NVML used less peak reserved memory of
// the whole-model runs in a bench/memory/peaks.py output file.
func largestOutsideIn(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var largest int64
	sc := bufio.NewScanner(z)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r struct {
			Used     int64 `json:"device_used_mib"`
			Reserved int64 `json:"peak_reserved_mib"`
		}
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Used > 0 {
			largest = max(largest, r.Used-r.Reserved)
		}
	}
	return largest
}

// Nor does it grow with the layers: the allocator hands the blocks of one
// layer's backward to the next (docs/memory-depth-2026-12-05.md). Half
// the layers on a rank without pipelining, about half the activations,
// the same reserve.
func TestSlackDoesNotGrowWithLayers(t *testing.T) {
	m, l := testmodel.Builtin(t, "llama3_70b", "gb200")
	deep := breakdown(t, m, l, eagerCand)
	m.Arch.Layers /= 2
	l.CPUOffloadLayers /= 2
	shallow := breakdown(t, m, l, eagerCand)
	if 10*shallow.Activations > 6*deep.Activations {
		t.Fatalf("activations %d MiB with %d layers, %d with twice as many: want about half", shallow.Activations, m.Arch.Layers, deep.Activations)
	}
	if shallow.Slack != deep.Slack || deep.Slack == 0 {
		t.Errorf("reserve %d MiB with %d layers, %d with twice as many: want the same", shallow.Slack, m.Arch.Layers, deep.Slack)
	}
}

// Expandable segments (the recipe's PYTORCH_CUDA_ALLOC_CONF) leave less
// stranded between blocks than the default allocator: the same layout
// with them reserves the smaller share of one layer, and a --set of the
// variable reaches the model as the recipe's own does.
func TestExpandableSegmentsReserveLess(t *testing.T) {
	m, l := testmodel.Builtin(t, "llama3_70b", "gb200")
	if ExpandableSegments(l) {
		t.Fatal("the gb200 recipe keeps the default allocator")
	}
	plain := breakdown(t, m, l, eagerCand)
	l = l.Clone()
	l.Settings["env.PYTORCH_CUDA_ALLOC_CONF"] = "garbage_collection_threshold:0.8, expandable_segments:True"
	expandable := breakdown(t, m, l, eagerCand)
	want := float64(plain.SlackOverActivations) * reserveShareExpandable / reserveShare
	if expandable.SlackOverActivations >= plain.SlackOverActivations || math.Abs(float64(expandable.SlackOverActivations)-want) > 1 {
		t.Errorf("reserve %d MiB with expandable segments, %d without: want %.0f", expandable.SlackOverActivations, plain.SlackOverActivations, want)
	}
}
