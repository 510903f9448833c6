package recipe

import (
	"slices"
	"strings"
	"testing"
)

// fires reports whether rule id is among r's violations.
func fires(r Report, id string) bool {
	return slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.ID == id })
}

// Every enabling change lifts the rule that names it: on each
// configuration of the rule table's cases that the rule rejects, the
// change applied (with the key the recipe decides by) and the rule
// passes. Every rule with enabling changes has such a case.
func TestEveryEnablingChangeLiftsItsRule(t *testing.T) {
	for _, r := range Rules() {
		if len(r.Enabling) == 0 {
			continue
		}
		if r.Kind != Reject {
			t.Errorf("%s is an auto-fix: nothing to lift", r.ID)
		}
		lifted := 0
		for _, rc := range ruleCases {
			if rc.id != r.ID || !rc.fail {
				continue
			}
			if rc.mb == "" {
				rc.mb = "0.4"
			}
			if !fires(run(t, rc), r.ID) {
				t.Fatalf("%s: the case does not fire", rc.name())
			}
			for _, ch := range r.Enabling {
				changed := rc
				changed.sets = append(slices.Clone(rc.sets), changeSets(t, rc, ch)...)
				if rep := run(t, changed); fires(rep, r.ID) {
					t.Errorf("%s with %s (%s): %s still fires: %v", rc.name(), ch.Name, strings.Join(changeSets(t, rc, ch), " "), r.ID, rep.Violations)
				}
				lifted++
			}
		}
		if lifted == 0 {
			t.Errorf("%s names enabling changes but has no case the rule rejects to lift", r.ID)
		}
	}
}

// changeSets are change ch's settings as --set values on the recipe of
// case rc (the key the recipe decides the field by).
func changeSets(t *testing.T, rc ruleCase, ch Change) []string {
	t.Helper()
	m := rc.model
	if m.Name == "" {
		m = denseModel
	}
	cfg, err := New(m, layoutFor(m), rc.mb)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rc.sets {
		if err := cfg.ApplySet(s); err != nil {
			t.Fatal(err)
		}
	}
	before := cfg.Clone()
	if err := ch.apply(cfg); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range Diff(before, cfg) {
		out = append(out, k+"="+cfg.show(k))
	}
	return out
}

// A change that sets a field MB's comm_overlap copies onto the model sets
// the comm_overlap key where the recipe has one, and the model's where it
// has none; a TE change never lowers the recipe's TE.
func TestChangesSetTheKeyThatCounts(t *testing.T) {
	cfg, err := New(moeModel, layoutFor(moeModel), "0.6")
	if err != nil {
		t.Fatal(err)
	}
	if got := epOverlapOff.Sets(cfg); got["model.overlap_moe_expert_parallel_comm"] != "false" || len(got) != 1 {
		t.Errorf("no comm_overlap config: ep-overlap-off sets %v, want model.overlap_moe_expert_parallel_comm", got)
	}
	if err := cfg.ApplySet(coOverlap); err != nil {
		t.Fatal(err)
	}
	if got := epOverlapOff.Sets(cfg); got["comm_overlap.overlap_moe_expert_parallel_comm"] != "false" || len(got) != 1 {
		t.Errorf("with comm_overlap: ep-overlap-off sets %v, want comm_overlap.overlap_moe_expert_parallel_comm", got)
	}
	if err := cfg.ApplySet("te_version=2.13.0"); err != nil {
		t.Fatal(err)
	}
	if err := teAtLeast("2.12").apply(cfg); err != nil {
		t.Fatal(err)
	}
	if v, _ := cfg.Get("te_version"); v.Str != "2.13.0" {
		t.Errorf("te-2.12 on TE 2.13: te_version %s, want 2.13.0 kept", v.Str)
	}
}

// Change names are what --what-if=accept takes: an unknown one is refused
// naming those allowed, and a list comes back in the table's order.
func TestParseChanges(t *testing.T) {
	cs, err := ParseChanges([]string{"drop-and-pad", "ep-overlap-off", "drop-and-pad"})
	if err != nil || len(cs) != 2 || cs[0].Name != ChangeNames()[slices.IndexFunc(ChangeNames(), func(n string) bool { return n == cs[0].Name })] {
		t.Fatalf("ParseChanges = %v, %v", cs, err)
	}
	if slices.Index(ChangeNames(), cs[0].Name) > slices.Index(ChangeNames(), cs[1].Name) {
		t.Errorf("changes %s, %s: not in the table's order %v", cs[0].Name, cs[1].Name, ChangeNames())
	}
	_, err = ParseChanges([]string{"drop-and-padd"})
	if err == nil || !strings.Contains(err.Error(), `"drop-and-padd"`) || !strings.Contains(err.Error(), "drop-and-pad, ") && !strings.Contains(err.Error(), ", drop-and-pad") {
		t.Errorf("an unknown change: %v", err)
	}
}
