package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"cgtune/engine/job"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
	"cgtune/stepmodel"
)

// complete runs cobra's hidden __complete command as the shell scripts do
// and returns the values offered (without their descriptions).
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	code, out, errb := cgtune(t, append([]string{"__complete"}, args...)...)
	if code != exitOK {
		t.Fatalf("__complete %q: exit %d %s", args, code, errb)
	}
	var vals []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" || strings.HasPrefix(l, ":") {
			continue
		}
		v, _, _ := strings.Cut(l, "\t")
		vals = append(vals, v)
	}
	return vals
}

// The values of every enumerated flag complete, as the rest of cgtune
// defines them, on every command that has the flag.
func TestCompletionOfFlagValues(t *testing.T) {
	isolate(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("CGTUNE_PRESETS", "")
	engines := []string{"megatron", "cuda", "estimate", "job"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--model", ""}, presets.BuiltinModelNames()},
		{[]string{"check", "--model", ""}, presets.BuiltinModelNames()},
		{[]string{"preset", "save", "x", "--model", ""}, presets.BuiltinModelNames()},
		{[]string{"--gpu-type", ""}, presets.GPUs()},
		{[]string{"emit", "--gpu-type", ""}, presets.GPUs()},
		{[]string{"--estimate-gpu", ""}, stepmodel.SpecNames()},
		{[]string{"--format", ""}, recipe.Formats},
		{[]string{"emit", "--format", ""}, recipe.Formats},
		{[]string{"validate", "--format", ""}, job.OverrideFormats},
		{[]string{"--command-format", ""}, job.OverrideFormats},
		{[]string{"check", "--impl", ""}, presets.InputImpls()},
		{[]string{"emit", "--impl", ""}, presets.InputImpls()},
		{[]string{"check", "--scope", ""}, presets.Scopes},
		{[]string{"--engine", ""}, engines},
		{[]string{"worker", "--engine", ""}, []string{"cuda", "estimate"}},
		{[]string{"--strategy", ""}, search.Strategies()},
		{[]string{"--mbridge", ""}, presets.MBridgeVersions},
		{[]string{"check", "--mbridge", ""}, presets.MBridgeVersions},
		{[]string{"--launcher", ""}, presets.Launchers},
		{[]string{"validate", "--launcher", ""}, presets.Launchers},
		{[]string{"preset", "save", "x", "--precision", ""}, presets.Precisions()},
		{[]string{"preset", "save", "x", "--dispatcher", ""}, presets.Dispatchers()},
	} {
		t.Run(argsName(tc.args), func(t *testing.T) {
			if got := complete(t, tc.args...); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	// A list completes its next value after what is typed, without the
	// values it holds already.
	got := complete(t, "check", "--scope", "attn,m")
	if len(got) != len(presets.Scopes)-1 || slices.Contains(got, "attn,attn") || !slices.Contains(got, "attn,moe") {
		t.Errorf("--scope attn,m: %q", got)
	}
	if got := complete(t, "preset", "save", "x", "--scopes", "attn,moe;mlp,"); !slices.Contains(got, "attn,moe;mlp,attn") || slices.Contains(got, "attn,moe;mlp,mlp") {
		t.Errorf("--scopes after a ';': %q", got)
	}
}

// Every flag of every command whose name says it takes one of a known set
// completes to something: a command added later with such a flag cannot
// be left out.
func TestEveryEnumeratedFlagCompletes(t *testing.T) {
	isolate(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("CGTUNE_PRESETS", "")
	if code, _, errb := cgtune(t, "preset", "save", "mine", "--model", "llama3_8b"); code != exitOK {
		t.Fatal(errb)
	}
	enumerated := []string{"model", "gpu-type", "job-gpu", "estimate-gpu", "format", "command-format", "impl", "impls", "scope", "scopes",
		"engine", "strategy", "mbridge", "launcher", "precision", "dispatcher", "job-te", "preset"}
	checked := 0
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !slices.Contains(enumerated, f.Name) {
				return
			}
			args := append(slices.Clone(path), "--"+f.Name, "")
			if len(complete(t, args...)) == 0 {
				t.Errorf("%q completes nothing", args)
			}
			checked++
		})
		for _, s := range c.Commands() {
			if s.Name() != "help" && s.Name() != "completion" && !s.Hidden {
				walk(s, append(slices.Clone(path), s.Name()))
			}
		}
	}
	walk(newRootCmd(), nil)
	if checked < 30 {
		t.Errorf("only %d enumerated flags found: the walk missed commands", checked)
	}
}

// Preset names complete for --preset and preset show/export/rm; run names
// for --resume, validate and runs show/rm; profile IDs for profile
// show/rm; and cgtune completion writes each shell's script.
func TestCompletionOfNames(t *testing.T) {
	isolate(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("CGTUNE_PRESETS", "")
	for _, name := range []string{"alpha", "beta"} {
		if code, _, errb := cgtune(t, "preset", "save", name, "--model", "llama3_8b"); code != exitOK {
			t.Fatal(errb)
		}
	}
	presetsWant := []string{"alpha", "beta"}
	for _, args := range [][]string{{"--preset", ""}, {"check", "--preset", ""}, {"preset", "show", ""}, {"preset", "export", ""}, {"preset", "rm", ""}} {
		if got := complete(t, args...); !slices.Equal(got, presetsWant) {
			t.Errorf("%q: %q, want %q", args, got, presetsWant)
		}
	}
	run := completeRun(t)
	name := run[strings.LastIndex(run, "/")+1:]
	for _, args := range [][]string{{"--resume", ""}, {"validate", ""}, {"runs", "show", ""}, {"runs", "rm", ""}} {
		if got := complete(t, args...); !slices.Equal(got, []string{name}) {
			t.Errorf("%q: %q, want %q", args, got, name)
		}
	}
	m := mustModel(t, "llama3_8b")
	l, _ := m.Layout("h100")
	dir, _ := stepmodel.DefaultProfileDir()
	path, err := stepmodel.SaveProfile(dir, gpuNodeProfile(m, l))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"profile", "show", ""}, {"profile", "rm", ""}} {
		if got := complete(t, args...); !slices.Equal(got, []string{stepmodel.ProfileIDOf(dir, path)}) {
			t.Errorf("%q: %q", args, got)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if code, out, _ := cgtune(t, "completion", shell); code != exitOK || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: exit %d, %d bytes", shell, code, len(out))
		}
	}
}
