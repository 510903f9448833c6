package recipe

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"cgtune/presets"
	"cgtune/stepmodel"
)

// Change is a change of recipe settings that lifts a rule: applied to a
// recipe the rule rejects, the rule passes (another rule may then need a
// change of its own). Each rule names the changes that lift it
// (Rule.Enabling); the rule table is the one list of them (Changes).
type Change struct {
	// Name is how a person names the change (cgtune --what-if=accept=NAME):
	// lower-case words joined by hyphens.
	Name string
	// Summary says in a few words what the change does.
	Summary string
	// Settings are the keys and values the change sets.
	Settings []ChangeSetting
	// Cost is what the change costs besides speed, in words: to training,
	// to the job's environment, or what the step pays for it.
	Cost string
	// Effect is what the change does to the step, as the engines price
	// it.
	Effect Effect
}

// ChangeSetting is one key a change sets, and its value as a --set value.
type ChangeSetting struct {
	// Key is a dotted recipe key (te_version and env.NAME included), or,
	// with CommOverlap, a model field MB's comm_overlap copies onto the
	// model.
	Key   string
	Value string
	// CommOverlap: the key that decides field Key is comm_overlap.Key
	// where the recipe has a comm_overlap config, else model.Key
	// (Recipe.commOverlapKey): the change sets the key that counts.
	CommOverlap bool
}

// Effect is what a change does to the training step.
type Effect string

// Effects of a change on the step.
const (
	// EffectNone: the step is priced as without the change (it changes
	// what the job checks or needs, not what the step computes).
	EffectNone Effect = ""
	// EffectMoEShape: the experts' shapes and the dispatch's host sync
	// (the workload's MoE mode): the engines build the changed step.
	EffectMoEShape Effect = "moe-shape"
	// EffectEPOverlap: whether the EP all-to-all is hidden by Megatron-
	// Core's combined 1F1B schedule (the workload's EP overlap).
	EffectEPOverlap Effect = "ep-overlap"
)

// The enabling changes the rule table names. Drop-and-pad's capacity
// factor is the one TC-22's fix and MB's own MoE graph recipes use.
var (
	dropAndPad = Change{Name: "drop-and-pad", Summary: "drop-and-pad experts: a capacity factor of 1.0, inputs padded to it",
		Settings: []ChangeSetting{{Key: "model.moe_expert_capacity_factor", Value: "1.0"}, {Key: "model.moe_pad_expert_input_to_capacity", Value: "true"}},
		Cost:     "tokens over an expert's capacity are dropped: changes training; every expert computes its whole capacity",
		Effect:   EffectMoEShape}
	epOverlapOff = Change{Name: "ep-overlap-off", Summary: "EP communication overlap off",
		Settings: []ChangeSetting{{Key: "overlap_moe_expert_parallel_comm", Value: "false", CommOverlap: true}},
		Cost:     "EP all-to-all no longer overlapped with the other micro-batch's computation: exposed on the step",
		Effect:   EffectEPOverlap}
	delayedWgradOff = Change{Name: "delayed-wgrad-off", Summary: "delayed weight-gradient computation off",
		Settings: []ChangeSetting{{Key: "delay_wgrad_compute", Value: "false", CommOverlap: true}},
		Cost:     "weight gradients no longer delayed to overlap the EP all-to-all (not modelled: the step is priced as with them)"}
	gradAccFusion = Change{Name: "grad-acc-fusion", Summary: "gradient-accumulation fusion on",
		Settings: []ChangeSetting{{Key: "model.gradient_accumulation_fusion", Value: "true"}},
		Cost:     "needs the fused weight-gradient accumulation kernel (Transformer Engine or apex) in the job's environment"}
	nanChecksOff = Change{Name: "nan-checks-off", Summary: "the loss and gradient NaN checks off",
		Settings: []ChangeSetting{{Key: "rerun_state_machine.check_for_nan_in_loss", Value: "false"}, {Key: "ddp.check_for_nan_in_grad", Value: "false"}},
		Cost:     "NaN or Inf in the loss and the gradients is no longer caught at each step"}
)

