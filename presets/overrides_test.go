package presets

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/overrides")

var overrideCases = []struct {
	name string
	c    Candidate
}{
	{"none", Candidate{Impl: ImplNone, Warmup: 3}},
	{"te_scoped", Candidate{Impl: ImplTE, Scopes: []string{ScopeAttn, ScopeMoERouter, ScopeMoEPreprocess}, Warmup: 3}},
	{"te_layer", Candidate{Impl: ImplTE, Warmup: 2}},
	{"full_iteration", Candidate{Impl: ImplLocal, Scopes: []string{ScopeFullIteration}, Warmup: 1}},
}

func TestOverridesGolden(t *testing.T) {
	for _, gen := range []Generation{G2, G3} {
		for _, tc := range overrideCases {
			o := BuildOverrides(tc.c, gen)
			for _, f := range Formats {
				got, err := o.Render(f)
				if err != nil {
					t.Fatalf("%s %s %s: %v", gen, tc.name, f, err)
				}
				path := filepath.Join("testdata", "overrides", strings.ToLower(gen.String())+"_"+tc.name+"."+f+".golden")
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./presets -run Golden -update)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs:\n--- got\n%s--- want\n%s", path, got, want)
				}
			}
		}
	}
}

// entryMap is what every rendering must carry: the dotted keys and values.
func entryMap(o Overrides) map[string]any {
	m := map[string]any{}
	for _, e := range o.Entries {
		switch v := e.Value.(type) {
		case []string:
			l := make([]any, len(v))
			for i, s := range v {
				l[i] = s
			}
			m[e.Key] = l
		default:
			m[e.Key] = v
		}
	}
	return m
}

func flatten(prefix string, v any, out map[string]any) {
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			flatten(joinPath(prefix, k), x, out)
		}
		return
	}
	out[prefix] = v
}

func TestOverridesSemantics(t *testing.T) {
	type want map[string]any
	te3 := []any{"attn", "moe_router", "moe_preprocess"}
	for _, tc := range []struct {
		gen  Generation
		c    Candidate
		want want
	}{
		{G3, overrideCases[0].c, want{KeyImpl: "none", KeyModules: []any{}, KeyScope: nil, KeyWarmup: 3, KeyModelRNG: false, KeyRNG: false}},
		{G2, overrideCases[0].c, want{KeyImpl: "none", KeyScope: []any{}, KeyWarmup: 3, KeyModelRNG: false, KeyRNG: false}},
		{G3, overrideCases[1].c, want{KeyImpl: "transformer_engine", KeyModules: te3, KeyScope: nil, KeyWarmup: 3, KeyModelRNG: true, KeyRNG: true}},
		{G2, overrideCases[1].c, want{KeyImpl: "transformer_engine", KeyScope: te3, KeyWarmup: 3, KeyModelRNG: true, KeyRNG: true}},
		{G3, overrideCases[2].c, want{KeyImpl: "transformer_engine", KeyModules: []any{}, KeyScope: nil, KeyWarmup: 2, KeyModelRNG: true, KeyRNG: true}},
		{G2, overrideCases[2].c, want{KeyImpl: "transformer_engine", KeyScope: []any{}, KeyWarmup: 2, KeyModelRNG: true, KeyRNG: true}},
		{G3, overrideCases[3].c, want{KeyImpl: "full_iteration", KeyModules: []any{}, KeyScope: nil, KeyWarmup: 1, KeyModelRNG: true, KeyRNG: true, KeyNaNLoss: false, KeyNaNGrad: false}},
		{G2, overrideCases[3].c, want{KeyImpl: "local", KeyScope: []any{"full_iteration"}, KeyWarmup: 1, KeyModelRNG: true, KeyRNG: true, KeyNaNLoss: false, KeyNaNGrad: false}},
		// A candidate that already speaks G3 (impl full_iteration) means the same.
		{G2, Candidate{Impl: "full_iteration", Warmup: 1}, want{KeyImpl: "local", KeyScope: []any{"full_iteration"}, KeyWarmup: 1, KeyModelRNG: true, KeyRNG: true, KeyNaNLoss: false, KeyNaNGrad: false}},
		// none clears the scope even when the candidate carries one.
		{G3, Candidate{Impl: ImplNone, Scopes: []string{"attn"}, Warmup: 3}, want{KeyImpl: "none", KeyModules: []any{}, KeyScope: nil, KeyWarmup: 3, KeyModelRNG: false, KeyRNG: false}},
	} {
		o := BuildOverrides(tc.c, tc.gen)
		got := entryMap(o)
		if !reflect.DeepEqual(got, map[string]any(tc.want)) {
			t.Errorf("%s %s:\n got %v\nwant %v", tc.gen, tc.c.Key(), got, tc.want)
		}
		if o.Entries[0].Key != KeyImpl {
			t.Errorf("%s %s: impl must come first, got %s", tc.gen, tc.c.Key(), o.Entries[0].Key)
		}
		// Every machine-readable rendering must carry exactly these values.
		y, _ := o.Render("yaml")
		var nested map[string]any
		if err := yaml.Unmarshal(y, &nested); err != nil {
			t.Fatalf("yaml output does not parse: %v\n%s", err, y)
		}
		flat := map[string]any{}
		flatten("", nested, flat)
		if !reflect.DeepEqual(flat, map[string]any(tc.want)) {
			t.Errorf("%s %s yaml reads back as %v", tc.gen, tc.c.Key(), flat)
		}
		j, _ := o.Render("json")
		var fromJSON map[string]any
		if err := json.Unmarshal(j, &fromJSON); err != nil {
			t.Fatalf("json output does not parse: %v\n%s", err, j)
		}
		for k, v := range fromJSON {
			if f, ok := v.(float64); ok {
				fromJSON[k] = int(f)
			}
		}
		if !reflect.DeepEqual(fromJSON, map[string]any(tc.want)) {
			t.Errorf("%s %s json reads back as %v", tc.gen, tc.c.Key(), fromJSON)
		}
	}
}

