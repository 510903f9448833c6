package recipe

import (
	"slices"
	"testing"

	"cgtune/presets"
)

// ChooseTarget takes the nearest later Megatron-Bridge version that can
// build the layout's recipe, from any version before it, and keeps a
// version the person named or one that builds it already.
func TestChooseTargetNearestLaterMBridge(t *testing.T) {
	m, err := presets.LookupModel("gpt_oss_20b")
	if err != nil {
		t.Fatal(err)
	}
	var g3 []string
	for _, v := range presets.MBridgeVersions {
		if gen, _ := presets.ParseMBridge(v); gen == presets.G3 {
			g3 = append(g3, v)
		}
	}
	for _, from := range presets.MBridgeVersions {
		c, err := ChooseTarget(m, "b300", true, from, false)
		if err != nil {
			t.Fatalf("from %s: %v", from, err)
		}
		want := from
		if !slices.Contains(g3, from) {
			want = g3[0] // the b300 recipe's settings are G3 fields
		}
		if c.MBridge != want || (want != from) != (len(c.Notes) == 1) {
			t.Errorf("from MB %s: chose %s with notes %q, want %s", from, c.MBridge, c.Notes, want)
		}
		if _, err := New(m, c.Layout, c.MBridge); err != nil {
			t.Errorf("from MB %s: the chosen %s cannot build the recipe: %v", from, c.MBridge, err)
		}
	}
	if c, _ := ChooseTarget(m, "b300", true, "0.4", true); c.MBridge != "0.4" || len(c.Notes) != 0 {
		t.Errorf("a named MB was replaced: %s %q", c.MBridge, c.Notes)
	}
	if _, err := ChooseTarget(m, "h100", true, "0.5", false); err == nil {
		t.Error("a named GPU type the model has no layout for was replaced")
	}
}
