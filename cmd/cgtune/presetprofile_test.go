package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/presets"
	"cgtune/search"
	"cgtune/stepmodel"
)

// home points the home, cache and config folders at a fresh temporary
// folder, as on another machine, and returns it.
func home(t *testing.T) string {
	t.Helper()
	h := t.TempDir()
	t.Setenv("HOME", h)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(h, "cache"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(h, "config"))
	t.Setenv("CGTUNE_PRESETS", "")
	return h
}

// gpuNodeProfile is a framework profile as a GPU node's megatron engine
// would cache it for model m on layout l (its figures are arbitrary: the
// tests compare estimates made with and without it).
func gpuNodeProfile(m presets.Model, l presets.Layout) *stepmodel.FrameworkProfile {
	return &stepmodel.FrameworkProfile{Version: stepmodel.ProfileVersion, Source: "megatron-core 0.16.0, torch 2.11.0, local layer spec, NVIDIA H100 80GB HBM3",
		Key: stepmodel.ProfileKey{GPU: "NVIDIA H100 80GB HBM3", Driver: "580.65.06", MCore: "0.16.0", Torch: "2.11.0", LayerSpec: "local",
			Model: stepmodel.ModelKey(m), Layout: stepmodel.LayoutKey(l)},
		Host: "gpu-node-7", Date: "2026-11-30T12:00:00Z",
		Layers: map[string]stepmodel.LayerProfile{"dense": {EagerFwd: stepmodel.HostGPU{HostMs: 1.5, GPUMs: 5}, EagerBwd: stepmodel.HostGPU{HostMs: 1.2, GPUMs: 10},
			Graphed: map[string]stepmodel.GraphedRegion{"layer": {ReplayHostMs: 0.1, GPUMs: 14}}}},
		OtherFwd: stepmodel.HostGPU{HostMs: 1, GPUMs: 3}, OtherBwd: stepmodel.HostGPU{HostMs: 1, GPUMs: 3}, Optimizer: stepmodel.HostGPU{HostMs: 5, GPUMs: 20}}
}

// estimateWith runs the estimate engine on a preset and returns each
// configuration's median step time and the notices.
func estimateWith(t *testing.T, preset string) (map[string]float64, string) {
	t.Helper()
	code, out, errb := cgtune(t, "--headless", "--preset", preset, "--engine", "estimate", "--strategy", "exhaustive", "--json")
	if code != exitOK {
		t.Fatalf("estimate of %s: exit %d\n%.3000s", preset, code, errb)
	}
	var d struct{ Ranking []search.Ranked }
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	steps := map[string]float64{}
	for _, r := range d.Ranking {
		steps[r.Result.Candidate.Key()] = r.Result.Step.Median
	}
	var notices []string
	for _, l := range strings.Split(errb, "\n") {
		var ev struct{ Event, Message string }
		if json.Unmarshal([]byte(l), &ev) == nil && ev.Event == "notice" {
			notices = append(notices, ev.Message)
		}
	}
	return steps, strings.Join(notices, "\n")
}

