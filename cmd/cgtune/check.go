package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"cgtune/presets"
	"cgtune/recipe"
)

// defaultCheckMBridge is the release check and emit target without
// --mbridge: cgtune's one default (presets.DefaultMBridge).
const defaultCheckMBridge = presets.DefaultMBridge

// harnessFlags are the perf-harness style flags check and emit share.
type harnessFlags struct {
	impl, scope string
	warmup      int
	name        string // --candidate: a candidate as cgtune names it
}

func (h *harnessFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&h.impl, "impl", "", "cuda_graph_impl: "+strings.Join(presets.InputImpls(), ", ")+" (te is transformer_engine; full_iteration is local with scope full_iteration)")
	cmd.Flags().StringVar(&h.scope, "scope", "", "comma-separated scopes: "+strings.Join(presets.Scopes, ", ")+"; or "+presets.WholeLayerName)
	cmd.Flags().IntVar(&h.warmup, "warmup", presets.DefaultWarmup, "cuda_graph_warmup_steps")
	cmd.Flags().StringVar(&h.name, "candidate", "", `a candidate as cgtune prints it, quoted: "te attn,moe_router w2", "full_iteration w3", "none" (instead of --impl, --scope and --warmup)`)
}

// candidate is the flags as a candidate, the names cgtune prints (te,
// whole-layer, full_iteration) read as the harness's values; Scopes stays
// nil when --scope was not given, which the harness reads as "keep the
// recipe's scope".
func (h *harnessFlags) candidate(cmd *cobra.Command) (presets.Candidate, error) {
	if cmd.Flags().Changed("candidate") {
		return h.named(cmd)
	}
	c := presets.Candidate{Impl: h.impl, Warmup: h.warmup}
	if cmd.Flags().Changed("scope") {
		c.Scopes = strings.Split(h.scope, ",")
	}
	c = presets.ResolveNames(c)
	if h.warmup < 0 {
		return c, fail(exitBadInput, "--warmup %d: must be >= 0", h.warmup)
	}
	if h.warmup > presets.MaxWarmup {
		return c, fail(exitBadInput, "--warmup %d: out of range (allowed: 0 to %d)", h.warmup, presets.MaxWarmup)
	}
	return c, nil
}

// named is --candidate read as every output names a candidate
// (presets.ParseName); it stands alone.
func (h *harnessFlags) named(cmd *cobra.Command) (presets.Candidate, error) {
	for _, f := range []string{"impl", "scope", "warmup"} {
		if cmd.Flags().Changed(f) {
			return presets.Candidate{}, fail(exitBadInput, "give --candidate or --%s, not both: the name holds the impl, scopes and warm-up", f)
		}
	}
	c, err := presets.ParseName(h.name)
	if err != nil {
		return c, fail(exitBadInput, "--candidate: %w", err)
	}
	return c, nil
}

func (h *harnessFlags) given(cmd *cobra.Command) bool {
	return cmd.Flags().Changed("impl") || cmd.Flags().Changed("scope") || cmd.Flags().Changed("warmup") || cmd.Flags().Changed("candidate")
}

// harnessInputError turns the perf harness's argparse rejections (an
// unknown impl or scope name) into bad input, as argparse would exit.
func harnessInputError(vs []recipe.Violation) error {
	for _, v := range vs {
		if v.ID == "PERF-01" || v.ID == "PERF-02" || v.ID == recipe.ConfigID {
			return fail(exitBadInput, "%s", v)
		}
	}
	return nil
}

