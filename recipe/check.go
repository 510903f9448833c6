package recipe

import (
	"fmt"
	"slices"
	"strings"

	"cgtune/presets"
	"cgtune/stepmodel"
)

// Violation is one rule a configuration breaks, with the message the stack
// would print.
type Violation struct {
	ID      string `json:"id"`
	Message string `json:"message"`
	// Hint says what to do, where the stack's message does not (a bare
	// Python error); "" for none.
	Hint string `json:"hint,omitempty"`
}

func (v Violation) String() string {
	if v.Hint != "" {
		return v.ID + ": " + v.Message + " (" + v.Hint + ")"
	}
	return v.ID + ": " + v.Message
}

// ConfigID marks a violation that is not a rule of the stack: the input
// itself could not be read (bad --set value, unknown MB version, ...).
const ConfigID = "CONFIG"

// Report is the outcome of a check: the rules broken, and the notes of the
// auto-fixes that were applied on the way ("ID: what changed").
type Report struct {
	Violations []Violation
	Notes      []string
}

// OK reports whether no rule was broken.
func (r Report) OK() bool { return len(r.Violations) == 0 }

func configReport(err error) Report {
	return Report{Violations: []Violation{{ID: ConfigID, Message: err.Error()}}}
}

// stateFor checks mbridge against the config and returns a state over c.
func stateFor(c *Recipe, mbridge string) (*state, error) {
	gen, mb, err := parseMB(mbridge)
	if err != nil {
		return nil, err
	}
	if gen != c.gen {
		return nil, fmt.Errorf("the configuration was read for %s, but Megatron-Bridge %s is %s", c.gen, mbridge, gen)
	}
	return newState(c, mb), nil
}

// fire evaluates one rule against s, records the violation or applies the
// fix, and reports whether it fired.
func (s *state) fire(r *Rule) bool {
	if !r.AppliesTo(s.gen, s.mb) || !r.RunsUnder(s.launcher) {
		return false
	}
	fired := false
	switch r.Kind {
	case Reject:
		if r.when(s) {
			fired = true
			if !s.fired[r.ID] && !(r.Shadow != "" && s.fired[r.Shadow]) {
				v := Violation{ID: r.ID, Message: r.message(s)}
				if r.hint != nil {
					v.Hint = r.hint(s)
				}
				s.violations = append(s.violations, v)
			}
			s.fired[r.ID] = true
		}
	case AutoFix:
		if r.when != nil && r.when(s) {
			fired = true
			if note := r.fix(s); note != "" {
				s.notes = append(s.notes, r.ID+": "+note)
			}
		}
	}
	if r.after != nil {
		r.after(s)
	}
	return fired
}

func (s *state) runStage(st stage) {
	s.stage = st
	for i := range rules {
		if slices.Contains(rules[i].stages, st) {
			s.fire(&rules[i])
		}
	}
}

// Check runs every rule of Megatron-Bridge version mbridge (and of the
// Megatron-Core and Transformer Engine it pins) against cfg, in MB's
// start-up order, applying the auto-fixes MB applies on the way. cfg is not
// modified. mbridge must be of the generation cfg was built for. With
// WithLauncher(LauncherMLM) the job is Megatron-LM's pretrain_gpt.py: its
// validate_args checks run first and MB's own checks not at all.
func Check(cfg *Recipe, mbridge string, opts ...Option) Report {
	s, err := checked(cfg, mbridge, opts...)
	if err != nil {
		return configReport(err)
	}
	return Report{Violations: s.violations, Notes: s.notes}
}

// checked runs Check's stages on a copy of cfg and returns the state the
// launcher ends its start-up with.
func checked(cfg *Recipe, mbridge string, opts ...Option) (*state, error) {
	s, err := stateFor(cfg.Clone(), mbridge)
	if err != nil {
		return nil, err
	}
	s.launcher = optionsOf(opts).launcher
	if s.launcher == LauncherMLM {
		// The recipe's comm_overlap settings are the job's own flags
		// (--overlap-moe-expert-parallel-comm, --delay-wgrad-compute).
		s.applyCommOverlap()
		s.runStage(stageArgs)
	} else {
		s.runStage(stageCommOverlap)
		s.applyCommOverlap()
	}
	if s.mb >= 6 {
		s.runStage(stagePreFinalize)
	}
	s.runStage(stageMCore)
	s.runStage(stageMB)
	s.runStage(stageProvide)
	s.runStage(stageRuntime)
	return s, nil
}

