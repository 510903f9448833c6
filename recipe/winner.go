package recipe

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"cgtune/presets"
)

// Target is the recipe a candidate's overrides are written for: the model
// and layout the search ran on, the Megatron-Bridge release whose field
// names they use, and the --set values the rules saw.
type Target struct {
	Model   presets.Model
	Layout  presets.Layout
	MBridge string
	Sets    map[string]string
}

// WinnerOverrides are the recipe overrides for candidate c of target t in
// the field names of t.MBridge: BuildOverrides (the graph setting
// and the companions the perf harness sets with it), plus every setting the
// search had beyond the recipe's defaults (a --set, or one of the layout's
// Settings) without which c would be rejected by a rule or fail its capture
// plan: applied to the recipe alone, the overrides must be what the search
// ranked. Which settings c depends on is derived, not listed: each is reset
// to the recipe's value in turn, and kept, with the reason, when c then
// breaks (CheckWithCapture on the recipe with the overrides applied). The
// companions get the reason too, where leaving them out breaks c. A setting
// that is not a recipe field (te_version, env.*) cannot be an override: it
// is a note. When c does not hold even with every setting (cgtune emit
// --force), all of them are kept and nothing is explained.
func WinnerOverrides(t Target, c presets.Candidate) Overrides {
	gen, _ := presets.ParseMBridge(t.MBridge)
	o := BuildOverrides(c, gen)
	d := deriver{t: t, gen: gen, plans: newPlanner(t.Model, t.Layout)}
	seeds := t.seeds()
	kept := seeds
	if whole := d.verdict(seeds, o.Entries); whole != "" {
		for i := range kept {
			kept[i].why = kept[i].origin() + "; the candidate does not hold even with it: " + whole
		}
	} else {
		kept = d.needed(seeds, o.Entries)
		d.explainCompanions(kept, o.Entries)
	}
	for _, s := range kept {
		if s.recipeField() {
			o.Entries = append(o.Entries, Entry{Key: s.key, Value: d.entryValue(kept, s.key), Why: s.why})
			continue
		}
		o.Notes = append(o.Notes, fmt.Sprintf("the candidate needs %s=%s, which is not a recipe field: %s", s.key, s.value, s.why))
	}
	return o
}

// seed is a recipe setting the search had beyond the recipe's defaults.
type seed struct {
	key, value string
	fromSet    bool   // a --set, else a setting of the layout
	why        string // what breaks without it
}

func (s seed) origin() string {
	if s.fromSet {
		return "given with --set"
	}
	return "set by the layout"
}

// recipeField reports whether the setting can be a recipe override: the
// TE version and environment variables are facts of the job, not fields.
func (s seed) recipeField() bool {
	return s.key != "te_version" && !strings.HasPrefix(s.key, envPrefix)
}

// seeds are t's settings in key order; a --set replaces the layout's
// setting of the same key.
func (t Target) seeds() []seed {
	byKey := map[string]seed{}
	for k, v := range t.Layout.Settings {
		byKey[k] = seed{key: k, value: v}
	}
	for k, v := range t.Sets {
		byKey[k] = seed{key: k, value: v, fromSet: true}
	}
	out := make([]seed, 0, len(byKey))
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		out = append(out, byKey[k])
	}
	return out
}

// deriver judges a candidate's overrides on recipes with some of the
// target's settings.
type deriver struct {
	t     Target
	gen   presets.Generation
	plans *planner
}

