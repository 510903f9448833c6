package presets

import (
	"embed"
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"
)

//go:embed models/*.yaml
var modelFiles embed.FS

// builtinOrder is dense, MoE, then hybrid, each family smallest first: the order
// BuiltinModels returns and `cgtune models` prints.
var builtinOrder = []string{
	"llama3_8b", "llama3_70b", "llama31_405b",
	"qwen3_30b_a3b", "qwen3_235b_a22b", "qwen3_next_80b_a3b",
	"deepseek_v3", "deepseek_v4_flash", "deepseek_v4_pro", "kimi_k2",
	"gpt_oss_20b", "gpt_oss_120b",
	"nemotronh_56b", "nemotron_3_nano", "nemotron_3_5_lightning", "nemotron_3_super", "nemotron_3_ultra",
}

// BuiltinModelNames lists the built-in model presets in display order.
func BuiltinModelNames() []string { return slices.Clone(builtinOrder) }

// GPUs are the GPU types cgtune knows: the GPU names of the MB perf
// harness (`run_script.py -g`), the keys a model's layouts may use, plus
// h200, which has no MB perf recipes of its own and takes h100's layouts
// (BorrowsLayouts).
func GPUs() []string {
	return []string{"h100", "h200", "b200", "b300", "gb200", "gb300", "vr200", "r100"}
}

// BorrowsLayouts names the GPU type whose default layouts gpu uses when a
// model has none for gpu itself ("" for none): an H200 is an H100 system
// with more HBM (NVIDIA H200 Tensor Core GPU datasheet), and MB's perf
// recipes have no h200 configurations, so its jobs run the h100 ones.
func BorrowsLayouts(gpu string) string {
	if gpu == "h200" {
		return "h100"
	}
	return ""
}

// Precisions are the compute dtypes of MB perf recipe names.
func Precisions() []string { return []string{"bf16", "fp8cs", "fp8ds", "fp8sc", "fp8mx", "nvfp4"} }

// Dispatchers are MCore's moe_token_dispatcher_type values (MB writes
// hybridep as flex + moe_flex_dispatcher_backend=hybridep).
func Dispatchers() []string { return []string{"alltoall", "allgather", "flex"} }

// Activations are the MLP activations the built-in models use.
func Activations() []string { return []string{"swiglu", "squared_relu", "quick_geglu", "gelu"} }

// Routers are the MoE router score functions (MCore
// moe_router_score_function; sqrtsoftplus is DeepSeek-V4's).
func Routers() []string { return []string{"softmax", "sigmoid", "sqrtsoftplus"} }

// AttentionVariants are the experimental_attention_variant values of MCore
// (gated_delta_net is the deprecated spelling of gdn that MB's Qwen3-Next
// bridge writes) and MB's DeepSeek-V4 bridge (dsv4_hybrid).
func AttentionVariants() []string {
	return []string{"gated_delta_net", "gdn", "gdn2", "dsa", "dsv4_hybrid"}
}

// CompressRatios are the values of CompressedAttention.CSACompressRatios:
// sliding window only (0, or 1 as some checkpoints write it), compressed
// sparse (4), heavily compressed (128).
func CompressRatios() []int { return []int{0, 1, 4, 128} }

// RecomputeModules are MCore's selective recompute_modules values.
func RecomputeModules() []string {
	// gdn_norm_out is Qwen3-Next's gated delta-net output norm; mhc
	// DeepSeek-V4's hyper-connections (MB HEAD recipes/deepseek/gb300/
	// deepseek_v4.py recomputes it).
	return []string{"core_attn", "mlp", "moe", "moe_act", "layernorm", "mla_up_proj", "shared_experts", "gdn_norm_out", "mhc"}
}

// HybridPatternChars are the layer symbols of hybrid_override_pattern cgtune understands.
const HybridPatternChars = "M*-E"

var nameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

// ValidName reports whether s is a valid model or preset name.
func ValidName(s string) bool { return nameRe.MatchString(s) }

type modelFile struct {
	Version int     `yaml:"version"`
	Models  []Model `yaml:"models"`
}

