package presets

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func measuredPreset(t *testing.T, name string) TeamPreset {
	t.Helper()
	return TeamPreset{
		Name:        name,
		Description: "DeepSeek on GB200, TE scopes",
		Model:       "deepseek_v3",
		GPU:         "gb200",
		Space: Space{
			Impls:   []string{ImplNone, ImplTE},
			Scopes:  [][]string{{ScopeAttn, ScopeMoERouter, ScopeMoEPreprocess}, {ScopeAttn}},
			Warmups: []int{1, 3},
		},
		MBridge: "0.6",
		Result: &Outcome{
			Winner:        Candidate{Impl: ImplTE, Scopes: []string{ScopeAttn, ScopeMoERouter}, Warmup: 3},
			StepMS:        1234.5,
			EagerStepMS:   1400.25,
			Speedup:       1.1343,
			MemoryMiB:     150321,
			Engine:        "measured",
			GPUName:       "NVIDIA GB200",
			DriverVersion: "580.65.06",
			CgtuneVersion: "0.1.0",
			// A local time with a monotonic reading, as time.Now() gives.
			MeasuredAt: time.Now(),
		},
	}
}

func TestStoreRoundTrip(t *testing.T) {
	cfgA, cfgB := t.TempDir(), t.TempDir()
	a := NewStore("", "", cfgA)
	saved, err := a.Save(measuredPreset(t, "ds-gb200"), false)
	if err != nil {
		t.Fatal(err)
	}
	if saved != filepath.Join(cfgA, "cgtune", "presets", "ds-gb200.yaml") {
		t.Errorf("saved to %s", saved)
	}
	exported := filepath.Join(t.TempDir(), "shared.yaml")
	if err := a.Export("ds-gb200", exported, false); err != nil {
		t.Fatal(err)
	}
	var viaWriter bytes.Buffer
	if err := a.ExportTo("ds-gb200", &viaWriter); err != nil {
		t.Fatal(err)
	}

	b := NewStore("", "", cfgB)
	_, imported, err := b.Import(exported, false)
	if err != nil {
		t.Fatal(err)
	}
	pa, err := a.Load("ds-gb200")
	if err != nil {
		t.Fatal(err)
	}
	pb, err := b.Load("ds-gb200")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pa, pb) {
		t.Errorf("imported preset differs:\n%+v\n%+v", pa, pb)
	}
	m, _ := LookupModel("deepseek_v3")
	l, _ := m.Layout("gb200")
	if !reflect.DeepEqual(pb.Layout, l) {
		t.Errorf("saved layout %+v, want the model's %+v", pb.Layout, l)
	}
	fa, _ := os.ReadFile(saved)
	fe, _ := os.ReadFile(exported)
	fb, _ := os.ReadFile(imported)
	if !bytes.Equal(fa, fe) || !bytes.Equal(fe, fb) || !bytes.Equal(fb, viaWriter.Bytes()) {
		t.Errorf("files differ:\nsaved:\n%s\nexported:\n%s\nimported:\n%s", fa, fe, fb)
	}
	if !strings.Contains(string(fa), "scopes: [attn, moe_router]") || !strings.Contains(string(fa), "version: 1") {
		t.Errorf("saved file:\n%s", fa)
	}
}

func TestImportAndSaveRefuseToOverwrite(t *testing.T) {
	cfg := t.TempDir()
	s := NewStore("", "", cfg)
	path, err := s.Save(measuredPreset(t, "p1"), false)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)

	other := measuredPreset(t, "p1")
	other.Description = "someone else's"
	src := filepath.Join(t.TempDir(), "p1.yaml")
	data, _ := MarshalPreset(other)
	os.WriteFile(src, data, 0o644)

	_, _, err = s.Import(src, false)
	if err == nil || !strings.Contains(err.Error(), `"p1"`) || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Import over an existing preset: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("a refused import changed the file")
	}
	if _, err := s.Save(other, false); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("Save over an existing preset: %v", err)
	}
	if _, _, err := s.Import(src, true); err != nil {
		t.Fatal(err)
	}
	p, _ := s.Load("p1")
	if p.Description != "someone else's" {
		t.Fatalf("forced import did not replace: %q", p.Description)
	}
}

