package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"cgtune/engine/job"
	"cgtune/internal/setup"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
	"cgtune/stepmodel"
)

// Shell completion (cgtune completion bash|zsh|fish|powershell, cobra's)
// completes the values of every flag that takes one of a known set, the
// presets, runs and profiles by name, wherever a command takes them.

// completer gives the completions of a value typed so far.
type completer func(toComplete string) ([]string, cobra.ShellCompDirective)

// fixed completes one value of a fixed set.
func fixed(values ...string) completer {
	return func(string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// listOf completes a list of values of a set separated by any of seps
// (a comma; ';' too between preset save's scope sets): each value not yet
// in the list (or, after a ';', in the set) being typed, after what is
// typed up to its last separator.
func listOf(values []string, seps string) completer {
	isSep := func(r rune) bool { return strings.ContainsRune(seps, r) }
	return func(toComplete string) ([]string, cobra.ShellCompDirective) {
		done := toComplete[:strings.LastIndexFunc(toComplete, isSep)+1]
		set := done
		if i := strings.LastIndex(done, ";"); i >= 0 {
			set = done[i+1:]
		}
		have := strings.FieldsFunc(set, isSep)
		var out []string
		for _, v := range values {
			if !slices.Contains(have, v) {
				out = append(out, done+v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// presetNames completes the team presets on the search path, each with
// its model and GPU; a FILE is completed too.
func presetNames(string) ([]string, cobra.ShellCompDirective) {
	list, _ := presetStore("").List()
	var out []string
	for _, p := range list {
		if p.Problem == "" && p.ShadowedBy == "" {
			out = append(out, p.Name+"\t"+p.Model+" on "+p.GPU)
		}
	}
	return out, cobra.ShellCompDirectiveDefault
}

// runNames completes the run folders under the runs folder, newest first.
func runNames(string) ([]string, cobra.ShellCompDirective) {
	runs, _ := runsUnderRoot(func(string) {})
	var out []string
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		what := r.State
		if fp := r.Fingerprint; fp != nil {
			what = fp.Model.Name + ", " + what
		}
		out = append(out, r.Name+"\t"+what)
	}
	return out, cobra.ShellCompDirectiveDefault
}

// profileIDs completes the cached framework profiles' IDs.
func profileIDs(string) ([]string, cobra.ShellCompDirective) {
	dir, err := stepmodel.DefaultProfileDir()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	list, _ := stepmodel.ListProfiles(dir)
	var out []string
	for _, c := range list {
		if c.Profile != nil {
			out = append(out, c.ID+"\t"+c.Profile.Key.Model+" on "+c.Profile.Origin(c.Modified))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// flagValues are the completions of the flags that take one of a known
// set, by flag name; byCommand holds the flags of one name whose values
// differ from one command to another.
func flagValues() (map[string]completer, map[string]map[string]completer) {
	overrideFormats := fixed(job.OverrideFormats...)
	all := map[string]completer{
		"model":          fixed(presets.BuiltinModelNames()...),
		"gpu-type":       fixed(presets.GPUs()...),
		"job-gpu":        fixed(presets.GPUs()...),
		"estimate-gpu":   fixed(stepmodel.SpecNames()...),
		"format":         fixed(recipe.Formats...),
		"command-format": overrideFormats,
		"impl":           fixed(presets.InputImpls()...),
		"impls":          listOf(presets.Impls, ","),
		"scope":          listOf(presets.Scopes, ","),
		"scopes":         listOf(presets.Scopes, ",;"),
		"engine":         fixed(setup.EngineMegatron, setup.EngineCUDA, setup.EngineEstimate, setup.EngineJob),
		"strategy":       fixed(search.Strategies()...),
		"mbridge":        fixed(presets.MBridgeVersions...),
		"launcher":       fixed(presets.Launchers...),
		"precision":      fixed(presets.Precisions()...),
		"dispatcher":     fixed(presets.Dispatchers()...),
		"job-te":         fixed("auto", "yes", "no"),
		"preset":         presetNames,
		"resume":         runNames,
	}
	byCommand := map[string]map[string]completer{
		"cgtune validate": {"format": overrideFormats},
		"cgtune worker":   {"engine": fixed(setup.EngineCUDA, setup.EngineEstimate)},
	}
	return all, byCommand
}

// registerCompletions gives every command's enumerated flags and named
// arguments their completions.
func registerCompletions(root *cobra.Command) {
	all, byCommand := flagValues()
	args := map[string]completer{
		"cgtune preset show": presetNames, "cgtune preset export": presetNames, "cgtune preset rm": presetNames,
		"cgtune runs show": runNames, "cgtune runs rm": runNames,
		"cgtune profile show": profileIDs, "cgtune profile rm": profileIDs,
		"cgtune validate": runNames,
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { registerFlag(c, f, all, byCommand) })
		if a, ok := args[c.CommandPath()]; ok {
			c.ValidArgsFunction = func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				return a(toComplete)
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

func registerFlag(c *cobra.Command, f *pflag.Flag, all map[string]completer, byCommand map[string]map[string]completer) {
	comp, ok := byCommand[c.CommandPath()][f.Name]
	if !ok {
		comp, ok = all[f.Name]
	}
	if !ok {
		return
	}
	err := c.RegisterFlagCompletionFunc(f.Name, func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return comp(toComplete)
	})
	if err != nil {
		// Only a second registration fails, and that is a bug here.
		fmt.Fprintf(os.Stderr, "cgtune: completion of --%s on %s: %v\n", f.Name, c.CommandPath(), err)
	}
}
