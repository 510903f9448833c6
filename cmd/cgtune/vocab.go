package main

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"cgtune/presets"
)

// The command line has one vocabulary: --gpu-type names a GPU type (whose
// default layout, whose spec) everywhere, --gpu names GPU indices (which
// devices to run on) everywhere; and --preset takes a preset's name (found
// on the preset search path) or a file.

// gpuTypeUsage is the help text of --gpu-type.
func gpuTypeUsage(what string) string {
	return what + " (" + strings.Join(presets.GPUs(), ", ") + ")"
}

// refuseGPUTypeAsIndex gives a command that takes no GPU indices a hidden
// --gpu that says what to use instead, rather than cobra's bare "unknown
// flag" (these commands took a GPU type as --gpu before).
func refuseGPUTypeAsIndex(cmd *cobra.Command) {
	var v string
	cmd.Flags().StringVar(&v, "gpu", "", "")
	cmd.Flags().MarkHidden("gpu")
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if c.Flags().Changed("gpu") {
			return fail(exitBadInput, "--gpu %s: --gpu takes GPU indices (cgtune --headless --gpu 0,1); a GPU type is --gpu-type %s", v, v)
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
}

// typeForIndex is the error for a --gpu value that names GPU types
// (h100, "h100,b200"), which --gpu-type takes; nil for anything else.
func typeForIndex(v string) error {
	for _, p := range strings.Split(v, ",") {
		if !slices.Contains(presets.GPUs(), strings.ToLower(strings.TrimSpace(p))) {
			return nil
		}
	}
	return fail(exitBadInput, "--gpu %s: --gpu takes GPU indices (cgtune --headless --gpu 0,1); a GPU type is --gpu-type %s", v, v)
}

// loadPreset reads --preset: a file when arg names one, else the preset of
// that name on the search path ($CGTUNE_PRESETS, then the user folder), as
// `cgtune preset save NAME` wrote it. The string returned names where it
// came from, for messages.
func loadPreset(arg string) (presets.TeamPreset, string, error) {
	st, err := os.Stat(arg)
	switch {
	case err == nil && st.IsDir():
		return presets.TeamPreset{}, "", fail(exitBadInput, "--preset %s is a folder; give a preset file or a preset name (cgtune preset list)", arg)
	case err == nil:
		p, err := presets.NewStore(arg, "", "").LoadFile(arg)
		if err != nil {
			return p, "", fail(exitBadInput, "%w", err)
		}
		return p, arg, nil
	case !errors.Is(err, fs.ErrNotExist):
		return presets.TeamPreset{}, "", fail(exitBadInput, "--preset %s: %w", arg, err)
	}
	if strings.ContainsRune(arg, os.PathSeparator) || strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml") || !presets.ValidName(arg) {
		return presets.TeamPreset{}, "", fail(exitBadInput, "--preset %s: no such file (a saved preset is named without a path: cgtune preset list)", arg)
	}
	s := presetStore("")
	info, err := s.Find(arg)
	if err != nil {
		return presets.TeamPreset{}, "", fail(exitBadInput, "--preset: %w", err)
	}
	p, err := s.Load(arg)
	if err != nil {
		return p, "", fail(exitBadInput, "--preset %s: %w", arg, err)
	}
	return p, info.Path, nil
}
