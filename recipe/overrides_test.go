package recipe

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"cgtune/presets"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/overrides")

var overrideCases = []struct {
	name string
	c    presets.Candidate
}{
	{"none", presets.Candidate{Impl: presets.ImplNone, Warmup: 3}},
	{"te_scoped", presets.Candidate{Impl: presets.ImplTE, Scopes: []string{presets.ScopeAttn, presets.ScopeMoERouter, presets.ScopeMoEPreprocess}, Warmup: 3}},
	{"te_layer", presets.Candidate{Impl: presets.ImplTE, Warmup: 2}},
	{"full_iteration", presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 1}},
}

// The golden renderings of G2 (MB 0.4), G3 (MB 0.6) and MB 0.5, which
// spells transformer_engine scopes in cuda_graph_scope.
func TestOverridesGolden(t *testing.T) {
	for _, mb := range []string{"0.4", "0.5", "0.6"} {
		gen, _ := presets.ParseMBridge(mb)
		prefix := strings.ToLower(gen.String())
		if mb == "0.5" {
			prefix += "_mb05"
		}
		for _, tc := range overrideCases {
			t.Run(tc.name, func(t *testing.T) {
				o := BuildOverrides(tc.c, mb)
				for _, f := range Formats {
					got, err := o.Render(f)
					if err != nil {
						t.Fatalf("%s %s %s: %v", gen, tc.name, f, err)
					}
					path := filepath.Join("testdata", "overrides", prefix+"_"+tc.name+"."+f+".golden")
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
						t.Fatalf("%v (run go test ./recipe -run Golden -update)", err)
					}
					if !bytes.Equal(got, want) {
						t.Errorf("%s differs:\n--- got\n%s--- want\n%s", path, got, want)
					}
				}
			})
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
			if prefix != "" {
				k = prefix + "." + k
			}
			flatten(k, x, out)
		}
		return
	}
	out[prefix] = v
}

func TestOverridesSemantics(t *testing.T) {
	type want map[string]any
	te3 := []any{"attn", "moe_router", "moe_preprocess"}
	for _, tc := range []struct {
		gen  presets.Generation
		c    presets.Candidate
		want want
	}{
		{presets.G3, overrideCases[0].c, want{KeyImpl: "none", KeyModules: []any{}, KeyScope: nil, KeyWarmup: 3, KeyModelRNG: false, KeyRNG: false}},
		{presets.G2, overrideCases[0].c, want{KeyImpl: "none", KeyScope: []any{}, KeyWarmup: 3, KeyModelRNG: false, KeyRNG: false}},
		{presets.G3, overrideCases[1].c, want{KeyImpl: "transformer_engine", KeyModules: te3, KeyScope: nil, KeyWarmup: 3, KeyModelRNG: true, KeyRNG: true}},
		{presets.G2, overrideCases[1].c, want{KeyImpl: "transformer_engine", KeyScope: te3, KeyWarmup: 3, KeyModelRNG: true, KeyRNG: true}},
		{presets.G3, overrideCases[2].c, want{KeyImpl: "transformer_engine", KeyModules: []any{}, KeyScope: nil, KeyWarmup: 2, KeyModelRNG: true, KeyRNG: true}},
		{presets.G2, overrideCases[2].c, want{KeyImpl: "transformer_engine", KeyScope: []any{}, KeyWarmup: 2, KeyModelRNG: true, KeyRNG: true}},
		{presets.G3, overrideCases[3].c, want{KeyImpl: "full_iteration", KeyModules: []any{}, KeyScope: nil, KeyWarmup: 1, KeyModelRNG: true, KeyRNG: true, KeyNaNLoss: false, KeyNaNGrad: false}},
		{presets.G2, overrideCases[3].c, want{KeyImpl: "local", KeyScope: []any{"full_iteration"}, KeyWarmup: 1, KeyModelRNG: true, KeyRNG: true, KeyNaNLoss: false, KeyNaNGrad: false}},
		// A candidate that already speaks G3 (impl full_iteration) means the same.
		{presets.G2, presets.Candidate{Impl: "full_iteration", Warmup: 1}, want{KeyImpl: "local", KeyScope: []any{"full_iteration"}, KeyWarmup: 1, KeyModelRNG: true, KeyRNG: true, KeyNaNLoss: false, KeyNaNGrad: false}},
		// none clears the scope even when the candidate carries one.
		{presets.G3, presets.Candidate{Impl: presets.ImplNone, Scopes: []string{"attn"}, Warmup: 3}, want{KeyImpl: "none", KeyModules: []any{}, KeyScope: nil, KeyWarmup: 3, KeyModelRNG: false, KeyRNG: false}},
	} {
		t.Run(fmt.Sprint(tc.gen), func(t *testing.T) {
			o := BuildOverrides(tc.c, mbOf(tc.gen))
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
		})
	}
}

