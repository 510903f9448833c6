package presets

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// TeamPreset is a search setup a team shares: which model, on which GPU,
// with which layout and search space, for which Megatron-Bridge, and
// optionally what cgtune measured with it.
type TeamPreset struct {
	Version     int    `yaml:"version" json:"version"`
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Model names a built-in model; ModelInline carries a full model
	// instead. Exactly one of them is set.
	Model       string `yaml:"model,omitempty" json:"model,omitempty"`
	ModelInline *Model `yaml:"model_inline,omitempty" json:"model_inline,omitempty"`
	GPU         string `yaml:"gpu" json:"gpu"`
	Layout      Layout `yaml:"layout" json:"layout"` // filled from the model's layout for GPU when left out
	Space       Space  `yaml:"space" json:"space"`
	// Reference is the setting the team compares with, in place of the
	// one the layout's recipe ships (nil: the recipe's).
	Reference *Candidate `yaml:"reference,omitempty" json:"reference,omitempty"`
	MBridge   string     `yaml:"mbridge" json:"mbridge"`
	Result    *Outcome   `yaml:"result,omitempty" json:"result,omitempty"`
	// Job is how the team launches the real training job, for
	// `cgtune validate --preset`. Its command is untrusted input: cgtune
	// shows it and runs it only with --trust-preset-command.
	Job *JobSetup `yaml:"job,omitempty" json:"job,omitempty"`
	// Profile is the framework profile measured for the preset's model,
	// layout and GPU on a GPU node (profileattach.go).
	Profile *AttachedProfile `yaml:"profile,omitempty" json:"profile,omitempty"`
}

// JobSetup is the training job of a team preset.
type JobSetup struct {
	Launcher string `yaml:"launcher,omitempty" json:"launcher,omitempty"` // local or slurm
	// Command is a command template ({overrides}, {flags}, {iters}, ...).
	Command     string `yaml:"command,omitempty" json:"command,omitempty"`
	Format      string `yaml:"format,omitempty" json:"format,omitempty"` // what {overrides} renders: dotlist, flags, run_script_flags
	Nodes       int    `yaml:"nodes,omitempty" json:"nodes,omitempty"`
	GPUsPerNode int    `yaml:"gpus_per_node,omitempty" json:"gpus_per_node,omitempty"`
	Time        string `yaml:"time,omitempty" json:"time,omitempty"` // Slurm --time
	Partition   string `yaml:"partition,omitempty" json:"partition,omitempty"`
	Account     string `yaml:"account,omitempty" json:"account,omitempty"`
}

// JobRecord names the training jobs a result was read from.
type JobRecord struct {
	Launcher string   `yaml:"launcher" json:"launcher"`
	IDs      []string `yaml:"ids" json:"ids"` // the winner's job first
	Nodes    int      `yaml:"nodes,omitempty" json:"nodes,omitempty"`
	GPUs     int      `yaml:"gpus,omitempty" json:"gpus,omitempty"`
}

// Launchers are the values of JobSetup.Launcher and JobRecord.Launcher.
var Launchers = []string{"local", "slurm"}

// Outcome is the measured (or estimated) outcome stored with a preset.
type Outcome struct {
	Winner        Candidate `yaml:"winner" json:"winner"`
	StepMS        float64   `yaml:"step_ms" json:"step_ms"`
	EagerStepMS   float64   `yaml:"eager_step_ms" json:"eager_step_ms"`
	Speedup       float64   `yaml:"speedup" json:"speedup"`
	MemoryMiB     float64   `yaml:"memory_mib" json:"memory_mib"`
	Engine        string    `yaml:"engine" json:"engine"` // measured or estimated
	GPUName       string    `yaml:"gpu_name,omitempty" json:"gpu_name,omitempty"`
	DriverVersion string    `yaml:"driver_version,omitempty" json:"driver_version,omitempty"`
	CgtuneVersion string    `yaml:"cgtune_version,omitempty" json:"cgtune_version,omitempty"`
	MeasuredAt    time.Time `yaml:"measured_at,omitempty" json:"measured_at,omitempty"`
	// Job is set for engine "job": the real training jobs it came from.
	Job *JobRecord `yaml:"job,omitempty" json:"job,omitempty"`
}