func writePreset(t *testing.T, dir, name, model, gpu string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := TeamPreset{Name: name, Model: model, GPU: gpu, Space: DefaultSpace(), MBridge: "0.4"}
	if err := p.FillLayout(); err != nil {
		t.Fatal(err)
	}
	data, err := MarshalPreset(p)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSearchPathPrecedence(t *testing.T) {
	root := t.TempDir()
	env1, env2, cfg := filepath.Join(root, "env1"), filepath.Join(root, "env2"), filepath.Join(root, "cfg")
	user := filepath.Join(cfg, "cgtune", "presets")
	flagFile := writePreset(t, filepath.Join(root, "flag"), "shared", "llama3_8b", "h100")
	e1 := writePreset(t, env1, "shared", "llama3_70b", "b200")
	e2 := writePreset(t, env2, "shared", "qwen3_30b_a3b", "gb200")
	u := writePreset(t, user, "shared", "deepseek_v3", "b300")
	writePreset(t, env2, "only-env2", "llama3_8b", "b200")
	writePreset(t, user, "mine", "llama3_8b", "gb300")

	env := env1 + string(os.PathListSeparator) + env2
	for _, tc := range []struct {
		flag, env, wantModel, wantPath string
	}{
		{flagFile, env, "llama3_8b", flagFile},
		{"", env, "llama3_70b", e1},
		{"", env2, "qwen3_30b_a3b", e2},
		{"", "", "deepseek_v3", u},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			s := NewStore(tc.flag, tc.env, cfg)
			p, err := s.Load("shared")
			if err != nil {
				t.Fatal(err)
			}
			info, _ := s.Find("shared")
			if p.Model != tc.wantModel || info.Path != tc.wantPath {
				t.Errorf("flag=%q env=%q: got %s from %s, want %s from %s", tc.flag, tc.env, p.Model, info.Path, tc.wantModel, tc.wantPath)
			}
		})
	}

	s := NewStore(flagFile, env, cfg)
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ name, path, source, shadowedBy string }
	var got []row
	for _, i := range list {
		got = append(got, row{i.Name, i.Path, i.Source, i.ShadowedBy})
	}
	want := []row{
		{"shared", flagFile, SourceFlag, ""},
		{"shared", e1, SourceEnv, flagFile},
		{"only-env2", filepath.Join(env2, "only-env2.yaml"), SourceEnv, ""},
		{"shared", e2, SourceEnv, flagFile},
		{"mine", filepath.Join(user, "mine.yaml"), SourceUser, ""},
		{"shared", u, SourceUser, flagFile},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("List:\n got %v\nwant %v", got, want)
	}
	if list[4].Model != "llama3_8b" || list[4].GPU != "gb300" {
		t.Errorf("List info %+v", list[4])
	}
	if sh, ok := s.Shadowing("shared"); !ok || sh.Path != flagFile {
		t.Errorf("Shadowing(shared) = %+v %v", sh, ok)
	}
	if _, ok := s.Shadowing("mine"); ok {
		t.Error("mine is not shadowed")
	}
}

func TestListReportsBrokenFiles(t *testing.T) {
	cfg := t.TempDir()
	user := filepath.Join(cfg, "cgtune", "presets")
	writePreset(t, user, "good", "llama3_8b", "h100")
	os.WriteFile(filepath.Join(user, "broken.yaml"), []byte("version: 1\nname: broken\nmodle: x\n"), 0o644)
	renamed := writePreset(t, user, "orig", "llama3_8b", "h100")
	os.Rename(renamed, filepath.Join(user, "renamed.yaml"))
	os.WriteFile(filepath.Join(user, "notes.txt"), []byte("not a preset"), 0o644)

	s := NewStore("", "", cfg)
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	probs := map[string]string{}
	for _, i := range list {
		probs[i.Name] = i.Problem
	}
	if len(list) != 3 || probs["good"] != "" || !strings.Contains(probs["broken"], `broken.yaml:3: unknown field "modle"`) ||
		!strings.Contains(probs["renamed"], `name "orig" does not match the file name`) {
		t.Fatalf("List = %+v", list)
	}
	if _, err := s.Load("broken"); err == nil || !strings.Contains(err.Error(), "broken.yaml:3:") {
		t.Errorf("Load(broken) = %v", err)
	}
	if _, err := s.Load("nope"); err == nil || !strings.Contains(err.Error(), `"nope" not found`) || !strings.Contains(err.Error(), user) {
		t.Errorf("Load(nope) = %v", err)
	}
	if _, err := s.Load("../etc/passwd"); err == nil || !strings.Contains(err.Error(), "invalid preset name") {
		t.Errorf("Load(../etc/passwd) = %v", err)
	}
}

