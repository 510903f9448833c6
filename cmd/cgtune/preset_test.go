package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/presets"
)

// presetEnv points the user config folder and $CGTUNE_PRESETS at temporary
// folders and returns the user presets folder.
func presetEnv(t *testing.T, envPresets string) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	t.Setenv("CGTUNE_PRESETS", envPresets)
	return filepath.Join(home, "config", "cgtune", "presets")
}

func TestPresetSaveShowExportImportRm(t *testing.T) {
	user := presetEnv(t, "")
	code, out, errs := runCmd(t, "preset", "save", "moe-b200", "--model", "qwen3_30b_a3b", "--gpu-type", "b200",
		"--impls", "none,transformer_engine", "--scopes", "attn,moe_router,moe_preprocess;attn", "--warmups", "1,3",
		"--mbridge", "0.4", "--description", "Qwen on B200")
	if code != exitOK {
		t.Fatalf("save: exit %d: %s", code, errs)
	}
	path := filepath.Join(user, "moe-b200.yaml")
	if !strings.Contains(out, path) {
		t.Errorf("save output %q does not name %s", out, path)
	}
	p, err := presets.NewStore("", "", filepath.Dir(filepath.Dir(user))).Load("moe-b200")
	if err != nil {
		t.Fatal(err)
	}
	if p.GPU != "b200" || p.Layout.MBS != 4 || p.MBridge != "0.4" || len(p.Space.Scopes) != 2 || p.Space.Scopes[0][2] != "moe_preprocess" ||
		len(p.Space.Warmups) != 2 || p.Space.Impls[1] != presets.ImplTE || p.Description != "Qwen on B200" {
		t.Errorf("saved preset %+v", p)
	}

	code, out, errs = runCmd(t, "preset", "show", "moe-b200")
	if code != exitOK || !strings.Contains(out, "name: moe-b200") || !strings.Contains(out, "scopes:\n    - [attn, moe_router, moe_preprocess]") || !strings.Contains(errs, path) {
		t.Errorf("show: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = runCmd(t, "preset", "show", "moe-b200", "--json")
	var asJSON presets.TeamPreset
	if code != exitOK || json.Unmarshal([]byte(out), &asJSON) != nil || asJSON.Layout.EP != 8 {
		t.Errorf("show --json: exit %d\n%s", code, out)
	}

	// Export to standard output and to a file give the same bytes.
	_, stdoutCopy, _ := runCmd(t, "preset", "export", "moe-b200")
	file := filepath.Join(t.TempDir(), "shared.yaml")
	if code, _, errs := runCmd(t, "preset", "export", "moe-b200", "-o", file); code != exitOK {
		t.Fatalf("export -o: exit %d: %s", code, errs)
	}
	fileCopy, _ := os.ReadFile(file)
	saved, _ := os.ReadFile(path)
	if stdoutCopy != string(fileCopy) || string(fileCopy) != string(saved) {
		t.Errorf("export copies differ:\n%s\n%s\n%s", stdoutCopy, fileCopy, saved)
	}

	// Import never replaces silently.
	code, _, errs = runCmd(t, "preset", "import", file)
	if code != exitBadInput || !strings.Contains(errs, `"moe-b200" already exists`) || !strings.Contains(errs, "--force") {
		t.Errorf("import over existing: exit %d, %q", code, errs)
	}
	if code, _, errs := runCmd(t, "preset", "import", file, "--force"); code != exitOK {
		t.Errorf("import --force: exit %d, %q", code, errs)
	}
	if code, _, errs := runCmd(t, "preset", "save", "moe-b200", "--model", "llama3_8b"); code != exitBadInput || !strings.Contains(errs, "--force") {
		t.Errorf("save over existing: exit %d, %q", code, errs)
	}

	code, out, _ = runCmd(t, "preset", "rm", "moe-b200")
	if code != exitOK || !strings.Contains(out, "removed "+path) {
		t.Errorf("rm: exit %d, %q", code, out)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Error("rm left the file")
	}
	code, _, errs = runCmd(t, "preset", "show", "moe-b200")
	if code != exitBadInput || !strings.Contains(errs, `"moe-b200" not found`) {
		t.Errorf("show after rm: exit %d, %q", code, errs)
	}

	// Import into a fresh config folder gives the very same file.
	fresh := presetEnv(t, "")
	if code, _, errs := runCmd(t, "preset", "import", file); code != exitOK {
		t.Fatalf("import: exit %d: %s", code, errs)
	}
	again, _ := os.ReadFile(filepath.Join(fresh, "moe-b200.yaml"))
	if string(again) != string(saved) {
		t.Errorf("imported file differs from the saved one:\n%s\n%s", again, saved)
	}
}

func TestPresetListAndPrecedence(t *testing.T) {
	shared := t.TempDir()
	user := presetEnv(t, shared)
	// The same name in $CGTUNE_PRESETS and in the user folder.
	t.Setenv("CGTUNE_PRESETS", "")
	if code, _, errs := runCmd(t, "preset", "save", "team", "--model", "llama3_8b", "--gpu-type", "gb200"); code != exitOK {
		t.Fatal(errs)
	}
	if code, _, errs := runCmd(t, "preset", "export", "team", "-o", filepath.Join(shared, "team.yaml")); code != exitOK {
		t.Fatal(errs)
	}
	if code, _, errs := runCmd(t, "preset", "save", "team", "--model", "llama3_70b", "--gpu-type", "b200", "--force"); code != exitOK {
		t.Fatal(errs)
	}
	t.Setenv("CGTUNE_PRESETS", shared)
	flagFile := filepath.Join(t.TempDir(), "solo.yaml")
	os.WriteFile(flagFile, []byte("version: 1\nname: solo\nmodel: deepseek_v3\ngpu: h100\nspace: {impls: [none], warmups: [3]}\nmbridge: \"0.6\"\n"), 0o644)

	code, out, errs := runCmd(t, "preset", "list", "--preset", flagFile)
	if code != exitOK {
		t.Fatalf("list: exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("list:\n%s", out)
	}
	for i, want := range [][]string{
		{"solo", "deepseek_v3", "h100", "--preset", flagFile},
		{"team", "llama3_8b", "gb200", "$CGTUNE_PRESETS", filepath.Join(shared, "team.yaml")},
		{"team", "llama3_70b", "b200", "user", filepath.Join(user, "team.yaml"), "shadowed by " + filepath.Join(shared, "team.yaml")},
	} {
		t.Run(strings.Join(want[:3], " "), func(t *testing.T) {
			for _, w := range want {
				if !strings.Contains(lines[i+1], w) {
					t.Errorf("list row %d %q lacks %q", i+1, lines[i+1], w)
				}
			}
		})
	}
	// Load follows the same order: the shared copy wins.
	_, out, _ = runCmd(t, "preset", "show", "team")
	if !strings.Contains(out, "model: llama3_8b") {
		t.Errorf("show team returned the shadowed copy:\n%s", out)
	}
	_, out, _ = runCmd(t, "preset", "show", "solo", "--preset", flagFile)
	if !strings.Contains(out, "model: deepseek_v3") || !strings.Contains(out, "num_gpus: 1024") {
		t.Errorf("show solo:\n%s", out)
	}
	// rm refuses the shared one.
	code, _, errs = runCmd(t, "preset", "rm", "team")
	if code != exitBadInput || !strings.Contains(errs, "shadowed") {
		t.Errorf("rm team: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(shared, "team.yaml")); err != nil {
		t.Error("rm touched the shared preset")
	}
	// An import of a preset the shared folder already has is refused too.
	code, _, errs = runCmd(t, "preset", "import", filepath.Join(shared, "team.yaml"))
	if code != exitBadInput || !strings.Contains(errs, "$CGTUNE_PRESETS") || !strings.Contains(errs, "--force") {
		t.Errorf("import team: exit %d, %q", code, errs)
	}
	code, out, _ = runCmd(t, "preset", "list", "--json")
	var infos []presets.PresetInfo
	if code != exitOK || json.Unmarshal([]byte(out), &infos) != nil || len(infos) != 2 || infos[1].ShadowedBy == "" {
		t.Errorf("list --json: exit %d\n%s", code, out)
	}
}

func TestPresetBadInput(t *testing.T) {
	user := presetEnv(t, "")
	os.MkdirAll(user, 0o755)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("version: 1\nname: x\nmodel: qwen3_30b_a3b\ngpu: b200\nspace:\n  impls: [tee]\n  warmups: [3]\nmbridge: \"0.6\"\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"preset", "import", bad}, []string{bad + ":6:", `unknown impl "tee"`, "allowed: none, local, transformer_engine"}},
		{[]string{"preset", "save", "x"}, []string{"--model is required", "llama3_8b"}},
		{[]string{"preset", "save", "x", "--model", "gpt4"}, []string{`unknown model "gpt4"`}},
		{[]string{"preset", "save", "x", "--model", "gpt_oss_20b", "--gpu-type", "h100"}, []string{`no layout for gpu "h100"`, "b300, gb200, gb300"}},
		{[]string{"preset", "save", "x", "--model", "llama3_8b", "--scopes", "attn,flash"}, []string{`unknown scope "flash"`}},
		{[]string{"preset", "save", "x", "--model", "llama3_8b", "--warmups", "1,two"}, []string{`"two" is not an integer`}},
		{[]string{"preset", "save", "x", "--model", "llama3_8b", "--mbridge", "1.0"}, []string{`unknown Megatron-Bridge version "1.0"`}},
		{[]string{"preset", "save", "Bad Name", "--model", "llama3_8b"}, []string{`invalid preset name "Bad Name"`}},
		{[]string{"preset", "show", "../x"}, []string{"invalid preset name"}},
		{[]string{"preset", "export", "nope"}, []string{`"nope" not found`}},
		{[]string{"preset", "rm", "nope"}, []string{`"nope" not found`}},
		{[]string{"preset"}, []string{"needs a subcommand"}},
		{[]string{"preset", "show"}, []string{"accepts 1 arg"}},
	} {
		t.Run(argsName(tc.args), func(t *testing.T) {
			code, _, errs := runCmd(t, tc.args...)
			if code != exitBadInput {
				t.Errorf("%v: exit %d, want %d (%s)", tc.args, code, exitBadInput, errs)
			}
			if strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("%v: error is not one line: %q", tc.args, errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("%v: error %q lacks %q", tc.args, errs, w)
				}
			}
		})
	}
	if entries, _ := os.ReadDir(user); len(entries) != 0 {
		t.Errorf("failed commands left files: %v", entries)
	}
	var out bytes.Buffer
	if run([]string{"preset", "list"}, &out, &bytes.Buffer{}) != exitOK || out.Len() != 0 {
		t.Errorf("empty list printed %q", out.String())
	}
}

// preset export -o names the file it wrote by its absolute path.
func TestPresetExportSaysTheAbsolutePath(t *testing.T) {
	presetEnv(t, "")
	if code, _, errs := runCmd(t, "preset", "save", "p1", "--model", "llama3_8b", "--gpu-type", "h100"); code != exitOK {
		t.Fatalf("save: exit %d: %s", code, errs)
	}
	t.Chdir(t.TempDir())
	here, _ := os.Getwd()
	code, _, errs := runCmd(t, "preset", "export", "p1", "-o", "p1.yaml")
	if want := "exported p1 to " + filepath.Join(here, "p1.yaml") + "\n"; code != exitOK || errs != want {
		t.Errorf("export: exit %d, %q; want %q", code, errs, want)
	}
}
