package main

import (
	"encoding/json"
	"strings"
	"testing"

	"cgtune/presets"
)

// A built-in model without a layout for the default GPU type is searched
// on its first GPU type, and a recipe that needs a later Megatron-Bridge
// takes the nearest one that has its fields, each said in one notice;
// what the person names on the command line is never replaced.
func TestHeadlessChoosesAGPUTypeAndMBTheModelHas(t *testing.T) {
	isolate(t)
	m, err := presets.LookupModel("gpt_oss_20b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Layout("h100"); err == nil {
		t.Fatal("gpt_oss_20b has an h100 layout now: pick a model without one for this test")
	}
	first := m.GPUs()[0]
	search := func(args ...string) (int, headlessResult, string) {
		t.Helper()
		args = append([]string{"--headless", "--model", "gpt_oss_20b", "--engine", "estimate", "--json"}, args...)
		code, out, errb := cgtune(t, args...)
		var r headlessResult
		if code == exitOK {
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("%v: %v", args, err)
			}
		}
		return code, r, errb
	}
	code, r, errb := search()
	if code != exitOK {
		t.Fatalf("no --gpu-type: exit %d\n%s", code, errb)
	}
	if r.GPUType != first || r.MBridge == presets.DefaultMBridge {
		t.Errorf("searched %s with MB %s; want %s with an MB other than %s", r.GPUType, r.MBridge, first, presets.DefaultMBridge)
	}
	for _, want := range []string{"gpt_oss_20b has no layout for h100: using its " + first + " layout", "using Megatron-Bridge " + r.MBridge + ": "} {
		if !strings.Contains(errb, want) {
			t.Errorf("stderr lacks the notice %q:\n%s", want, errb)
		}
	}

	code, r, errb = search("--gpu-type", "b300")
	if code != exitOK || r.GPUType != "b300" || !strings.Contains(errb, "using Megatron-Bridge "+r.MBridge) {
		t.Errorf("--gpu-type b300: exit %d, %s MB %s\n%s", code, r.GPUType, r.MBridge, errb)
	}
	if code, _, errb := search("--gpu-type", "h100"); code != exitBadInput || !strings.Contains(errb, "no layout for gpu") {
		t.Errorf("--gpu-type h100 named: exit %d %s", code, errb)
	}
	if code, _, errb := search("--gpu-type", "b300", "--mbridge", presets.DefaultMBridge); code != exitBadInput || !strings.Contains(errb, "allowed: --mbridge") {
		t.Errorf("--mbridge %s named: exit %d %s", presets.DefaultMBridge, code, errb)
	}
	// A model with an h100 layout keeps the defaults and says nothing.
	code, out, errb := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate")
	if code != exitOK || strings.Contains(errb, "no layout for") || strings.Contains(errb, "using Megatron-Bridge") || !strings.Contains(errb, "MB "+presets.DefaultMBridge) {
		t.Errorf("llama3_8b: exit %d\n%s%s", code, out, errb)
	}
}