// BuiltinModels returns the embedded model presets in builtinOrder.
func BuiltinModels() ([]Model, error) {
	entries, err := modelFiles.ReadDir("models")
	if err != nil {
		return nil, err
	}
	byName := map[string]Model{}
	for _, e := range entries {
		p := path.Join("models", e.Name())
		data, err := modelFiles.ReadFile(p)
		if err != nil {
			return nil, err
		}
		ms, err := ParseModelYAML("presets/"+p, data)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if _, dup := byName[m.Name]; dup {
				return nil, fmt.Errorf("presets/%s: built-in model %q defined twice", p, m.Name)
			}
			byName[m.Name] = m
		}
	}
	out := make([]Model, 0, len(byName))
	for _, n := range builtinOrder {
		m, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("built-in model %q has no file under presets/models", n)
		}
		out = append(out, m)
		delete(byName, n)
	}
	for n := range byName {
		return nil, fmt.Errorf("built-in model %q is not in the built-in order list", n)
	}
	return out, nil
}

// LookupModel returns the built-in model preset called name.
func LookupModel(name string) (Model, error) {
	if !slices.Contains(builtinOrder, name) {
		return Model{}, fmt.Errorf("unknown model %q (allowed: %s)", name, strings.Join(builtinOrder, ", "))
	}
	// Each built-in lives in models/NAME.yaml; parsing only that file keeps
	// a preset load (which looks its model up) from parsing them all.
	p := path.Join("models", name+".yaml")
	data, err := modelFiles.ReadFile(p)
	if err != nil {
		return Model{}, fmt.Errorf("built-in model %q: %w", name, err)
	}
	ms, err := ParseModelYAML("presets/"+p, data)
	if err != nil {
		return Model{}, err
	}
	for _, m := range ms {
		if m.Name == name {
			return m, nil
		}
	}
	return Model{}, fmt.Errorf("presets/%s does not define model %q", p, name)
}

// ParseModelYAML reads a model preset file (version: 1, models: [...]).
// Errors are one line, FILE:LINE: ..., naming the field and what is allowed.
func ParseModelYAML(file string, data []byte) ([]Model, error) {
	var mf modelFile
	d, err := decodeStrict(file, data, &mf)
	if err != nil {
		return nil, err
	}
	if len(mf.Models) == 0 {
		return nil, d.errf("models", "no models in the file (want a list under models:)")
	}
	seen := map[string]bool{}
	for i := range mf.Models {
		p := fmt.Sprintf("models[%d]", i)
		if err := d.validateModel(&mf.Models[i], p); err != nil {
			return nil, err
		}
		if seen[mf.Models[i].Name] {
			return nil, d.errf(p+".name", "model %q defined twice", mf.Models[i].Name)
		}
		seen[mf.Models[i].Name] = true
	}
	return mf.Models, nil
}

// Layout returns the model's default parallel layout for gpu, with GPU set.
func (m Model) Layout(gpu string) (Layout, error) {
	l, ok := m.Layouts[gpu]
	if from := BorrowsLayouts(gpu); !ok && from != "" {
		if l, ok = m.Layouts[from]; ok {
			if l.Source != "" {
				l.Source += "; "
			}
			l.Source += fmt.Sprintf("%s has no MB perf recipe: %s's layout", gpu, from)
		}
	}
	if !ok {
		return Layout{}, fmt.Errorf("model %s has no layout for gpu %q (allowed: %s)", m.Name, gpu, strings.Join(m.GPUs(), ", "))
	}
	l.GPU = gpu
	return l.Clone(), nil
}

// GPUs lists the GPUs the model has a default layout for, in GPUs() order.
func (m Model) GPUs() []string {
	var out []string
	for _, g := range GPUs() {
		_, own := m.Layouts[g]
		_, borrowed := m.Layouts[BorrowsLayouts(g)]
		if own || borrowed {
			out = append(out, g)
		}
	}
	// Custom models may use GPU names the harness does not know.
	var extra []string
	for g := range m.Layouts {
		if !slices.Contains(out, g) {
			extra = append(extra, g)
		}
	}
	slices.Sort(extra)
	return append(out, extra...)
}

