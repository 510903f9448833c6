package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"cgtune/presets"
	"cgtune/recipe"
)

// presetLayoutFlags are preset save's changes to the model's default
// layout: the parallel layout and batch, and --set recipe fields (kept in
// the layout's settings, which seed the recipe before any --set of a
// search), so a drop-and-pad or re-sharded preset can be made without the
// TUI.
type presetLayoutFlags struct {
	ints       []layoutInt
	precision  string
	dispatcher string
	seqPar     bool
	sets       []string
}

// layoutInt is one integer field of the layout and its flag.
type layoutInt struct {
	flag, usage string
	field       func(*presets.Layout) *int
	v           int
}

// layoutFlagKeys are the recipe fields the layout flags decide: a --set of
// one would contradict the layout the search builds.
var layoutFlagKeys = map[string]string{
	"model.tensor_model_parallel_size":           "--tp",
	"model.pipeline_model_parallel_size":         "--pp",
	"model.virtual_pipeline_model_parallel_size": "--vp",
	"model.context_parallel_size":                "--cp",
	"model.expert_model_parallel_size":           "--ep",
	"model.expert_tensor_parallel_size":          "--etp",
	"model.sequence_parallel":                    "--sequence-parallel",
	"model.moe_token_dispatcher_type":            "--dispatcher",
}

func (lf *presetLayoutFlags) register(cmd *cobra.Command) {
	lf.ints = []layoutInt{
		{flag: "num-gpus", usage: "GPUs of the job", field: func(l *presets.Layout) *int { return &l.NumGPUs }},
		{flag: "tp", usage: "tensor parallel size", field: func(l *presets.Layout) *int { return &l.TP }},
		{flag: "pp", usage: "pipeline parallel size", field: func(l *presets.Layout) *int { return &l.PP }},
		{flag: "vp", usage: "virtual pipeline stages per rank (0: none)", field: func(l *presets.Layout) *int { return &l.VP }},
		{flag: "cp", usage: "context parallel size", field: func(l *presets.Layout) *int { return &l.CP }},
		{flag: "ep", usage: "expert parallel size", field: func(l *presets.Layout) *int { return &l.EP }},
		{flag: "etp", usage: "expert tensor parallel size (0: as TP)", field: func(l *presets.Layout) *int { return &l.ETP }},
		{flag: "mbs", usage: "micro-batch size", field: func(l *presets.Layout) *int { return &l.MBS }},
		{flag: "gbs", usage: "global batch size", field: func(l *presets.Layout) *int { return &l.GBS }},
		{flag: "seq", usage: "sequence length", field: func(l *presets.Layout) *int { return &l.Seq }},
	}
	f := cmd.Flags()
	for i := range lf.ints {
		li := &lf.ints[i]
		f.IntVar(&li.v, li.flag, 0, li.usage+" (default: the model's layout for the GPU type)")
	}
	f.StringVar(&lf.precision, "precision", "", "compute precision: "+strings.Join(presets.Precisions(), ", ")+" (default: the layout's)")
	f.StringVar(&lf.dispatcher, "dispatcher", "", "MoE token dispatcher: "+strings.Join(presets.Dispatchers(), ", ")+" (default: the layout's)")
	f.BoolVar(&lf.seqPar, "sequence-parallel", false, "sequence parallelism on (--sequence-parallel=false: off; default: the layout's)")
	f.StringArrayVar(&lf.sets, "set", nil, "recipe field KEY=VALUE kept in the layout's settings (Hydra syntax), e.g. model.moe_expert_capacity_factor=1.0; repeatable")
}

// given lists the layout flags given on the command line, as --NAME,
// but for --num-gpus, which an imported recipe takes too.
func (lf *presetLayoutFlags) given(cmd *cobra.Command) []string {
	var out []string
	names := []string{"precision", "dispatcher", "sequence-parallel", "set"}
	for _, li := range lf.ints {
		if li.flag != "num-gpus" {
			names = append(names, li.flag)
		}
	}
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			out = append(out, "--"+n)
		}
	}
	return out
}