// Engines are the values of Outcome.Engine ("job": read from the logs of
// real training jobs by `cgtune validate`).
var Engines = []string{"measured", "estimated", "job"}

// DefaultMBridge is the Megatron-Bridge version cgtune targets when none is
// given, everywhere (search, check, emit, presets, the TUI): v0.4, the last
// release of the G2 API (cuda_graph_scope) that most recipes in use were
// written for.
const DefaultMBridge = "0.4"

// DefaultWarmup is MCore's default cuda_graph_warmup_steps (MLM
// megatron/core/transformer/transformer_config.py, core_v0.16.0).
const DefaultWarmup = 3

// DefaultWarmups are the warm-up values a search tries when the space names
// none, in the TUI and headless alike: 3 is MCore's default; MB's perf
// recipes also use 1 (MB src/megatron/bridge/perf_recipes/deepseek/gb200/
// deepseek_v3.py, partial-graph configs) and 2 (MB v0.5.0
// scripts/performance/configs/gpt_oss/gpt_oss_llm_pretrain.py).
func DefaultWarmups() []int { return []int{1, 2, 3} }

// DefaultSpace tries every impl, every scope subset and DefaultWarmups.
func DefaultSpace() Space {
	return Space{Impls: slices.Clone(Impls), Warmups: DefaultWarmups()}
}

// Generation is the MB generation the preset targets.
func (p TeamPreset) Generation() (Generation, error) { return ParseMBridge(p.MBridge) }

// ResolveModel returns the inline model or the built-in one it names.
func (p TeamPreset) ResolveModel() (Model, error) {
	if p.ModelInline != nil {
		return p.ModelInline.Clone(), nil
	}
	return LookupModel(p.Model)
}

// ModelName is the name of the preset's model, inline or built in.
func (p TeamPreset) ModelName() string {
	if p.ModelInline != nil {
		return p.ModelInline.Name
	}
	return p.Model
}

// ParsePreset reads a team preset file strictly: unknown fields, bad impl or
// scope names, unknown models and versions are one-line FILE:LINE errors.
// A missing layout is filled from the model's layout for the GPU.
func ParsePreset(file string, data []byte) (TeamPreset, error) {
	var p TeamPreset
	d, err := decodeStrict(file, data, &p)
	if err != nil {
		return TeamPreset{}, err
	}
	if err := d.validatePreset(&p); err != nil {
		return TeamPreset{}, err
	}
	return p, nil
}

