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

// emitFlags are emit's flags; run prints or writes the overrides.
type emitFlags struct {
	model, gpu, mbridge, format, outPath string
	sets                                 []string
	force                                bool
	h                                    harnessFlags
}

func newEmitCmd() *cobra.Command {
	e := &emitFlags{}
	cmd := &cobra.Command{
		Use:   "emit (--impl I [--scope a,b] [--warmup N] | --candidate NAME) [--format F] [--mbridge V] [--model M [--gpu-type G] [--set k=v ...]] [-o FILE] [--force]",
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
		RunE: func(cmd *cobra.Command, _ []string) error { return e.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&e.format, "format", "yaml", "output format: "+strings.Join(recipe.Formats, ", "))
	f.StringVar(&e.mbridge, "mbridge", defaultCheckMBridge, "Megatron-Bridge version: "+strings.Join(presets.MBridgeVersions, ", "))
	f.StringVar(&e.model, "model", "", "check against this built-in model's recipe")
	f.StringVar(&e.gpu, "gpu-type", "h100", gpuTypeUsage("GPU type whose default layout --model uses"))
	f.StringArrayVar(&e.sets, "set", nil, "with --model: recipe override KEY=VALUE (Hydra syntax); repeatable")
	f.StringVarP(&e.outPath, "output", "o", "", "write to FILE (atomically; - for stdout) instead of stdout")
	f.BoolVar(&e.force, "force", false, "replace FILE if it exists; emit a configuration whose capture cgtune predicts fails (WILL-FAIL), with a warning in the output")
	e.h.register(cmd)
	refuseGPUTypeAsIndex(cmd)
	return cmd
}

// run checks the configuration, then prints or writes its overrides.
func (e *emitFlags) run(cmd *cobra.Command) error {
	c, setMap, err := e.candidate(cmd)
	if err != nil {
		return err
	}
	o, r, err := e.overrides(c, setMap)
	if err != nil {
		return err
	}
	if err := harnessInputError(r.Violations); err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	if err := refuseEmit(stderr, r, e.force, &o); err != nil {
		return err
	}
	if !c.Graphed() && len(c.Scopes) > 0 {
		fmt.Fprintf(stderr, "note: --scope %s is dropped: cuda_graph_impl none captures nothing (Megatron-Bridge clears the scope of impl none itself)\n", strings.Join(c.Scopes, ","))
	}
	data, err := o.Render(e.format)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	return e.write(cmd, data)
}

// candidate reads the configuration and the --set values from the flags,
// refusing what is missing or unknown.
func (e *emitFlags) candidate(cmd *cobra.Command) (presets.Candidate, map[string]string, error) {
	if !cmd.Flags().Changed("impl") && !cmd.Flags().Changed("candidate") {
		return presets.Candidate{}, nil, fail(exitBadInput, "emit needs --impl (%s) or --candidate NAME", strings.Join(presets.InputImpls(), ", "))
	}
	if !slices.Contains(recipe.Formats, e.format) {
		return presets.Candidate{}, nil, fail(exitBadInput, "unknown format %q (allowed: %s)", e.format, strings.Join(recipe.Formats, ", "))
	}
	if _, err := presets.ParseMBridge(e.mbridge); err != nil {
		return presets.Candidate{}, nil, fail(exitBadInput, "--mbridge: %w", err)
	}
	c, err := e.h.candidate(cmd)
	if err != nil {
		return presets.Candidate{}, nil, err
	}
	setMap, err := parseSets(e.sets)
	if err != nil {
		return presets.Candidate{}, nil, err
	}
	if len(setMap) > 0 && e.model == "" {
		return presets.Candidate{}, nil, fail(exitBadInput, "--set needs --model: the values apply to that model's recipe")
	}
	return c, setMap, nil
}

// overrides are c's overrides and the rules' report on them: against the
// model's recipe with --model, else on the impl/scope combination alone.
func (e *emitFlags) overrides(c presets.Candidate, setMap map[string]string) (recipe.Overrides, recipe.Report, error) {
	if e.model == "" {
		return recipe.BuildOverrides(c, e.mbridge), recipe.ValidateShape(c, e.mbridge), nil
	}
	m, err := presets.LookupModel(e.model)
	if err != nil {
		return recipe.Overrides{}, recipe.Report{}, fail(exitBadInput, "%w", err)
	}
	l, err := m.Layout(e.gpu)
	if err != nil {
		return recipe.Overrides{}, recipe.Report{}, fail(exitBadInput, "%w", err)
	}
	r := recipe.ValidateWithCapture(m, l, c, e.mbridge, setMap)
	// With the model known, the settings of --set the configuration needs
	// go with it, as the search emits them.
	o := recipe.WinnerOverrides(recipe.Target{Model: m, Layout: l, MBridge: e.mbridge, Sets: setMap}, c)
	return o, r, nil
}

// write prints data, or writes it to -o (checked as every output is).
func (e *emitFlags) write(cmd *cobra.Command, data []byte) error {
	if e.outPath == "" || e.outPath == "-" {
		_, err := cmd.OutOrStdout().Write(data)
		return stdoutErr(err)
	}
	if err := newOutputCheck(e.force).check(output{"-o", e.outPath}); err != nil {
		return err
	}
	if err := writeOutput(e.outPath, data, e.force); err != nil {
		return fail(exitBadInput, "-o %w", err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", e.outPath)
	return nil
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