func TestBuildOverridesDoesNotAlias(t *testing.T) {
	c := Candidate{Impl: ImplTE, Scopes: []string{"attn"}, Warmup: 3}
	o := BuildOverrides(c, G3)
	c.Scopes[0] = "mlp"
	if v, _ := o.Get(KeyModules); v.([]string)[0] != "attn" {
		t.Fatal("overrides share the candidate's scope slice")
	}
}

func TestJSONKeepsOrder(t *testing.T) {
	o := BuildOverrides(overrideCases[3].c, G3)
	j, _ := o.Render("json")
	dec := json.NewDecoder(bytes.NewReader(j))
	var keys []string
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for _, e := range o.Entries {
		want = append(want, e.Key)
	}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("json key order %v, want %v", keys, want)
	}
}

// TestShellQuoting runs the rendered command lines through sh to check that
// the shell hands Hydra and argparse exactly the intended tokens.
func TestShellQuoting(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, gen := range []Generation{G2, G3} {
		for _, tc := range overrideCases {
			o := BuildOverrides(tc.c, gen)
			raw, _ := o.FlagTokens(false)
			for _, f := range []struct {
				format string
				want   []string
			}{{"dotlist", o.DotlistTokens(false)}, {"flags", raw}} {
				line, _ := o.Render(f.format)
				cmd := exec.Command(sh, "-c", "set -- "+strings.TrimSpace(string(line))+`; for a in "$@"; do printf '%s\n' "$a"; done`)
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%s: sh: %v", line, err)
				}
				got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
				if !reflect.DeepEqual(got, f.want) {
					t.Errorf("%s %s %s: shell splits into %q, want %q", gen, tc.name, f.format, got, f.want)
				}
			}
		}
	}
}

func TestDotlistTokens(t *testing.T) {
	o := BuildOverrides(overrideCases[1].c, G3)
	toks := o.DotlistTokens(false)
	want := []string{
		"model.cuda_graph_impl=transformer_engine",
		"model.cuda_graph_modules=[attn,moe_router,moe_preprocess]",
		"model.cuda_graph_scope=null",
		"model.cuda_graph_warmup_steps=3",
		"model.use_te_rng_tracker=true",
		"rng.te_rng_tracker=true",
	}
	if !reflect.DeepEqual(toks, want) {
		t.Fatalf("tokens %q, want %q", toks, want)
	}
	lines := string(o.RenderDotlistLines())
	if !strings.Contains(lines, "\n'model.cuda_graph_modules=[attn,moe_router,moe_preprocess]'\n") || strings.Count(lines, "\n") != len(want) {
		t.Fatalf("one-per-line dotlist:\n%s", lines)
	}
}

func TestFlagsFullIterationUsesHarnessVocabulary(t *testing.T) {
	// The harness has no full_iteration impl: both generations spell it
	// --cuda_graph_impl local --cuda_graph_scope full_iteration.
	for _, gen := range []Generation{G2, G3} {
		toks, err := BuildOverrides(overrideCases[3].c, gen).FlagTokens(false)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(toks[:4], " ") != "--cuda_graph_impl local --cuda_graph_scope full_iteration" {
			t.Errorf("%s: flags %q", gen, toks)
		}
		for _, tok := range toks {
			if strings.HasPrefix(tok, KeyModules) || strings.HasPrefix(tok, KeyScope) || strings.HasPrefix(tok, KeyImpl) {
				t.Errorf("%s: %q repeats what the flags already say", gen, tok)
			}
		}
	}
	// Whole-layer capture has no scope flag, so the clear goes in the dotlist.
	toks, _ := BuildOverrides(overrideCases[2].c, G3).FlagTokens(false)
	if strings.Contains(strings.Join(toks, " "), flagScope) || !strings.Contains(strings.Join(toks, " "), "model.cuda_graph_modules=[]") {
		t.Errorf("te whole layer flags %q", toks)
	}
}