func TestBuildOverridesDoesNotAlias(t *testing.T) {
	c := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}, Warmup: 3}
	o := BuildOverrides(c, "0.6")
	c.Scopes[0] = "mlp"
	if v, _ := o.Get(KeyModules); v.([]string)[0] != "attn" {
		t.Fatal("overrides share the candidate's scope slice")
	}
}

func TestJSONKeepsOrder(t *testing.T) {
	o := BuildOverrides(overrideCases[3].c, "0.6")
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
	for _, gen := range []presets.Generation{presets.G2, presets.G3} {
		for _, tc := range overrideCases {
			t.Run(tc.name, func(t *testing.T) {
				o := BuildOverrides(tc.c, mbOf(gen))
				raw, _ := o.FlagTokens(false)
				for _, f := range []struct {
					format string
					want   []string
				}{{"dotlist", o.DotlistTokens(false)}, {"flags", raw}} {
					t.Run(f.format, func(t *testing.T) {
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
					})
				}
			})
		}
	}
}

func TestDotlistTokens(t *testing.T) {
	o := BuildOverrides(overrideCases[1].c, "0.6")
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
	for _, gen := range []presets.Generation{presets.G2, presets.G3} {
		t.Run(gen.String(), func(t *testing.T) {
			toks, err := BuildOverrides(overrideCases[3].c, mbOf(gen)).FlagTokens(false)
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
		})
	}
	// Whole-layer capture has no scope flag, so the clear goes in the dotlist.
	toks, _ := BuildOverrides(overrideCases[2].c, "0.6").FlagTokens(false)
	if strings.Contains(strings.Join(toks, " "), flagScope) || !strings.Contains(strings.Join(toks, " "), "model.cuda_graph_modules=[]") {
		t.Errorf("te whole layer flags %q", toks)
	}
}

func TestRenderErrors(t *testing.T) {
	o := BuildOverrides(overrideCases[0].c, "0.6")
	_, err := o.Render("toml")
	if err == nil || !strings.Contains(err.Error(), `"toml"`) || !strings.Contains(err.Error(), "yaml, dotlist, python, flags, json") {
		t.Fatalf("Render(toml) = %v", err)
	}
	bad := Overrides{Gen: presets.G3, Entries: []Entry{{Key: KeyImpl, Value: "none"}, {Key: KeyWarmup, Value: float32(3.5)}}}
	for _, f := range []string{"yaml", "python", "json"} {
		t.Run(f, func(t *testing.T) {
			if _, err := bad.Render(f); err == nil || !strings.Contains(err.Error(), "float32") {
				t.Errorf("%s with a float value: %v", f, err)
			}
		})
	}
	if _, err := (Overrides{Gen: presets.G3}).Render("flags"); err == nil {
		t.Error("flags without an impl must fail")
	}
}

