package main

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"cgtune/engine/job"
	"cgtune/presets"
	"cgtune/search"
	"cgtune/stepmodel"
)

// snakeKey is what every key of cgtune's JSON output looks like.
var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// dataMaps are the objects whose keys are data, not field names: recipe
// keys as the person or the recipe writes them (model.moe_..., dotted).
var dataMaps = []string{"settings", "sets", "overrides", "overrides_why"}

// jsonKeys collects, for every key of the JSON value v that is no
// snake_case field name, the path where it was found; seen counts every
// key walked, by name.
func jsonKeys(v any, path string, bad map[string]string, seen map[string]int) {
	switch x := v.(type) {
	case map[string]any:
		last := path[strings.LastIndexAny(path, ".")+1:]
		if slices.Contains(dataMaps, last) {
			return
		}
		for k, c := range x {
			seen[k]++
			if !snakeKey.MatchString(k) {
				bad[k] = path
			}
			jsonKeys(c, path+"."+k, bad, seen)
		}
	case []any:
		for _, c := range x {
			jsonKeys(c, path, bad, seen)
		}
	}
}

// checkSnakeJSON decodes each JSON document (one object, or JSON lines)
// and fails on any key that is not snake_case.
func checkSnakeJSON(t *testing.T, what, text string, lines bool, seen map[string]int) {
	t.Helper()
	docs := []string{text}
	if lines {
		docs = strings.Split(strings.TrimSpace(text), "\n")
	}
	bad := map[string]string{}
	for _, d := range docs {
		var v any
		if err := json.Unmarshal([]byte(d), &v); err != nil {
			t.Fatalf("%s: not JSON (%v): %.200s", what, err, d)
		}
		jsonKeys(v, what, bad, seen)
	}
	for k, where := range bad {
		t.Errorf("%s: key %q at %s is not snake_case", what, k, where)
	}
}

// Every key of every --json output is snake_case: the search's result and
// events (with a rule's violations), validate's outcome and events, the
// models, the presets, the runs and the profiles.
func TestJSONKeysAreSnakeCase(t *testing.T) {
	cache := isolate(t)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(cache, "config"))
	t.Setenv("CGTUNE_PRESETS", "")
	seen := map[string]int{}
	// A small MoE space with configurations the rules reject (MoE graphs
	// of a dropless model), so that their violations are among the keys.
	preset := writeFile(t, "moe.yaml", `version: 1
name: moe
model: qwen3_30b_a3b
gpu: h100
space:
  impls: [none, transformer_engine]
  scopes: [[attn], [moe], [attn, moe_router]]
  warmups: [3]
mbridge: "0.4"
`)
	code, out, errb := cgtune(t, "--headless", "--preset", preset, "--engine", "estimate", "--json")
	if code != exitOK {
		t.Fatalf("search: exit %d\n%s", code, errb)
	}
	checkSnakeJSON(t, "search stdout", out, false, seen)
	var run struct {
		RunDir string `json:"run_dir"`
	}
	if err := json.Unmarshal([]byte(out), &run); err != nil {
		t.Fatal(err)
	}
	checkSnakeJSON(t, "search stderr", errb, true, seen)
	// The MoE model's space has configurations the rules reject: their
	// violations were among what was checked.
	if seen["violations"] == 0 || seen["id"] == 0 || seen["message"] == 0 {
		t.Fatalf("no violation was checked: violations %d, id %d, message %d", seen["violations"], seen["id"], seen["message"])
	}

	valRun := searchRun(t)
	// Without the calibration fit, which takes long; its object's keys
	// are among the types TestJSONFieldNamesAreSnakeCase checks.
	code, out, errb = cgtune(t, "validate", valRun, "--launcher", "local", "--command", fakeJobCommand(t), "--iters", "12", "--poll", "100ms",
		"--job-python", fakePython(t, true), "--top", "1", "--no-calibrate", "--json")
	if code != exitOK {
		t.Fatalf("validate: exit %d\n%s", code, errb)
	}
	checkSnakeJSON(t, "validate stdout", out, false, seen)
	// Its stderr opens with a plain line saying what runs where; the
	// events are the JSON lines.
	var events []string
	for _, l := range strings.Split(errb, "\n") {
		if strings.HasPrefix(l, "{") {
			events = append(events, l)
		}
	}
	if len(events) == 0 {
		t.Fatalf("validate --json: no events on stderr:\n%s", errb)
	}
	checkSnakeJSON(t, "validate stderr", strings.Join(events, "\n"), true, seen)

	if code, _, errb := cgtune(t, "preset", "save", "keys", "--model", "llama3_8b"); code != exitOK {
		t.Fatalf("preset save: exit %d %s", code, errb)
	}
	m := mustModel(t, "llama3_8b")
	l, _ := m.Layout("h100")
	profiles, _ := stepmodel.DefaultProfileDir()
	profile, err := stepmodel.SaveProfile(profiles, gpuNodeProfile(m, l))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"models", "--json"}, {"models", "--gpu-type", "b200", "--json"},
		{"preset", "list", "--json"}, {"preset", "show", "keys", "--json"},
		{"runs", "list", "--json"}, {"runs", "show", filepath.Base(run.RunDir), "--json"},
		{"profile", "list", "--json"}, {"profile", "show", stepmodel.ProfileIDOf(profiles, profile), "--json"},
	} {
		code, out, errb := cgtune(t, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d %s", args, code, errb)
		}
		checkSnakeJSON(t, strings.Join(args, " "), out, false, seen)
	}
}

// jsonFieldNames collects the JSON names of t's fields, through pointers,
// slices, maps, embedded structs and nested structs, each type once;
// types that marshal themselves are left to their own code.
func jsonFieldNames(t reflect.Type, path string, seen map[reflect.Type]bool, names map[string]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] || t.Implements(reflect.TypeOf((*json.Marshaler)(nil)).Elem()) || t == reflect.TypeOf(time.Time{}) {
		return
	}
	seen[t] = true
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			jsonFieldNames(f.Type, path, seen, names)
			continue
		}
		if name == "" {
			name = f.Name
		}
		names[path+"."+t.Name()+"."+f.Name] = name
		jsonFieldNames(f.Type, path, seen, names)
	}
}

// Every field of every type a --json output writes has a snake_case name,
// whether or not a run fills it.
func TestJSONFieldNamesAreSnakeCase(t *testing.T) {
	roots := []any{headlessResult{}, noticeEvent{}, wroteEvent{}, errorEvent{},
		search.PlanEvent{}, search.StartEvent{}, search.SampleEvent{}, search.ResultEvent{}, search.MemoryEvent{},
		search.WorkerEvent{}, search.PrepareEvent{}, search.DoneEvent{},
		validateOutput{}, job.JobEvent{}, job.JobDone{}, modelLayoutJSON{},
		presets.PresetInfo{}, presets.TeamPreset{}, presets.Model{}, search.RunInfo{}, stepmodel.CachedProfile{}}
	names := map[string]string{}
	seen := map[reflect.Type]bool{}
	for _, r := range roots {
		jsonFieldNames(reflect.TypeOf(r), reflect.TypeOf(r).Name(), seen, names)
	}
	if len(names) < 100 {
		t.Fatalf("only %d fields found: the walk missed types", len(names))
	}
	for field, name := range names {
		if !snakeKey.MatchString(name) {
			t.Errorf("%s is written as %q, not snake_case", field, name)
		}
	}
}
