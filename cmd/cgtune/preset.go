package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"cgtune/engine/megatron"
	"cgtune/internal/fileio"
	"cgtune/presets"
	"cgtune/search"
)

// presetStore builds the store from --preset, $CGTUNE_PRESETS and the user
// config folder. A machine with no config folder can still list and show
// presets; only saving needs one.
func presetStore(presetFile string) *presets.Store {
	cfg, err := userConfigDir()
	s := presets.NewStore(presetFile, os.Getenv("CGTUNE_PRESETS"), cfg)
	s.UserDirErr = err
	// A save killed with SIGKILL (nothing can catch it) leaves its
	// temporary file behind; the next command that uses the store clears
	// the old ones (docs/files.md).
	if s.UserDir() != "" {
		fileio.RemoveStaleTemps(s.UserDir(), fileio.StaleTempAge)
	}
	return s
}

// userConfigDir is os.UserConfigDir with an error that says what to set:
// the standard library's refusal of a relative $XDG_CONFIG_HOME does not
// say that $HOME would do once it is unset.
func userConfigDir() (string, error) {
	d, err := os.UserConfigDir()
	if err == nil {
		return d, nil
	}
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" && !filepath.IsAbs(x) {
		return "", fmt.Errorf("$XDG_CONFIG_HOME is %q, a relative path, which cgtune does not guess a folder from; set it to an absolute path, or unset it to use $HOME/.config", x)
	}
	return "", errors.New("neither $XDG_CONFIG_HOME nor $HOME is set")
}

// warningStore is presetStore telling cmd's stderr about the entries of
// the preset folders it skips (a FIFO, a device, an oversized file).
func warningStore(cmd *cobra.Command, presetFile string) *presets.Store {
	s := presetStore(presetFile)
	s.Warn = func(msg string) { fmt.Fprintln(cmd.ErrOrStderr(), "cgtune: warning: "+msg) }
	return s
}

