package mbconfig

import (
	"fmt"

	"cgtune/presets"
)

// Options say what a ConfigContainer file does not: the names, the GPU
// type the layout is for, and, where the file leaves them out, the GPU
// count and the vocabulary.
type Options struct {
	Name, Display, Family string
	// Source is the model's source text; LayoutSource the layout's.
	Source, LayoutSource string
	GPU                  string
	// NumGPUs is the job's GPU count; 0 reads it from a --dryrun file.
	NumGPUs int
	// Vocab is the vocabulary when the file leaves it to a HuggingFace
	// tokenizer (model and tokenizer vocab_size null); 0 for none.
	Vocab int
	// MBridge is the Megatron-Bridge version whose rules read the layout's
	// settings (presets.MBridgeVersions).
	MBridge string
}

// Convert reads c as a model preset with one layout, for o.GPU. Every
// error is one line naming the file and, where one is at fault, the field
// and what is allowed; the result validates (presets.Model.Validate).
func Convert(c *Config, o Options) (presets.Model, error) {
	if !presets.ValidName(o.Name) {
		return presets.Model{}, fmt.Errorf("model name %q is not valid (allowed: [a-z0-9][a-z0-9._-]*)", o.Name)
	}
	if o.GPU == "" {
		return presets.Model{}, fmt.Errorf("no GPU type for the layout (allowed: %v)", presets.GPUs())
	}
	a, err := c.arch(o.Vocab)
	if err != nil {
		return presets.Model{}, err
	}
	mtp, _, err := c.Int("model.mtp_num_layers")
	if err != nil {
		return presets.Model{}, err
	}
	l, err := c.layout(o.NumGPUs, mtp)
	if err != nil {
		return presets.Model{}, err
	}
	if a.MoE != nil {
		if err := c.expertBudget(&l); err != nil {
			return presets.Model{}, err
		}
	}
	l.Source = o.LayoutSource
	m := presets.Model{Name: o.Name, Display: o.Display, Family: o.Family, Arch: a, Source: o.Source,
		Layouts: map[string]presets.Layout{o.GPU: l}}
	if err := m.Validate(); err != nil {
		return presets.Model{}, fmt.Errorf("%s: %w", c.file, err)
	}
	mb := o.MBridge
	if mb == "" {
		mb = presets.DefaultMBridge
	}
	l.GPU = o.GPU
	if l.Settings, err = c.settings(m, l, mb); err != nil {
		return presets.Model{}, err
	}
	l.GPU = ""
	m.Layouts[o.GPU] = l
	return m, nil
}