// CheckWithCapture is Check, then, when no rule is broken, the capture
// plan of the CUDA-graph setting MB ends its start-up with, on the model
// cfg was seeded from and the layout its values describe (Recipe.Layout),
// with the recipe's MoE mode (stepmodel.PlanCapture, as the search plans
// each candidate): a capture known to fail is a WillFailID violation with
// the reason the search gives, and a setting that captures nothing on the
// model is a note.
func CheckWithCapture(cfg *Recipe, mbridge string, opts ...Option) Report {
	return checkWithCapture(cfg, mbridge, newPlanner(cfg.model), opts...)
}

func checkWithCapture(cfg *Recipe, mbridge string, p *planner, opts ...Option) Report {
	s, err := checked(cfg, mbridge, opts...)
	if err != nil {
		return configReport(err)
	}
	r := Report{Violations: s.violations, Notes: s.notes}
	if len(r.Violations) > 0 {
		return r
	}
	v, notes, err := s.captureVerdict(p)
	switch {
	case err != nil:
		r.Violations = append(r.Violations, Violation{ID: ConfigID, Message: err.Error()})
	case v != nil:
		r.Violations = append(r.Violations, *v)
	}
	r.Notes = append(r.Notes, notes...)
	return r
}

// graphSetting is the CUDA-graph setting of the state, as the search
// writes candidates (the perf harness's vocabulary: a full-iteration graph
// is impl local with scope full_iteration).
func (s *state) graphSetting() presets.Candidate {
	w := s.i("model.cuda_graph_warmup_steps")
	switch {
	case s.impl() == presets.ImplNone || s.impl() == "":
		return presets.Candidate{Impl: presets.ImplNone, Scopes: []string{}, Warmup: w}
	case s.fullIteration():
		return presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: w}
	}
	return presets.Candidate{Impl: s.impl(), Scopes: presets.CanonicalScopes(s.moduleNames()), Warmup: w}
}

// moeWorkload sets the workload options the state decides: the layer
// spec (model.transformer_impl), whether FusedAdam copies bf16 moments
// (te_version), and the MoE mode: static shapes, with no
// token count sent to the host, for drop-and-pad experts
// (moe_expert_capacity_factor with moe_pad_expert_input_to_capacity, as
// MCore decides it) and for the flex dispatcher's static per-rank budget;
// else dropless.
func (s *state) moeWorkload(m presets.Model, opts stepmodel.WorkloadOptions) stepmodel.WorkloadOptions {
	if impl := s.str("model.transformer_impl"); impl == "local" {
		opts.LayerSpec = impl
	}
	// FusedAdam fuses the bf16 moments' unscaling into its kernel from
	// Transformer Engine 2.14 (transformer_engine/pytorch/optimizers/
	// fused_adam.py fuse_unscale).
	opts.BF16MomentCopies = s.teBelow("2.14.0")
	if m.Arch.MoE == nil {
		return opts
	}
	opts.EPOverlap = s.epOverlap()
	dropless := !s.staticDispatch()
	opts.Dropless = &dropless
	if !s.dropless() {
		opts.MoECapacityFactor = s.f("model.moe_expert_capacity_factor")
	}
	return opts
}

// planner builds the workloads capture verdicts plan on, once per
// layout, MoE mode and generation, and keeps each verdict: a verdict needs
// only which ops the graphs hold.
type planner struct {
	m        presets.Model
	built    map[string]*stepmodel.Workload
	verdicts map[string]capture
}

// capture is a capture plan's verdict: the failure, or the plan's notes.
type capture struct {
	fail  *Violation
	notes []string
}

func newPlanner(m presets.Model) *planner {
	return &planner{m: m, built: map[string]*stepmodel.Workload{}, verdicts: map[string]capture{}}
}

func (p *planner) workload(l presets.Layout, opts stepmodel.WorkloadOptions) (*stepmodel.Workload, string, error) {
	dropless := opts.Dropless != nil && *opts.Dropless
	shape := l.Clone()
	shape.CUDAGraph, shape.Source = nil, "" // neither moves an op
	key := fmt.Sprintf("%v|%v|%v|%v|%+v", dropless, opts.MoECapacityFactor, opts.Generation, opts.LayerSpec, shape)
	if w, ok := p.built[key]; ok {
		return w, key, nil
	}
	w, err := stepmodel.BuildWorkload(p.m, l, opts)
	if err != nil {
		return nil, key, err
	}
	p.built[key] = w
	return w, key, nil
}

