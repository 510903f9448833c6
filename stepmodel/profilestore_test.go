package stepmodel

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cgtune/presets"
)

func testProfile(model, layout, gpu, mcore string) *FrameworkProfile {
	return &FrameworkProfile{Version: ProfileVersion, Source: "megatron-core " + mcore + ", " + gpu,
		Key: ProfileKey{GPU: gpu, Driver: "580.65", Torch: "2.11.0", MCore: mcore, LayerSpec: "local", Model: model, Layout: layout, WorldSize: 1},
		Layers: map[string]LayerProfile{"dense": {EagerFwd: HostGPU{HostMs: 2, GPUMs: 1}, EagerBwd: HostGPU{HostMs: 1, GPUMs: 2},
			Graphed: map[string]GraphedRegion{"layer": {ReplayHostMs: 0.1, GPUMs: 2.5, GraphMiB: 50}}}},
		OtherFwd: HostGPU{HostMs: 1, GPUMs: 1}, Optimizer: HostGPU{HostMs: 3, GPUMs: 1}}
}

func TestProfileCacheRoundTrip(t *testing.T) {
	dir := t.TempDir()
	layout := LayoutKey(presets.Layout{NumGPUs: 8, TP: 2, GBS: 64, MBS: 1, Seq: 4096, Precision: "bf16"})
	old := testProfile("llama3_8b", layout, "NVIDIA H200", "0.16.0")
	path, err := SaveProfile(dir, old)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(path, filepath.Join(dir, "llama3_8b", layout, "h200")) {
		t.Errorf("cached at %s", path)
	}
	// A newer measurement with another framework version is the one used.
	newer := testProfile("llama3_8b", layout, "NVIDIA H200", "0.20.0")
	p2, err := SaveProfile(dir, newer)
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	os.Chtimes(p2, later, later)
	got, at, err := FindProfile(dir, "llama3_8b", layout, "H200 (estimated)")
	if err != nil || got == nil || got.Key.MCore != "0.20.0" || at != p2 {
		t.Fatalf("found %+v at %s (%v)", got, at, err)
	}
	// Another GPU, model or layout has none; a broken file is skipped.
	for _, k := range [][3]string{{"llama3_8b", layout, "h100"}, {"llama3_70b", layout, "h200"}, {"llama3_8b", "tp1", "h200"}} {
		t.Run(strings.Join(k[:], " "), func(t *testing.T) {
			if p, _, err := FindProfile(dir, k[0], k[1], k[2]); p != nil || err != nil {
				t.Errorf("%v: found %v (%v)", k, p, err)
			}
		})
	}
	os.WriteFile(filepath.Join(filepath.Dir(p2), "zz_broken.json"), []byte("{"), 0o644)
	os.Chtimes(filepath.Join(filepath.Dir(p2), "zz_broken.json"), later.Add(time.Hour), later.Add(time.Hour))
	if got, _, _ := FindProfile(dir, "llama3_8b", layout, "h200"); got == nil || got.Key.MCore != "0.20.0" {
		t.Errorf("broken newer file not skipped: %+v", got)
	}
	// A profile with a negative or non-finite time is refused.
	bad := testProfile("m", "l", "h200", "x")
	bad.Optimizer.HostMs = -1
	if _, err := SaveProfile(dir, bad); err == nil || !strings.Contains(err.Error(), "optimizer.host_ms") {
		t.Errorf("negative time saved: %v", err)
	}
}