// numGPUs is the --num-gpus given (0 when not).
func (lf *presetLayoutFlags) numGPUs() int {
	for _, li := range lf.ints {
		if li.flag == "num-gpus" {
			return li.v
		}
	}
	return 0
}

// apply changes layout l of model m as the flags given say, and returns
// what changed, for the layout's source. Each refusal names its flag.
func (lf *presetLayoutFlags) apply(cmd *cobra.Command, m presets.Model, l *presets.Layout) ([]string, error) {
	changed := cmd.Flags().Changed
	var edits []string
	for _, li := range lf.ints {
		if !changed(li.flag) {
			continue
		}
		if li.v < 0 {
			return nil, fail(exitBadInput, "--%s %d: allowed: 0 or more", li.flag, li.v)
		}
		*li.field(l) = li.v
		edits = append(edits, fmt.Sprintf("--%s %d", li.flag, li.v))
	}
	if changed("precision") {
		if !slices.Contains(presets.Precisions(), lf.precision) {
			return nil, fail(exitBadInput, "--precision %q: allowed: %s", lf.precision, strings.Join(presets.Precisions(), ", "))
		}
		l.Precision = lf.precision
		edits = append(edits, "--precision "+lf.precision)
	}
	if changed("dispatcher") {
		if !slices.Contains(presets.Dispatchers(), lf.dispatcher) {
			return nil, fail(exitBadInput, "--dispatcher %q: allowed: %s", lf.dispatcher, strings.Join(presets.Dispatchers(), ", "))
		}
		if m.Arch.MoE == nil {
			return nil, fail(exitBadInput, "--dispatcher: %s has no MoE layers to dispatch tokens to", m.Name)
		}
		l.Dispatcher = lf.dispatcher
		edits = append(edits, "--dispatcher "+lf.dispatcher)
	}
	if changed("sequence-parallel") {
		l.SequenceParallel = lf.seqPar
		edits = append(edits, fmt.Sprintf("--sequence-parallel=%v", lf.seqPar))
	}
	sets, err := parseSets(lf.sets)
	if err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(sets)) {
		if flag, ok := layoutFlagKeys[k]; ok {
			return nil, fail(exitBadInput, "--set %s: the layout decides it; give %s", k, flag)
		}
		l.Settings = maps.Clone(l.Settings)
		if l.Settings == nil {
			l.Settings = map[string]string{}
		}
		l.Settings[k] = sets[k]
		edits = append(edits, "--set "+k+"="+sets[k])
	}
	return edits, nil
}

// finish makes preset p of model m what preset save's flags say: the
// layout edited (its source says how), an MB version its recipe has when
// --mbridge is not given (the line saying so is returned), checked, and
// with the cached framework profile when withProfile.
func (lf *presetLayoutFlags) finish(cmd *cobra.Command, m presets.Model, p *presets.TeamPreset, withProfile bool) (string, error) {
	edits, err := lf.apply(cmd, m, &p.Layout)
	if err != nil {
		return "", err
	}
	if len(edits) > 0 {
		p.Layout.Source = strings.TrimPrefix(p.Layout.Source+"; edited with cgtune preset save: "+strings.Join(edits, " "), "; ")
	}
	var mbNote string
	if !cmd.Flags().Changed("mbridge") {
		p.MBridge, mbNote = recipe.ChooseMBridge(m, p.Layout, p.MBridge)
	}
	if err := checkPresetLayout(*p, m, edits); err != nil {
		return "", err
	}
	if withProfile {
		if _, err := attachCachedProfile(p, "--with-profile"); err != nil {
			return "", err
		}
	}
	return mbNote, nil
}

// checkPresetLayout refuses a layout the preset file would refuse (sizes
// that do not divide) or whose recipe the MB version cannot build (a --set
// field it does not have, a bad value), before anything is written.
func checkPresetLayout(p presets.TeamPreset, m presets.Model, edits []string) error {
	if err := p.Validate(); err != nil {
		return fail(exitBadInput, "preset save %s (%s): %w", p.Name, strings.Join(edits, " "), err)
	}
	if _, err := recipe.New(m, p.Layout, p.MBridge); err != nil {
		return fail(exitBadInput, "preset save %s: %w", p.Name, err)
	}
	return nil
}
