package main

import (
	"context"

	"github.com/spf13/pflag"

	"cgtune/engine/megatron"
	"cgtune/internal/mbimport"
	"cgtune/presets"
)

// mbImportFlags import a Megatron-Bridge recipe as a team preset: the
// ConfigContainer YAML MB writes (--mbridge-config), or a recipe function
// run in the user's Python (--recipe).
type mbImportFlags struct {
	file, recipe string
	numGPUs      int
	vocab        int
}

func (m *mbImportFlags) register(fs *pflag.FlagSet) {
	m.registerSource(fs)
	fs.IntVar(&m.numGPUs, "num-gpus", 0, "with --mbridge-config or --recipe: the job's GPU count (default: from the recipe's name, or a --dryrun file)")
}

// registerSource registers the flags that name the recipe, for a command
// whose own --num-gpus also serves the import (preset save).
func (m *mbImportFlags) registerSource(fs *pflag.FlagSet) {
	fs.StringVar(&m.file, "mbridge-config", "", "import the model and layout from a Megatron-Bridge ConfigContainer YAML (ConfigContainer.to_yaml; scripts/performance/run_script.py --dryrun writes ConfigContainer.yaml)")
	fs.StringVar(&m.recipe, "recipe", "", "import the model and layout from a Megatron-Bridge recipe function (MODULE:FUNCTION or its name), run with --python where MB is installed")
	fs.IntVar(&m.vocab, "vocab-size", 0, "with --mbridge-config or --recipe: the vocabulary, where the recipe leaves it to a HuggingFace tokenizer")
}

func (m *mbImportFlags) given() bool { return m.file != "" || m.recipe != "" }

// check refuses the import flags' misuse before anything runs.
func (m *mbImportFlags) check() error {
	switch {
	case m.file != "" && m.recipe != "":
		return fail(exitBadInput, "give --mbridge-config or --recipe, not both")
	case !m.given() && (m.numGPUs != 0 || m.vocab != 0):
		return fail(exitBadInput, "--num-gpus and --vocab-size are for --mbridge-config or --recipe")
	case m.numGPUs < 0 || m.numGPUs > presets.MaxGPUs:
		return fail(exitBadInput, "--num-gpus %d: allowed: 1 to %d", m.numGPUs, presets.MaxGPUs)
	case m.vocab < 0 || m.vocab > presets.MaxVocab:
		return fail(exitBadInput, "--vocab-size %d: allowed: 1 to %d", m.vocab, presets.MaxVocab)
	}
	return nil
}

// load imports the recipe as a team preset; gpuType is "" where the flag
// was not given (the recipe's name, else h100, decides).
func (m *mbImportFlags) load(ctx context.Context, python, gpuType, mbridge string) (presets.TeamPreset, error) {
	if err := m.check(); err != nil {
		return presets.TeamPreset{}, err
	}
	o := mbimport.Options{GPU: gpuType, NumGPUs: m.numGPUs, Vocab: m.vocab, MBridge: mbridge}
	if m.file != "" {
		p, err := mbimport.FromFile(m.file, o)
		if err != nil {
			return p, fail(exitBadInput, "--mbridge-config: %w", err)
		}
		return p, nil
	}
	py, err := megatron.FindPython(python)
	if err != nil {
		return presets.TeamPreset{}, fail(exitBadInput, "--recipe: %w", err)
	}
	p, err := mbimport.FromRecipe(ctx, py, m.recipe, o)
	if err != nil && ctx.Err() != nil {
		return p, fail(exitInterrupted, "--recipe: interrupted while the recipe ran: %w", context.Cause(ctx))
	} else if err != nil {
		return p, fail(exitBadInput, "--recipe: %w", err)
	}
	return p, nil
}
