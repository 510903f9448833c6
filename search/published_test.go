package search

import (
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"cgtune/internal/fileio"
	"cgtune/mbconfig"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// publishedDir holds the pre-training runs Megatron-Bridge publishes and
// the perf recipe each one is, written by tools/mbrecipes/published.py
// (docs/published-runs-2026-12-05.md).
const publishedDir = "../presets/testdata/published"

// publishedOverTheirGPU lists, by recipe function, the published runs the
// memory model alone puts over their GPU, with the cause and share.
// Each stays listed only while the model says so.
var publishedOverTheirGPU = map[string]string{}

// publishedIndex is publishedDir/index.yaml.
type publishedIndex struct {
	MBCommit string         `yaml:"mb_commit"`
	Rows     []publishedRow `yaml:"rows"`
}

type publishedRow struct {
	Doc            string            `yaml:"doc"`
	Section        string            `yaml:"section"`
	Line           int               `yaml:"line"`
	Columns        map[string]string `yaml:"columns"`
	Model          string            `yaml:"model"`
	GPU            string            `yaml:"gpu"`
	NumGPUs        int               `yaml:"num_gpus"`
	Function       string            `yaml:"function"`
	File           string            `yaml:"file"`
	Match          bool              `yaml:"match"`
	Dump           string            `yaml:"dump"`
	TokenizerVocab *struct {
		Size int `yaml:"size"`
	} `yaml:"tokenizer_vocab"`
}

func (r publishedRow) where() string { return fmt.Sprintf("%s:%d (%s)", r.Doc, r.Line, r.Section) }

// readPublished reads the index and groups the matching rows by recipe
// function: several published runs (releases) can be one recipe.
func readPublished(t *testing.T) (publishedIndex, map[string][]publishedRow) {
	t.Helper()
	p := filepath.Join(publishedDir, "index.yaml")
	data, err := fileio.ReadFileLimited(p, presets.MaxYAMLBytes)
	if err != nil {
		t.Fatal(err)
	}
	var ix publishedIndex
	if err := yaml.Unmarshal(data, &ix); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	byFn := map[string][]publishedRow{}
	for _, r := range ix.Rows {
		if r.Match {
			byFn[r.Function] = append(byFn[r.Function], r)
		}
	}
	if len(ix.MBCommit) < 7 || len(byFn) == 0 {
		t.Fatalf("%s: no mb_commit or no row that matches its recipe (%d rows): regenerate it (docs/mb-generator.md)", p, len(ix.Rows))
	}
	return ix, byFn
}

// publishedLayout converts a matching row's recipe dump with the
// converter the built-in presets go through (tools/genpresets), onto the
// built-in model of that name.
func publishedLayout(t *testing.T, commit string, r publishedRow) (presets.Model, presets.Layout) {
	t.Helper()
	c, err := mbconfig.Load(filepath.Join(publishedDir, r.Dump))
	if err != nil {
		t.Fatal(err)
	}
	vocab := 0
	if r.TokenizerVocab != nil {
		vocab = r.TokenizerVocab.Size
	}
	one, err := mbconfig.Convert(c, mbconfig.Options{Name: r.Model, GPU: r.GPU, NumGPUs: r.NumGPUs, Vocab: vocab,
		MBridge: "0.7", LayoutSource: fmt.Sprintf("MB %s %s %s", commit[:7], r.File, r.Function)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := presets.LookupModel(r.Model)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.Arch, one.Arch) {
		t.Errorf("%s builds another architecture than the built-in %s:\n recipe   %+v\n built-in %+v", r.Function, r.Model, one.Arch, m.Arch)
	}
	m.Layouts = map[string]presets.Layout{r.GPU: one.Layouts[r.GPU]}
	l, err := m.Layout(r.GPU)
	if err != nil {
		t.Fatal(err)
	}
	return m, l
}

// Every pre-training run Megatron-Bridge publishes ran without running
// out of memory, so the memory model alone (estimate engine, without the
// anchor on the recipe's own setting) must judge the recipe the run is,
// with its own CUDA-graph setting, to fit the run's GPU, but for the ones
// listed in publishedOverTheirGPU.
func TestPublishedRunsFitTheirGPUs(t *testing.T) {
	ix, byFn := readPublished(t)
	fns := slices.Sorted(maps.Keys(byFn))
	for _, fn := range fns {
		rows := byFn[fn]
		t.Run(fn, func(t *testing.T) {
			m, l := publishedLayout(t, ix.MBCommit, rows[0])
			ref := rankShippedSetting(t, m, l)
			b := ref.Ranked.Result.Memory.Breakdown
			why, over := publishedOverTheirGPU[fn]
			var runs []string
			for _, r := range rows {
				runs = append(runs, r.where())
			}
			switch {
			case b == nil:
				t.Fatalf("no memory breakdown")
			case !over && !b.Fits:
				t.Errorf("the memory model alone puts %s, which ran (%v), over its GPU: %s", l.ShippedGraph().Name(), runs, b.Describe())
			case !over && !ref.Ranked.Fits:
				t.Errorf("the ranking judges %s, which ran (%v), not to fit: %s", l.ShippedGraph().Name(), runs, ref.Ranked.Note)
			case over && b.Fits:
				t.Errorf("listed as over its GPU (%s), but the model fits it: %s", why, b.Describe())
			case over:
				t.Logf("over its GPU (%s): %s", why, b.Describe())
			}
			for _, r := range rows {
				t.Logf("%s", publishedLine(r, l, b))
			}
		})
	}
	for fn := range publishedOverTheirGPU {
		if _, ok := byFn[fn]; !ok {
			t.Errorf("%s is listed but no published run matches it", fn)
		}
	}
}

// publishedLine is a row of the table of docs/published-runs-2026-12-05.md:
// the run, its recipe and the recipe's CUDA-graph setting, the pipeline
// rank judged, the model's total of the GPU, the share, and the three
// largest terms (GiB).
func publishedLine(r publishedRow, l presets.Layout, b *stepmodel.MemoryBreakdown) string {
	step := b.MainGrads + b.StateCopies
	terms := []struct {
		name string
		mib  int64
	}{
		{"weights", b.Weights}, {"gradients", b.Gradients}, {"optimizer", b.Optimizer}, {"expert stash", b.ExpertStash},
		{"activations", max(b.Activations, step)}, {"graphs", b.Graphs}, {"slack", b.Slack}, {"outside", b.Context},
	}
	if step > b.Activations {
		terms[4].name = "optimizer step"
	}
	sort.SliceStable(terms, func(i, j int) bool { return terms[i].mib > terms[j].mib })
	gib := func(mib int64) float64 { return float64(mib) / 1024 }
	c := r.Columns
	return fmt.Sprintf("| %s | %s:%d | %s | %s | %s | %s | %t | %s | %d (%d layers) | %.0f / %.0f | %.0f%% | %s %.0f, %s %.0f, %s %.0f |",
		strings.TrimSuffix(r.Section, " NeMo Container"), filepath.Base(r.Doc), r.Line, c["System"], c["#-GPUs"], c["Precision"],
		r.Function, r.Match, l.ShippedGraph().Name(), b.Stage, b.StageLayers, gib(b.Total), gib(b.GPUMiB), 100*float64(b.Total)/float64(b.GPUMiB),
		terms[0].name, gib(terms[0].mib), terms[1].name, gib(terms[1].mib), terms[2].name, gib(terms[2].mib))
}