// A preset exported with its framework profile on one machine and
// imported on another gives the same estimate there as on the first, and
// the search says which profile it used and where it was measured;
// without the profile the estimate differs and says it is a lower bound.
func TestPresetProfileRoundTrip(t *testing.T) {
	// Home A: the GPU node, with the profile its megatron engine measured.
	home(t)
	// Eager, whole-layer and full-iteration graphs: each spends the
	// profile's costs differently.
	if code, _, errb := cgtune(t, "preset", "save", "team", "--model", "llama3_8b", "--gpu-type", "h100",
		"--impls", "none,local", "--scopes", ";full_iteration", "--warmups", "3"); code != exitOK {
		t.Fatalf("save: exit %d %s", code, errb)
	}
	m := mustModel(t, "llama3_8b")
	l, _ := m.Layout("h100")
	dirA, _ := stepmodel.DefaultProfileDir()
	pathA, err := stepmodel.SaveProfile(dirA, gpuNodeProfile(m, l))
	if err != nil {
		t.Fatal(err)
	}
	idA := stepmodel.ProfileIDOf(dirA, pathA)
	onA, noticeA := estimateWith(t, "team")
	origin := "NVIDIA H100 80GB HBM3, driver 580.65.06, 2026-11-30, host gpu-node-7"
	if !strings.Contains(noticeA, "framework profile: host costs measured with Megatron-Core on "+origin) || !strings.Contains(noticeA, "cgtune profile show "+idA) {
		t.Errorf("A's search does not name its profile:\n%s", noticeA)
	}
	shared := filepath.Join(t.TempDir(), "team.yaml")
	code, _, errb := cgtune(t, "preset", "export", "team", "--with-profile", "-o", shared)
	if code != exitOK || !strings.Contains(errb, "with its framework profile (measured on "+origin+")") {
		t.Fatalf("export --with-profile: exit %d %s", code, errb)
	}

	// Home B: a login node without a GPU or a profile.
	home(t)
	without, noticeB := estimateWith(t, shared)
	if !strings.Contains(noticeB, "LOWER BOUND") || !strings.Contains(noticeB, "cgtune preset import "+shared+" installs it") {
		t.Errorf("B's search without the profile does not say it is a lower bound and how to install the profile:\n%s", noticeB)
	}
	if sameSteps(without, onA) {
		t.Fatalf("the estimate without the profile equals the one with it: the test shows nothing\n%v", onA)
	}
	code, out, errb := cgtune(t, "preset", "import", shared)
	if code != exitOK || !strings.Contains(out, "installed its framework profile (measured on "+origin+")") {
		t.Fatalf("import: exit %d\n%s%s", code, out, errb)
	}
	onB, noticeB := estimateWith(t, "team")
	if !sameSteps(onB, onA) {
		t.Errorf("B's estimate differs from A's:\nA %v\nB %v", onA, onB)
	}
	if !strings.Contains(noticeB, "measured with Megatron-Core on "+origin) || strings.Contains(noticeB, "LOWER BOUND") || strings.Contains(noticeB, "preset import") {
		t.Errorf("B's search after the import:\n%s", noticeB)
	}
	// The profile has the same ID here; profile show and rm find it.
	code, out, _ = cgtune(t, "profile", "list")
	if code != exitOK || !strings.Contains(out, idA) || !strings.Contains(out, origin) {
		t.Errorf("profile list on B: exit %d\n%s", code, out)
	}
	if code, out, _ := cgtune(t, "profile", "show", idA[:6]); code != exitOK || !strings.Contains(out, "measured on: "+origin) || !strings.Contains(out, "dense layer") {
		t.Errorf("profile show: exit %d\n%s", code, out)
	}
	if code, out, _ := cgtune(t, "preset", "import", shared, "--force"); code != exitOK || !strings.Contains(out, "its framework profile is cached already") {
		t.Errorf("import again: exit %d\n%s", code, out)
	}
	if code, out, errb := cgtune(t, "profile", "rm", idA); code != exitOK || !strings.Contains(out, "removed ") {
		t.Fatalf("profile rm: exit %d %s%s", code, out, errb)
	}
	if after, _ := estimateWith(t, "team"); !sameSteps(after, without) {
		t.Errorf("after profile rm the estimate is not the one without a profile:\n%v\n%v", after, without)
	}
}