func TestYAMLQuotesAmbiguousStrings(t *testing.T) {
	o := Overrides{Gen: presets.G3, Entries: []Entry{{Key: "model.a", Value: "null"}, {Key: "model.b", Value: "on"}, {Key: "model.c", Value: "a b"}, {Key: "model.d", Value: []string{"yes", "x"}}}}
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
		c    presets.Candidate
		gen  presets.Generation
		want string
	}{
		{presets.Candidate{Impl: presets.ImplNone, Warmup: 3}, presets.G3, "--cuda-graph-impl none --cuda-graph-warmup-steps 3"},
		{presets.Candidate{Impl: presets.ImplLocal, Warmup: 2}, presets.G3, "--cuda-graph-impl local --cuda-graph-warmup-steps 2"},
		{presets.Candidate{Impl: presets.ImplTE, Scopes: []string{presets.ScopeAttn, presets.ScopeMoERouter}, Warmup: 3}, presets.G3,
			"--cuda-graph-impl transformer_engine --cuda-graph-modules attn moe_router --cuda-graph-warmup-steps 3"},
		{presets.Candidate{Impl: presets.ImplTE, Scopes: []string{presets.ScopeAttn}, Warmup: 3}, presets.G2,
			"--cuda-graph-impl transformer_engine --cuda-graph-scope attn --cuda-graph-warmup-steps 3"},
		{presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 1}, presets.G3,
			"--cuda-graph-impl full_iteration --cuda-graph-warmup-steps 1 --no-check-for-nan-in-loss-and-grad"},
		{presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 1}, presets.G2,
			"--cuda-graph-impl local --cuda-graph-scope full_iteration --cuda-graph-warmup-steps 1 --no-check-for-nan-in-loss-and-grad"},
	}
	for _, tc := range cases {
		t.Run(tc.gen.String()+" "+tc.c.Key(), func(t *testing.T) {
			toks, err := BuildOverrides(tc.c, mbOf(tc.gen)).MegatronLMFlagTokens(true)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(toks, " "); got != tc.want {
				t.Errorf("%s %s:\n got %s\nwant %s", tc.gen, tc.c.Key(), got, tc.want)
			}
		})
	}
	// The settings beside the graph go as the flags Megatron-LM derives
	// from TransformerConfig's fields; a false switch is Megatron-LM's
	// default, save the few it turns on itself; a key with no flag is an
	// error, not a job run without it.
	o := BuildOverrides(fullIter, "0.4")
	o.Entries = append(o.Entries, Entry{Key: "model.moe_expert_capacity_factor", Value: 1.0},
		Entry{Key: "model.moe_pad_expert_input_to_capacity", Value: true}, Entry{Key: "comm_overlap.overlap_moe_expert_parallel_comm", Value: false},
		Entry{Key: "model.tensor_model_parallel_size", Value: 2}, Entry{Key: "model.recompute_modules", Value: []string{"core_attn", "mlp"}},
		Entry{Key: "model.gradient_accumulation_fusion", Value: false}, Entry{Key: "train.micro_batch_size", Value: 2})
	toks, err := o.MegatronLMFlagTokens(false)
	want := "--cuda-graph-impl local --cuda-graph-scope full_iteration --cuda-graph-warmup-steps 2 --no-check-for-nan-in-loss-and-grad " +
		"--moe-expert-capacity-factor 1.0 --moe-pad-expert-input-to-capacity --tensor-model-parallel-size 2 --recompute-modules core_attn mlp " +
		"--no-gradient-accumulation-fusion --micro-batch-size 2"
	if got := strings.Join(toks, " "); err != nil || got != want {
		t.Errorf("got %s, %v\nwant %s", got, err, want)
	}
	o.Entries = append(o.Entries, Entry{Key: "ddp.overlap_grad_reduce", Value: false})
	if _, err := o.MegatronLMFlagTokens(false); err == nil || !strings.Contains(err.Error(), "ddp.overlap_grad_reduce has no Megatron-LM flag") {
		t.Errorf("a key without a flag: %v", err)
	}
	// Values that are not plain words are quoted for the shell.
	o = Overrides{Gen: presets.G3, Entries: []Entry{{Key: KeyImpl, Value: "local"}, {Key: KeyModules, Value: []string{"a b", "$(x)"}}}}
	toks, err = o.MegatronLMFlagTokens(true)
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
	o := BuildOverrides(presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"attn"}, Warmup: 3}, "0.4")
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