// captureVerdict plans the capture of the state's CUDA-graph setting on
// the planner's model and the recipe's layout (Recipe.Layout): the
// WillFailID violation the search would give it, or the plan's notes.
func (s *state) captureVerdict(p *planner) (*Violation, []string, error) {
	c := s.graphSetting()
	if !c.Graphed() {
		return nil, nil, nil
	}
	w, key, err := p.workload(s.c.Layout(), s.moeWorkload(p.m, stepmodel.WorkloadOptions{Generation: s.gen}))
	if err != nil {
		return nil, nil, err
	}
	key += "|" + c.Key()
	if v, ok := p.verdicts[key]; ok {
		return v.fail, v.notes, nil
	}
	var v capture
	if cp := stepmodel.PlanCapture(w, c, s.gen); cp.Failure != nil {
		v.fail = &Violation{ID: WillFailID, Message: WillFailMessage(cp)}
	} else {
		v.notes = cp.Notes
	}
	p.verdicts[key] = v
	return v.fail, v.notes, nil
}

// ApplyHarnessFlags applies the perf harness's --cuda_graph_impl and
// --cuda_graph_scope flags and the model.cuda_graph_warmup_steps override
// to cfg, as MB's scripts/performance would (MB scripts/performance/utils/
// overrides.py _set_cuda_graph_overrides): PERF-01..05
// reject, PERF-06 sets the companion fields (each change is a note).
// c.Impl == "" means --cuda_graph_impl was not given and c.Scopes == nil
// that --cuda_graph_scope was not; an empty non-nil Scopes is the whole
// layer. MB v0.6+ follow that function as at HEAD; v0.3–v0.5 shipped laxer versions of
// _set_cuda_graph_overrides, which are followed for those releases. After a
// violation cfg is left as the harness had it when it raised.
func ApplyHarnessFlags(cfg *Recipe, c presets.Candidate, mbridge string) (notes []string, violations []Violation) {
	s, err := stateFor(cfg, mbridge)
	if err != nil {
		return nil, configReport(err).Violations
	}
	s.stage = stageHarness
	s.cand = c
	s.scopeGiven = c.Scopes != nil
	if s.fire(ruleByID("PERF-01")) || s.fire(ruleByID("PERF-02")) {
		return s.notes, s.violations // argparse stops before anything is set
	}
	s.set("model.cuda_graph_warmup_steps", Value{Int: c.Warmup})
	switch {
	case s.mb >= 6:
		harnessHead(s)
	case s.mb == 5:
		harness05(s)
	default:
		harness04(s)
	}
	if len(s.violations) == 0 && s.fullIteration() {
		s.harnessSet(false, "full-iteration graph", s.perfNaNChecksOff()...)
	}
	return s.notes, s.violations
}

// perfNaNChecksOff are the NaN checks a full-iteration graph has off under
// the perf harness. Its recipe turns both off before the overrides are
// applied (v0.3/v0.4 _set_common_perf_overrides, from v0.5 the same or
// _benchmark_common, in MB scripts/performance), so a check an override
// turned back on stays on; from v0.5, _set_cuda_graph_overrides turns the
// loss check off for a full-iteration graph whatever was set.
func (s *state) perfNaNChecksOff() []string {
	const loss, grad = "rerun_state_machine.check_for_nan_in_loss", "ddp.check_for_nan_in_grad"
	var keys []string
	if s.mb >= 5 || !s.c.overridden[loss] {
		keys = append(keys, loss)
	}
	if !s.c.overridden[grad] {
		keys = append(keys, grad)
	}
	return keys
}

// ApplyHarness is the pass the perf harness makes over every recipe it
// runs, flags or none: MB's scripts/performance/run_script.py calls
// set_user_overrides, and with it _set_cuda_graph_overrides, whether or
// not --cuda_graph_impl or --cuda_graph_scope was given
// (scripts/performance/utils/overrides.py, v0.3.0 to HEAD). Without
// flags, v0.5.0's asserts that a transformer_engine recipe's
// cuda_graph_scope is a list of TE scopes (None fails) and v0.6.0+ check
// the module names; impl none has its scope cleared. It is
// ApplyHarnessFlags with no flag given.
func ApplyHarness(cfg *Recipe, mbridge string) (notes []string, violations []Violation) {
	w, _ := cfg.Get(KeyWarmup)
	return ApplyHarnessFlags(cfg, presets.Candidate{Warmup: w.Int}, mbridge)
}

