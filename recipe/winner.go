package recipe

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"cgtune/presets"
)

// Target is what a candidate was ranked under: the model and layout the
// search ran on, the Megatron-Bridge release whose field names its
// overrides use, and the --set values the rules saw.
type Target struct {
	Model   presets.Model
	Layout  presets.Layout
	MBridge string
	Sets    map[string]string
	// Changes are enabling changes (Change names) applied after the --set
	// values: a what-if row's. A candidate's own Candidate.WhatIf adds to
	// them.
	Changes []string
}

// StockLayout is the layout of the recipe the overrides go onto: for a
// built-in model (its architecture unchanged) the layout Megatron-Bridge
// ships for the target's GPU type, whatever the search's layout changed
// (a team preset's layout, the TUI's layout editor); for any other model
// the target's layout itself, which is the user's recipe as cgtune knows
// it.
func (t Target) StockLayout() presets.Layout {
	m, err := presets.LookupModel(t.Model.Name)
	if err != nil || !reflect.DeepEqual(m.Arch, t.Model.Arch) {
		return t.Layout.Clone()
	}
	l, err := m.Layout(t.Layout.GPU)
	if err != nil {
		return t.Layout.Clone()
	}
	return l
}

// Stock is the recipe the overrides go onto (StockLayout), as
// Megatron-Bridge t.MBridge starts from it.
func (t Target) Stock() (*Recipe, error) { return New(t.Model, t.StockLayout(), t.MBridge) }

// Conditions is the recipe the search ranked a candidate on, before the
// candidate: the model on the search's layout, then the --set values in
// key order.
func (t Target) Conditions() (*Recipe, error) {
	r, err := New(t.Model, t.Layout, t.MBridge)
	if err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(t.Sets)) {
		if err := r.ApplySet(k + "=" + t.Sets[k]); err != nil {
			return nil, err
		}
	}
	return r, t.applyChanges(r)
}

// Ranked is the recipe candidate c was ranked as: Conditions, then c as
// the perf harness applies it (a nil c.Scopes is the whole layer), with the
// harness's violations.
func (t Target) Ranked(c presets.Candidate) (*Recipe, []string, []Violation, error) {
	return NewValidator(t).Ranked(c)
}

// PresetLayout is the target's layout with its --set values written into
// the layout's settings, for a team preset saved from the search: loaded
// again, the preset ranks candidates under the same conditions and its
// overrides are the same. The keys a layout cannot hold (te_version, which
// is no dotted recipe field) come back unwritten.
func (t Target) PresetLayout() (presets.Layout, []string) {
	l := t.Layout.Clone()
	var left []string
	for _, k := range slices.Sorted(maps.Keys(t.Sets)) {
		if !strings.Contains(k, ".") {
			left = append(left, k+"="+t.Sets[k])
			continue
		}
		if l.Settings == nil {
			l.Settings = map[string]string{}
		}
		l.Settings[k] = t.Sets[k]
	}
	return l, left
}

// WinnerOverrides are the recipe overrides of a ranked result: candidate
// c and the conditions t it was ranked under, written for the recipe the
// user puts them onto (t.Stock) in the field names of t.MBridge. They are
// BuildOverrides (the graph setting and the companions the perf harness
// sets with it) and every setting in which the search's recipe differed
// from the stock one (a --set, a layout field or a setting of the search's
// layout): applied to the stock recipe, they give the recipe that was
// ranked. Each such setting says where it came from and, when c breaks
// without it (a rule, or its capture plan, on the stock recipe with the
// others applied), what breaks; each companion says what breaks without
// it. What no recipe field can say (the GPU count, the precision, an
// environment variable, the TE version) is a note. Every writer of a
// recommendation renders these overrides.
func WinnerOverrides(t Target, c presets.Candidate) Overrides {
	return NewRecommender(t).Overrides(c)
}

// Recommender writes the overrides of candidates ranked under one
// target, sharing the recipes and capture plans they are judged on.
type Recommender struct {
	*Validator
	stock    *Recipe
	stockErr error // the stock recipe or the conditions could not be built
	seeds    []seed
	notes    []string
	parsed   map[string]Value // entries' dotlist tokens, parsed (applyEntries)
	// byChanges are the recommenders of candidates with enabling changes
	// of their own (Candidate.WhatIf), by change set.
	byChanges recommenders
}