func TestModelAndLayoutKeys(t *testing.T) {
	m, err := presets.LookupModel("llama3_8b")
	if err != nil {
		t.Fatal(err)
	}
	if ModelKey(m) != "llama3_8b" {
		t.Errorf("built-in key %q", ModelKey(m))
	}
	m.Arch.Layers = 8
	if k := ModelKey(m); !strings.HasPrefix(k, "llama3_8b@") || len(k) != len("llama3_8b@")+12 {
		t.Errorf("changed architecture key %q", k)
	}
	l := presets.Layout{NumGPUs: 16, EP: 16, GBS: 1024, MBS: 1, Seq: 4096, Precision: "bf16", Dispatcher: "flex", RecomputeModules: []string{"moe_act", "layernorm"}}
	if k := LayoutKey(l); k != "tp1-pp1-vp1-cp1-ep16-etp1-dp16-mbs1-gbs1024-seq4096-bf16-flex-rc_layernorm_moe_act" {
		t.Errorf("layout key %q", k)
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "adjust.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProfileAdjustFile(t *testing.T) {
	p := writeFile(t, `host_scale: 2
layers:
  dense:
    eager_fwd: {host_ms: 4}
    graphed:
      layer: {replay_host_ms: 0.3}
optimizer: {gpu_ms: 7}
step_start: {host_ms: 0.25}
pre_fwd_host_ms: 0.5
`)
	a, err := LoadProfileAdjust(p)
	if err != nil {
		t.Fatal(err)
	}
	base := testProfile("m", "l", "h200", "0.16.0")
	q := a.Apply(base)
	d := q.Layers["dense"]
	// Overrides replace, then the host scale multiplies every host time.
	if d.EagerFwd.HostMs != 8 || d.EagerFwd.GPUMs != 1 || d.EagerBwd.HostMs != 2 || d.Graphed["layer"].ReplayHostMs != 0.6 ||
		q.Optimizer.GPUMs != 7 || q.Optimizer.HostMs != 6 || q.OtherFwd.HostMs != 2 || q.StepStart.HostMs != 0.5 || q.PreFwdHostMs != 1 {
		t.Errorf("adjusted: %+v", q)
	}
	if base.Layers["dense"].EagerFwd.HostMs != 2 {
		t.Error("Apply changed the cached profile")
	}
	if !strings.Contains(q.Source, "adjusted by "+p) || !strings.Contains(q.Source, "host ×2") {
		t.Errorf("source %q", q.Source)
	}
	// Without a profile, the host scale applies to the per-op costs.
	h := a.ApplyHost(DefaultHostCosts())
	if h.GEMMUs != 2*DefaultHostCosts().GEMMUs {
		t.Errorf("per-op host costs: %+v", h)
	}
}

// A profile file's errors name the file, the line and the field in words,
// one error on one line, never the YAML decoder's Go type names; version:
// 1, as cgtune's other YAML files have it, is accepted.
func TestProfileFileErrorsInWords(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"a list for a layer", "host_scale: 1.2\nlayers:\n  moe:\n    - eager_fwd\n", `:4: field "layers.moe": want a mapping, got a list`},
		{"a version other than 1", "version: 2\nhost_scale: 1.2\n", `:1: unsupported version "2" (allowed: 1)`},
		{"a value out of range", "host_scale: 1\nlayers:\n  dense:\n    eager_fwd:\n      host_ms: -1\n", ":5: field layers.dense.eager_fwd.host_ms: -1 (allowed: ms from 0 to 1e+06)"},
		{"an unknown field", "layers:\n  dense:\n    eager_fwd: {hots_ms: 1}\n", `:3: unknown field "hots_ms" in layers.dense.eager_fwd (allowed: host_ms, gpu_ms)`},
		{"a string for a number", "full_iteration:\n  replay_host_ms: soon\n", `:2: field "full_iteration.replay_host_ms": want a number, got "soon"`},
		{"an alias", "other_fwd: &a {host_ms: 1}\nother_bwd: *a\n", ":1: YAML anchors and aliases are not supported in a profile file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, tc.body)
			_, err := LoadProfileAdjust(p)
			if err == nil || err.Error() != p+tc.want && !strings.HasPrefix(err.Error(), p+tc.want) || strings.ContainsAny(err.Error(), "\n!") || strings.Contains(err.Error(), "stepmodel.") {
				t.Errorf("%v; want %s%s", err, p, tc.want)
			}
		})
	}
	p := writeFile(t, "version: 1\nhost_scale: 1.5\n")
	if a, err := LoadProfileAdjust(p); err != nil || *a.HostScale != 1.5 {
		t.Errorf("version: 1: %v", err)
	}
}