// perfHarness is what MB's perf harness does with run_script.py's command
// line, transcribed from MB at tags v0.4.0 and v0.6.0 (and v0.5.0, the
// other G3 release):
//   - scripts/performance/argument_parser.py: VALID_CUDA_GRAPH_IMPLS and
//     VALID_CUDA_GRAPH_SCOPES (the same lists in all three),
//     is_cuda_graph_impl_valid, is_cuda_graph_scope_valid (arg.split(",")
//     with every part in the list); parse_known_args leaves the unknown
//     tokens to Hydra (run_script.py main / _apply_perf_recipe_overrides);
//   - scripts/performance/run_script.py: the Hydra overrides are applied
//     (set_cli_overrides) before the flags (set_user_overrides);
//   - scripts/performance/utils/overrides.py _set_cuda_graph_overrides.
type perfHarness struct {
	mb int // Megatron-Bridge minor version: 4, 5 or 6
}

var (
	harnessImpls  = []string{"none", "local", "transformer_engine"}
	harnessScopes = []string{"full_iteration", "attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba"}
	harnessTE     = []string{"attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba"}
)

// graphConfig is the recipe's CUDA-graph fields; a nil list is None.
type graphConfig struct {
	impl          string
	scope, mods   []string
	scopeNone     bool
	modsNone      bool
	rng, nanCheck bool
}

// run parses toks as run_script.py would and returns the recipe's graph
// fields after the harness, or the error the harness raises.
func (h perfHarness) run(toks []string) (graphConfig, error) {
	var implFlag, scopeFlag *string
	var hydra []string
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t == "--cuda_graph_impl" || t == "--cuda_graph_scope":
			if i+1 >= len(toks) {
				return graphConfig{}, fmt.Errorf("argparse: %s expects one argument", t)
			}
			v := toks[i+1]
			i++
			if t == "--cuda_graph_impl" {
				if !slices.Contains(harnessImpls, v) {
					return graphConfig{}, fmt.Errorf("argparse: invalid is_cuda_graph_impl_valid value: %q", v)
				}
				implFlag = &v
				continue
			}
			for _, p := range strings.Split(v, ",") {
				if !slices.Contains(harnessScopes, p) {
					return graphConfig{}, fmt.Errorf("argparse: invalid is_cuda_graph_scope_valid value: %q", v)
				}
			}
			scopeFlag = &v
		case strings.HasPrefix(t, "-"):
			return graphConfig{}, fmt.Errorf("unknown flag %q would reach Hydra", t)
		case strings.Contains(t, "="):
			hydra = append(hydra, t)
		default:
			return graphConfig{}, fmt.Errorf("token %q is neither a flag nor a Hydra override", t)
		}
	}
	// The library recipe's own values (MB recipes write cuda_graph_scope="full").
	g := graphConfig{impl: "none", scopeNone: true, modsNone: h.mb < 5, rng: false, nanCheck: true}
	g.scope, g.scopeNone = []string{"full"}, false
	if h.mb >= 5 {
		g.mods = []string{}
	}
	for _, t := range hydra {
		k, v, _ := strings.Cut(t, "=")
		var list []string
		isNull := v == "null"
		if strings.HasPrefix(v, "[") {
			if inner := strings.Trim(v, "[]"); inner != "" {
				list = strings.Split(inner, ",")
			} else {
				list = []string{}
			}
		}
		switch k {
		case KeyImpl:
			g.impl = v
		case KeyScope:
			g.scope, g.scopeNone = list, isNull
		case KeyModules:
			if h.mb < 5 {
				return g, fmt.Errorf("Hydra: %s is not a field of MB 0.%d", k, h.mb)
			}
			g.mods, g.modsNone = list, isNull
		case KeyModelRNG:
			g.rng = v == "true"
		}
	}
	var scopeList []string
	if scopeFlag != nil {
		scopeList = strings.Split(*scopeFlag, ",")
	}
	if implFlag != nil {
		g.impl = *implFlag
		g.rng = *implFlag != "none"
	}
	switch {
	case h.mb <= 4:
		if implFlag != nil && *implFlag == "transformer_engine" {
			if scopeFlag == nil {
				return g, errors.New("TypeError: 'NoneType' object is not iterable")
			}
			if !allIn(scopeList, harnessTE) {
				return g, fmt.Errorf("AssertionError: Invalid cuda graph scope: %v", scopeList)
			}
		}
		if scopeFlag != nil {
			g.scope, g.scopeNone = scopeList, false
		}
	case h.mb == 5:
		if scopeFlag != nil {
			g.scope, g.scopeNone = scopeList, false
		}
		if g.impl == "transformer_engine" && (g.scopeNone || !allIn(g.scope, harnessTE)) {
			return g, fmt.Errorf("AssertionError: Invalid cuda graph scope: %v", g.scope)
		}
		if g.impl == "none" {
			g.scope = []string{}
		}
	default:
		if g.impl == "none" {
			g.mods, g.modsNone, g.scope, g.scopeNone = []string{}, false, nil, true
			return g, nil
		}
		if scopeFlag != nil {
			if slices.Contains(scopeList, "full_iteration") {
				if len(scopeList) != 1 || g.impl == "transformer_engine" {
					return g, errors.New("ValueError: full_iteration CUDA graph scope")
				}
				g.impl, g.mods, g.modsNone, g.scope, g.scopeNone = "full_iteration", []string{}, false, nil, true
			} else {
				g.mods, g.modsNone, g.scope, g.scopeNone = scopeList, false, nil, true
			}
		}
		if g.impl == "transformer_engine" && !allIn(g.moduleNames(), harnessTE) {
			return g, fmt.Errorf("AssertionError: Invalid cuda graph scope: %v", g.moduleNames())
		}
		if g.impl == "local" && !slices.Contains(append(slices.Clone(g.mods), g.scope...), "full_iteration") {
			return g, errors.New(`ValueError: Megatron Bridge supports model.cuda_graph_impl="local" only for full-iteration CUDA graphs`)
		}
	}
	return g, nil
}