// CheckAsApplied is CheckWithCapture of overrides as the user applies
// them, either way: put onto the recipe by a recipe script (cfg as it is)
// and run by the perf harness (cfg, then ApplyHarness). A rule either
// breaks is reported once, the recipe script's first. cfg is not modified.
// A job Megatron-LM's pretrain_gpt.py launches (WithLauncher) never goes
// through MB's perf harness: only the first way applies.
func CheckAsApplied(cfg *Recipe, mbridge string, opts ...Option) Report {
	return checkAsApplied(cfg, mbridge, newPlanner(cfg.model), opts...)
}

func checkAsApplied(cfg *Recipe, mbridge string, p *planner, opts ...Option) Report {
	r := checkWithCapture(cfg, mbridge, p, opts...)
	if optionsOf(opts).launcher == LauncherMLM {
		return r
	}
	h := cfg.Clone()
	notes, vs := ApplyHarness(h, mbridge)
	if len(vs) == 0 {
		hr := checkWithCapture(h, mbridge, p, opts...)
		vs, notes = hr.Violations, append(notes, hr.Notes...)
	}
	for _, v := range vs {
		if !slices.Contains(r.Violations, v) {
			r.Violations = append(r.Violations, v)
		}
	}
	if len(r.Violations) == 0 {
		// The harness's changes are worth a note only where the file
		// holds: they are what the harness run differs in.
		for _, n := range notes {
			if strings.HasPrefix(n, "PERF-") && !slices.Contains(r.Notes, n) {
				r.Notes = append(r.Notes, n)
			}
		}
	}
	return r
}

// Settle is cfg as Megatron-Bridge ends its start-up (every auto-fix of
// Check applied), with Check's report: two recipes that settle the same
// run the same job.
func Settle(cfg *Recipe, mbridge string) (*Recipe, Report) {
	s, err := checked(cfg, mbridge)
	if err != nil {
		return cfg.Clone(), configReport(err)
	}
	return s.c, Report{Violations: s.violations, Notes: s.notes}
}

// harnessSet writes bool fields and notes the ones that changed, in one
// PERF-06 note.
func (s *state) harnessSet(v bool, why string, keys ...string) {
	var changed []string
	for _, k := range keys {
		if s.b(k) != v || s.null(k) {
			s.set(k, Value{Bool: v})
			changed = append(changed, k+"="+pyBool(v))
		}
	}
	if len(changed) > 0 {
		s.notes = append(s.notes, fmt.Sprintf("PERF-06: %s (%s)", strings.Join(changed, ", "), why))
	}
}

func (s *state) harnessRNG(on bool) {
	why := "CUDA graphs need the TE RNG tracker"
	if !on {
		why = "cuda_graph_impl=none"
	}
	s.harnessSet(on, why, "rng.te_rng_tracker", "model.use_te_rng_tracker")
}

// setModules is MB's set_cuda_graph_modules.
func (s *state) setModules(mods []string) {
	if s.gen == presets.G3 {
		s.set("model.cuda_graph_modules", Value{List: slices.Clone(mods)})
		s.set("model.cuda_graph_scope", Value{Null: true})
		return
	}
	s.set("model.cuda_graph_scope", Value{List: slices.Clone(mods)})
}

// harnessHead is _set_cuda_graph_overrides of MB v0.6+ (MB
// scripts/performance/utils/overrides.py).
func harnessHead(s *state) {
	if s.cand.Impl != "" {
		s.set("model.cuda_graph_impl", Value{Str: s.cand.Impl})
		if s.cand.Impl != presets.ImplNone {
			s.harnessRNG(true)
		}
	}
	if s.impl() == presets.ImplNone {
		s.harnessRNG(false)
		if cleared := s.moduleNames(); len(cleared) > 0 {
			s.notes = append(s.notes, "PERF-06: cuda_graph_impl=none: cleared the CUDA graph scope "+pyList(cleared))
		}
		s.setModules([]string{})
		return
	}
	if s.scopeGiven {
		if slices.Contains(s.cand.Scopes, presets.ScopeFullIteration) {
			if s.fire(ruleByID("PERF-03")) || s.fire(ruleByID("PERF-04")) {
				return
			}
			// set_full_iteration_cuda_graph (G3 form; v0.6+ is always G3).
			s.set("model.cuda_graph_impl", Value{Str: "full_iteration"})
			s.setModules([]string{})
		} else {
			s.setModules(s.cand.Scopes)
		}
	}
	if s.fire(ruleByID("PERF-05")) {
		return
	}
	s.fire(ruleByID("MB-05"))
}