func sameSteps(a, b map[string]float64) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// What a preset carries is checked before anything is written: a profile
// of another model, or a different profile cached in its place without
// --force, is refused and neither the preset nor the profile is written;
// export --with-profile without a cached profile says how to measure one.
func TestPresetProfileRefusals(t *testing.T) {
	h := home(t)
	if code, _, errb := cgtune(t, "preset", "save", "team", "--model", "llama3_8b", "--gpu-type", "h100"); code != exitOK {
		t.Fatalf("save: %s", errb)
	}
	code, _, errb := cgtune(t, "preset", "export", "team", "--with-profile", "-o", filepath.Join(h, "x.yaml"))
	if code != exitBadInput || !strings.Contains(errb, "no framework profile of llama3_8b") || !strings.Contains(errb, "cgtune probe --framework --preset team") {
		t.Errorf("export --with-profile without a profile: exit %d %q", code, errb)
	}
	if _, err := os.Stat(filepath.Join(h, "x.yaml")); !os.IsNotExist(err) {
		t.Errorf("a file was written: %v", err)
	}
	m := mustModel(t, "llama3_8b")
	l, _ := m.Layout("h100")
	dir, _ := stepmodel.DefaultProfileDir()
	if _, err := stepmodel.SaveProfile(dir, gpuNodeProfile(m, l)); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(h, "team.yaml")
	if code, _, errb := cgtune(t, "preset", "export", "team", "--with-profile", "-o", shared); code != exitOK {
		t.Fatalf("export: %s", errb)
	}
	data, _ := os.ReadFile(shared)

	// Another home whose cache holds a different profile in that place.
	home(t)
	other := gpuNodeProfile(m, l)
	other.Layers["dense"] = stepmodel.LayerProfile{EagerFwd: stepmodel.HostGPU{HostMs: 9, GPUMs: 5}, EagerBwd: stepmodel.HostGPU{HostMs: 9, GPUMs: 10}}
	dirB, _ := stepmodel.DefaultProfileDir()
	cached, err := stepmodel.SaveProfile(dirB, other)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(cached)
	code, _, errb = cgtune(t, "preset", "import", shared)
	if code != exitBadInput || !strings.Contains(errb, "a different one is cached at "+cached) || !strings.Contains(errb, "--force") {
		t.Errorf("import over a different cached profile: exit %d %q", code, errb)
	}
	if after, _ := os.ReadFile(cached); string(after) != string(before) {
		t.Error("the cached profile was replaced without --force")
	}
	if code, _, _ := cgtune(t, "preset", "show", "team"); code != exitBadInput {
		t.Error("the preset was imported although its profile was refused")
	}

	// A profile of another model in a llama3_8b preset.
	q := mustModel(t, "qwen3_30b_a3b")
	ql, _ := q.Layout("h100")
	wrong := gpuNodeProfile(q, ql)
	wrongJSON, _ := json.MarshalIndent(wrong, "", "  ")
	var p presets.TeamPreset
	p, err = presets.ParsePreset(shared, data)
	if err != nil {
		t.Fatal(err)
	}
	p.Profile.Data = string(wrongJSON)
	bad, err := presets.MarshalPreset(p)
	if err != nil {
		t.Fatal(err)
	}
	badPath := filepath.Join(t.TempDir(), "team.yaml")
	must(t, os.WriteFile(badPath, bad, 0o644))
	code, _, errb = cgtune(t, "preset", "import", badPath, "--force")
	if code != exitBadInput || !strings.Contains(errb, "its profile is of qwen3_30b_a3b") {
		t.Errorf("import of a profile of another model: exit %d %q", code, errb)
	}
	// Data that is no profile at all is refused when the file is read.
	broken := strings.Replace(string(data), `"version": 3`, `"version": 3,,`, 1)
	brokenPath := filepath.Join(t.TempDir(), "team.yaml")
	must(t, os.WriteFile(brokenPath, []byte(broken), 0o644))
	if code, _, errb := cgtune(t, "preset", "import", brokenPath); code != exitBadInput || !strings.Contains(errb, `field "data": not a framework profile`) {
		t.Errorf("import of broken profile data: exit %d %q", code, errb)
	}
}

// With --save-with-profile the TUI's save puts the profile cached for the
// preset in it; with none cached it says how to measure one and saves
// nothing.
func TestTUISaveWithProfile(t *testing.T) {
	b := testBackend(t)
	b.flags.saveWithProfile = true
	p := presets.TeamPreset{Version: presets.FileVersion, Name: "t1", Model: "llama3_8b", GPU: "h100", Space: presets.DefaultSpace(), MBridge: "0.4"}
	if err := p.FillLayout(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SavePreset(p, false); err == nil || !strings.Contains(err.Error(), "--save-with-profile: no framework profile of llama3_8b") {
		t.Errorf("save without a cached profile: %v", err)
	}
	if list, _ := b.TeamPresets(); len(list) != 0 {
		t.Errorf("a preset was saved: %v", list)
	}
	dir, _ := stepmodel.DefaultProfileDir()
	if _, err := stepmodel.SaveProfile(dir, gpuNodeProfile(mustModel(t, "llama3_8b"), p.Layout)); err != nil {
		t.Fatal(err)
	}
	path, err := b.SavePreset(p, false)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := b.store.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if prof, err := stepmodel.AttachedProfile(saved); err != nil || prof == nil || prof.Host != "gpu-node-7" {
		t.Errorf("the saved preset's profile: %v %v", prof, err)
	}
}