// NewRecommender prepares the overrides of candidates ranked under t.
func NewRecommender(t Target) *Recommender {
	r := &Recommender{Validator: NewValidator(t), parsed: map[string]Value{}}
	stockL := t.StockLayout()
	r.stock, r.stockErr = New(t.Model, stockL, t.MBridge)
	if r.stockErr != nil {
		return r
	}
	if r.stockErr = r.Validator.err; r.stockErr != nil {
		return r
	}
	r.notes = layoutNotes(stockL, t.Layout)
	r.seeds = t.seedsOf(r.stock, r.cond, stockL)
	return r
}

// Overrides are candidate c's overrides (WinnerOverrides); a candidate
// with enabling changes of its own (a what-if row) has them written as
// settings the search ran with, each with its cost.
func (r *Recommender) Overrides(c presets.Candidate) Overrides {
	if sub := r.forChanges(c.WhatIf); sub != r {
		return sub.Overrides(c)
	}
	return r.overrides(c)
}

// Stock is a copy of the recipe the overrides go onto (Target.Stock).
func (r *Recommender) Stock() (*Recipe, error) {
	if r.stock == nil {
		return nil, r.stockErr
	}
	return r.stock.Clone(), nil
}

// overrides are candidate c's overrides under the recommender's target.
func (r *Recommender) overrides(c presets.Candidate) Overrides {
	o := BuildOverrides(c, r.t.MBridge)
	if r.stockErr != nil {
		o.Notes = append(o.Notes, "the settings the search ran with could not be compared with the recipe's: "+r.stockErr.Error())
		return o
	}
	var seeds []seed
	for _, s := range r.seeds {
		if _, isGraph := o.Get(s.key); !isGraph {
			seeds = append(seeds, s)
		}
	}
	if whole := r.verdict(seeds, o.Entries); whole != "" {
		for i := range seeds {
			seeds[i].why = seeds[i].origin + "; the candidate does not hold even with it: " + whole
		}
	} else {
		r.explainSeeds(seeds, o.Entries)
		r.explainCompanions(seeds, o.Entries)
	}
	for _, s := range seeds {
		if s.recipeField() {
			o.Entries = append(o.Entries, Entry{Key: s.key, Value: s.value, Why: s.why})
			continue
		}
		o.Notes = append(o.Notes, fmt.Sprintf("set %s=%s where the job runs (not a recipe field): %s", s.key, s.text, s.why))
	}
	o.Notes = append(o.Notes, r.notes...)
	if note := r.dropNote(); note != "" {
		o.Notes = append(o.Notes, note)
		o.DropsTokens = note
	}
	return o
}

// dropNote says, when the overrides turn the recipe's dropless experts
// into drop-and-pad ones, that this changes training: MCore drops the
// tokens over an expert's capacity (moe_expert_capacity_factor, MLM
// megatron/core/transformer/transformer_config.py; None drops none).
func (r *Recommender) dropNote() string {
	if r.cond == nil || newState(r.stock, 0).dropless() == newState(r.cond, 0).dropless() || newState(r.cond, 0).dropless() {
		return ""
	}
	f := r.cond.vals["model.moe_expert_capacity_factor"].Float
	return fmt.Sprintf("drop-and-pad MoE (capacity factor %s): tokens over an expert's capacity are dropped, which changes training, not only its speed",
		strconv.FormatFloat(f, 'g', -1, 64))
}

// seed is a recipe setting in which the search's recipe differed from
// the stock one.
type seed struct {
	key    string
	val    Value  // as the recipe holds it
	value  any    // as an override entry holds it
	text   string // as a --set value
	origin string // where it came from
	why    string // why the overrides carry it
}

// recipeField reports whether the setting can be a recipe override: the
// TE version and environment variables are facts of the job, not fields.
func (s seed) recipeField() bool {
	return s.key != "te_version" && !strings.HasPrefix(s.key, envPrefix)
}

