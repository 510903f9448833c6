package presets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/internal/fileio/fileiotest"
)

// Loading a FIFO, /dev/zero or another hostile path returns a refusal
// within a bound instead of blocking or reading without end.
func TestLoadFileNeverHangs(t *testing.T) {
	for kind, p := range fileiotest.Hostile(t, t.TempDir()) {
		var err error
		fileiotest.Within(t, p, func() { _, err = NewStore("", "", "").LoadFile(p) })
		if err == nil || !strings.Contains(err.Error(), fileiotest.Refusal(kind)) {
			t.Errorf("LoadFile(%s): %v", kind, err)
		}
	}
}

// A FIFO, /dev/zero, a folder or a dangling link in a $CGTUNE_PRESETS
// folder is skipped with a warning naming it, and the good presets beside
// it still list and load, so no command that lists presets can hang.
func TestListSkipsHostileEntriesWithAWarning(t *testing.T) {
	env := t.TempDir()
	bad := fileiotest.Hostile(t, env)
	must(t, os.Mkdir(filepath.Join(env, "folder.yaml"), 0o755))
	must(t, os.Symlink("nowhere.yaml", filepath.Join(env, "dangling.yaml")))
	writePreset(t, env, "good", "llama3_8b", "h100")
	s := NewStore("", env, "")
	var warnings []string
	s.Warn = func(m string) { warnings = append(warnings, m) }
	var list []PresetInfo
	var err error
	fileiotest.Within(t, "List", func() { list, err = s.List() })
	if err != nil || len(list) != 1 || list[0].Name != "good" || list[0].Problem != "" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if len(warnings) != len(bad)+2 {
		t.Errorf("warnings %q", warnings)
	}
	for _, w := range warnings {
		if !strings.HasPrefix(w, "skipped "+env) || !strings.Contains(w, SourceEnv) {
			t.Errorf("warning %q", w)
		}
	}
	if _, err := s.Load("good"); err != nil {
		t.Errorf("Load(good) beside the hostile entries: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