// moduleNames is MB v0.6.0's cuda_graph_module_names (src/megatron/bridge/
// utils/cuda_graph.py): both fields, without the special values.
func (g graphConfig) moduleNames() []string {
	var out []string
	for _, n := range append(slices.Clone(g.mods), g.scope...) {
		if n != "full" && n != "full_iteration" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// The flags rendering is what run_script.py of MB v0.4.0, v0.5.0 and
// v0.6.0 accepts for every scope set, the whole layer included, and the
// recipe ends with the candidate's graph.
func TestFlagsAcceptedByPerfHarness(t *testing.T) {
	var cands []presets.Candidate
	cands = append(cands, presets.Candidate{Impl: presets.ImplNone, Warmup: 3}, presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 2})
	for mask := 0; mask < 1<<len(presets.LayerScopes); mask++ {
		set := []string{}
		for i, s := range presets.LayerScopes {
			if mask&(1<<i) != 0 {
				set = append(set, s)
			}
		}
		cands = append(cands, presets.Candidate{Impl: presets.ImplTE, Scopes: set, Warmup: 1})
	}
	g2Local := []presets.Candidate{{Impl: presets.ImplLocal, Warmup: 3}, {Impl: presets.ImplLocal, Scopes: []string{presets.ScopeAttn}, Warmup: 3}}
	for _, h := range []perfHarness{{mb: 4}, {mb: 5}, {mb: 6}} {
		all := cands
		if h.mb <= 4 {
			all = append(slices.Clone(cands), g2Local...)
		}
		for _, c := range all {
			t.Run(fmt.Sprintf("MB_0.%d/%s", h.mb, c.Key()), func(t *testing.T) {
				toks, err := BuildOverrides(c, fmt.Sprintf("0.%d", h.mb)).FlagTokens(false)
				if err != nil {
					t.Fatal(err)
				}
				g, err := h.run(toks)
				if err != nil {
					t.Fatalf("%q: %v", toks, err)
				}
				wantImpl, wantMods := c.Impl, c.Scopes
				if wantMods == nil {
					wantMods = []string{}
				}
				gotMods := g.moduleNames()
				switch {
				case h.mb <= 5:
					// The scope field, as the harness leaves it; MCore moves
					// it to cuda_graph_modules later (G3).
					gotMods = g.scope
				case c.FullIteration():
					wantImpl, wantMods = "full_iteration", []string{}
				}
				if gotMods == nil {
					gotMods = []string{}
				}
				if !c.Graphed() {
					wantMods = gotMods // the harness clears or ignores the scope of none
				}
				if g.impl != wantImpl || !slices.Equal(gotMods, wantMods) || g.rng != c.Graphed() {
					t.Errorf("%q ends as impl %s scopes %v rng %v; want %s %v", toks, g.impl, gotMods, g.rng, wantImpl, wantMods)
				}
			})
		}
	}
}

// A setting the overrides carry with a reason, a nested key, a float and
// notes: every format carries the values and the reasons (a comment where
// the format has comments, JSON's _why and _notes otherwise).
func TestOverridesWhyAndNotes(t *testing.T) {
	for _, gen := range []presets.Generation{presets.G2, presets.G3} {
		t.Run(gen.String(), func(t *testing.T) {
			o := BuildOverrides(presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{presets.ScopeFullIteration}, Warmup: 1}, mbOf(gen))
			o.Entries = append(o.Entries,
				Entry{Key: "model.moe_expert_capacity_factor", Value: 1.0, Why: "without it the capture fails:\ndropless presets.MoE"},
				Entry{Key: "dataset.offline_packing_specs.pad_cu_seqlens", Value: true, Why: "MB-08 needs it"})
			o.Notes = []string{"WARNING: forced"}
			for _, f := range Formats {
				data, err := o.Render(f)
				if err != nil {
					t.Fatalf("%s %s: %v", gen, f, err)
				}
				got := string(data)
				switch f {
				case "yaml":
					var nested map[string]any
					if err := yaml.Unmarshal(data, &nested); err != nil {
						t.Fatalf("%s yaml: %v\n%s", gen, err, got)
					}
					flat := map[string]any{}
					flatten("", nested, flat)
					if v, ok := flat["model.moe_expert_capacity_factor"].(float64); !ok || v != 1.0 || flat["dataset.offline_packing_specs.pad_cu_seqlens"] != true {
						t.Errorf("%s yaml reads back as %v", gen, flat)
					}
					if !strings.Contains(got, "  # without it the capture fails: dropless presets.MoE\n  moe_expert_capacity_factor: 1.0\n") ||
						!strings.Contains(got, "\n    # MB-08 needs it\n    pad_cu_seqlens: true\n") || !strings.Contains(got, "\n# WARNING: forced\n") {
						t.Errorf("%s yaml:\n%s", gen, got)
					}
				case "python":
					if !strings.Contains(got, "# without it the capture fails: dropless presets.MoE\ncfg.model.moe_expert_capacity_factor = 1.0\n") ||
						!strings.Contains(got, "cfg.dataset.offline_packing_specs.pad_cu_seqlens = True\n") || !strings.Contains(got, "\n# WARNING: forced\n") {
						t.Errorf("%s python:\n%s", gen, got)
					}
				case "dotlist", "flags":
					lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
					last := lines[len(lines)-1]
					for _, l := range lines[:len(lines)-1] {
						if !strings.HasPrefix(l, "# ") {
							t.Errorf("%s %s: %q is not a comment line", gen, f, l)
						}
					}
					if !strings.Contains(got, "# model.moe_expert_capacity_factor: without it the capture fails: dropless presets.MoE\n") ||
						!strings.Contains(last, "model.moe_expert_capacity_factor=1.0") || !strings.Contains(got, "# WARNING: forced\n") {
						t.Errorf("%s %s:\n%s", gen, f, got)
					}
				case "json":
					var m map[string]any
					if err := json.Unmarshal(data, &m); err != nil {
						t.Fatalf("%s json: %v\n%s", gen, err, got)
					}
					why, _ := m[JSONWhyKey].(map[string]any)
					if m["model.moe_expert_capacity_factor"] != 1.0 || !strings.Contains(got, `"model.moe_expert_capacity_factor": 1.0`) ||
						why["dataset.offline_packing_specs.pad_cu_seqlens"] != "MB-08 needs it" || len(why) != 2 ||
						!reflect.DeepEqual(m[JSONNotesKey], []any{"WARNING: forced"}) {
						t.Errorf("%s json:\n%s", gen, got)
					}
				}
			}
		})
	}
}