// Kind is "dense", "moe" or "hybrid", for tables.
func (m Model) Kind() string {
	switch {
	case m.Arch.HybridPattern != "":
		return "hybrid"
	case m.Arch.MoE != nil:
		return "moe"
	}
	return "dense"
}

// Validate checks a model built in code (an inline preset model, say) with
// the rules the file parser applies; errors name the field but no line.
func (m Model) Validate() error {
	d := &strictDoc{lines: map[string]int{}}
	m = m.Clone()
	return d.validateModel(&m, "")
}

// Clone returns a deep copy: the layouts map and every slice and pointer
// are the copy's own, so changing one never changes the other.
func (m Model) Clone() Model {
	c := m
	if m.Layouts != nil {
		c.Layouts = make(map[string]Layout, len(m.Layouts))
		for k, l := range m.Layouts {
			c.Layouts[k] = l.Clone()
		}
	}
	if m.Arch.MoE != nil {
		x := *m.Arch.MoE
		c.Arch.MoE = &x
	}
	if m.Arch.MLA != nil {
		x := *m.Arch.MLA
		c.Arch.MLA = &x
	}
	if m.Arch.Mamba != nil {
		x := *m.Arch.Mamba
		c.Arch.Mamba = &x
	}
	if m.Arch.LinearAttention != nil {
		x := *m.Arch.LinearAttention
		x.LinearAttentionPattern = slices.Clone(x.LinearAttentionPattern)
		c.Arch.LinearAttention = &x
	}
	if m.Arch.CompressedAttention != nil {
		x := *m.Arch.CompressedAttention
		x.CSACompressRatios = slices.Clone(x.CSACompressRatios)
		c.Arch.CompressedAttention = &x
	}
	if m.Arch.HyperConnections != nil {
		x := *m.Arch.HyperConnections
		c.Arch.HyperConnections = &x
	}
	return c
}

// ValidateLayout checks l against the model: divisibility of the parallel
// degrees, batch sizes and names.
func (m Model) ValidateLayout(l Layout) error {
	d := &strictDoc{lines: map[string]int{}}
	return d.validateLayout(&m, &l, l.GPU, "")
}

func oneOf(d *strictDoc, path, field, v string, allowed []string) error {
	if !slices.Contains(allowed, v) {
		return d.errf(joinPath(path, field), "field %q: unknown value %q (allowed: %s)", field, v, strings.Join(allowed, ", "))
	}
	return nil
}

func (d *strictDoc) validateModel(m *Model, p string) error {
	if m.Name == "" {
		return d.errf(p, "missing field \"name\" (a name like [a-z0-9][a-z0-9._-]*)")
	}
	if !ValidName(m.Name) {
		return d.errf(joinPath(p, "name"), "field \"name\": %q is not a valid name (allowed: [a-z0-9][a-z0-9._-]*)", m.Name)
	}
	if err := d.validateArch(&m.Arch, joinPath(p, "arch")); err != nil {
		return err
	}
	if len(m.Layouts) == 0 {
		return d.errf(p, "model %s: missing field \"layouts\" (at least one GPU, e.g. %s)", m.Name, strings.Join(GPUs()[:3], ", "))
	}
	for _, g := range m.GPUs() {
		l, own := m.Layouts[g]
		if !own {
			continue // borrowed from another GPU type (BorrowsLayouts), checked there
		}
		lp := joinPath(joinPath(p, "layouts"), g)
		if !slices.Contains(GPUs(), g) {
			return d.errf(lp, "layouts: unknown gpu %q (allowed: %s)", g, strings.Join(GPUs(), ", "))
		}
		if l.GPU != "" && l.GPU != g {
			return d.errf(joinPath(lp, "gpu"), "field \"gpu\" is %q under layouts.%s; leave it out or make it %q", l.GPU, g, g)
		}
		if err := d.validateLayout(m, &l, g, lp); err != nil {
			return err
		}
		l.GPU = g
		m.Layouts[g] = l
	}
	return nil
}

