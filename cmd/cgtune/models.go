package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"cgtune/presets"
)

func init() { subcommands = append(subcommands, newModelsCmd) }

// modelLayoutJSON is one row of `cgtune models --gpu-type G --json`.
type modelLayoutJSON struct {
	Model        string          `json:"model"`
	GPU          string          `json:"gpu"`
	Layout       *presets.Layout `json:"layout"` // null when the model has no layout for the GPU
	DP           int             `json:"dp,omitempty"`
	MicroBatches int             `json:"micro_batches,omitempty"`
}

func newModelsCmd() *cobra.Command {
	var gpu string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "models",
		Short: "List the built-in model presets and their default parallel layouts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := presets.BuiltinModels()
			if err != nil {
				return fail(exitBadInput, "built-in models: %v", err)
			}
			if gpu != "" && !slices.Contains(presets.GPUs(), gpu) {
				return fail(exitBadInput, "--gpu-type %q: unknown GPU type (allowed: %s)", gpu, strings.Join(presets.GPUs(), ", "))
			}
			out := cmd.OutOrStdout()
			switch {
			case gpu == "" && asJSON:
				return writeIndentedJSON(out, ms)
			case gpu == "":
				return modelsTable(out, ms)
			case asJSON:
				rows := make([]modelLayoutJSON, 0, len(ms))
				for _, m := range ms {
					r := modelLayoutJSON{Model: m.Name, GPU: gpu}
					if l, err := m.Layout(gpu); err == nil {
						r.Layout, r.DP, r.MicroBatches = &l, l.DP(), l.MicroBatches()
					}
					rows = append(rows, r)
				}
				return writeIndentedJSON(out, rows)
			}
			return layoutsTable(out, ms, gpu)
		},
	}
	cmd.Flags().StringVar(&gpu, "gpu-type", "", gpuTypeUsage("show each model's default layout for this GPU type"))
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	refuseGPUTypeAsIndex(cmd)
	return cmd
}

// writeIndentedJSON is shared by the models and preset commands.
func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func modelsTable(w io.Writer, ms []presets.Model) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLAYERS\tHIDDEN\tKIND\tEXPERTS/TOP-K\tGPUS (GPU COUNT)")
	for _, m := range ms {
		experts := "-"
		if m.Arch.MoE != nil {
			experts = fmt.Sprintf("%d/%d", m.Arch.MoE.Experts, m.Arch.MoE.TopK)
		}
		var gpus []string
		for _, g := range m.GPUs() {
			gpus = append(gpus, fmt.Sprintf("%s(%d)", g, m.Layouts[g].NumGPUs))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", m.Name, m.Arch.Layers, m.Arch.Hidden, m.Kind(), experts, strings.Join(gpus, " "))
	}
	return tw.Flush()
}

func layoutDash(v int) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

func layoutsTable(w io.Writer, ms []presets.Model, gpu string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "MODEL\tGPUS\tPRECISION\tTP\tPP\tVP\tCP\tEP\tGBS\tMBS\tSEQ\tMICRO-BATCHES\n")
	var missing []string
	for _, m := range ms {
		l, err := m.Layout(gpu)
		if err != nil {
			missing = append(missing, m.Name)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", m.Name, l.NumGPUs, l.Precision,
			l.TPSize(), l.PPSize(), layoutDash(l.VP), l.CPSize(), l.EPSize(), l.GBS, l.MBS, l.Seq, l.MicroBatches())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if from := presets.BorrowsLayouts(gpu); from != "" {
		fmt.Fprintf(w, "%s has no MB perf recipes: the %s layouts (its jobs run those; the GPU's own memory is used for fit)\n", gpu, from)
	}
	if len(missing) > 0 {
		fmt.Fprintf(w, "no %s layout in the MB perf recipes for: %s\n", gpu, strings.Join(missing, ", "))
	}
	return nil
}