// MarshalPreset writes p in the canonical file form (version 1). Saving,
// exporting and importing all go through it, so a preset that travels
// through them comes back byte for byte. A missing layout is written out
// from the model's default for the GPU.
func MarshalPreset(p TeamPreset) ([]byte, error) {
	p.Version = FileVersion
	if err := p.FillLayout(); err != nil {
		return nil, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Result != nil {
		r := *p.Result
		// YAML timestamps carry no monotonic clock and a parsed one is in
		// UTC; normalising here makes the written form the round-trip form.
		r.MeasuredAt = r.MeasuredAt.UTC().Round(0)
		p.Result = &r
	}
	body, err := marshalYAML(p)
	if err != nil {
		return nil, err
	}
	return append([]byte("# cgtune team preset; see `cgtune preset show NAME`\n"), body...), nil
}

// Validate checks a preset built in code, with the rules ParsePreset
// applies (a missing layout is an error here; use FillLayout first).
func (p TeamPreset) Validate() error {
	d := &strictDoc{lines: map[string]int{}}
	if p.Version == 0 {
		p.Version = FileVersion
	}
	if p.Layout.NumGPUs == 0 {
		return fmt.Errorf("preset %s: missing layout", p.Name)
	}
	// Validation fills defaults in; they must land in a copy, not in the
	// caller's inline model.
	if p.ModelInline != nil {
		m := p.ModelInline.Clone()
		p.ModelInline = &m
	}
	p.Layout = p.Layout.Clone()
	return d.validatePreset(&p)
}

// FillLayout sets p.Layout from the model's default layout for p.GPU when
// it is not set yet.
func (p *TeamPreset) FillLayout() error {
	if p.Layout.NumGPUs != 0 {
		return nil
	}
	m, err := p.ResolveModel()
	if err != nil {
		return err
	}
	l, err := m.Layout(p.GPU)
	if err != nil {
		return err
	}
	p.Layout = l
	return nil
}

func (d *strictDoc) validatePreset(p *TeamPreset) error {
	if p.Version != FileVersion {
		return d.errf("version", "unsupported version %d (allowed: %d)", p.Version, FileVersion)
	}
	if p.Name == "" {
		return d.errf("", "missing field \"name\" (a name like [a-z0-9][a-z0-9._-]*)")
	}
	if !ValidName(p.Name) {
		return d.errf("name", "field \"name\": %q is not a valid preset name (allowed: [a-z0-9][a-z0-9._-]*)", p.Name)
	}
	if strings.ContainsAny(p.Description, "\x00") {
		return d.errf("description", "field \"description\" contains a NUL byte")
	}
	m, err := d.presetModel(p)
	if err != nil {
		return err
	}
	if p.GPU == "" {
		return d.errf("", "missing field \"gpu\" (allowed: %s)", strings.Join(GPUs(), ", "))
	}
	if err := oneOf(d, "", "gpu", p.GPU, GPUs()); err != nil {
		return err
	}
	if err := d.presetLayout(p, &m); err != nil {
		return err
	}
	if c := p.Reference; c != nil {
		*c = ResolveNames(*c)
		sp := Space{Impls: []string{c.Impl}, Warmups: []int{c.Warmup}}
		if len(c.Scopes) > 0 {
			sp.Scopes = [][]string{c.Scopes}
		}
		if err := d.validateSpace(&sp, "reference"); err != nil {
			return err
		}
	}
	if err := d.validateSpace(&p.Space, "space"); err != nil {
		return err
	}
	if p.MBridge == "" {
		return d.errf("", "missing field \"mbridge\" (allowed: %s)", strings.Join(MBridgeVersions, ", "))
	}
	if _, err := ParseMBridge(p.MBridge); err != nil {
		return d.errf("mbridge", "field \"mbridge\": %w", err)
	}
	if p.Result != nil {
		if err := d.validateResult(p.Result, "result"); err != nil {
			return err
		}
	}
	if p.Job != nil {
		if err := d.validateJobSetup(p.Job, "job"); err != nil {
			return err
		}
	}
	if p.Profile != nil {
		return d.validateAttachedProfile(p.Profile, "profile")
	}
	return nil
}

// presetModel is the preset's model: the inline one, validated, or the
// built-in one it names; exactly one of the two must be given.
func (d *strictDoc) presetModel(p *TeamPreset) (Model, error) {
	switch {
	case p.Model != "" && p.ModelInline != nil:
		return Model{}, d.errf("model_inline", "fields \"model\" and \"model_inline\" are both set; give one")
	case p.ModelInline != nil:
		if err := d.validateModel(p.ModelInline, "model_inline"); err != nil {
			return Model{}, err
		}
		return *p.ModelInline, nil
	case p.Model != "":
		bm, err := LookupModel(p.Model)
		if err != nil {
			return Model{}, d.errf("model", "field \"model\": %w", err)
		}
		return bm, nil
	default:
		return Model{}, d.errf("", "missing field \"model\" (a built-in model: %s) or \"model_inline\"", strings.Join(builtinOrder, ", "))
	}
}

// presetLayout fills an absent layout with m's default for the preset's
// GPU, or validates the given one against m and the preset's GPU.
func (d *strictDoc) presetLayout(p *TeamPreset, m *Model) error {
	if p.Layout.NumGPUs == 0 && isZeroLayout(p.Layout) {
		l, err := m.Layout(p.GPU)
		if err != nil {
			return d.errf("gpu", "no layout: given: %w; add a layout: section", err)
		}
		p.Layout = l
		return nil
	}
	if p.Layout.GPU == "" {
		p.Layout.GPU = p.GPU
	}
	if p.Layout.GPU != p.GPU {
		return d.errf("layout.gpu", "field \"gpu\" in layout is %q but the preset's gpu is %q", p.Layout.GPU, p.GPU)
	}
	return d.validateLayout(m, &p.Layout, p.GPU, "layout")
}

// jobTokenRe is what a Slurm time, partition or account may hold; the
// launcher checks them again before they reach a batch script.
var jobTokenRe = regexp.MustCompile(`^[A-Za-z0-9_.,:+-]*$`)

func (d *strictDoc) validateJobSetup(j *JobSetup, p string) error {
	if j.Launcher != "" {
		if err := oneOf(d, p, "launcher", j.Launcher, Launchers); err != nil {
			return err
		}
	}
	if strings.ContainsRune(j.Command, 0) {
		return d.errf(joinPath(p, "command"), "field \"command\" contains a NUL byte")
	}
	if j.Format != "" {
		if err := oneOf(d, p, "format", j.Format, []string{"dotlist", "flags", "run_script_flags"}); err != nil {
			return err
		}
	}
	if j.Nodes < 0 || j.GPUsPerNode < 0 {
		return d.errf(p, "fields \"nodes\" and \"gpus_per_node\" must be 0 or more")
	}
	for _, f := range []struct{ name, v string }{{"time", j.Time}, {"partition", j.Partition}, {"account", j.Account}} {
		if !jobTokenRe.MatchString(f.v) {
			return d.errf(joinPath(p, f.name), "field %q: %q holds characters Slurm does not take (allowed: letters, digits and _.,:+-)", f.name, f.v)
		}
	}
	return nil
}

func isZeroLayout(l Layout) bool {
	return l.GPU == "" && l.NumGPUs == 0 && l.Precision == "" && l.TP == 0 && l.PP == 0 && l.VP == 0 &&
		l.CP == 0 && l.EP == 0 && l.ETP == 0 && l.GBS == 0 && l.MBS == 0 && l.Seq == 0 &&
		l.Dispatcher == "" && !l.SequenceParallel && len(l.RecomputeModules) == 0 && l.Source == "" &&
		l.RecomputeGranularity == "" && l.RecomputeLayers == 0 && l.CUDAGraph == nil && !l.FSDP && l.CPUOffloadLayers == 0 &&
		len(l.OffloadModules) == 0 && l.OptimizerStates == "" && !l.NoDistributedOptimizer && !l.GradReduceInFP32 &&
		l.MTPLayers == 0 && !l.MTPUseRepeatedLayer && l.Optimizer == "" && l.RankCapacityFactor == 0 && l.PagedStash == nil && len(l.Settings) == 0
}

// ValidateSpace checks impl and scope names and warm-up counts.
func ValidateSpace(s Space) error {
	d := &strictDoc{lines: map[string]int{}}
	return d.validateSpace(&s, "")
}

func (d *strictDoc) validateSpace(s *Space, p string) error {
	if len(s.Impls) == 0 {
		return d.errf(p, "missing field \"impls\" in space (allowed: %s)", strings.Join(Impls, ", "))
	}
	// The names outputs print are read as the harness's values (te,
	// whole-layer); the rest of cgtune sees only those.
	for i := range s.Impls {
		s.Impls[i] = ParseImpl(s.Impls[i])
	}
	for i := range s.Scopes {
		s.Scopes[i] = ParseScopes(s.Scopes[i])
	}
	for i, im := range s.Impls {
		ip := fmt.Sprintf("%s[%d]", joinPath(p, "impls"), i)
		if im == FullIterationName {
			return d.errf(ip, "field \"impls\": the full-iteration graph is impl local with the scope set [full_iteration] in a space (allowed impls: %s, te)", strings.Join(Impls, ", "))
		}
		if !slices.Contains(Impls, im) {
			return d.errf(ip, "field \"impls\": unknown impl %q (allowed: %s, te)", im, strings.Join(Impls, ", "))
		}
		if slices.Index(s.Impls, im) != i {
			return d.errf(ip, "field \"impls\": %q listed twice", im)
		}
	}
	for i, set := range s.Scopes {
		sp := fmt.Sprintf("%s[%d]", joinPath(p, "scopes"), i)
		for j, sc := range set {
			if !slices.Contains(Scopes, sc) {
				return d.errf(fmt.Sprintf("%s[%d]", sp, j), "field \"scopes\": unknown scope %q (allowed: %s)", sc, strings.Join(Scopes, ", "))
			}
			if slices.Index(set, sc) != j {
				return d.errf(fmt.Sprintf("%s[%d]", sp, j), "field \"scopes\": %q listed twice in one set", sc)
			}
		}
	}
	if len(s.Warmups) == 0 {
		return d.errf(p, "missing field \"warmups\" in space (e.g. [%d], MCore's default)", DefaultWarmup)
	}
	for i, w := range s.Warmups {
		if w < 0 || w > MaxWarmup {
			return d.errf(fmt.Sprintf("%s[%d]", joinPath(p, "warmups"), i), "field \"warmups\": %d is out of range (allowed: 0 to %d)", w, MaxWarmup)
		}
	}
	if err := CheckSpaceSize(*s); err != nil {
		if p == "" {
			return err
		}
		return d.errf(p, "field %q: %w", p, err)
	}
	return nil
}

// Validate checks a candidate's names and warm-up: impl one of Impls,
// each scope one of Scopes and listed once, warm-up 0 to MaxWarmup. Which
// combinations Megatron accepts is the rules' business (search); this is
// what any candidate must be before it is run at all.
func (c Candidate) Validate() error {
	d := &strictDoc{lines: map[string]int{}}
	return d.validateCandidate(&c, "")
}

func (d *strictDoc) validateCandidate(c *Candidate, p string) error {
	*c = ResolveNames(*c)
	if c.Impl == "" {
		return d.errf(p, "missing field \"impl\" (allowed: %s)", strings.Join(Impls, ", "))
	}
	if !slices.Contains(Impls, c.Impl) {
		return d.errf(joinPath(p, "impl"), "field \"impl\": unknown impl %q (allowed: %s)", c.Impl, strings.Join(Impls, ", "))
	}
	for i, sc := range c.Scopes {
		if !slices.Contains(Scopes, sc) {
			return d.errf(fmt.Sprintf("%s[%d]", joinPath(p, "scopes"), i), "field \"scopes\": unknown scope %q (allowed: %s)", sc, strings.Join(Scopes, ", "))
		}
		if slices.Index(c.Scopes, sc) != i {
			return d.errf(fmt.Sprintf("%s[%d]", joinPath(p, "scopes"), i), "field \"scopes\": %q listed twice", sc)
		}
	}
	if c.Warmup < 0 || c.Warmup > MaxWarmup {
		return d.errf(joinPath(p, "warmup"), "field \"warmup\": %d is out of range (allowed: 0 to %d)", c.Warmup, MaxWarmup)
	}
	return nil
}

func (d *strictDoc) validateResult(r *Outcome, p string) error {
	if err := d.validateCandidate(&r.Winner, joinPath(p, "winner")); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"step_ms", r.StepMS}, {"eager_step_ms", r.EagerStepMS}, {"speedup", r.Speedup}, {"memory_mib", r.MemoryMiB}} {
		if !finite(f.v) || f.v < 0 {
			return d.errf(joinPath(p, f.name), "field %q must be a finite number >= 0, got %v", f.name, f.v)
		}
	}
	if r.Engine == "" {
		return d.errf(p, "missing field \"engine\" in result (allowed: %s)", strings.Join(Engines, ", "))
	}
	if err := oneOf(d, p, "engine", r.Engine, Engines); err != nil {
		return err
	}
	if r.Job != nil {
		jp := joinPath(p, "job")
		if err := oneOf(d, jp, "launcher", r.Job.Launcher, Launchers); err != nil {
			return err
		}
		for i, id := range r.Job.IDs {
			if id == "" || !jobTokenRe.MatchString(id) {
				return d.errf(fmt.Sprintf("%s[%d]", joinPath(jp, "ids"), i), "field \"ids\": %q is not a job id", id)
			}
		}
		if r.Job.Nodes < 0 || r.Job.GPUs < 0 {
			return d.errf(jp, "fields \"nodes\" and \"gpus\" must be 0 or more")
		}
	}
	return nil
}
