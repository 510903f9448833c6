package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"cgtune/presets"
	"cgtune/search"
)

func init() { subcommands = append(subcommands, newEmitCmd) }

func newEmitCmd() *cobra.Command {
	var model, gpu, mbridge, format, outPath string
	var force bool
	var h harnessFlags
	cmd := &cobra.Command{
		Use:   "emit --impl I [--scope a,b] [--warmup N] [--format F] [--mbridge V] [--model M] [--gpu-type G] [-o FILE [--force]]",
		Short: "Print the recipe overrides for one CUDA-graph configuration",
		Long: `emit prints the Megatron-Bridge recipe overrides for a CUDA-graph configuration,
with the companion settings it needs (TE RNG tracker; NaN checks off for a
full-iteration graph), in the field names of the given MB release.

It refuses a configuration MB would reject, printing "RULE-ID: message" and
exiting 1. With --model the model's recipe (its default layout on --gpu-type) is
checked; without it, only the impl/scope combination.
Without --scope a graph impl captures the whole layer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("impl") {
				return fail(exitBadInput, "emit needs --impl (%s)", strings.Join(presets.Impls, ", "))
			}
			if !slices.Contains(presets.Formats, format) {
				return fail(exitBadInput, "unknown format %q (allowed: %s)", format, strings.Join(presets.Formats, ", "))
			}
			gen, err := presets.ParseMBridge(mbridge)
			if err != nil {
				return fail(exitBadInput, "--mbridge: %v", err)
			}
			c, err := h.candidate(cmd)
			if err != nil {
				return err
			}
			var r search.Report
			o := presets.BuildOverrides(c, gen)
			if model != "" {
				m, err := presets.LookupModel(model)
				if err != nil {
					return fail(exitBadInput, "%v", err)
				}
				l, err := m.Layout(gpu)
				if err != nil {
					return fail(exitBadInput, "%v", err)
				}
				r = search.ValidateCandidate(m, l, c, mbridge, nil)
				// With the model known, its companions too (padded
				// experts for a full-iteration MoE graph), as the search emits.
				o = search.WinnerOverrides(m, c, mbridge)
			} else {
				r = search.ValidateShape(c, mbridge)
			}
			if err := harnessInputError(r.Violations); err != nil {
				return err
			}
			if !r.OK() {
				for _, v := range r.Violations {
					fmt.Fprintln(cmd.ErrOrStderr(), v)
				}
				return quiet(exitInvalid)
			}
			data, err := o.Render(format)
			if err != nil {
				return fail(exitBadInput, "%v", err)
			}
			if outPath == "" || outPath == "-" {
				_, err = cmd.OutOrStdout().Write(data)
				return stdoutErr(err)
			}
			if err := (outputCheck{folders: []string{cacheFolder()}, force: force}).check(output{"-o", outPath}); err != nil {
				return err
			}
			if err := writeOutput(outPath, data, force); err != nil {
				return fail(exitBadInput, "-o %v", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", outPath)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "yaml", "output format: "+strings.Join(presets.Formats, ", "))
	f.StringVar(&mbridge, "mbridge", defaultCheckMBridge, "Megatron-Bridge version: "+strings.Join(presets.MBridgeVersions, ", "))
	f.StringVar(&model, "model", "", "check against this built-in model's recipe")
	f.StringVar(&gpu, "gpu-type", "h100", gpuTypeUsage("GPU type whose default layout --model uses"))
	f.StringVarP(&outPath, "output", "o", "", "write to FILE (atomically; - for stdout) instead of stdout")
	f.BoolVar(&force, "force", false, "replace FILE if it exists")
	h.register(cmd)
	refuseGPUTypeAsIndex(cmd)
	return cmd
}