// precisionKeys are the model fields MB's mixed-precision recipe writes
// (MB src/megatron/bridge/training/mixed_precision.py): the recipe's
// mixed_precision setting writes them again at start-up, so an override of
// them does not change the precision.
var precisionKeys = []string{"model.bf16", "model.fp16", "model.fp8", "model.fp8_recipe", "model.fp4", "model.fp4_recipe"}

// seedsOf are the settings of ranked that differ from stock's, in key
// order. The fields of a precision the search's layout changed are left
// to layoutNotes, unless a --set gave them.
func (t Target) seedsOf(stock, ranked *Recipe, stockL presets.Layout) []seed {
	var out []seed
	origins := t.changeOrigins()
	for _, k := range Diff(stock, ranked) {
		_, set := t.Sets[k]
		if !set && slices.Contains(precisionKeys, k) && stockL.Precision != t.Layout.Precision {
			continue
		}
		v, ok := ranked.Get(k)
		if !ok {
			continue // a --set env var the search unset: nothing to write
		}
		f, _ := ranked.field(k)
		s := seed{key: k, val: v.clone(), value: v.entry(f), text: ranked.show(k), origin: "given with --set"}
		if ch, ok := origins[k]; ok {
			s.origin = fmt.Sprintf("the what-if change %s; its cost: %s", ch.Name, ch.Cost)
		} else if !set {
			s.origin = fmt.Sprintf("the search's layout sets it (the recipe's: %s)", shown(stock, k))
		}
		out = append(out, s)
	}
	return out
}