func newPresetCmd() *cobra.Command {
	var presetFile string
	cmd := &cobra.Command{
		Use:   "preset",
		Short: "List, show, save, export, import and remove team presets",
		Long: `Team presets are YAML files (version: 1) holding a model, a GPU, a parallel
layout, a search space, a Megatron-Bridge version and optionally a measured result.
They are searched in --preset FILE, then the colon-separated folders of
$CGTUNE_PRESETS, then the user folder (` + presetUserDirHint() + `); an earlier place
shadows a later one. save and import write to the user folder.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fail(exitBadInput, "preset needs a subcommand: list, show, save, export, import, rm")
		},
	}
	cmd.PersistentFlags().StringVar(&presetFile, "preset", "", "a preset FILE searched before $CGTUNE_PRESETS and the user folder")
	store := func(cmd *cobra.Command) *presets.Store { return warningStore(cmd, presetFile) }
	cmd.AddCommand(newPresetListCmd(store), newPresetShowCmd(store), newPresetSaveCmd(store),
		newPresetExportCmd(store), newPresetImportCmd(store), newPresetRmCmd(store))
	return cmd
}

func presetUserDirHint() string {
	if d, err := presets.DefaultUserDir(); err == nil {
		return d
	}
	return "<user config folder>/cgtune/presets"
}

func newPresetListCmd(store func(*cobra.Command) *presets.Store) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the presets on the search path; shadowed and unreadable ones are marked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := store(cmd)
			list, err := s.List()
			if err != nil {
				return fail(exitBadInput, "%w", err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if list == nil {
					list = []presets.PresetInfo{}
				}
				return writeIndentedJSON(out, list)
			}
			if len(list) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "no presets (searched: %s)\n", strings.Join(s.SearchPath(), ", "))
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tMODEL\tGPU\tSOURCE\tPATH\tNOTE")
			for _, p := range list {
				note := ""
				switch {
				case p.Problem != "":
					note = "unreadable: " + p.Problem
				case p.ShadowedBy != "":
					note = "shadowed by " + p.ShadowedBy
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, presetOrDash(p.Model), presetOrDash(p.GPU), p.Source, p.Path, note)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func presetOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newPresetShowCmd(store func(*cobra.Command) *presets.Store) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Print a preset (YAML, with its layout written out)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s := store(cmd)
			info, err := s.Find(args[0])
			if err != nil {
				return fail(exitBadInput, "%w", err)
			}
			p, err := s.Load(args[0])
			if err != nil {
				return fail(exitBadInput, "%w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s (%s)\n", info.Path, info.Source)
			if asJSON {
				return writeIndentedJSON(cmd.OutOrStdout(), p)
			}
			data, err := presets.MarshalPreset(p)
			if err != nil {
				return fail(exitBadInput, "%w", err)
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// presetParseScopeSets reads "attn,moe_router;attn;" as scope sets; an
// empty set (between semicolons) is the whole layer.
func presetParseScopeSets(s string) [][]string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var sets [][]string
	for _, part := range strings.Split(s, ";") {
		set := []string{}
		for _, sc := range strings.Split(part, ",") {
			if sc = strings.TrimSpace(sc); sc != "" {
				set = append(set, sc)
			}
		}
		sets = append(sets, presets.ParseScopes(set))
	}
	return sets
}

func presetParseWarmups(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("--warmups: %q is not an integer (want e.g. 1,2,3)", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// withProfileFlag is ["--with-profile"] when that flag was given.
func withProfileFlag(cmd *cobra.Command) []string {
	if cmd.Flags().Changed("with-profile") {
		return []string{"--with-profile"}
	}
	return nil
}

// presetSaveFlags are preset save's flags; run saves the preset they
// describe.
type presetSaveFlags struct {
	model, gpu, scopes, warmups, mbridge, description, python string
	impls                                                     []string
	force, withProfile                                        bool
	lf                                                        presetLayoutFlags
	imp                                                       mbImportFlags
}

func newPresetSaveCmd(store func(*cobra.Command) *presets.Store) *cobra.Command {
	ps := &presetSaveFlags{}
	cmd := &cobra.Command{
		Use:   "save NAME (--model M | --mbridge-config FILE | --recipe R) [--gpu-type G] [--tp N --ep N ...] [--set KEY=VALUE ...]",
		Short: "Save a preset in the user folder",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ps.imp.given() {
				return ps.saveImported(cmd, store, args[0])
			}
			return ps.saveBuiltin(cmd, store, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&ps.model, "model", "", "built-in model ("+strings.Join(presets.BuiltinModelNames(), ", ")+")")
	f.StringVar(&ps.gpu, "gpu-type", "", gpuTypeUsage("GPU type whose default layout to use (default: the model's first)"))
	f.StringSliceVar(&ps.impls, "impls", presets.DefaultSpace().Impls, "implementations to try ("+strings.Join(presets.Impls, ", ")+"; te is transformer_engine)")
	f.StringVar(&ps.scopes, "scopes", "", `scope sets to try, ';' between sets, ',' within one, e.g. "attn,moe_router;attn"; an empty set (or whole-layer) is the whole layer (default: every subset)`)
	f.StringVar(&ps.warmups, "warmups", joinInts(presets.DefaultWarmups()), "warm-up step counts to try, e.g. 1,2,3")
	f.StringVar(&ps.mbridge, "mbridge", presets.DefaultMBridge, "Megatron-Bridge version ("+strings.Join(presets.MBridgeVersions, ", ")+")")
	f.StringVar(&ps.description, "description", "", "one line saying what the preset is for")
	f.BoolVar(&ps.force, "force", false, "replace an existing preset of that name")
	f.BoolVar(&ps.withProfile, "with-profile", false, "carry the framework profile cached here for the preset's model, layout and GPU (cgtune preset export --with-profile)")
	ps.lf.register(cmd)
	f.StringVar(&ps.python, "python", "", "with --recipe: the Python interpreter where Megatron-Bridge is installed (default: $"+megatron.PythonEnv+", then python3 on PATH)")
	ps.imp.registerSource(f)
	refuseGPUTypeAsIndex(cmd)
	return cmd
}

// saveImported saves the user's Megatron-Bridge recipe as the preset: the
// imported recipe is the layout, so the layout flags do not apply (edit
// the recipe, or save it and change the preset, rather than mix the two).
func (ps *presetSaveFlags) saveImported(cmd *cobra.Command, store func(*cobra.Command) *presets.Store, name string) error {
	if ps.model != "" {
		return fail(exitBadInput, "preset save: give --model or --mbridge-config/--recipe, not both")
	}
	if given := append(ps.lf.given(cmd), withProfileFlag(cmd)...); len(given) > 0 {
		return fail(exitBadInput, "preset save: %s apply to --model only; an imported recipe's layout is the recipe's own", strings.Join(given, ", "))
	}
	ps.imp.numGPUs = ps.lf.numGPUs()
	return saveImported(cmd, store(cmd), ps.imp, importedPreset{name: name, gpu: ps.gpu, python: ps.python, mbridge: ps.mbridge,
		description: ps.description, impls: ps.impls, scopes: ps.scopes, warmups: ps.warmups, force: ps.force})
}

// saveBuiltin saves a preset of a built-in model: its layout on
// --gpu-type (default: the model's first GPU type) with the layout flags
// applied, and the search space the flags give.
func (ps *presetSaveFlags) saveBuiltin(cmd *cobra.Command, store func(*cobra.Command) *presets.Store, name string) error {
	if ps.model == "" {
		return fail(exitBadInput, "preset save: --model is required, or --mbridge-config FILE or --recipe R to import one (allowed models: %s)", strings.Join(presets.BuiltinModelNames(), ", "))
	}
	m, err := presets.LookupModel(ps.model)
	if err != nil {
		return fail(exitBadInput, "--model: %w", err)
	}
	if !presets.ValidName(name) {
		return fail(exitBadInput, "invalid preset name %q (allowed: [a-z0-9][a-z0-9._-]*)", name)
	}
	gpu, defaulted := ps.gpu, ps.gpu == ""
	if defaulted {
		gpus := m.GPUs()
		if len(gpus) == 0 {
			return fail(exitBadInput, "model %s has no default layout; give --gpu-type", ps.model)
		}
		gpu = gpus[0]
	}
	p, mbNote, err := ps.preset(cmd, m, name, gpu)
	if err != nil {
		return err
	}
	s := store(cmd)
	path, err := s.Save(p, ps.force)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "saved %s to %s\n", p.Name, path)
	if defaulted {
		fmt.Fprintf(cmd.ErrOrStderr(), "no --gpu-type given: used %s, the first GPU type with a %s layout (%s)\n", gpu, ps.model, strings.Join(m.GPUs(), ", "))
	}
	if mbNote != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), mbNote)
	}
	warnShadowed(cmd, s, p.Name)
	return nil
}

// preset is the team preset of built-in model m on gpu, with the search
// space and layout the flags give, and the note on its MB version.
func (ps *presetSaveFlags) preset(cmd *cobra.Command, m presets.Model, name, gpu string) (presets.TeamPreset, string, error) {
	sets := presetParseScopeSets(ps.scopes)
	for i, im := range ps.impls {
		ps.impls[i] = presets.ParseImpl(im)
	}
	if err := presetCheckScopes(sets); err != nil {
		return presets.TeamPreset{}, "", err
	}
	ws, err := presetParseWarmups(ps.warmups)
	if err != nil {
		return presets.TeamPreset{}, "", fail(exitBadInput, "%w", err)
	}
	p := presets.TeamPreset{
		Version: presets.FileVersion, Name: name, Description: ps.description,
		Model: ps.model, GPU: gpu, MBridge: ps.mbridge,
		// The space as the model runs it: spellings Megatron reads alike
		// are saved once, in their canonical form.
		Space: search.CanonicalSpace(m, presets.Space{Impls: ps.impls, Scopes: sets, Warmups: ws}),
	}
	if err := p.FillLayout(); err != nil {
		return presets.TeamPreset{}, "", fail(exitBadInput, "%w", err)
	}
	mbNote, err := ps.lf.finish(cmd, m, &p, ps.withProfile)
	if err != nil {
		return presets.TeamPreset{}, "", err
	}
	return p, mbNote, nil
}

// importedPreset is what preset save adds to an imported model and layout.
type importedPreset struct {
	name, gpu, python, mbridge, description string
	impls                                   []string
	scopes, warmups                         string
	force                                   bool
}

// saveImported saves the model and layout of the user's Megatron-Bridge
// recipe as a team preset (the model inline), with the search space the
// flags give.
func saveImported(cmd *cobra.Command, s *presets.Store, imp mbImportFlags, ip importedPreset) error {
	if !presets.ValidName(ip.name) {
		return fail(exitBadInput, "invalid preset name %q (allowed: [a-z0-9][a-z0-9._-]*)", ip.name)
	}
	sets := presetParseScopeSets(ip.scopes)
	for i, im := range ip.impls {
		ip.impls[i] = presets.ParseImpl(im)
	}
	if err := presetCheckScopes(sets); err != nil {
		return err
	}
	ws, err := presetParseWarmups(ip.warmups)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	p, err := imp.load(context.Background(), ip.python, ip.gpu, ip.mbridge)
	if err != nil {
		return err
	}
	p.Name = ip.name
	if ip.description != "" {
		p.Description = ip.description
	}
	p.Space = search.CanonicalSpace(*p.ModelInline, presets.Space{Impls: ip.impls, Scopes: sets, Warmups: ws})
	path, err := s.Save(p, ip.force)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "saved %s (model %s, %s layout from %s) to %s\n", p.Name, p.ModelInline.Name, p.GPU, p.Description, path)
	warnShadowed(cmd, s, p.Name)
	return nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// presetCheckScopes refuses scope names the harness does not know before
// the space is canonicalised (which keeps unknown names for the preset
// file's own check, with its line number).
func presetCheckScopes(sets [][]string) error {
	for _, set := range sets {
		for _, sc := range set {
			if !slices.Contains(presets.Scopes, sc) {
				return fail(exitBadInput, "--scopes: unknown scope %q (allowed: %s)", sc, strings.Join(presets.Scopes, ", "))
			}
		}
	}
	return nil
}

// warnShadowed tells the person when the preset they just wrote is hidden
// by one earlier on the search path, so a later load would not return it.
func warnShadowed(cmd *cobra.Command, s *presets.Store, name string) {
	if sh, ok := s.Shadowing(name); ok {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %s at %s (%s) comes first on the search path and hides this copy\n", name, sh.Path, sh.Source)
	}
}

func newPresetExportCmd(store func(*cobra.Command) *presets.Store) *cobra.Command {
	var outPath string
	var force, withProfile bool
	cmd := &cobra.Command{
		Use:   "export NAME [-o FILE [--force]] [--with-profile]",
		Short: "Write a preset to FILE (atomically; never replaces one without --force) or to standard output",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s := store(cmd)
			if withProfile {
				return exportWithProfile(cmd, s, args[0], outPath, force)
			}
			if outPath == "" || outPath == "-" {
				if err := s.ExportTo(args[0], cmd.OutOrStdout()); err != nil {
					return fail(exitBadInput, "%w", err)
				}
				return nil
			}
			info, err := s.Find(args[0])
			if err != nil {
				return fail(exitBadInput, "%w", err)
			}
			gate := newOutputCheck(force, input{"the preset " + args[0], info.Path})
			if err := gate.check(output{"-o", outPath}); err != nil {
				return err
			}
			if err := s.Export(args[0], outPath, force); err != nil {
				return fail(exitBadInput, "%w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "exported %s to %s\n", args[0], absPath(outPath))
			return nil
		},
	}
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "output FILE (default: standard output)")
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	cmd.Flags().BoolVar(&withProfile, "with-profile", false, "carry the framework profile cached here for the preset's model, layout and GPU (measured on a GPU node), so that estimates elsewhere use it; preset import installs it")
	return cmd
}

func newPresetImportCmd(store func(*cobra.Command) *presets.Store) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Copy a preset file into the user folder (never replaces one without --force); a framework profile it carries goes into the profile cache",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s := store(cmd)
			prof, err := checkImportProfile(s, args[0], force)
			if err != nil {
				return err
			}
			p, path, err := s.Import(args[0], force)
			if err != nil {
				return fail(exitBadInput, "%w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported %s to %s\n", p.Name, path)
			if err := prof.install(cmd.OutOrStdout()); err != nil {
				return err
			}
			warnShadowed(cmd, s, p.Name)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing preset of that name (and a different framework profile cached in the place of the one it carries)")
	return cmd
}

func newPresetRmCmd(store func(*cobra.Command) *presets.Store) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"remove"},
		Short:   "Remove a preset from the user folder",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := store(cmd).Remove(args[0])
			if err != nil {
				return fail(exitBadInput, "%w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", path)
			return nil
		},
	}
}
