package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"cgtune/stepmodel"
)

func newProfileCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "List, show and remove the framework profiles cached for the emulating engines",
		Long: `A framework profile is what Megatron-Core costs per layer, measured on a GPU
node (cgtune probe --framework, or first thing in a megatron search) for one model,
layout and GPU; the cuda and estimate engines spend it instead of PyTorch's per-op
costs, which make what graphs gain a lower bound. Profiles are cached in
` + profileDirHint() + `; cgtune preset export --with-profile carries one to
another machine, and cgtune preset import installs it there.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fail(exitBadInput, "profile needs a subcommand: list, show, rm")
		},
	}
	cmd.AddCommand(newProfileListCmd(), newProfileShowCmd(), newProfileRmCmd())
	return cmd
}

func profileDirHint() string {
	if d, err := stepmodel.DefaultProfileDir(); err == nil {
		return d
	}
	return "<user cache folder>/cgtune/profiles"
}

func profileDir() (string, error) {
	dir, err := stepmodel.DefaultProfileDir()
	if err != nil {
		return "", fail(exitBadInput, "no user cache folder for profiles: %w", err)
	}
	return dir, nil
}

func newProfileListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the cached profiles: ID, model, GPU, where and when measured, framework, layout",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := profileDir()
			if err != nil {
				return err
			}
			list, err := stepmodel.ListProfiles(dir)
			if err != nil {
				return fail(exitBadInput, "%w", err)
			}
			if asJSON {
				if list == nil {
					list = []stepmodel.CachedProfile{}
				}
				return writeIndentedJSON(cmd.OutOrStdout(), list)
			}
			if len(list) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "no framework profiles in %s (measure one on a GPU node: cgtune probe --framework --model M)\n", dir)
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tMODEL\tMEASURED ON\tFRAMEWORK\tLAYOUT")
			for _, c := range list {
				if c.Profile == nil {
					fmt.Fprintf(tw, "%s\t-\tnot used: %s\t\t\n", c.ID, c.Problem)
					continue
				}
				k := c.Profile.Key
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.ID, k.Model, c.Profile.Origin(c.Modified), framework(k), k.Layout)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// framework is a profile key's framework versions and layer spec.
func framework(k stepmodel.ProfileKey) string {
	parts := []string{"mcore " + k.MCore, "torch " + k.Torch}
	if k.TE != "" {
		parts = append(parts, "te "+k.TE)
	}
	return strings.Join(append(parts, k.LayerSpec), ", ")
}

// lookupCachedProfile finds the cached profile id names (an ID prefix or
// a file name, as profile list prints them) and the cache folder it is in.
func lookupCachedProfile(id string) (string, stepmodel.CachedProfile, error) {
	dir, err := profileDir()
	if err != nil {
		return "", stepmodel.CachedProfile{}, err
	}
	c, err := stepmodel.LookupProfile(dir, id)
	if err != nil {
		return "", c, fail(exitBadInput, "%w", err)
	}
	return dir, c, nil
}

func newProfileShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Print a cached profile: where it was measured and what each layer costs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, c, err := lookupCachedProfile(args[0])
			if err != nil {
				return err
			}
			if c.Profile == nil {
				return fail(exitBadInput, "%s: %s", c.Path, c.Problem)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeIndentedJSON(out, c)
			}
			k := c.Profile.Key
			fmt.Fprintf(out, "profile %s (%s)\nmodel: %s\nlayout: %s\nmeasured on: %s\nframework: %s\n",
				c.ID, c.Path, k.Model, k.Layout, c.Profile.Origin(c.Modified), framework(k))
			printProfile(out, c.Profile)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newProfileRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID",
		Aliases: []string{"remove"},
		Short:   "Remove a cached profile (the emulating engines then fall back to per-op costs, or an older profile)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, c, err := lookupCachedProfile(args[0])
			if err != nil {
				return err
			}
			if err := stepmodel.RemoveProfile(dir, c); err != nil {
				return fail(exitBadInput, "%w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", c.Path)
			return nil
		},
	}
}
