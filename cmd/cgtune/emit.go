package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"cgtune/presets"
	"cgtune/recipe"
)

func newEmitCmd() *cobra.Command {
	var model, gpu, mbridge, format, outPath string
	var sets []string
	var force bool
	var h harnessFlags
	cmd := &cobra.Command{
		Use:   "emit --impl I [--scope a,b] [--warmup N] [--format F] [--mbridge V] [--model M [--gpu-type G] [--set k=v ...]] [-o FILE] [--force]",
		Short: "Print the recipe overrides for one CUDA-graph configuration",
		Long: `emit prints the Megatron-Bridge recipe overrides for a CUDA-graph configuration,
with the companion settings it needs (TE RNG tracker; NaN checks off for a
full-iteration graph), in the field names of the given MB release.

It refuses a configuration MB would reject, printing "RULE-ID: message" and
exiting 1. With --model the model's recipe (its default layout on --gpu-type,
with the --set values) is checked; without it, only the impl/scope
combination. A configuration whose capture cgtune's capture plan says fails
(as the search marks it WILL-FAIL: dropless MoE inside a graph, local mlp
without attn) is refused the same way, in one line; --force emits it anyway,
with a warning in the output. The --set values that change the model's
recipe are emitted with it, each with the reason (what breaks without it,
say drop-and-pad MoE for a full-iteration graph): the output, put onto the
stock recipe, is the recipe that was checked.
Without --scope a graph impl captures the whole layer. --impl none captures
nothing: a --scope given with it is dropped, with a note on stderr (MB clears
the scope of impl none itself).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("impl") {
				return fail(exitBadInput, "emit needs --impl (%s)", strings.Join(presets.Impls, ", "))
			}
			if !slices.Contains(recipe.Formats, format) {
				return fail(exitBadInput, "unknown format %q (allowed: %s)", format, strings.Join(recipe.Formats, ", "))
			}
			if _, err := presets.ParseMBridge(mbridge); err != nil {
				return fail(exitBadInput, "--mbridge: %w", err)
			}
			c, err := h.candidate(cmd)
			if err != nil {
				return err
			}
			setMap, err := parseSets(sets)
			if err != nil {
				return err
			}
			if len(setMap) > 0 && model == "" {
				return fail(exitBadInput, "--set needs --model: the values apply to that model's recipe")
			}
			var r recipe.Report
			o := recipe.BuildOverrides(c, mbridge)
			if model != "" {
				m, err := presets.LookupModel(model)
				if err != nil {
					return fail(exitBadInput, "%w", err)
				}
				l, err := m.Layout(gpu)
				if err != nil {
					return fail(exitBadInput, "%w", err)
				}
				r = recipe.ValidateWithCapture(m, l, c, mbridge, setMap)
				// With the model known, the settings of --set the
				// configuration needs go with it, as the search emits them.
				o = recipe.WinnerOverrides(recipe.Target{Model: m, Layout: l, MBridge: mbridge, Sets: setMap}, c)
			} else {
				r = recipe.ValidateShape(c, mbridge)
			}
			if err := harnessInputError(r.Violations); err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			if err := refuseEmit(stderr, r, force, &o); err != nil {
				return err
			}
			if !c.Graphed() && len(c.Scopes) > 0 {
				fmt.Fprintf(stderr, "note: --scope %s is dropped: cuda_graph_impl none captures nothing (Megatron-Bridge clears the scope of impl none itself)\n", strings.Join(c.Scopes, ","))
			}
			data, err := o.Render(format)
			if err != nil {
				return fail(exitBadInput, "%w", err)
			}
			if outPath == "" || outPath == "-" {
				_, err = cmd.OutOrStdout().Write(data)
				return stdoutErr(err)
			}
			if err := newOutputCheck(force).check(output{"-o", outPath}); err != nil {
				return err
			}
			if err := writeOutput(outPath, data, force); err != nil {
				return fail(exitBadInput, "-o %w", err)
			}
			fmt.Fprintf(stderr, "wrote %s\n", outPath)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "yaml", "output format: "+strings.Join(recipe.Formats, ", "))
	f.StringVar(&mbridge, "mbridge", defaultCheckMBridge, "Megatron-Bridge version: "+strings.Join(presets.MBridgeVersions, ", "))
	f.StringVar(&model, "model", "", "check against this built-in model's recipe")
	f.StringVar(&gpu, "gpu-type", "h100", gpuTypeUsage("GPU type whose default layout --model uses"))
	f.StringArrayVar(&sets, "set", nil, "with --model: recipe override KEY=VALUE (Hydra syntax); repeatable")
	f.StringVarP(&outPath, "output", "o", "", "write to FILE (atomically; - for stdout) instead of stdout")
	f.BoolVar(&force, "force", false, "replace FILE if it exists; emit a configuration whose capture cgtune predicts fails (WILL-FAIL), with a warning in the output")
	h.register(cmd)
	refuseGPUTypeAsIndex(cmd)
	return cmd
}

// refuseEmit refuses a configuration the rules reject (every violation,
// exit 1) or whose capture the plan says fails (one line, exit 1; with
// force a warning on stderr and in the overrides instead).
func refuseEmit(stderr io.Writer, r recipe.Report, force bool, o *recipe.Overrides) error {
	var rules, willFail []recipe.Violation
	for _, v := range r.Violations {
		if v.ID == recipe.WillFailID {
			willFail = append(willFail, v)
		} else {
			rules = append(rules, v)
		}
	}
	if len(rules) > 0 {
		for _, v := range rules {
			fmt.Fprintln(stderr, v)
		}
		return quiet(exitInvalid)
	}
	if len(willFail) == 0 {
		return nil
	}
	v := willFail[0]
	if !force {
		fmt.Fprintf(stderr, "%s (--force emits it anyway)\n", v)
		return quiet(exitInvalid)
	}
	warning := "WARNING: emitted with --force: cgtune's capture plan says this configuration fails: " + v.Message
	o.Notes = append(o.Notes, warning)
	fmt.Fprintln(stderr, "warning: "+strings.TrimPrefix(warning, "WARNING: "))
	return nil
}