func (d *strictDoc) validateArch(a *Arch, p string) error {
	if err := d.validateArchSizes(a, p); err != nil {
		return err
	}
	if a.Activation != "" {
		if err := oneOf(d, p, "activation", a.Activation, Activations()); err != nil {
			return err
		}
	}
	if a.MLA != nil {
		if a.KVGroups != 0 {
			return d.errf(joinPath(p, "kv_groups"), "field \"kv_groups\" must be 0 (or left out) with mla, got %d", a.KVGroups)
		}
	} else {
		if a.KVGroups <= 0 {
			return d.errf(joinPath(p, "kv_groups"), "field \"kv_groups\" must be a positive integer (0 only with mla), got %d", a.KVGroups)
		}
		if a.Heads%a.KVGroups != 0 {
			return d.errf(joinPath(p, "kv_groups"), "field \"kv_groups\": heads (%d) is not divisible by kv_groups (%d)", a.Heads, a.KVGroups)
		}
	}
	if a.MoE != nil {
		mp := joinPath(p, "moe")
		if a.MoE.TopK > a.MoE.Experts {
			return d.errf(joinPath(mp, "top_k"), "field \"top_k\" (%d) is larger than experts (%d)", a.MoE.TopK, a.MoE.Experts)
		}
		if a.MoE.FirstDenseLayers < 0 || a.MoE.FirstDenseLayers >= a.Layers {
			return d.errf(joinPath(mp, "first_dense_layers"), "field \"first_dense_layers\" must be in [0, layers-1] = [0, %d], got %d", a.Layers-1, a.MoE.FirstDenseLayers)
		}
		if a.MoE.Router != "" {
			if err := oneOf(d, mp, "router", a.MoE.Router, Routers()); err != nil {
				return err
			}
		}
	}
	if err := d.validatePattern(a, p); err != nil {
		return err
	}
	return d.validateAttentionVariant(a, p)
}

// validateAttentionVariant checks the fields of the new attention kinds:
// each block goes with its variant, and the per-layer lists cover every
// layer.
func (d *strictDoc) validateAttentionVariant(a *Arch, p string) error {
	v := a.ExperimentalAttentionVariant
	if v != "" {
		if err := oneOf(d, p, "experimental_attention_variant", v, AttentionVariants()); err != nil {
			return err
		}
	}
	if la := a.LinearAttention; la != nil {
		lp := joinPath(p, "linear_attention")
		if v != "gated_delta_net" && v != "gdn" && v != "gdn2" {
			return d.errf(lp, "field \"linear_attention\" needs experimental_attention_variant gated_delta_net, gdn or gdn2 (got %q)", v)
		}
		if la.LinearNumValueHeads%la.LinearNumKeyHeads != 0 {
			return d.errf(joinPath(lp, "linear_num_value_heads"), "field \"linear_num_value_heads\" (%d) is not a multiple of linear_num_key_heads (%d)", la.LinearNumValueHeads, la.LinearNumKeyHeads)
		}
		if (la.LinearAttentionFreq == 0) == (len(la.LinearAttentionPattern) == 0) {
			return d.errf(lp, "give one of linear_attention_freq (every N-th layer softmax attention) and linear_attention_pattern (1 linear, 0 softmax per layer)")
		}
		if n := len(la.LinearAttentionPattern); n > 0 && n != a.Layers {
			return d.errf(joinPath(lp, "linear_attention_pattern"), "field \"linear_attention_pattern\" has %d entries but layers is %d", n, a.Layers)
		}
		for i, x := range la.LinearAttentionPattern {
			if x != 0 && x != 1 {
				return d.errf(joinPath(lp, "linear_attention_pattern"), "field \"linear_attention_pattern\": entry %d is %d (allowed: 0 softmax attention, 1 linear attention)", i+1, x)
			}
		}
	}
	if ca := a.CompressedAttention; ca != nil {
		cp := joinPath(p, "compressed_attention")
		if v != "dsv4_hybrid" {
			return d.errf(cp, "field \"compressed_attention\" needs experimental_attention_variant dsv4_hybrid (got %q)", v)
		}
		if a.MLA == nil {
			return d.errf(cp, "field \"compressed_attention\" needs mla (DeepSeek-V4's attention reads q_lora_rank, qk_rope_dim, v_head_dim, o_groups and o_lora_rank)")
		}
		if n := len(ca.CSACompressRatios); n < a.Layers || n > MaxLayers {
			return d.errf(joinPath(cp, "csa_compress_ratios"), "field \"csa_compress_ratios\" has %d entries; want one per layer (%d) and per MTP layer", n, a.Layers)
		}
		for i, r := range ca.CSACompressRatios {
			if !slices.Contains(CompressRatios(), r) {
				return d.errf(joinPath(cp, "csa_compress_ratios"), "field \"csa_compress_ratios\": entry %d is %d (allowed: 0, 1, 4, 128)", i+1, r)
			}
		}
	}
	if a.MTPHybridOverridePattern != "" {
		for i, r := range a.MTPHybridOverridePattern {
			if !strings.ContainsRune(HybridPatternChars, r) {
				return d.errf(joinPath(p, "mtp_hybrid_override_pattern"), "field \"mtp_hybrid_override_pattern\": character %q at position %d (allowed: M mamba, * attention, - mlp, E moe)", r, i+1)
			}
		}
	}
	return nil
}

