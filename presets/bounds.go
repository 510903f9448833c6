package presets

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Limits of the size fields. They sit far above any real model or job
// (the largest built-ins have 126 layers, hidden 16384, vocab 201088,
// 1024 GPUs, 8192-token sequences) and low enough that every product cgtune
// forms from them fits an int64, no memory or time it derives overflows,
// and a workload is built in milliseconds.
const (
	MaxLayers   = 1024
	MaxHidden   = 1 << 17 // 131072
	MaxFFN      = 1 << 20 // ffn_hidden, MoE expert and shared-expert FFN
	MaxHeads    = 4096    // attention heads, kv groups, Mamba heads and groups
	MaxHeadDim  = 1024    // head_dim, MLA qk/rope/v head dims, Mamba head_dim and state_dim
	MaxVocab    = 1 << 22 // 4194304
	MaxExperts  = 4096
	MaxLoraRank = 1 << 16 // MLA q/kv LoRA ranks

	MaxGPUs   = 1 << 20 // num_gpus
	MaxDegree = 1 << 16 // tp, pp, cp, ep, etp
	MaxVP     = 1024
	MaxGBS    = 1 << 22
	MaxMBS    = 1 << 16
	MaxSeq    = 1 << 24
	// MaxTokensPerMicroBatch bounds mbs × seq, the tokens one micro-batch
	// carries before context parallelism splits them.
	MaxTokensPerMicroBatch = 1 << 24

	// MaxWarmup bounds cuda_graph_warmup_steps (MCore's default is 3).
	MaxWarmup = 1000

	// MaxSpaceCandidates bounds the candidates a search space enumerates.
	// Before the search starts each one is checked against the rules and
	// its capture planned (milliseconds apiece), and the search runs every
	// configuration at least once: the default space has 391, every scope
	// subset with warm-ups 0 to 30 has 4031.
	MaxSpaceCandidates = 4096
)

// SpaceCandidates is how many candidates space s enumerates before
// spellings of one configuration are merged: each graphed impl × each
// scope set × each warm-up, and none once. Empty parts count as the
// defaults (every impl, every scope subset and full_iteration,
// DefaultWarmups).
func SpaceCandidates(s Space) (n int, parts string) {
	impls, sets, warmups := distinct(s.Impls), len(s.Scopes), len(distinct(s.Warmups))
	if len(impls) == 0 {
		impls = Impls
	}
	if sets == 0 {
		sets = 1<<len(LayerScopes) + 1
	}
	if warmups == 0 {
		warmups = len(DefaultWarmups())
	}
	graphed := len(impls)
	if slices.Contains(impls, ImplNone) {
		graphed--
	}
	parts = fmt.Sprintf("%d graphed impls × %d scope sets × %d warm-ups", graphed, sets, warmups)
	n = graphed * sets * warmups
	if graphed < len(impls) {
		n, parts = n+1, parts+" + none"
	}
	return n, parts
}

// CheckSpaceSize reports a space of more than MaxSpaceCandidates
// candidates, saying why there is a bound.
func CheckSpaceSize(s Space) error {
	n, parts := SpaceCandidates(s)
	if n <= MaxSpaceCandidates {
		return nil
	}
	return fmt.Errorf("the space holds %d candidates (%s), more than the %d cgtune plans: each is checked against the rules and its capture planned before the search starts, and the search runs every configuration; list fewer warm-ups or scope sets",
		n, parts, MaxSpaceCandidates)
}