func TestProfileAdjustRejectsBadValues(t *testing.T) {
	for body, want := range map[string]string{
		"host_scale: .nan\n":                          "field host_scale: NaN (allowed: a number from 0.01 to 100)",
		"host_scale: .inf\n":                          "field host_scale: +Inf",
		"gpu_scale: 0\n":                              "field gpu_scale: 0 (allowed",
		"host_scale: 1000\n":                          "field host_scale: 1000",
		"layers: {dense: {eager_fwd: {host_ms: -1}}}": "field layers.dense.eager_fwd.host_ms: -1 (allowed: ms from 0 to 1e+06)",
		"layers: {gpu: {eager_fwd: {host_ms: 1}}}":    "field layers.gpu: unknown layer kind (allowed: dense, moe, mamba",
		"host_scael: 1\n":                             `unknown field "host_scael" (allowed: version, host_scale, gpu_scale,`,
		"pre_fwd_host_ms: -0.5\n":                     "field pre_fwd_host_ms: -0.5 (allowed: ms from 0 to 1e+06)",
		"host_scale: fast\n":                          `field "host_scale": want a number, got "fast"`,
	} {
		t.Run(body, func(t *testing.T) {
			p := writeFile(t, body)
			_, err := LoadProfileAdjust(p)
			if err == nil || !strings.HasPrefix(err.Error(), p+":1: ") || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%q: %v; want one line naming %s and %q", body, err, p, want)
			}
		})
	}
	for arg, want := range map[string]string{
		"host=1.3":         "",
		"host=1.3,gpu=0.9": "",
		"host=inf":         "host_scale: +Inf",
		"host=0":           "host_scale: 0",
		"cpu=2":            `unknown key "cpu" (allowed: host, gpu)`,
		"host":             "want host=F",
	} {
		t.Run(arg, func(t *testing.T) {
			a, err := ParseProfileScale(arg, nil)
			switch {
			case want == "" && (err != nil || *a.HostScale != 1.3):
				t.Errorf("%s: %v", arg, err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Errorf("%s: %v, want %q", arg, err, want)
			}
		})
	}
}