func (d *strictDoc) validatePattern(a *Arch, p string) error {
	pp := joinPath(p, "hybrid_pattern")
	if a.HybridPattern == "" {
		if a.Mamba != nil {
			return d.errf(joinPath(p, "mamba"), "field \"mamba\" needs hybrid_pattern (which layers are M)")
		}
		return nil
	}
	counts := map[rune]int{}
	for i, r := range a.HybridPattern {
		if !strings.ContainsRune(HybridPatternChars, r) {
			return d.errf(pp, "field \"hybrid_pattern\": character %q at position %d (allowed: M mamba, * attention, - mlp, E moe)", r, i+1)
		}
		counts[r]++
	}
	if n := len(a.HybridPattern); n != a.Layers {
		return d.errf(pp, "field \"hybrid_pattern\" has %d layers (%d M, %d *, %d -, %d E) but layers is %d",
			n, counts['M'], counts['*'], counts['-'], counts['E'], a.Layers)
	}
	if counts['M'] > 0 && a.Mamba == nil {
		return d.errf(pp, "field \"hybrid_pattern\" has %d M (Mamba) layers but the arch has no mamba: section", counts['M'])
	}
	if counts['E'] > 0 && a.MoE == nil {
		return d.errf(pp, "field \"hybrid_pattern\" has %d E (MoE) layers but the arch has no moe: section", counts['E'])
	}
	if a.MoE != nil && counts['E'] == 0 {
		return d.errf(joinPath(p, "moe"), "field \"moe\" is set but hybrid_pattern has no E (MoE) layer")
	}
	if a.MoE != nil && a.MoE.FirstDenseLayers != 0 {
		return d.errf(joinPath(joinPath(p, "moe"), "first_dense_layers"), "field \"first_dense_layers\" does not apply to a hybrid model; the pattern says which layers are E")
	}
	return nil
}

