package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"cgtune/presets"
)

// modelLayoutJSON is one row of `cgtune models --gpu-type G --json`.
type modelLayoutJSON struct {
	Model        string          `json:"model"`
	GPU          string          `json:"gpu"`
	Layout       *presets.Layout `json:"layout"` // null when the model has no layout for the GPU
	DP           int             `json:"dp,omitempty"`
	MicroBatches int             `json:"micro_batches,omitempty"`
	// BorrowedFrom is the GPU type whose layout this is (h200 runs h100's).
	BorrowedFrom string `json:"borrowed_from,omitempty"`
	// RecipeFile and Recipe name the MB perf recipe the layout is, as its
	// source says.
	RecipeFile string `json:"recipe_file,omitempty"`
	Recipe     string `json:"recipe,omitempty"`
	// ShippedCUDAGraph is the CUDA-graph setting that recipe ships.
	ShippedCUDAGraph *presets.Candidate `json:"shipped_cuda_graph,omitempty"`
}

// recipeRe finds the MB perf recipe in a layout's source: the file and the
// recipe function named right after it.
var recipeRe = regexp.MustCompile(`(src/megatron/bridge/perf_recipes/\S+\.py)\s+([a-z0-9_]+_config)\b`)

// recipeOf returns the perf-recipe file and function a layout's source
// names ("", "" when it names none, as a custom model's may not).
func recipeOf(source string) (file, function string) {
	m := recipeRe.FindStringSubmatch(source)
	if m == nil {
		return "", ""
	}
	return m[1], m[2]
}

// graphText is a shipped CUDA-graph setting for a table cell.
func graphText(c presets.Candidate) string {
	return c.Name()
}

func layoutRow(m presets.Model, gpu string) modelLayoutJSON {
	r := modelLayoutJSON{Model: m.Name, GPU: gpu}
	l, err := m.Layout(gpu)
	if err != nil {
		return r
	}
	r.Layout, r.DP, r.MicroBatches = &l, l.DP(), l.MicroBatches()
	if _, own := m.Layouts[gpu]; !own {
		r.BorrowedFrom = presets.BorrowsLayouts(gpu)
	}
	r.RecipeFile, r.Recipe = recipeOf(l.Source)
	g := l.ShippedGraph()
	r.ShippedCUDAGraph = &g
	return r
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
				return fail(exitBadInput, "built-in models: %w", err)
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
					rows = append(rows, layoutRow(m, gpu))
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
			if l, own := m.Layouts[g]; own {
				gpus = append(gpus, fmt.Sprintf("%s(%d)", g, l.NumGPUs))
			} else {
				gpus = append(gpus, fmt.Sprintf("%s(%s's)", g, presets.BorrowsLayouts(g)))
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", m.Name, m.Arch.Layers, m.Arch.Hidden, m.Kind(), experts, strings.Join(gpus, " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, g := range presets.GPUs() {
		if from := presets.BorrowsLayouts(g); from != "" {
			fmt.Fprintf(w, "%s(%s's): MB has no %s perf recipes; its jobs run the %s layouts\n", g, from, g, from)
		}
	}
	return nil
}

func layoutDash(v int) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

// layoutsTable prints each model's layout for gpu: the parallel layout,
// the CUDA-graph setting its MB perf recipe ships, and that recipe.
func layoutsTable(w io.Writer, ms []presets.Model, gpu string) error {
	var rows []modelLayoutJSON
	var missing []string
	for _, m := range ms {
		if r := layoutRow(m, gpu); r.Layout != nil {
			rows = append(rows, r)
		} else {
			missing = append(missing, m.Name)
		}
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintf(w, "no built-in model has a layout for GPU type %s: MB's perf recipes have none for it\n", gpu)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "MODEL\tGPUS\tPRECISION\tTP\tPP\tVP\tCP\tEP\tGBS\tMBS\tSEQ\tMICRO-BATCHES\tSHIPPED CUDA GRAPH\tMB PERF RECIPE\n")
	for _, r := range rows {
		l := r.Layout
		recipe := r.Recipe
		if recipe == "" {
			recipe = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", r.Model, l.NumGPUs, l.Precision,
			l.TPSize(), l.PPSize(), layoutDash(l.VP), l.CPSize(), l.EPSize(), l.GBS, l.MBS, l.Seq, l.MicroBatches(),
			graphText(*r.ShippedCUDAGraph), recipe)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if from := presets.BorrowsLayouts(gpu); from != "" {
		fmt.Fprintf(w, "%s has no MB perf recipes: the %s layouts and recipes (its jobs run those; the GPU's own memory is used for fit)\n", gpu, from)
	}
	if len(missing) > 0 {
		fmt.Fprintf(w, "no %s layout in the MB perf recipes for: %s\n", gpu, strings.Join(missing, ", "))
	}
	return nil
}