// ProfileSet uses the cached profile of the workload's model and layout on
// its GPU (adjusted), else the per-op costs (scaled), and applies the
// calibration hook.
func TestProfileSetCosts(t *testing.T) {
	dir := t.TempDir()
	w, err := BuildWorkload(denseModel, oneGPU, WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := SpecFor("h200")
	two := 2.0
	s := &ProfileSet{Dir: dir, GPU: "NVIDIA H200", Adjust: &ProfileAdjust{HostScale: &two, Source: "test"}}
	c := s.CostsFor(w, r, DefaultHostCosts())
	if c.Profile != nil || c.Host.GEMMUs != 2*DefaultHostCosts().GEMMUs || c.Kind() != HostCostsPerOp {
		t.Errorf("without a profile: %+v", c)
	}
	if _, err := SaveProfile(dir, testProfile(ModelKey(w.Spec.Model), LayoutKey(w.Layout), "NVIDIA H200", "0.16.0")); err != nil {
		t.Fatal(err)
	}
	// The set that looked before the profile was measured (a megatron
	// search measures it first, after the estimator has looked) finds it.
	if c = s.CostsFor(w, r, DefaultHostCosts()); c.Profile == nil {
		t.Error("a profile saved after a miss is not found")
	}
	s = &ProfileSet{Dir: dir, GPU: "h200", Adjust: &ProfileAdjust{HostScale: &two, Source: "test"},
		Calibration: func(model, layout string) (float64, string, bool) {
			return 1.5, "job logs", strings.HasPrefix(model, "dense@")
		}}
	c = s.CostsFor(w, r, DefaultHostCosts())
	if c.Profile == nil || c.Kind() != HostCostsProfile || c.Profile.Layers["dense"].EagerFwd.HostMs != 2*2*1.5 {
		t.Fatalf("with a profile: %+v", c.Profile)
	}
	if !strings.Contains(c.Source(), "calibrated ×1.5 from job logs") {
		t.Errorf("source %q", c.Source())
	}
}

// A cached profile of an older format is not used, and the costs say it
// must be measured again; with a current one beside it, that one is used.
func TestProfileOfAnOlderFormatIsSaidNotUsed(t *testing.T) {
	dir := t.TempDir()
	w, err := BuildWorkload(denseModel, oneGPU, WorkloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := testProfile(ModelKey(w.Spec.Model), LayoutKey(w.Layout), "NVIDIA H200", "0.16.0")
	path := ProfilePath(dir, old.Key)
	old.Version = ProfileVersion - 1
	data, _ := json.Marshal(old)
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if p, _, err := FindProfile(dir, old.Key.Model, old.Key.Layout, "h200"); p != nil || !errors.Is(err, ErrProfileVersion) {
		t.Fatalf("older format: found %v (%v), want none and ErrProfileVersion", p, err)
	}
	r, _ := SpecFor("h200")
	c := (&ProfileSet{Dir: dir, GPU: "h200"}).CostsFor(w, r, DefaultHostCosts())
	if c.Profile != nil || !strings.Contains(c.Source(), "older format") || !strings.Contains(c.Source(), "cgtune probe --framework") {
		t.Errorf("costs %q: want the per-op fallback saying the profile must be measured again", c.Source())
	}
	cur := testProfile(ModelKey(w.Spec.Model), LayoutKey(w.Layout), "NVIDIA H200", "0.20.0")
	if _, err := SaveProfile(dir, cur); err != nil {
		t.Fatal(err)
	}
	if p, _, err := FindProfile(dir, cur.Key.Model, cur.Key.Layout, "h200"); p == nil || err != nil {
		t.Errorf("current format beside an older one: %v (%v)", p, err)
	}
}

// A profile's collective exposures survive the cache; a rank count below
// 2, twice the same rank count or a negative figure is refused.
func TestProfileCollectivesRoundTripAndValidation(t *testing.T) {
	dir := t.TempDir()
	p := testProfile("m", "tp2", "NVIDIA H200", "0.16.0")
	p.Collectives = []CollectiveExposure{{WorldSize: 2, EagerExposedHostMsPerLayer: 0.8, GraphedExposedHostMsPerLayer: 0.05, Source: "test"}}
	path, err := SaveProfile(dir, p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := LoadProfile(path)
	if err != nil || len(got.Collectives) != 1 || got.Collectives[0] != p.Collectives[0] {
		t.Fatalf("loaded %+v (%v)", got, err)
	}
	data, _ := os.ReadFile(path)
	for _, field := range []string{`"collectives"`, `"world_size": 2`, `"eager_exposed_host_ms_per_layer": 0.8`, `"graphed_exposed_host_ms_per_layer": 0.05`} {
		if !strings.Contains(string(data), field) {
			t.Errorf("file lacks %s", field)
		}
	}
	for _, tc := range []struct {
		c    []CollectiveExposure
		want string
	}{
		{[]CollectiveExposure{{WorldSize: 1}}, "collectives[0].world_size: 1 (want 2 or more"},
		{[]CollectiveExposure{{WorldSize: 2}, {WorldSize: 2}}, "collectives[1].world_size: 2"},
		{[]CollectiveExposure{{WorldSize: 4, EagerExposedHostMsPerLayer: -1}}, "collectives[0].eager_exposed_host_ms_per_layer: -1"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			bad := testProfile("m", "tp2", "NVIDIA H200", "0.16.0")
			bad.Collectives = tc.c
			if _, err := SaveProfile(dir, bad); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%+v: %v; want %q", tc.c, err, tc.want)
			}
		})
	}
	// A profile without the field (older files) still loads.
	q := testProfile("m", "tp1", "NVIDIA H200", "0.16.0")
	path, err = SaveProfile(dir, q)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); strings.Contains(string(data), "collectives") {
		t.Error("an empty exposure list is written")
	}
}