func (d *strictDoc) validateLayout(m *Model, l *Layout, gpu, p string) error {
	if err := checkSizes(d, p, layoutSizes(l)); err != nil {
		return err
	}
	if err := d.checkNoZeroDegrees(l, p); err != nil {
		return err
	}
	if err := oneOf(d, p, "precision", l.Precision, Precisions()); err != nil {
		return err
	}
	if l.Dispatcher != "" {
		if err := oneOf(d, p, "dispatcher", l.Dispatcher, Dispatchers()); err != nil {
			return err
		}
	}
	for i, r := range l.RecomputeModules {
		if !slices.Contains(RecomputeModules(), r) {
			return d.errf(fmt.Sprintf("%s[%d]", joinPath(p, "recompute_modules"), i),
				"field \"recompute_modules\": unknown module %q (allowed: %s)", r, strings.Join(RecomputeModules(), ", "))
		}
	}
	if err := d.validateRecipeSettings(l, p); err != nil {
		return err
	}
	where := "layout"
	if gpu != "" {
		where = "layout for " + gpu
	}
	prod, err := layoutProducts(d, l, p, where)
	if err != nil {
		return err
	}
	if l.NumGPUs%prod.tpppcp != 0 {
		return d.errf(joinPath(p, "num_gpus"), "%s: tp×pp×cp = %d×%d×%d = %d does not divide num_gpus %d",
			where, l.TPSize(), l.PPSize(), l.CPSize(), prod.tpppcp, l.NumGPUs)
	}
	dp := l.NumGPUs / prod.tpppcp
	if l.GBS%prod.mbsdp != 0 {
		return d.errf(joinPath(p, "gbs"), "%s: gbs %d is not divisible by mbs×dp = %d×%d = %d",
			where, l.GBS, l.MBS, dp, prod.mbsdp)
	}
	// MCore's expert rank generator needs ETP×EP×PP to divide the world size
	// (parallel_state.initialize_model_parallel); ETP defaults to TP there.
	etp := l.ETP
	if etp == 0 {
		etp = l.TPSize()
	}
	if l.NumGPUs%prod.etpeppp != 0 {
		return d.errf(joinPath(p, "ep"), "%s: etp×ep×pp = %d×%d×%d = %d does not divide num_gpus %d",
			where, etp, l.EPSize(), l.PPSize(), prod.etpeppp, l.NumGPUs)
	}
	if l.VP > 1 && l.PPSize() == 1 {
		return d.errf(joinPath(p, "vp"), "%s: vp %d needs pp > 1 (interleaved pipeline)", where, l.VP)
	}
	if m == nil {
		return nil
	}
	return d.validateLayoutForModel(m, l, p, where)
}

// validateLayoutForModel checks what a layout must satisfy for one model:
// its pipeline layout, and heads, kv_groups and experts split evenly over
// tp and ep; where names the layout in messages.
func (d *strictDoc) validateLayoutForModel(m *Model, l *Layout, p, where string) error {
	a := m.Arch
	if l.PipelineLayout != "" {
		chunks, err := ParsePipelineLayout(l.PipelineLayout)
		if err == nil {
			err = CheckPipelineLayout(chunks, len(a.LayerKinds()), *l)
		}
		if err != nil {
			return d.errf(joinPath(p, "pipeline_layout"), "%s: field \"pipeline_layout\" %q: %w", where, l.PipelineLayout, err)
		}
	}
	if a.Heads > 0 && a.Heads%l.TPSize() != 0 {
		return d.errf(joinPath(p, "tp"), "%s: heads (%d) is not divisible by tp (%d)", where, a.Heads, l.TPSize())
	}
	if a.KVGroups > 0 && a.KVGroups%l.TPSize() != 0 {
		return d.errf(joinPath(p, "tp"), "%s: kv_groups (%d) is not divisible by tp (%d)", where, a.KVGroups, l.TPSize())
	}
	if l.EPSize() > 1 {
		if a.MoE == nil {
			return d.errf(joinPath(p, "ep"), "%s: ep %d needs a MoE model; %s is dense", where, l.EP, m.Name)
		}
		if a.MoE.Experts%l.EPSize() != 0 {
			return d.errf(joinPath(p, "ep"), "%s: experts (%d) is not divisible by ep (%d)", where, a.MoE.Experts, l.EPSize())
		}
	}
	if l.Dispatcher != "" && a.MoE == nil {
		return d.errf(joinPath(p, "dispatcher"), "%s: dispatcher %q needs a MoE model; %s is dense", where, l.Dispatcher, m.Name)
	}
	return nil
}

// OffloadModules are MCore's fine-grained activation offload_modules values.
func OffloadModules() []string {
	return []string{"attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act", "fused_group_mlp"}
}