// teAtLeast is the change to Transformer Engine version v (major.minor).
func teAtLeast(v string) Change {
	return Change{Name: "te-" + v, Summary: "Transformer Engine " + v + " or newer",
		Settings: []ChangeSetting{{Key: "te_version", Value: v + ".0"}},
		Cost:     "needs TE ≥ " + v + " in the job's environment (not modelled: the step is priced with the recipe's TE)"}
}

// Changes lists every enabling change the rule table names, each once,
// in the order the table first names them.
func Changes() []Change {
	var out []Change
	for _, r := range rules {
		for _, c := range r.Enabling {
			if !slices.ContainsFunc(out, func(o Change) bool { return o.Name == c.Name }) {
				out = append(out, c)
			}
		}
	}
	return out
}

// ChangeNames are the names of Changes, for messages.
func ChangeNames() []string {
	var out []string
	for _, c := range Changes() {
		out = append(out, c.Name)
	}
	return out
}

// LookupChange returns the enabling change named name.
func LookupChange(name string) (Change, bool) {
	for _, c := range Changes() {
		if c.Name == name {
			return c, true
		}
	}
	return Change{}, false
}

// ParseChanges reads change names (as --what-if=accept= lists them),
// refusing an unknown one with the names allowed; the result is in the
// table's order, each once.
func ParseChanges(names []string) ([]Change, error) {
	var out []Change
	for _, n := range names {
		n = strings.TrimSpace(n)
		c, ok := LookupChange(n)
		if !ok {
			return nil, fmt.Errorf("unknown enabling change %q (allowed: %s)", n, strings.Join(ChangeNames(), ", "))
		}
		if !slices.ContainsFunc(out, func(o Change) bool { return o.Name == c.Name }) {
			out = append(out, c)
		}
	}
	return sortChanges(out), nil
}

// sortChanges orders changes as the table names them.
func sortChanges(cs []Change) []Change {
	order := ChangeNames()
	slices.SortFunc(cs, func(a, b Change) int { return slices.Index(order, a.Name) - slices.Index(order, b.Name) })
	return cs
}

// ChangesFor are the changes that may lift violation v: those its rule
// names. A capture the plan says fails (WillFailID) is no rule: it fails
// on a host sync inside a graph, and only a change of the experts'
// shapes moves one (drop-and-pad removes the dropless dispatch's), so
// those changes are tried on it.
func ChangesFor(v Violation) []Change {
	if v.ID == WillFailID {
		var out []Change
		for _, c := range Changes() {
			if c.Effect == EffectMoEShape {
				out = append(out, c)
			}
		}
		return out
	}
	if r, ok := LookupRule(v.ID); ok && r.Kind == Reject {
		return slices.Clone(r.Enabling)
	}
	return nil
}

// key is the key setting s sets in recipe c.
func (s ChangeSetting) key(c *Recipe) string {
	if s.CommOverlap {
		return c.commOverlapKey(s.Key)
	}
	return s.Key
}

// Sets are the change's keys and values as recipe c spells them.
func (ch Change) Sets(c *Recipe) map[string]string {
	out := map[string]string{}
	for _, s := range ch.Settings {
		out[s.key(c)] = s.Value
	}
	return out
}

// SetsText is the change's settings as recipe c spells them, for tables:
// "model.moe_expert_capacity_factor=1.0, model.moe_pad_...=true"; the
// keys as written when c is nil.
func (ch Change) SetsText(c *Recipe) string {
	var parts []string
	for _, s := range ch.Settings {
		k := s.Key
		if c != nil {
			k = s.key(c)
		} else if s.CommOverlap {
			parts = append(parts, fmt.Sprintf("comm_overlap.%s=%s (model.%s without a comm_overlap config)", k, s.Value, k))
			continue
		}
		parts = append(parts, k+"="+s.Value)
	}
	return strings.Join(parts, ", ")
}