func distinct[T comparable](xs []T) []T {
	var out []T
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// sized is one integer field and its allowed range.
type sized struct {
	name   string
	v      int
	lo, hi int
}

// checkSizes reports the first field of fs outside its range.
func checkSizes(d *strictDoc, path string, fs []sized) error {
	for _, f := range fs {
		switch {
		case f.v < f.lo && f.lo == 1:
			return d.errf(joinPath(path, f.name), "field %q must be a positive integer, got %d (allowed: 1 to %d)", f.name, f.v, f.hi)
		case f.v < f.lo && f.lo == 0:
			return d.errf(joinPath(path, f.name), "field %q must not be negative, got %d (allowed: 0 to %d)", f.name, f.v, f.hi)
		case f.v < f.lo || f.v > f.hi:
			return d.errf(joinPath(path, f.name), "field %q: %d is out of range (allowed: %d to %d)", f.name, f.v, f.lo, f.hi)
		}
	}
	return nil
}

func archSizes(a *Arch) []sized {
	return []sized{
		{"layers", a.Layers, 1, MaxLayers}, {"hidden", a.Hidden, 1, MaxHidden}, {"ffn_hidden", a.FFNHidden, 1, MaxFFN},
		{"heads", a.Heads, 1, MaxHeads}, {"head_dim", a.HeadDim, 1, MaxHeadDim}, {"vocab", a.Vocab, 1, MaxVocab},
		{"kv_groups", a.KVGroups, 0, MaxHeads},
	}
}

func moeSizes(m *MoE) []sized {
	return []sized{
		{"experts", m.Experts, 1, MaxExperts}, {"top_k", m.TopK, 1, MaxExperts}, {"ffn_hidden", m.FFNHidden, 1, MaxFFN},
		{"shared_expert_ffn", m.SharedExpertFFN, 0, MaxFFN}, {"first_dense_layers", m.FirstDenseLayers, 0, MaxLayers},
		{"moe_latent_size", m.MoELatentSize, 0, MaxHidden}, {"moe_n_hash_layers", m.MoENHashLayers, 0, MaxLayers},
	}
}

func mlaSizes(m *MLA) []sized {
	return []sized{
		{"q_lora_rank", m.QLoraRank, 1, MaxLoraRank}, {"kv_lora_rank", m.KVLoraRank, 1, MaxLoraRank},
		{"qk_head_dim", m.QKHeadDim, 1, MaxHeadDim}, {"qk_rope_dim", m.QKRopeDim, 1, MaxHeadDim}, {"v_head_dim", m.VHeadDim, 1, MaxHeadDim},
		{"o_groups", m.OGroups, 0, MaxHeads}, {"o_lora_rank", m.OLoraRank, 0, MaxLoraRank},
	}
}

func mambaSizes(m *Mamba) []sized {
	return []sized{
		{"state_dim", m.StateDim, 1, MaxHeadDim}, {"heads", m.Heads, 1, MaxHeads},
		{"head_dim", m.HeadDim, 1, MaxHeadDim}, {"groups", m.Groups, 1, MaxHeads},
	}
}

func layoutSizes(l *Layout) []sized {
	return []sized{
		{"num_gpus", l.NumGPUs, 1, MaxGPUs}, {"gbs", l.GBS, 1, MaxGBS}, {"mbs", l.MBS, 1, MaxMBS}, {"seq", l.Seq, 1, MaxSeq},
		{"tp", l.TP, 0, MaxDegree}, {"pp", l.PP, 0, MaxDegree}, {"vp", l.VP, 0, MaxVP},
		{"cp", l.CP, 0, MaxDegree}, {"ep", l.EP, 0, MaxDegree}, {"etp", l.ETP, 0, MaxDegree},
		{"recompute_layers", l.RecomputeLayers, 0, MaxLayers}, {"cpu_offload_layers", l.CPUOffloadLayers, 0, MaxLayers},
		{"mtp_layers", l.MTPLayers, 0, MaxLayers},
	}
}

// checkNoZeroDegrees refuses a parallel size a file writes as 0. A layout
// may leave tp, pp, cp, ep, etp and vp out (Layout.TPSize: 1; vp: no
// virtual pipeline), which decodes to 0 as well; the strict decoder records
// the line of each field the file gives, and that tells the two apart.
func (d *strictDoc) checkNoZeroDegrees(l *Layout, p string) error {
	for _, f := range []struct {
		name    string
		v, max  int
		missing string
	}{
		{"tp", l.TP, MaxDegree, "1"}, {"pp", l.PP, MaxDegree, "1"}, {"vp", l.VP, MaxVP, "no virtual pipeline"},
		{"cp", l.CP, MaxDegree, "1"}, {"ep", l.EP, MaxDegree, "1"}, {"etp", l.ETP, MaxDegree, "1"},
	} {
		if _, given := d.lines[joinPath(p, f.name)]; given && f.v == 0 {
			return d.errf(joinPath(p, f.name), "field %q: 0 is not a size (allowed: 1 to %d; leave the field out for %s)", f.name, f.max, f.missing)
		}
	}
	return nil
}

// validateArchSizes bounds every size of the architecture.
func (d *strictDoc) validateArchSizes(a *Arch, p string) error {
	if err := checkSizes(d, p, archSizes(a)); err != nil {
		return err
	}
	if a.MoE != nil {
		if err := checkSizes(d, joinPath(p, "moe"), moeSizes(a.MoE)); err != nil {
			return err
		}
	}
	if a.MLA != nil {
		if err := checkSizes(d, joinPath(p, "mla"), mlaSizes(a.MLA)); err != nil {
			return err
		}
	}
	if a.Mamba != nil {
		if err := checkSizes(d, joinPath(p, "mamba"), mambaSizes(a.Mamba)); err != nil {
			return err
		}
	}
	if la := a.LinearAttention; la != nil {
		if err := checkSizes(d, joinPath(p, "linear_attention"), []sized{
			{"linear_attention_freq", la.LinearAttentionFreq, 0, MaxLayers}, {"linear_conv_kernel_dim", la.LinearConvKernelDim, 1, MaxHeadDim},
			{"linear_key_head_dim", la.LinearKeyHeadDim, 1, MaxHeadDim}, {"linear_value_head_dim", la.LinearValueHeadDim, 1, MaxHeadDim},
			{"linear_num_key_heads", la.LinearNumKeyHeads, 1, MaxHeads}, {"linear_num_value_heads", la.LinearNumValueHeads, 1, MaxHeads},
		}); err != nil {
			return err
		}
	}
	if ca := a.CompressedAttention; ca != nil {
		if err := checkSizes(d, joinPath(p, "compressed_attention"), []sized{
			{"csa_window_size", ca.CSAWindowSize, 1, MaxSeq}, {"dsa_indexer_n_heads", ca.DSAIndexerNHeads, 1, MaxHeads},
			{"dsa_indexer_head_dim", ca.DSAIndexerHeadDim, 1, MaxHeadDim}, {"dsa_indexer_topk", ca.DSAIndexerTopK, 1, MaxSeq},
		}); err != nil {
			return err
		}
	}
	if hc := a.HyperConnections; hc != nil {
		if err := checkSizes(d, joinPath(p, "hyper_connections"), []sized{
			{"num_residual_streams", hc.NumResidualStreams, 1, MaxHeads}, {"mhc_sinkhorn_iterations", hc.MHCSinkhornIterations, 0, MaxLayers},
		}); err != nil {
			return err
		}
	}
	return nil
}

// CheckSizes reports a size of the model's architecture outside the
// range cgtune can build a workload for. Validate checks this and more;
// CheckSizes is for a model that arrives from elsewhere (a journal, the
// worker protocol) before anything is sized by it.
func (m Model) CheckSizes() error {
	d := &strictDoc{lines: map[string]int{}}
	if err := d.validateArchSizes(&m.Arch, "arch"); err != nil {
		return fmt.Errorf("model %s: %w", m.Name, err)
	}
	if n := len(m.Arch.HybridPattern); n > MaxLayers {
		return fmt.Errorf("model %s: field \"hybrid_pattern\" has %d layers (allowed: 1 to %d)", m.Name, n, MaxLayers)
	}
	return nil
}

// CheckSizes reports a layout field outside its range, or a product of
// layout fields (tp×pp×cp, etp×ep×pp, mbs×dp, mbs×seq) that overflows or
// passes its bound.
func (l Layout) CheckSizes() error {
	d := &strictDoc{lines: map[string]int{}}
	if err := checkSizes(d, "", layoutSizes(&l)); err != nil {
		return fmt.Errorf("layout: %w", err)
	}
	_, err := layoutProducts(d, &l, "", "layout")
	return err
}

// products are the products of layout fields validation divides by.
type products struct {
	tpppcp, etpeppp, mbsdp, tokens int
}

// layoutProducts computes the products of layout fields with checked
// arithmetic: a product that overflows (or passes its bound) is an error
// naming its factors, never a wrapped negative number.
func layoutProducts(d *strictDoc, l *Layout, p, where string) (products, error) {
	var out products
	var ok bool
	if out.tpppcp, ok = MulInts(l.TPSize(), l.PPSize(), l.CPSize()); !ok || out.tpppcp > MaxGPUs {
		return out, d.errf(joinPath(p, "num_gpus"), "%s: tp×pp×cp = %d×%d×%d is more than %d GPUs", where, l.TPSize(), l.PPSize(), l.CPSize(), MaxGPUs)
	}
	etp := l.ETP
	if etp == 0 {
		etp = l.TPSize()
	}
	if out.etpeppp, ok = MulInts(etp, l.EPSize(), l.PPSize()); !ok || out.etpeppp > MaxGPUs {
		return out, d.errf(joinPath(p, "ep"), "%s: etp×ep×pp = %d×%d×%d is more than %d GPUs", where, etp, l.EPSize(), l.PPSize(), MaxGPUs)
	}
	dp := max(1, l.NumGPUs/out.tpppcp)
	if out.mbsdp, ok = MulInts(l.MBS, dp); !ok || out.mbsdp > MaxGBS {
		return out, d.errf(joinPath(p, "mbs"), "%s: mbs×dp = %d×%d is more than the largest gbs, %d", where, l.MBS, dp, MaxGBS)
	}
	if out.tokens, ok = MulInts(l.MBS, l.Seq); !ok || out.tokens > MaxTokensPerMicroBatch {
		return out, d.errf(joinPath(p, "seq"), "%s: mbs×seq = %d×%d tokens per micro-batch is more than %d", where, l.MBS, l.Seq, MaxTokensPerMicroBatch)
	}
	return out, nil
}

// MulInts multiplies its arguments; ok is false when the product
// overflows int or a factor is negative.
func MulInts(xs ...int) (p int, ok bool) {
	p = 1
	for _, x := range xs {
		if x < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(uint64(p), uint64(x))
		if hi != 0 || lo > math.MaxInt {
			return 0, false
		}
		p = int(lo)
	}
	return p, true
}

// mulSat is a×b for sizes, saturating at math.MaxInt instead of wrapping.
func mulSat(xs ...int) int {
	p, ok := MulInts(xs...)
	if !ok {
		return math.MaxInt
	}
	return p
}

// MaxYAMLBytes is the most a YAML input (a preset, a model file, an
// overrides file) may hold. The real ones are a few KiB; the cap turns
// /dev/zero or a runaway generator into an error instead of a process that
// grows until the machine runs out of memory.
const MaxYAMLBytes = 4 << 20