// validateRecipeSettings checks the recipe-level settings of a layout: the
// shipped CUDA-graph setting and what moves memory.
func (d *strictDoc) validateRecipeSettings(l *Layout, p string) error {
	if l.RecomputeGranularity != "" {
		if err := oneOf(d, p, "recompute_granularity", l.RecomputeGranularity, []string{"selective", "full"}); err != nil {
			return err
		}
	}
	if l.RecomputeLayers != 0 && !l.FullRecompute() {
		return d.errf(joinPath(p, "recompute_layers"), "field \"recompute_layers\" needs recompute_granularity: full")
	}
	if l.RecomputeMethod != "" {
		if err := oneOf(d, p, "recompute_method", l.RecomputeMethod, []string{"uniform", "block"}); err != nil {
			return err
		}
		if !l.FullRecompute() {
			return d.errf(joinPath(p, "recompute_method"), "field \"recompute_method\" needs recompute_granularity: full")
		}
	}
	if l.OptimizerStates != "" {
		if err := oneOf(d, p, "optimizer_states", l.OptimizerStates, []string{"fp32", "bf16"}); err != nil {
			return err
		}
	}
	if l.Optimizer != "" {
		if err := oneOf(d, p, "optimizer", l.Optimizer, Optimizers()); err != nil {
			return err
		}
		// Without the distributed optimizer Megatron-Core builds the
		// layer-wise optimizer's Adam part unwrapped
		// (skip_megatron_wrapping), which it refuses with the
		// precision-aware optimizer (optimizer/__init__.py).
		if l.LayerWiseMuon() && l.PrecisionAwareOptimizer && l.NoDistributedOptimizer {
			return d.errf(joinPath(p, "precision_aware_optimizer"), "field \"precision_aware_optimizer\" cannot be true with optimizer %s and no_distributed_optimizer (Megatron-Core refuses the precision-aware optimizer there)", OptimizerDistMuon)
		}
	}
	for i, m := range l.OffloadModules {
		if !slices.Contains(OffloadModules(), m) {
			return d.errf(fmt.Sprintf("%s[%d]", joinPath(p, "offload_modules"), i),
				"field \"offload_modules\": unknown module %q (allowed: %s)", m, strings.Join(OffloadModules(), ", "))
		}
	}
	if err := d.validateExpertBudget(l, p); err != nil {
		return err
	}
	if l.CUDAGraph != nil {
		gp := joinPath(p, "cuda_graph")
		sp := Space{Impls: []string{l.CUDAGraph.Impl}, Warmups: []int{l.CUDAGraph.Warmup}}
		if len(l.CUDAGraph.Scopes) > 0 {
			sp.Scopes = [][]string{l.CUDAGraph.Scopes}
		}
		if err := d.validateSpace(&sp, gp); err != nil {
			return err
		}
	}
	for k := range l.Settings {
		if !strings.Contains(k, ".") {
			return d.errf(joinPath(p, "settings"), "field \"settings\": key %q is not a dotted recipe field such as model.moe_pad_experts_for_cuda_graph_inference", k)
		}
	}
	return nil
}

// validateExpertBudget checks the flex dispatcher's per-rank budget and
// the paged stash's buffer factors: finite numbers, the budget positive
// where set. Whether the stash has the budget it needs is the rule
// table's (TC-47), as Megatron-Core checks it.
func (d *strictDoc) validateExpertBudget(l *Layout, p string) error {
	if f := l.RankCapacityFactor; !finite(f) || f < 0 {
		return d.errf(joinPath(p, "rank_capacity_factor"), "field \"rank_capacity_factor\": %v is not a positive number (allowed: a positive number, or 0 for none)", f)
	}
	if s := l.PagedStash; s != nil {
		sp := joinPath(p, "paged_stash")
		if !finite(s.CUDAFactor) {
			return d.errf(joinPath(sp, "cuda_factor"), "field \"cuda_factor\": %v is not a number (allowed: a number; negative sizes the buffer by the tokens routed)", s.CUDAFactor)
		}
		if !finite(s.HostFactor) {
			return d.errf(joinPath(sp, "host_factor"), "field \"host_factor\": %v is not a number (allowed: a number, 0 for no host buffer)", s.HostFactor)
		}
	}
	return nil
}

// finite reports whether f is a usable measurement (not NaN or ±Inf).
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