// resolveModel picks the model and layout from --model/--preset and
// --gpu-type, and the MB version from --mbridge or the preset.
func resolveModel(cmd *cobra.Command, model, presetArg, gpu, mbridge string) (presets.Model, presets.Layout, string, error) {
	var m presets.Model
	var l presets.Layout
	switch {
	case model != "" && presetArg != "":
		return m, l, "", fail(exitBadInput, "give --model or --preset, not both")
	case model == "" && presetArg == "":
		return m, l, "", fail(exitBadInput, "give --model M or --preset NAME|FILE")
	case model != "":
		var err error
		if m, err = presets.LookupModel(model); err != nil {
			return m, l, "", fail(exitBadInput, "%w", err)
		}
		if l, err = m.Layout(gpu); err != nil {
			return m, l, "", fail(exitBadInput, "%w", err)
		}
	default:
		p, where, err := loadPreset(presetArg)
		if err != nil {
			return m, l, "", err
		}
		if m, err = p.ResolveModel(); err != nil {
			return m, l, "", fail(exitBadInput, "%s: %w", where, err)
		}
		l = p.Layout
		// The preset names its GPU and MB release; explicit flags win.
		if cmd.Flags().Changed("gpu-type") {
			if l, err = m.Layout(gpu); err != nil {
				return m, l, "", fail(exitBadInput, "%w", err)
			}
		}
		if !cmd.Flags().Changed("mbridge") && p.MBridge != "" {
			mbridge = p.MBridge
		}
	}
	if _, err := presets.ParseMBridge(mbridge); err != nil {
		return m, l, "", fail(exitBadInput, "--mbridge: %w", err)
	}
	return m, l, mbridge, nil
}

// check runs the rules on cfg as the harness flags apply it when they are
// given; without them, the overrides must hold however they are applied:
// by a recipe script and by the perf harness, which makes its own pass
// over every recipe it runs (recipe.CheckAsApplied).
func (h *harnessFlags) check(cmd *cobra.Command, cfg *recipe.Recipe, mb string, opts ...recipe.Option) ([]string, []recipe.Violation, error) {
	if !h.given(cmd) {
		r := recipe.CheckAsApplied(cfg, mb, opts...)
		return r.Notes, r.Violations, harnessInputError(r.Violations)
	}
	c, err := h.candidate(cmd)
	if err != nil {
		return nil, nil, err
	}
	if !cmd.Flags().Changed("warmup") && !cmd.Flags().Changed("candidate") {
		// No flag: the recipe's value (file or --set) stays.
		v, _ := cfg.Get("model.cuda_graph_warmup_steps")
		c.Warmup = v.Int
	}
	notes, violations := recipe.ApplyHarnessFlags(cfg, c, mb)
	if err := harnessInputError(violations); err != nil {
		return nil, nil, err
	}
	if len(violations) == 0 {
		r := recipe.CheckWithCapture(cfg, mb, opts...)
		notes, violations = append(notes, r.Notes...), r.Violations
	}
	return notes, violations, harnessInputError(violations)
}

// checkFlags are check's flags; run checks the recipe they name.
type checkFlags struct {
	model, presetArg, gpu, mbridge, launcher, python string
	sets                                             []string
	h                                                harnessFlags
	imp                                              mbImportFlags
}

func newCheckCmd() *cobra.Command {
	c := &checkFlags{}
	cmd := &cobra.Command{
		Use:   "check (--model M | --preset NAME|FILE | --mbridge-config FILE | --recipe R) [OVERRIDES.yaml] [--impl I --scope a,b --warmup N | --candidate NAME] [--set k=v ...] [--mbridge V] [--gpu-type G] [--launcher mb|mlm]",
		Short: "Check a recipe's CUDA-graph settings against Megatron-Bridge's rules",
		Long: `check builds the recipe of a model (its default layout on --gpu-type) as the given
Megatron-Bridge release starts from, applies OVERRIDES.yaml (nested model:, rng:,
ddp:, rerun_state_machine:, ... as MB's --config-file takes it), then each
--set key=value (Hydra syntax), then the pass MB's perf harness
(scripts/performance) makes over every recipe it runs, with --impl/--scope/
--warmup when given, and runs every validation rule of MB, Megatron-Core and
Transformer Engine of that release. With --launcher mlm the job is
Megatron-LM's pretrain_gpt.py instead: its launcher checks (validate_args,
the ARG-* rules) run and MB's own, and its perf harness's, do not.

It prints "valid", or one line per broken rule, "RULE-ID: message", with the
message MB would print (and, where that is a bare Python error, what to do in
parentheses). When the rules pass, the CUDA-graph setting MB ends with is
planned on the model's layers as the search plans candidates: a capture the
search rules out (dropless MoE's host sync inside a graph, local mlp without
attn on Megatron-Core 0.16-0.20) is "WILL-FAIL: reason", the reason the
search gives. The changes MB makes on its own (the TE RNG tracker, NaN checks
for full-iteration graphs, ...) are printed to stderr as notes.
Exit status: 0 valid, 1 invalid, 2 bad input.`,
		Args: cobra.MaximumNArgs(1),
		RunE: c.run,
	}
	f := cmd.Flags()
	f.StringVar(&c.model, "model", "", "built-in model name (cgtune models)")
	f.StringVar(&c.presetArg, "preset", "", "team preset: a NAME saved with cgtune preset save (searched in $CGTUNE_PRESETS, then the user folder) or a FILE")
	f.StringVar(&c.gpu, "gpu-type", "h100", gpuTypeUsage("GPU type whose default layout to use"))
	f.StringVar(&c.mbridge, "mbridge", defaultCheckMBridge, "Megatron-Bridge version: "+strings.Join(presets.MBridgeVersions, ", "))
	f.StringArrayVar(&c.sets, "set", nil, "override KEY=VALUE (Hydra syntax: true, 1.0, null, [a,b]); repeatable")
	f.StringVar(&c.launcher, "launcher", string(recipe.LauncherMB), "what starts the job: mb (Megatron-Bridge) or mlm (Megatron-LM's pretrain_gpt.py)")
	f.StringVar(&c.python, "python", "", "with --recipe: the Python interpreter where Megatron-Bridge is installed")
	c.imp.register(f)
	c.h.register(cmd)
	refuseGPUTypeAsIndex(cmd)
	return cmd
}