// harness05 is _set_cuda_graph_overrides of MB v0.5.0: the scope flag goes
// into the deprecated cuda_graph_scope field as given.
func harness05(s *state) {
	if s.cand.Impl != "" {
		s.set("model.cuda_graph_impl", Value{Str: s.cand.Impl})
		if s.cand.Impl != presets.ImplNone {
			s.harnessRNG(true)
		}
	}
	if s.scopeGiven {
		s.set("model.cuda_graph_scope", Value{List: slices.Clone(s.cand.Scopes)})
	}
	switch s.impl() {
	case presets.ImplTE:
		s.fire(ruleByID("PERF-05"))
	case presets.ImplNone:
		if cleared := names(s.v("model.cuda_graph_scope")); len(cleared) > 0 && !slices.Equal(cleared, []string{"full"}) {
			s.notes = append(s.notes, "PERF-06: cuda_graph_impl=none: cleared model.cuda_graph_scope "+pyList(cleared))
		}
		s.set("model.cuda_graph_scope", Value{List: []string{}})
		s.harnessRNG(false)
	}
}

// harness04 is _set_cuda_graph_overrides of MB v0.3.0/v0.4.0: only the
// flags themselves are checked.
func harness04(s *state) {
	if s.cand.Impl != "" {
		s.set("model.cuda_graph_impl", Value{Str: s.cand.Impl})
		s.harnessRNG(s.cand.Impl != presets.ImplNone)
		if s.cand.Impl == presets.ImplTE && s.fire(ruleByID("PERF-05")) {
			return
		}
	}
	if s.scopeGiven {
		s.set("model.cuda_graph_scope", Value{List: slices.Clone(s.cand.Scopes)})
	}
}

// ValidateCandidate checks candidate c on model m and layout l for
// Megatron-Bridge mbridge: the recipe defaults, then the sets (Hydra-style
// key=value overrides, applied in key order), then c as the perf harness
// applies it, then every rule. A nil c.Scopes is the whole layer here. A
// set that cannot be applied is reported as a CONFIG violation.
func ValidateCandidate(m presets.Model, l presets.Layout, c presets.Candidate, mbridge string, sets map[string]string, opts ...Option) Report {
	return NewValidator(Target{Model: m, Layout: l, MBridge: mbridge, Sets: sets}, opts...).Validate(c)
}

// ValidateWithCapture is ValidateCandidate, then the capture plan's verdict
// (CheckWithCapture): a candidate the search would leave out as WillFailID
// is a violation here.
func ValidateWithCapture(m presets.Model, l presets.Layout, c presets.Candidate, mbridge string, sets map[string]string, opts ...Option) Report {
	return NewValidator(Target{Model: m, Layout: l, MBridge: mbridge, Sets: sets}, opts...).ValidateWithCapture(c)
}

// Validator judges candidates ranked under one target: the recipe of its
// conditions is built once, and capture verdicts are kept.
type Validator struct {
	t     Target
	opts  []Option // how the job is launched (WithLauncher)
	cond  *Recipe
	err   error
	plans *planner
	// whatIf are the conditions of candidates with enabling changes of
	// their own (Candidate.WhatIf), by change set.
	whatIf whatIfConds
}

// NewValidator prepares the judging of candidates under t, launched as
// opts say (Megatron-Bridge by default).
func NewValidator(t Target, opts ...Option) *Validator {
	v := &Validator{t: t, opts: opts, plans: newPlanner(t.Model), whatIf: whatIfConds{m: map[string]condEntry{}}}
	v.cond, v.err = t.Conditions()
	return v
}

// Ranked is the recipe candidate c was ranked as (Target.Ranked).
func (v *Validator) Ranked(c presets.Candidate) (*Recipe, []string, []Violation, error) {
	cond, err := v.condFor(c)
	if err != nil {
		return nil, nil, nil, err
	}
	r := cond.Clone()
	if c.Scopes == nil {
		c.Scopes = []string{}
	}
	notes, vs := ApplyHarnessFlags(r, c, v.t.MBridge)
	return r, notes, vs, nil
}

