package recipe

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"cgtune/presets"
)

// The harness's parser keeps the two CUDA-graph flags (either spelling,
// the last one winning), leaves every other token to Hydra, and refuses
// what argparse refuses, in argparse's words.
func TestParseRunScriptArgs(t *testing.T) {
	a, err := ParseRunScriptArgs([]string{"model.a=1", "--cuda_graph_impl", "local", "--cuda_graph_scope=attn,mlp", "rng.x=[a,b]", "--cuda_graph_impl=transformer_engine"})
	if err != nil || a.Impl != "transformer_engine" || !slices.Equal(a.Scopes, []string{"attn", "mlp"}) || !slices.Equal(a.Hydra, []string{"model.a=1", "rng.x=[a,b]"}) {
		t.Errorf("%+v, %v", a, err)
	}
	if a, err := ParseRunScriptArgs([]string{"model.a=1"}); err != nil || a.Impl != "" || a.Scopes != nil {
		t.Errorf("no flags: %+v, %v", a, err)
	}
	for toks, want := range map[string]string{
		"--cuda_graph_impl full_iteration":          "argument --cuda_graph_impl: invalid is_cuda_graph_impl_valid value: 'full_iteration'",
		"--cuda_graph_scope=":                       "argument --cuda_graph_scope: invalid is_cuda_graph_scope_valid value: ''",
		"--cuda_graph_scope attn,mlpp":              "invalid is_cuda_graph_scope_valid value: 'attn,mlpp'",
		"--cuda_graph_impl":                         "argument --cuda_graph_impl: expected one argument",
		"--cuda_graph_impl --cuda_graph_scope attn": "argument --cuda_graph_impl: expected one argument",
		"-tp 2": "-tp is not a flag cgtune writes",
	} {
		if _, err := ParseRunScriptArgs(strings.Fields(toks)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", toks, err, want)
		}
	}
}

// Shell text splits as a shell splits it: comments, quotes, escapes and
// the continuation lines the TUI's pane breaks long lines with.
func TestShellWords(t *testing.T) {
	got, err := shellWords([]byte("# a comment 'x\nmodel.a=1 'model.b=[a, b]' \\\n  \"c d\" e\\ f 'it'\\''s'\n"))
	want := []string{"model.a=1", "model.b=[a, b]", "c d", "e f", "it's"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("%q, %v", got, err)
	}
	if _, err := shellWords([]byte("'open")); err == nil {
		t.Error("an unterminated quote reads")
	}
}

// Every rendering of every candidate, read back as the user applies it,
// sets the same recipe as the overrides' entries applied one by one; the
// flags through the harness's parser end with the graph the independent
// transcription of the harness (perfHarness) ends with.
func TestApplyRenderedReadsBackEveryFormat(t *testing.T) {
	cands := []presets.Candidate{{Impl: presets.ImplNone, Warmup: 3}, fullIter, teAttn,
		{Impl: presets.ImplTE, Warmup: 2}, {Impl: presets.ImplTE, Scopes: []string{"attn", "moe_router", "moe_preprocess"}, Warmup: 1}}
	for _, mb := range []string{"0.4", "0.5", "0.6"} {
		for _, c := range cands {
			t.Run(mb+"/"+c.Key(), func(t *testing.T) {
				o := BuildOverrides(c, mb)
				o.Entries = append(o.Entries, Entry{Key: "model.moe_expert_capacity_factor", Value: 1.0, Why: "it's needed"},
					Entry{Key: "comm_overlap.overlap_moe_expert_parallel_comm", Value: false})
				want, err := New(moeModel, layoutFor(moeModel), mb)
				if err != nil {
					t.Fatal(err)
				}
				for _, tok := range o.DotlistTokens(false) {
					if err := want.ApplySet(tok); err != nil {
						t.Fatal(err)
					}
				}
				for _, f := range Formats {
					data, err := o.Render(f)
					if err != nil {
						t.Fatal(err)
					}
					got, _ := New(moeModel, layoutFor(moeModel), mb)
					if _, err := got.ApplyRendered(f, data, mb); err != nil {
						t.Fatalf("%s: %v\n%s", f, err, data)
					}
					if f == "flags" {
						readBackFlagsLikeTheHarness(t, mb, o, got)
						continue
					}
					if d := Diff(want, got); len(d) > 0 {
						t.Errorf("%s reads back different %v\n%s", f, d, data)
					}
				}
			})
		}
	}
}

// readBackFlagsLikeTheHarness compares what ApplyRunScript left with
// what perfHarness's transcription of run_script.py ends with.
func readBackFlagsLikeTheHarness(t *testing.T, mb string, o Overrides, got *Recipe) {
	t.Helper()
	toks, err := o.FlagTokens(false)
	if err != nil {
		t.Fatal(err)
	}
	var minor int
	fmt.Sscanf(mb, "0.%d", &minor)
	g, err := perfHarness{mb: minor}.run(onlyGraphTokens(toks))
	if err != nil {
		t.Fatalf("%q: %v", toks, err)
	}
	impl, _ := got.Get(KeyImpl)
	rng, _ := got.Get(KeyModelRNG)
	if impl.Str != g.impl || rng.Bool != g.rng {
		t.Errorf("%q: impl %s rng %v; the harness: %s %v", toks, impl.Str, rng.Bool, g.impl, g.rng)
	}
}

// onlyGraphTokens drops the Hydra tokens perfHarness does not model.
func onlyGraphTokens(toks []string) []string {
	var out []string
	for i := 0; i < len(toks); i++ {
		if strings.HasPrefix(toks[i], "--") {
			out = append(out, toks[i], toks[i+1])
			i++
			continue
		}
		if strings.HasPrefix(toks[i], "model.cuda_graph") || strings.HasPrefix(toks[i], KeyModelRNG) {
			out = append(out, toks[i])
		}
	}
	return out
}