// run checks the recipe: "valid" on stdout, or one line per violation
// and exit 1; MB's own changes go to stderr as notes.
func (c *checkFlags) run(cmd *cobra.Command, args []string) error {
	cfg, mb, launch, err := c.recipe(cmd, args)
	if err != nil {
		return err
	}
	notes, violations, err := c.h.check(cmd, cfg, mb, recipe.WithLauncher(launch))
	if err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(cmd.ErrOrStderr(), "note: "+n)
	}
	out := cmd.OutOrStdout()
	if len(violations) == 0 {
		fmt.Fprintln(out, "valid")
		return nil
	}
	for _, v := range violations {
		fmt.Fprintln(out, v)
	}
	return quiet(exitInvalid)
}

// recipe is the recipe check judges, its MB version and the launcher: the
// target's recipe, with the overrides file (args) and the --set values
// applied in that order.
func (c *checkFlags) recipe(cmd *cobra.Command, args []string) (*recipe.Recipe, string, recipe.Launcher, error) {
	m, l, mb, err := checkTarget(cmd, c.imp, c.python, c.model, c.presetArg, c.gpu, c.mbridge)
	if err != nil {
		return nil, "", "", err
	}
	launch, err := recipe.ParseLauncher(c.launcher)
	if err != nil {
		return nil, "", "", fail(exitBadInput, "--launcher: %w", err)
	}
	cfg, err := recipe.New(m, l, mb)
	if err != nil {
		return nil, "", "", fail(exitBadInput, "%w", err)
	}
	if len(args) == 1 {
		if err := cfg.LoadOverridesFile(args[0]); err != nil {
			return nil, "", "", fail(exitBadInput, "%w", err)
		}
	}
	for _, s := range c.sets {
		if err := cfg.ApplySet(s); err != nil {
			return nil, "", "", fail(exitBadInput, "%w", err)
		}
	}
	return cfg, mb, launch, nil
}

// checkTarget is the model, layout and MB version check reads: an
// imported recipe (--mbridge-config, --recipe) or resolveModel's.
func checkTarget(cmd *cobra.Command, imp mbImportFlags, python, model, presetArg, gpu, mbridge string) (presets.Model, presets.Layout, string, error) {
	if !imp.given() {
		if err := imp.check(); err != nil {
			return presets.Model{}, presets.Layout{}, "", err
		}
		return resolveModel(cmd, model, presetArg, gpu, mbridge)
	}
	if model != "" || presetArg != "" {
		return presets.Model{}, presets.Layout{}, "", fail(exitBadInput, "give one of --model, --preset and --mbridge-config/--recipe")
	}
	if !cmd.Flags().Changed("gpu-type") {
		gpu = ""
	}
	p, err := imp.load(context.Background(), python, gpu, mbridge)
	if err != nil {
		return presets.Model{}, presets.Layout{}, "", err
	}
	return *p.ModelInline, p.Layout, p.MBridge, nil
}