func TestRemoveOnlyFromUserFolder(t *testing.T) {
	root := t.TempDir()
	env, cfg := filepath.Join(root, "env"), filepath.Join(root, "cfg")
	shared := writePreset(t, env, "team", "llama3_8b", "h100")
	s := NewStore("", env, cfg)
	if _, err := s.Remove("team"); err == nil || !strings.Contains(err.Error(), "not in the user folder") || !strings.Contains(err.Error(), SourceEnv) {
		t.Fatalf("Remove(team from env) = %v", err)
	}
	if _, err := os.Stat(shared); err != nil {
		t.Fatal("Remove deleted a shared preset")
	}
	// A user copy hidden under the shared one is not removed either: the
	// person would think they removed the one Load returns.
	user := writePreset(t, filepath.Join(cfg, "cgtune", "presets"), "team", "llama3_8b", "h100")
	if _, err := s.Remove("team"); err == nil || !strings.Contains(err.Error(), "shadowed") {
		t.Fatalf("Remove(shadowed user copy) = %v", err)
	}
	mine := writePreset(t, filepath.Join(cfg, "cgtune", "presets"), "mine", "llama3_8b", "h100")
	got, err := s.Remove("mine")
	if err != nil || got != mine {
		t.Fatalf("Remove(mine) = %q, %v", got, err)
	}
	if _, err := os.Stat(mine); !os.IsNotExist(err) {
		t.Fatal("file still there")
	}
	if _, err := os.Stat(user); err != nil {
		t.Fatal("the shadowed copy went away")
	}
	if _, err := s.Remove("mine"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("second Remove = %v", err)
	}
}

func TestStoreWithoutUserFolder(t *testing.T) {
	s := NewStore("", "", "")
	p := measuredPreset(t, "x")
	if _, err := s.Save(p, false); err == nil || !strings.Contains(err.Error(), "no user config folder") {
		t.Fatalf("Save with no user folder = %v", err)
	}
	if err := s.Export("x", "-", false); err == nil {
		t.Error("Export to - must point at ExportTo")
	}
}

func TestDefaultUserDir(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/tmp/xdg-test")
	d, err := DefaultUserDir()
	if err != nil {
		t.Fatal(err)
	}
	if d != "/tmp/xdg-test/cgtune/presets" {
		t.Fatalf("DefaultUserDir = %s", d)
	}
}

// Of eight saves of one name at once without overwrite, exactly one
// succeeds and its file is the one kept: the check for an existing file
// and the write must be one step, not a look followed by a rename.
func TestSaveWithoutOverwriteRaces(t *testing.T) {
	const savers, trials = 8, 20
	for trial := range trials {
		s := NewStore("", "", t.TempDir())
		errs := make(chan error, savers)
		start := make(chan struct{})
		for i := range savers {
			p := measuredPreset(t, "race")
			p.Description = fmt.Sprintf("saver %d", i)
			go func() {
				<-start
				_, err := s.Save(p, false)
				errs <- err
			}()
		}
		close(start)
		saved := 0
		for range savers {
			err := <-errs
			switch {
			case err == nil:
				saved++
			case !strings.Contains(err.Error(), "already exists") || !strings.Contains(err.Error(), "--force"):
				t.Fatalf("trial %d: %v", trial, err)
			}
		}
		if saved != 1 {
			t.Fatalf("trial %d: %d saves of one name succeeded without --force, want 1", trial, saved)
		}
	}
}

// Export refuses to replace an existing file (naming it and --force) or
// the preset's own file, and replaces the former only with --force.
func TestExportRefusesToOverwrite(t *testing.T) {
	s := NewStore("", "", t.TempDir())
	saved, err := s.Save(measuredPreset(t, "p1"), false)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "out.yaml")
	os.WriteFile(dst, []byte("mine\n"), 0o644)
	if err := s.Export("p1", dst, false); err == nil || !strings.Contains(err.Error(), dst) || !strings.Contains(err.Error(), "--force") {
		t.Errorf("export over a file: %v", err)
	}
	if got, _ := os.ReadFile(dst); string(got) != "mine\n" {
		t.Errorf("refused export left %q", got)
	}
	if err := s.Export("p1", dst, true); err != nil {
		t.Errorf("export --force: %v", err)
	}
	if got, _ := os.ReadFile(dst); !strings.Contains(string(got), "name: p1") {
		t.Errorf("forced export left %q", got)
	}
	before, _ := os.ReadFile(saved)
	link := filepath.Join(t.TempDir(), "link.yaml")
	os.Symlink(saved, link)
	for _, p := range []string{saved, link} {
		t.Run(filepath.Base(p), func(t *testing.T) {
			if err := s.Export("p1", p, true); err == nil || !strings.Contains(err.Error(), "the preset p1 itself") {
				t.Errorf("export onto the preset's own file (%s): %v", p, err)
			}
		})
	}
	if after, _ := os.ReadFile(saved); !bytes.Equal(before, after) {
		t.Error("the preset's file changed")
	}
}