// recipe is the recipe of the model and layout with only the kept
// settings: the layout's own Settings outside kept are left out too.
func (d deriver) recipe(kept []seed) (*Recipe, error) {
	l := d.t.Layout.Clone()
	l.Settings = nil
	for _, s := range kept {
		if !s.fromSet {
			if l.Settings == nil {
				l.Settings = map[string]string{}
			}
			l.Settings[s.key] = s.value
		}
	}
	r, err := New(d.t.Model, l, d.t.MBridge)
	if err != nil {
		return nil, err
	}
	for _, s := range kept {
		if s.fromSet {
			if err := r.ApplySet(s.key + "=" + s.value); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// verdict is "" when the overrides hold on the recipe with the kept
// settings (no rule broken, the capture plan fine), else why not.
func (d deriver) verdict(kept []seed, entries []Entry) string {
	r, err := d.recipe(kept)
	if err != nil {
		return err.Error()
	}
	for _, tok := range (Overrides{Gen: d.gen, Entries: entries}).DotlistTokens(false) {
		if err := r.ApplySet(tok); err != nil {
			return err.Error()
		}
	}
	s, err := checked(r, d.t.MBridge)
	if err != nil {
		return err.Error()
	}
	if len(s.violations) > 0 {
		return s.violations[0].String()
	}
	v, _, err := s.captureVerdict(d.plans)
	switch {
	case err != nil:
		return err.Error()
	case v != nil:
		return v.String()
	}
	return ""
}

// needed drops, in key order, each recipe setting the overrides hold
// without, and again until none drops (a setting can be needed only by
// another: MCore refuses the expert padding without a capacity factor).
// The TE version and environment variables are facts of the job: they
// stay in the recipe, and count only where the candidate needs them. What
// is returned holds, and each of it is needed given the rest.
func (d deriver) needed(seeds []seed, entries []Entry) []seed {
	kept := slices.Clone(seeds)
	why := map[string]string{} // what breaks without each, on the last pass
	for dropped := true; dropped; {
		dropped = false
		for _, s := range slices.Clone(kept) {
			i := slices.IndexFunc(kept, func(k seed) bool { return k.key == s.key })
			trial := slices.Delete(slices.Clone(kept), i, i+1)
			reason := d.verdict(trial, entries)
			if reason == "" && s.recipeField() {
				kept, dropped = trial, true
				continue
			}
			why[s.key] = reason
		}
	}
	var out []seed
	for i, s := range kept {
		if why[s.key] == "" {
			continue // a fact of the job the candidate does not need
		}
		r, err := d.recipe(slices.Delete(slices.Clone(kept), i, i+1))
		was := "its value"
		if err == nil {
			was = "the recipe's value (" + r.show(s.key) + ")"
		}
		s.why = fmt.Sprintf("needed (%s): with %s, %s", s.origin(), was, why[s.key])
		out = append(out, s)
	}
	return out
}

// graphKeys are the entries that are the graph setting itself; the others
// are companions whose reason explainCompanions finds.
var graphKeys = []string{KeyImpl, KeyScope, KeyModules, KeyWarmup}

// explainCompanions gives each companion entry the reason it is there:
// what breaks when it is left out, alone or with another companion (MB
// keeps the two RNG-tracker fields in sync, so one alone breaks nothing).
func (d deriver) explainCompanions(kept []seed, entries []Entry) {
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
		if r := d.verdict(kept, without(i)); r != "" {
			entries[i].Why = "without it: " + r
		}
	}
	for a, i := range comp {
		for _, j := range comp[a+1:] {
			if entries[i].Why != "" || entries[j].Why != "" {
				continue
			}
			if r := d.verdict(kept, without(i, j)); r != "" {
				entries[i].Why = "without it and " + entries[j].Key + ": " + r
				entries[j].Why = "without it and " + entries[i].Key + ": " + r
			}
		}
	}
}

// entryValue is key's value on the recipe with the kept settings, typed as
// an override entry.
func (d deriver) entryValue(kept []seed, key string) any {
	r, err := d.recipe(kept)
	if err != nil {
		return nil
	}
	v, _ := r.Get(key)
	f, _ := r.field(key)
	return v.entry(f)
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
		return slices.Clone(v.List)
	case f.Type == TIntOrList && v.IsList:
		return slices.Clone(v.Ints)
	case f.Type == TIntOrList:
		return v.Int
	}
	return v.Str
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