// layoutNotes say where the search's layout differs from the stock one in
// what no recipe override can change.
func layoutNotes(stock, ran presets.Layout) []string {
	var out []string
	diff := func(what string, was, is any) {
		if !reflect.DeepEqual(was, is) {
			out = append(out, fmt.Sprintf("the search ran with %s %v where the recipe has %v: not a recipe override; run the job so", what, is, was))
		}
	}
	diff("GPUs", stock.NumGPUs, ran.NumGPUs)
	if stock.Precision != ran.Precision {
		out = append(out, fmt.Sprintf("the search ran with precision %s where the recipe has %s: use Megatron-Bridge's %s recipe (the perf harness's -c %s); overriding the model's precision fields does not change it (the recipe's mixed_precision writes them at start-up)",
			ran.Precision, stock.Precision, ran.Precision, ran.Precision))
	}
	diff("optimizer", orDefault(stock.Optimizer, "adam"), orDefault(ran.Optimizer, "adam"))
	diff("optimizer states", orDefault(stock.OptimizerStates, "fp32"), orDefault(ran.OptimizerStates, "fp32"))
	diff("the distributed optimizer off", stock.NoDistributedOptimizer, ran.NoDistributedOptimizer)
	diff("fp32 gradient reduction", stock.GradReduceInFP32, ran.GradReduceInFP32)
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// recipe is the stock recipe with the kept settings.
func (r *Recommender) recipe(kept []seed) *Recipe {
	c := r.stock.Clone()
	for _, s := range kept {
		c.vals[s.key] = s.val.clone()
	}
	return c
}

// verdict is "" when the overrides hold on the stock recipe with the kept
// settings, applied as the user applies them: by a recipe script (the
// overrides alone) and by the perf harness (the overrides, then the
// harness's own pass, ApplyHarness). Holding means no rule broken and the
// capture plan fine; else it says why not.
func (r *Recommender) verdict(kept []seed, entries []Entry) string {
	c := r.recipe(kept)
	if err := r.applyEntries(c, entries); err != nil {
		return err.Error()
	}
	if v := r.holds(c); v != "" {
		return v
	}
	if _, vs := ApplyHarness(c, r.t.MBridge); len(vs) > 0 {
		return vs[0].String()
	}
	return r.holds(c)
}

// applyEntries applies entries to c as their dotlist tokens would: each
// entry is parsed once (the Hydra grammar, ApplySet) and kept.
func (r *Recommender) applyEntries(c *Recipe, entries []Entry) error {
	for _, e := range entries {
		tok := (Overrides{Gen: c.gen, Entries: []Entry{e}}).DotlistTokens(false)[0]
		v, ok := r.parsed[tok]
		if !ok {
			scratch := r.stock.Clone()
			if err := scratch.ApplySet(tok); err != nil {
				return err
			}
			v, _ = scratch.Get(e.Key)
			r.parsed[tok] = v
		}
		c.vals[e.Key] = v
	}
	return nil
}

// holds is "" when c breaks no rule and its capture plan is fine, else
// the first thing that breaks.
func (r *Recommender) holds(c *Recipe) string {
	s, err := checked(c, r.t.MBridge)
	if err != nil {
		return err.Error()
	}
	if len(s.violations) > 0 {
		return s.violations[0].String()
	}
	v, _, err := s.captureVerdict(r.Validator.plans)
	switch {
	case err != nil:
		return err.Error()
	case v != nil:
		return v.String()
	}
	return ""
}

// explainSeeds gives each seed its reason: what breaks when it alone is
// left at the recipe's value, or that the search ranked the candidate
// with it.
func (r *Recommender) explainSeeds(seeds []seed, entries []Entry) {
	for i, s := range seeds {
		others := slices.Delete(slices.Clone(seeds), i, i+1)
		if reason := r.verdict(others, entries); reason != "" {
			seeds[i].why = fmt.Sprintf("needed (%s): with the recipe's value (%s), %s", s.origin, shown(r.stock, s.key), reason)
			continue
		}
		seeds[i].why = s.origin + "; the search ranked the candidate with it"
	}
}

// graphKeys are the entries that are the graph setting itself; the others
// are companions whose reason explainCompanions finds.
var graphKeys = []string{KeyImpl, KeyScope, KeyModules, KeyWarmup}

// explainCompanions gives each companion entry the reason it is there:
// what breaks when it is left out, alone or with another companion (MB
// keeps the two RNG-tracker fields in sync, so one alone breaks nothing).
func (r *Recommender) explainCompanions(kept []seed, entries []Entry) {
	var comp []int
	for i, e := range entries {
		if !slices.Contains(graphKeys, e.Key) {
			comp = append(comp, i)
		}
	}
	without := func(drop ...int) []Entry {
		var out []Entry
		for i, e := range entries {
			if !slices.Contains(drop, i) {
				out = append(out, e)
			}
		}
		return out
	}
	for _, i := range comp {
		if v := r.verdict(kept, without(i)); v != "" {
			entries[i].Why = "without it: " + v
		}
	}
	for a, i := range comp {
		for _, j := range comp[a+1:] {
			if entries[i].Why != "" || entries[j].Why != "" {
				continue
			}
			if v := r.verdict(kept, without(i, j)); v != "" {
				entries[i].Why = "without it and " + entries[j].Key + ": " + v
				entries[j].Why = "without it and " + entries[i].Key + ": " + v
			}
		}
	}
}

// entry is the value as an override entry holds it.
func (v Value) entry(f Field) any {
	switch {
	case v.Null:
		return nil
	case f.Type == TBool:
		return v.Bool
	case f.Type == TInt:
		return v.Int
	case f.Type == TFloat:
		return v.Float
	case f.Type == TList:
		return slices.Clone(nonNil(v.List))
	case f.Type == TIntOrList && v.IsList:
		return slices.Clone(v.Ints)
	case f.Type == TIntOrList:
		return v.Int
	}
	return v.Str
}

// shown is key's value for a message: an unset environment variable is
// "unset".
func shown(r *Recipe, key string) string {
	if s := r.show(key); s != "" {
		return s
	}
	return "unset"
}

// show writes key's value as a --set value.
func (r *Recipe) show(key string) string {
	v, _ := r.Get(key)
	f, _ := r.field(key)
	switch x := v.entry(f).(type) {
	case nil:
		return "null"
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []string:
		return "[" + strings.Join(x, ",") + "]"
	case []int:
		parts := make([]string, len(x))
		for i, n := range x {
			parts[i] = strconv.Itoa(n)
		}
		return "[" + strings.Join(parts, ",") + "]"
	default:
		return fmt.Sprint(x)
	}
}
