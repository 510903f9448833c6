// Package mbimport turns a user's Megatron-Bridge recipe into a cgtune
// team preset: a ConfigContainer YAML (what MB's to_yaml and
// scripts/performance/run_script.py --dryrun write) read through the
// converter the built-in presets are generated with (package mbconfig), or
// a recipe function run in the user's Python with MB installed.
package mbimport

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"cgtune/mbconfig"
	"cgtune/presets"
)

// Options say what the recipe does not: each zero value is read from the
// recipe's name (<model>_<task>_<N>gpu_<gpu>_<precision>_config, as MB
// names its recipes) where it can be, else from the file.
type Options struct {
	Name    string // preset and model name
	GPU     string // the layout's GPU type (presets.GPUs)
	NumGPUs int    // the job's GPU count
	Vocab   int    // the vocabulary, where the recipe leaves it to a HuggingFace tokenizer
	MBridge string // the Megatron-Bridge version of the preset
}

// recipeNameRe reads MB's recipe names (MB src/megatron/bridge/recipes/
// and perf_recipes/, e.g. llama3_8b_pretrain_2gpu_h100_bf16_config).
var recipeNameRe = regexp.MustCompile(`([a-z0-9_]+?)_(?:pretrain|sft|peft)_(\d+)gpu_([a-z0-9]+)_`)

// fromName fills the options a recipe name gives.
func (o Options) fromName(name string) Options {
	m := recipeNameRe.FindStringSubmatch(name)
	if m == nil {
		return o
	}
	if o.Name == "" {
		o.Name = m[1]
	}
	if o.NumGPUs == 0 {
		o.NumGPUs, _ = strconv.Atoi(m[2])
	}
	if o.GPU == "" && slices.Contains(presets.GPUs(), m[3]) {
		o.GPU = m[3]
	}
	return o
}

var unsafeNameRe = regexp.MustCompile(`[^a-z0-9._-]+`)

// fileName is a preset name for a file with no recipe name in it.
func fileName(path string) string {
	base := strings.ToLower(strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)))
	base = strings.Trim(unsafeNameRe.ReplaceAllString(base, "-"), "-._")
	if base == "" || !presets.ValidName(base) {
		return "imported"
	}
	return base
}

// FromFile imports a ConfigContainer YAML file as a team preset. Errors
// are one line, naming the file and, where one is at fault, the field.
func FromFile(path string, o Options) (presets.TeamPreset, error) {
	c, err := mbconfig.Load(path)
	if err != nil {
		return presets.TeamPreset{}, err
	}
	o = o.fromName(filepath.Base(path))
	if o.Name == "" {
		o.Name = fileName(path)
	}
	return build(c, o, "imported from "+path)
}

// build converts c into a team preset of o.
func build(c *mbconfig.Config, o Options, source string) (presets.TeamPreset, error) {
	if o.GPU == "" {
		o.GPU = "h100"
	}
	if o.MBridge == "" {
		o.MBridge = presets.DefaultMBridge
	}
	m, err := mbconfig.Convert(c, mbconfig.Options{
		Name: o.Name, Display: o.Name, Source: source, LayoutSource: source,
		GPU: o.GPU, NumGPUs: o.NumGPUs, Vocab: o.Vocab, MBridge: o.MBridge,
	})
	if err != nil {
		return presets.TeamPreset{}, err
	}
	l := m.Layouts[o.GPU]
	l.GPU = o.GPU
	p := presets.TeamPreset{
		Version: presets.FileVersion, Name: o.Name, Description: source,
		ModelInline: &m, GPU: o.GPU, Layout: l, Space: presets.DefaultSpace(), MBridge: o.MBridge,
	}
	if err := p.Validate(); err != nil {
		return presets.TeamPreset{}, fmt.Errorf("%s: %w", c.File(), err)
	}
	return p, nil
}

//go:embed pyrecipe/run_recipe.py
var runRecipe string

// recipeTimeout bounds a recipe run: importing MB takes tens of seconds,
// and a bare recipe name is looked up through every recipe module.
const recipeTimeout = 5 * time.Minute

// FromRecipe runs recipe name (MODULE:FUNCTION or a recipe function's
// name) in python, which must import Megatron-Bridge, and imports the
// ConfigContainer MB's to_yaml writes of it.
func FromRecipe(ctx context.Context, python, name string, o Options) (presets.TeamPreset, error) {
	dir, err := os.MkdirTemp("", "cgtune-recipe-")
	if err != nil {
		return presets.TeamPreset{}, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "ConfigContainer.yaml")
	ctx, cancel := context.WithTimeout(ctx, recipeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-B", "-c", runRecipe, "--recipe", name, "--out", out)
	cmd.Dir = dir // the recipe's relative paths (checkpoints, logs) land in the throwaway folder
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		return presets.TeamPreset{}, recipeError(python, name, err, stderr.String())
	}
	var res struct {
		Recipe string `json:"recipe"`
	}
	if err := json.Unmarshal(lastLine(stdout), &res); err != nil || res.Recipe == "" {
		return presets.TeamPreset{}, fmt.Errorf("recipe %s: %s did not say which recipe it ran", name, python)
	}
	c, err := mbconfig.Load(out)
	if err != nil {
		return presets.TeamPreset{}, fmt.Errorf("recipe %s: %w", res.Recipe, err)
	}
	return build(c, o.fromName(res.Recipe), "recipe "+res.Recipe+" run with "+python)
}

// recipeError is the runner's one line, or how python failed.
func recipeError(python, name string, err error, stderr string) error {
	var exit *exec.ExitError
	if line := strings.TrimSpace(string(lastLine([]byte(stderr)))); line != "" && errors.As(err, &exit) {
		return fmt.Errorf("recipe %s: %s", name, line)
	}
	return fmt.Errorf("recipe %s: %s: %w", name, python, err)
}

func lastLine(b []byte) []byte {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return []byte(s)
}
