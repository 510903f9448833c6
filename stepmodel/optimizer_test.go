package stepmodel

import (
	"strings"
	"testing"

	"cgtune/internal/testmodel"
	"cgtune/presets"
)

// Megatron-Core's layer-wise distributed Muon on Llama 3 8B at DP 8:
// every rank keeps the whole bf16 gradient buffer; its share of the
// layers' weights holds an fp32 main parameter and a momentum (8 bytes),
// the embedding and output layer are Adam's (main parameter and two
// states, 12 bytes) and, without the distributed optimizer, go whole to
// one rank each, so the fullest rank holds one of them whole and 1/8 of
// the other; at the step the share's
// gradients are copied to fp32 (4 bytes), and there is no Adam state copy.
func TestLayerWiseMuonState(t *testing.T) {
	m := llama(t)
	l := harnessLayout()
	l.Optimizer, l.NoDistributedOptimizer = presets.OptimizerDistMuon, true
	b := breakdown(t, m, l, eagerCand)
	const vocab = 128256 * 4096.0
	layers := float64(llamaParams-2*vocab) / 8
	held := vocab + vocab/8
	if !b.LayerWiseMuon || b.PrecisionAware || !strings.Contains(b.Describe(), "layer-wise distributed Muon") {
		t.Errorf("optimizer kind: %s", b.Describe())
	}
	if b.Weights != mibOf(2*llamaParams) || b.Gradients != mibOf(2*llamaParams) {
		t.Errorf("weights %d, gradients %d MiB; want the whole model's bf16 %d each", b.Weights, b.Gradients, mibOf(2*llamaParams))
	}
	if b.Optimizer != mibOf(8*layers+12*held) || b.MainGrads != mibOf(4*(layers+held)) || b.StateCopies != 0 {
		t.Errorf("optimizer %d, main grads %d, state copies %d MiB; want %d, %d, 0", b.Optimizer, b.MainGrads, b.StateCopies,
			mibOf(8*layers+12*held), mibOf(4*(layers+held)))
	}
	// With the distributed optimizer, a DistributedOptimizer shards the
	// embedding and output layer byte by byte.
	l.NoDistributedOptimizer = false
	if b := breakdown(t, m, l, eagerCand); b.Optimizer != mibOf(8*layers+12*2*vocab/8) {
		t.Errorf("with the distributed optimizer: optimizer %d MiB, want %d", b.Optimizer, mibOf(8*layers+12*2*vocab/8))
	}
	// An fp32 buffer is the optimizer's gradient: nothing is copied.
	l.GradReduceInFP32 = true
	if b := breakdown(t, m, l, eagerCand); b.MainGrads != 0 || b.Gradients != mibOf(4*llamaParams) {
		t.Errorf("fp32 buffer: %s", b.Describe())
	}
}

// With a Transformer Engine older than 2.14 FusedAdam copies a parameter
// group's bf16 moments to fp32 at its step, and the dense and expert
// optimizers step one after the other: the copies peak at the larger
// optimizer's share, not at both.
func TestBF16MomentCopiesPeakAtTheLargerOptimizer(t *testing.T) {
	m, l := testmodel.Builtin(t, "qwen3_30b_a3b", "h100")
	l.OptimizerStates = "bf16"
	w, err := BuildWorkload(m, l, WorkloadOptions{BF16MomentCopies: true})
	if err != nil {
		t.Fatal(err)
	}
	b := PredictMemory(w, PlanCapture(w, eagerCand, presets.G3), nil, 0, MemoryOptions{})
	split, err := SplitPipeline(m.Arch, l)
	if err != nil {
		t.Fatal(err)
	}
	p := paramsOf(w, split.Ranks[b.Stage])
	dDense, dExpert := dataParallelSizes(l)
	dense, expert := p.dense/dDense, p.expert/dExpert
	if dense == 0 || expert == 0 {
		t.Fatalf("want both optimizers: dense %.0f, expert %.0f", dense, expert)
	}
	if b.Optimizer != mibOf(8*(dense+expert)) || b.StateCopies != mibOf(8*max(dense, expert)) {
		t.Errorf("optimizer %d, state copies %d MiB; want 8 bytes × both shares %d and × the larger %d",
			b.Optimizer, b.StateCopies, mibOf(8*(dense+expert)), mibOf(8*max(dense, expert)))
	}
}