func TestRenderErrors(t *testing.T) {
	o := BuildOverrides(overrideCases[0].c, G3)
	_, err := o.Render("toml")
	if err == nil || !strings.Contains(err.Error(), `"toml"`) || !strings.Contains(err.Error(), "yaml, dotlist, python, flags, json") {
		t.Fatalf("Render(toml) = %v", err)
	}
	bad := Overrides{Gen: G3, Entries: []Entry{{KeyImpl, "none"}, {KeyWarmup, 3.5}}}
	for _, f := range []string{"yaml", "python", "json"} {
		if _, err := bad.Render(f); err == nil || !strings.Contains(err.Error(), "float64") {
			t.Errorf("%s with a float value: %v", f, err)
		}
	}
	if _, err := (Overrides{Gen: G3}).Render("flags"); err == nil {
		t.Error("flags without an impl must fail")
	}
}

func TestYAMLQuotesAmbiguousStrings(t *testing.T) {
	o := Overrides{Gen: G3, Entries: []Entry{{"model.a", "null"}, {"model.b", "on"}, {"model.c", "a b"}, {"model.d", []string{"yes", "x"}}}}
	y, err := o.Render("yaml")
	if err != nil {
		t.Fatal(err)
	}
	var nested map[string]map[string]any
	if err := yaml.Unmarshal(y, &nested); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": "null", "b": "on", "c": "a b", "d": []any{"yes", "x"}}
	if !reflect.DeepEqual(nested["model"], want) {
		t.Fatalf("yaml reads back as %v\n%s", nested["model"], y)
	}
}

func TestMegatronLMFlagTokens(t *testing.T) {
	cases := []struct {
		c    Candidate
		gen  Generation
		want string
	}{
		{Candidate{Impl: ImplNone, Warmup: 3}, G3, "--cuda-graph-impl none --cuda-graph-warmup-steps 3"},
		{Candidate{Impl: ImplLocal, Warmup: 2}, G3, "--cuda-graph-impl local --cuda-graph-warmup-steps 2"},
		{Candidate{Impl: ImplTE, Scopes: []string{ScopeAttn, ScopeMoERouter}, Warmup: 3}, G3,
			"--cuda-graph-impl transformer_engine --cuda-graph-modules attn moe_router --cuda-graph-warmup-steps 3"},
		{Candidate{Impl: ImplTE, Scopes: []string{ScopeAttn}, Warmup: 3}, G2,
			"--cuda-graph-impl transformer_engine --cuda-graph-scope attn --cuda-graph-warmup-steps 3"},
		{Candidate{Impl: ImplLocal, Scopes: []string{ScopeFullIteration}, Warmup: 1}, G3,
			"--cuda-graph-impl full_iteration --cuda-graph-warmup-steps 1 --no-check-for-nan-in-loss-and-grad"},
		{Candidate{Impl: ImplLocal, Scopes: []string{ScopeFullIteration}, Warmup: 1}, G2,
			"--cuda-graph-impl local --cuda-graph-scope full_iteration --cuda-graph-warmup-steps 1 --no-check-for-nan-in-loss-and-grad"},
	}
	for _, tc := range cases {
		toks, err := BuildOverrides(tc.c, tc.gen).MegatronLMFlagTokens(true)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(toks, " "); got != tc.want {
			t.Errorf("%s %s:\n got %s\nwant %s", tc.gen, tc.c.Key(), got, tc.want)
		}
	}
	// Values that are not plain words are quoted for the shell.
	o := Overrides{Gen: G3, Entries: []Entry{{KeyImpl, "local"}, {KeyModules, []string{"a b", "$(x)"}}}}
	toks, err := o.MegatronLMFlagTokens(true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(toks, " "), `--cuda-graph-impl local --cuda-graph-modules 'a b' '$(x)'`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// Annotate puts comment lines where each format takes them, and leaves
// JSON alone.
func TestAnnotate(t *testing.T) {
	o := BuildOverrides(Candidate{Impl: ImplTE, Scopes: []string{"attn"}, Warmup: 3}, G2)
	for _, f := range Formats {
		data, err := o.Render(f)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := Annotate(data, f, "ESTIMATED: not measured")
		switch f {
		case "json":
			if ok || string(got) != string(data) {
				t.Errorf("json: ok %v, changed %v", ok, string(got) != string(data))
			}
		case "yaml", "python":
			lines := strings.Split(string(got), "\n")
			if !ok || !strings.HasPrefix(lines[0], "# Generated by cgtune") || lines[1] != "# ESTIMATED: not measured" || strings.Join(append(lines[:1], lines[2:]...), "\n") != string(data) {
				t.Errorf("%s:\n%s", f, got)
			}
		default:
			if !ok || string(got) != "# ESTIMATED: not measured\n"+string(data) {
				t.Errorf("%s:\n%s", f, got)
			}
		}
	}
}
