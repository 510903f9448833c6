package recipe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"cgtune/internal/fileio"
	"cgtune/presets"
)

// LoadOverridesFile applies an overrides YAML file (nested model:, rng:,
// ddp:, ... as the --config-file of MB's scripts takes it) to c.
func (c *Recipe) LoadOverridesFile(path string) error {
	data, err := fileio.ReadFileLimited(path, presets.MaxYAMLBytes)
	if err != nil {
		return err
	}
	return c.ApplyYAML(path, data)
}

var yamlErrLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// ApplyYAML applies overrides from YAML data; name is used in messages.
// Every error is one line, FILE:LINE: field KEY: ..., and unknown keys are
// rejected by name, as Hydra's struct mode rejects them. Nothing is applied
// unless the whole file is valid.
func (c *Recipe) ApplyYAML(name string, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file overrides nothing
		}
		if m := yamlErrLineRe.FindStringSubmatch(err.Error()); m != nil {
			return fmt.Errorf("%s:%s: %s", name, m[1], m[2])
		}
		return fmt.Errorf("%s:1: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return fmt.Errorf("%s:%d: a second YAML document; an overrides file holds one", name, extra.Line)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.ShortTag() == "!!null" {
		return nil
	}
	staged := c.Clone()
	if err := staged.walkYAML(name, top, ""); err != nil {
		return err
	}
	c.vals = staged.vals
	return nil
}

// isSection reports whether path is a known group of fields (model,
// dataset.offline_packing_specs, env, ...).
func (c *Recipe) isSection(path string) bool {
	if path+"." == envPrefix {
		return true
	}
	for _, f := range schema {
		if strings.HasPrefix(f.Key, path+".") {
			return true
		}
	}
	return false
}

func (c *Recipe) walkYAML(name string, n *yaml.Node, path string) error {
	where := path
	if where == "" {
		where = "the top level"
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s:%d: field %s: expected a mapping of fields, got %q", name, n.Line, where, nodeText(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if path != "" {
			key = path + "." + k.Value
		}
		if seen[key] {
			return fmt.Errorf("%s:%d: field %s: set twice in this file", name, k.Line, key)
		}
		seen[key] = true
		if f, ok := c.field(key); ok {
			if err := c.setYAMLLeaf(name, f, v); err != nil {
				return err
			}
			continue
		}
		if c.isSection(key) && !strings.HasPrefix(key, envPrefix) {
			if err := c.walkYAML(name, v, key); err != nil {
				return err
			}
			continue
		}
		return fmt.Errorf("%s:%d: %s", name, k.Line, c.unknownField(key))
	}
	return nil
}

func (c *Recipe) setYAMLLeaf(name string, f Field, n *yaml.Node) error {
	r, ok := nodeRaw(n)
	if !ok {
		return fmt.Errorf("%s:%d: field %s: bad value %q (allowed: %s)", name, n.Line, f.Key, nodeText(n), f.allowed(c.gen))
	}
	v, bad := coerce(f, r, c.gen)
	if bad != nil {
		return fmt.Errorf("%s:%d: field %s: bad value %q (allowed: %s)", name, bad.line, f.Key, bad.text, f.allowed(c.gen))
	}
	if err := c.overriddenByCommOverlap(f.Key, nodeText(n)); err != nil {
		return fmt.Errorf("%s:%d: field %s: %w", name, n.Line, f.Key, err)
	}
	if err := c.override(f.Key, v); err != nil {
		return fmt.Errorf("%s:%d: %w", name, n.Line, err)
	}
	return nil
}

// nodeRaw converts a scalar or a flat sequence of scalars; mappings and
// nested sequences are never a valid field value.
func nodeRaw(n *yaml.Node) (raw, bool) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return raw{null: true, line: n.Line}, true
		}
		return raw{tag: n.ShortTag(), text: n.Value, line: n.Line}, true
	case yaml.SequenceNode:
		r := raw{isList: true, elems: []raw{}, line: n.Line}
		for _, e := range n.Content {
			er, ok := nodeRaw(e)
			if !ok || er.isList {
				return raw{}, false
			}
			r.elems = append(r.elems, er)
		}
		return r, true
	}
	return raw{}, false
}

// nodeText renders a node compactly for messages.
func nodeText(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value
	case yaml.SequenceNode:
		parts := make([]string, len(n.Content))
		for i, e := range n.Content {
			parts[i] = nodeText(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return nodeText(n.Alias)
	}
	return ""
}