// apply sets the change's values on c.
func (ch Change) apply(c *Recipe) error {
	for _, s := range ch.Settings {
		if s.Key == "te_version" && !newState(c, 0).teBelow(s.Value) {
			continue // the recipe's TE is new enough: a change must not downgrade it
		}
		if err := c.applySet(s.key(c)+"="+s.Value, false); err != nil {
			return fmt.Errorf("enabling change %s: %w", ch.Name, err)
		}
	}
	return nil
}

// changeKey names a set of change names, in the table's order.
func changeKey(names []string) string {
	cs, err := ParseChanges(names)
	if err != nil {
		return strings.Join(names, ",")
	}
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return strings.Join(out, ",")
}

// WithChanges is t with the enabling changes names added to its own.
func (t Target) WithChanges(names []string) Target {
	all := append(slices.Clone(t.Changes), names...)
	if len(all) == 0 {
		t.Changes = nil
		return t
	}
	t.Changes = strings.Split(changeKey(all), ",")
	return t
}

// applyChanges applies t's changes to r, in the table's order.
func (t Target) applyChanges(r *Recipe) error {
	cs, err := ParseChanges(t.Changes)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if err := c.apply(r); err != nil {
			return err
		}
	}
	return nil
}

// changeOrigins maps each key t's changes set to the change, for the
// reasons the overrides give (the keys as the recipe of t's --set values
// spells them).
func (t Target) changeOrigins() map[string]Change {
	cs, err := ParseChanges(t.Changes)
	if err != nil || len(cs) == 0 {
		return nil
	}
	t.Changes = nil
	base, err := t.Conditions()
	if err != nil {
		return nil
	}
	out := map[string]Change{}
	for _, c := range cs {
		for k := range c.Sets(base) {
			out[k] = c
		}
	}
	return out
}

// whatIfConds keeps the conditions a validator built for change sets.
type whatIfConds struct {
	mu sync.Mutex
	m  map[string]condEntry
}

type condEntry struct {
	r   *Recipe
	err error
}

// condFor is the recipe of the conditions candidate c is ranked under:
// the target's, with c's own enabling changes (Candidate.WhatIf) applied.
func (v *Validator) condFor(c presets.Candidate) (*Recipe, error) {
	if len(c.WhatIf) == 0 || v.err != nil {
		return v.cond, v.err
	}
	t := v.t.WithChanges(c.WhatIf)
	k := strings.Join(t.Changes, ",")
	v.whatIf.mu.Lock()
	defer v.whatIf.mu.Unlock()
	e, ok := v.whatIf.m[k]
	if !ok {
		e.r, e.err = t.Conditions()
		v.whatIf.m[k] = e
	}
	return e.r, e.err
}

// recommenders keeps a recommender's recommenders for change sets.
type recommenders struct {
	mu sync.Mutex
	m  map[string]*Recommender
}

// forChanges is the recommender of candidates ranked with enabling
// changes names on top of r's target: r itself when they add none.
func (r *Recommender) forChanges(names []string) *Recommender {
	t := r.t.WithChanges(names)
	if slices.Equal(t.Changes, r.t.Changes) {
		return r
	}
	k := strings.Join(t.Changes, ",")
	r.byChanges.mu.Lock()
	defer r.byChanges.mu.Unlock()
	if r.byChanges.m == nil {
		r.byChanges.m = map[string]*Recommender{}
	}
	sub, ok := r.byChanges.m[k]
	if !ok {
		sub = NewRecommender(t)
		r.byChanges.m[k] = sub
	}
	return sub
}

// MoEWorkload is MoEWorkload under t: opts with what t's recipe decides
// of the step (the layer spec, the MoE mode, EP communication overlap),
// its --set values and its enabling changes applied, so that a what-if
// row's engines run the step its changes make.
func (t Target) MoEWorkload(opts stepmodel.WorkloadOptions) (stepmodel.WorkloadOptions, error) {
	r, err := t.Conditions()
	if err != nil {
		return opts, err
	}
	return newState(r, 0).moeWorkload(t.Model, opts), nil
}
