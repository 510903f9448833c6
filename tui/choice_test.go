package tui

import (
	"testing"

	"cgtune/presets"
	"cgtune/recipe"
)

// The TUI picks the GPU type and MB version of a built-in as the headless
// search does (recipe.ChooseTarget): gpt_oss_20b, which has no h100
// layout, starts on its first GPU type with an MB its recipe has and no
// error; the next model starts from the person's MB again.
func TestBuiltinWithoutTheGPUTypeTakesOneItHas(t *testing.T) {
	f := newFake(t)
	m := newColourModel(t, f, "gpt_oss_20b", "h100", 120, 40)
	b, _ := presets.LookupModel("gpt_oss_20b")
	want, err := recipe.ChooseTarget(b, "h100", false, presets.DefaultMBridge, false)
	if err != nil {
		t.Fatal(err)
	}
	sel := m.modelScr.sel
	if sel.err != nil || sel.layout.GPU != b.GPUs()[0] || sel.mbridge != want.MBridge || sel.mbridge == presets.DefaultMBridge {
		t.Fatalf("selection %s MB %s (error %v); want %s with MB %s", sel.layout.GPU, sel.mbridge, sel.err, b.GPUs()[0], want.MBridge)
	}
	llama, _ := presets.LookupModel("llama3_8b")
	m.modelScr.applyBuiltin(llama, "h100")
	if sel := m.modelScr.sel; sel.err != nil || sel.mbridge != presets.DefaultMBridge {
		t.Errorf("llama3_8b after it: MB %s (error %v), want %s", sel.mbridge, sel.err, presets.DefaultMBridge)
	}
}