// Validate is ValidateCandidate under the validator's target.
func (v *Validator) Validate(c presets.Candidate) Report {
	return v.validate(c, func(cfg *Recipe, mb string) Report { return Check(cfg, mb, v.opts...) })
}

// ValidateWithCapture is ValidateWithCapture under the validator's target.
func (v *Validator) ValidateWithCapture(c presets.Candidate) Report {
	return v.validate(c, v.CheckWithCapture)
}

// CheckWithCapture is CheckWithCapture with the validator's kept verdicts
// (cfg must be of the validator's model).
func (v *Validator) CheckWithCapture(cfg *Recipe, mbridge string) Report {
	return checkWithCapture(cfg, mbridge, v.plans, v.opts...)
}

// CheckAsApplied is CheckAsApplied with the validator's kept verdicts
// (cfg must be of the validator's model).
func (v *Validator) CheckAsApplied(cfg *Recipe, mbridge string) Report {
	return checkAsApplied(cfg, mbridge, v.plans, v.opts...)
}

func (v *Validator) validate(c presets.Candidate, check func(*Recipe, string) Report) Report {
	cfg, notes, violations, err := v.Ranked(c)
	if err != nil {
		return configReport(err)
	}
	if len(violations) > 0 {
		return Report{Violations: violations, Notes: notes}
	}
	r := check(cfg, v.t.MBridge)
	r.Notes = append(notes, r.Notes...)
	return r
}

// shapeModel is a model every per-layer scope is legal on: MoE layers, a
// dense layer and a Mamba layer. With drop-and-pad MoE set on top, only the
// rules about the impl/scope combination itself can fire.
var shapeModel = presets.Model{Name: "any", Arch: presets.Arch{
	Layers: 4, Hidden: 1024, FFNHidden: 4096, Heads: 8, KVGroups: 8, HeadDim: 128, Vocab: 32000,
	MoE: &presets.MoE{Experts: 8, TopK: 2, FFNHidden: 1024, FirstDenseLayers: 1},
}}

var shapeSets = map[string]string{
	"model.moe_expert_capacity_factor":       "1.0",
	"model.moe_pad_expert_input_to_capacity": "true",
	"model.moe_token_dispatcher_type":        "flex",
	// MCore's default flex backend, deepep, refuses the padding (TC-43).
	"model.moe_flex_dispatcher_backend": "hybridep",
}

// ValidateShape checks only what does not depend on a model: the impl,
// scope and warm-up combination as the perf harness and the stack of
// Megatron-Bridge mbridge see it, and its capture plan where that fails on
// any model (impl local with mlp and no attn) (for `cgtune emit` without
// --model).
func ValidateShape(c presets.Candidate, mbridge string) Report {
	l := presets.Layout{NumGPUs: 8, Precision: "bf16", EP: 8, GBS: 64, MBS: 1, Seq: 4096, Dispatcher: "flex"}
	return ValidateWithCapture(shapeModel, l, c, mbridge, shapeSets)
}

// WillFailID marks a candidate the rules accept but whose capture is known
// to fail before it runs (a graph that would hold a host sync); it is not
// run.
const WillFailID = "WILL-FAIL"

// WillFailMessage says why a planned capture fails, the cause first (a table
// cell shows the start), with the way out for dropless MoE's host sync.
func WillFailMessage(p *stepmodel.CapturePlan) string {
	f := p.Failure
	if f.Stage != stepmodel.FailCapture || f.Op == "" {
		return f.Message
	}
	graph := "the " + string(f.Region) + " graph of layer " + fmt.Sprint(f.Layer)
	switch f.Region {
	case stepmodel.RegionLayer:
		graph = "the whole-layer graph of layer " + fmt.Sprint(f.Layer)
	case stepmodel.RegionFullIteration:
		graph = "the full-iteration graph"
	}
	return fmt.Sprintf("dropless MoE syncs with the host inside %s (%s copies the tokens per expert to the host to size the dispatch): "+
		"stream capture fails with cudaErrorStreamCaptureInvalidated; drop-and-pad MoE "+
		"(model.moe_expert_capacity_factor=1.0, model.moe_pad_expert_input_to_capacity=true) captures", graph, f.Op)
}
