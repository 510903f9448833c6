// Package mbconfig converts a Megatron-Bridge ConfigContainer YAML (what
// MB's ConfigContainer.to_yaml writes: a recipe dump of tools/mbrecipes,
// scripts/performance/run_script.py --dryrun, or a user's own recipe) into
// cgtune's model preset and layout. The built-in presets are generated
// through it (tools/genpresets) and `cgtune --mbridge-config` imports
// through it, so there is one mapping from MB's fields to cgtune's.
package mbconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"cgtune/internal/fileio"
	"cgtune/presets"
)

// Config is a parsed ConfigContainer YAML file.
type Config struct {
	file string
	root *yaml.Node
	read map[string]bool // the keys looked up, for the test that Keys lists them
}

var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// Load reads and parses the ConfigContainer YAML at path.
func Load(path string) (*Config, error) {
	data, err := fileio.ReadFileLimited(path, presets.MaxYAMLBytes)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse parses ConfigContainer YAML data; file names it in errors, which
// are one line, FILE:LINE: ... .
func Parse(file string, data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s:1: empty file; want the ConfigContainer YAML Megatron-Bridge writes (model:, train:, ...)", file)
		}
		if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
			return nil, fmt.Errorf("%s:%s: %s", file, m[1], m[2])
		}
		return nil, fmt.Errorf("%s:1: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("%s:%d: a second YAML document; a ConfigContainer file holds one", file, extra.Line)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:1: want a YAML mapping with the ConfigContainer's sections (model:, train:, ...)", file)
	}
	c := &Config{file: file, root: doc.Content[0], read: map[string]bool{}}
	for _, s := range []string{"model", "train"} {
		if child(c.root, s) == nil {
			return nil, fmt.Errorf("%s:1: no %s: section; want the ConfigContainer YAML Megatron-Bridge writes (ConfigContainer.to_yaml, run_script.py --dryrun)", file, s)
		}
	}
	return c, nil
}

// File is the name the config was parsed under.
func (c *Config) File() string { return c.file }

// child is the value node of key in mapping n, nil when absent.
func child(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// node returns the node at a dotted key. A model.* key is looked up under
// model: and then under model.transformer:, where MB's GPTModelConfig and
// HybridModelConfig keep the TransformerConfig.
func (c *Config) node(key string) *yaml.Node {
	c.read[key] = true
	parts := strings.Split(key, ".")
	if n := walk(c.root, parts); n != nil {
		return n
	}
	if parts[0] == "model" && len(parts) > 1 {
		return walk(child(c.root, "model"), append([]string{"transformer"}, parts[1:]...))
	}
	return nil
}

func walk(n *yaml.Node, parts []string) *yaml.Node {
	for _, p := range parts {
		if n = child(n, p); n == nil {
			return nil
		}
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// fieldError is one line naming the file, the line and the field.
func (c *Config) fieldError(n *yaml.Node, key, format string, args ...any) error {
	line := 1
	if n != nil {
		line = n.Line
	}
	return fmt.Errorf("%s:%d: field %s: %s", c.file, line, key, fmt.Sprintf(format, args...))
}

// Int reads an integer field; ok is false when it is absent or null.
func (c *Config) Int(key string) (v int, ok bool, err error) {
	n := c.node(key)
	if isNull(n) {
		return 0, false, nil
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		if v, err := strconv.Atoi(n.Value); err == nil {
			return v, true, nil
		}
	}
	return 0, false, c.fieldError(n, key, "want an integer, got %s", describe(n))
}

// Float reads a number field; ok is false when it is absent or null.
func (c *Config) Float(key string) (v float64, ok bool, err error) {
	n := c.node(key)
	if isNull(n) {
		return 0, false, nil
	}
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
		if v, err := strconv.ParseFloat(n.Value, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			return v, true, nil
		}
	}
	return 0, false, c.fieldError(n, key, "want a number, got %s", describe(n))
}

// Bool reads a boolean field, false when absent or null.
func (c *Config) Bool(key string) (bool, error) {
	n := c.node(key)
	if isNull(n) {
		return false, nil
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		return n.Value == "true" || n.Value == "True", nil
	}
	return false, c.fieldError(n, key, "want true or false, got %s", describe(n))
}

// String reads a string field, "" when absent or null. Megatron's enums
// and references to functions or dtypes ({_target_: ..., _name_: ...}, as
// MCore's YAML representers write them) read as their name.
func (c *Config) String(key string) (string, error) {
	n := c.node(key)
	if isNull(n) {
		return "", nil
	}
	if s, ok := name(n); ok {
		return s, nil
	}
	return "", c.fieldError(n, key, "want a name, got %s", describe(n))
}

// name is a scalar's text, an enum's _name_, or the last part of a
// reference's _target_ (torch.bfloat16 -> bfloat16).
func name(n *yaml.Node) (string, bool) {
	switch n.Kind {
	case yaml.ScalarNode:
		s := n.Value
		if i := strings.LastIndex(s, "."); i >= 0 && strings.HasPrefix(s, "CudaGraph") {
			s = s[i+1:] // CudaGraphModule.attn, as str() of the enum prints it
		}
		return s, true
	case yaml.MappingNode:
		if nm := child(n, "_name_"); nm != nil && nm.Kind == yaml.ScalarNode {
			return nm.Value, true
		}
		if t := child(n, "_target_"); t != nil && t.Kind == yaml.ScalarNode {
			return t.Value[strings.LastIndex(t.Value, ".")+1:], true
		}
	}
	return "", false
}

// Names reads a list of names (a YAML list, or a comma-separated string
// as MCore accepts it); absent or null is nil, and isList reports whether
// the field was a list rather than a single string such as "full".
func (c *Config) Names(key string) (names []string, isList bool, err error) {
	n := c.node(key)
	if isNull(n) {
		return nil, false, nil
	}
	if n.Kind == yaml.ScalarNode {
		for _, p := range strings.Split(n.Value, ",") {
			if p = strings.TrimSpace(p); p != "" {
				names = append(names, p)
			}
		}
		return names, false, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, false, c.fieldError(n, key, "want a list of names, got %s", describe(n))
	}
	names = []string{}
	for _, e := range n.Content {
		s, ok := name(e)
		if !ok {
			return nil, false, c.fieldError(e, key, "want a list of names, got an element %s", describe(e))
		}
		names = append(names, s)
	}
	return names, true, nil
}

// Ints reads a list of integers; a single integer reads as ok with one.
func (c *Config) Ints(key string) (v []int, isList bool, err error) {
	n := c.node(key)
	if isNull(n) {
		return nil, false, nil
	}
	if n.Kind == yaml.ScalarNode {
		i, _, err := c.Int(key)
		if err != nil {
			return nil, false, c.fieldError(n, key, "want an integer or a list of integers, got %s", describe(n))
		}
		return []int{i}, false, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, false, c.fieldError(n, key, "want an integer or a list of integers, got %s", describe(n))
	}
	for _, e := range n.Content {
		x, err := strconv.Atoi(e.Value)
		if e.Kind != yaml.ScalarNode || e.ShortTag() != "!!int" || err != nil {
			return nil, false, c.fieldError(e, key, "want a list of integers, got an element %s", describe(e))
		}
		v = append(v, x)
	}
	return v, true, nil
}

// describe renders a node compactly for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		s := n.Value
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return strconv.Quote(s)
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return "an alias"
}
