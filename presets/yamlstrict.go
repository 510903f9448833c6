package presets

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// FileVersion is the only version of the preset file formats cgtune reads.
const FileVersion = 1

// strictDoc decodes one YAML file into a Go value and remembers the line of
// every field, so that validation after decoding can still point at
// FILE:LINE. Errors are always one line: they end up on a terminal after
// "cgtune: " and in CI logs, where a multi-line yaml.TypeError is unreadable.
type strictDoc struct {
	file  string
	lines map[string]int // dotted path (models[0].arch.layers) -> line
	kind  string         // what the file is, for errors ("preset file")
}

var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// decodeStrict parses data into out (a pointer to a struct whose top level
// has a `version` field). It checks, before decoding, that every key is a
// known field, that scalars have the right type and that version is
// FileVersion, so each error can name the field, its line and what is allowed.
func decodeStrict(file string, data []byte, out any) (*strictDoc, error) {
	return decodeStrictAs(file, "preset file", true, data, out)
}

// StrictFile is a YAML file read with the checks of the preset files, for
// the other YAML inputs (a profile adjustment file).
type StrictFile struct{ d *strictDoc }

// DecodeStrictFile decodes data, the YAML file file (a kind such as
// "profile file", for errors), into out with the checks of the preset
// files: every key a known field, scalars of the field's type, no anchors,
// aliases or second document; each error one line, FILE:LINE: and the
// field in words. Unlike a preset file it may be empty (out stays zero) and
// needs no version field; one it gives must be FileVersion, and out must
// then have a version field to hold it.
func DecodeStrictFile(file, kind string, data []byte, out any) (*StrictFile, error) {
	d, err := decodeStrictAs(file, kind, false, data, out)
	if err != nil {
		return nil, err
	}
	return &StrictFile{d: d}, nil
}

// Errorf is a validation error at field path (dotted, as the file nests
// it: layers.moe.eager_fwd.host_ms), located at its line.
func (f *StrictFile) Errorf(path, format string, args ...any) error {
	return f.d.errf(path, format, args...)
}

func decodeStrictAs(file, kind string, versioned bool, data []byte, out any) (*strictDoc, error) {
	d := &strictDoc{file: file, lines: map[string]int{}, kind: kind}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) && !versioned {
			return d, nil
		}
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s:1: empty file (want a YAML mapping with version: %d)", file, FileVersion)
		}
		return nil, d.syntaxErr(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("%s:%d: a second YAML document; a %s holds exactly one", file, extra.Line, kind)
	} else if !errors.Is(err, io.EOF) {
		return nil, d.syntaxErr(err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 {
		if !versioned {
			return d, nil
		}
		return nil, fmt.Errorf("%s:1: empty file (want a YAML mapping with version: %d)", file, FileVersion)
	}
	top := root.Content[0]
	if top.Kind != yaml.MappingNode {
		if !versioned {
			return nil, fmt.Errorf("%s:%d: want a YAML mapping at the top, got %s", file, top.Line, kindName(top))
		}
		return nil, fmt.Errorf("%s:%d: want a YAML mapping with version: %d at the top, got %s", file, top.Line, FileVersion, kindName(top))
	}
	if err := d.checkVersion(top, versioned); err != nil {
		return nil, err
	}
	t := reflect.TypeOf(out).Elem()
	if err := d.walk(top, t, ""); err != nil {
		return nil, err
	}
	// The walk above has checked everything the decoder can complain about;
	// decoding again with KnownFields is the belt to those braces.
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(out); err != nil {
		return nil, d.syntaxErr(err)
	}
	return d, nil
}

func (d *strictDoc) checkVersion(top *yaml.Node, required bool) error {
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if k.Value != "version" {
			continue
		}
		n, err := strconv.Atoi(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil || n != FileVersion {
			return fmt.Errorf("%s:%d: unsupported version %q (allowed: %d)", d.file, v.Line, v.Value, FileVersion)
		}
		return nil
	}
	if !required {
		return nil
	}
	return fmt.Errorf("%s:%d: missing field \"version\" (allowed: %d)", d.file, top.Line, FileVersion)
}

// syntaxErr turns a yaml error ("yaml: line 3: ...", or a TypeError listing
// several lines) into FILE:LINE: first problem.
func (d *strictDoc) syntaxErr(err error) error {
	var te *yaml.TypeError
	msg := err.Error()
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = "yaml: " + te.Errors[0]
	}
	msg = strings.ReplaceAll(msg, "\n", " ")
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s:%s: %s", d.file, m[1], m[2])
	}
	return fmt.Errorf("%s:1: %s", d.file, strings.TrimPrefix(msg, "yaml: "))
}

// line finds the line of path, or of its closest ancestor that has one.
func (d *strictDoc) line(path string) int {
	for path != "" {
		if l, ok := d.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	if l, ok := d.lines[""]; ok {
		return l
	}
	return 1
}

// errf formats a validation error located at path. Without a file (a
// value built in code) there is no location to give.
func (d *strictDoc) errf(path, format string, args ...any) error {
	if d.file == "" {
		return fmt.Errorf(format, args...)
	}
	return fmt.Errorf("%s:%d: "+format, append([]any{d.file, d.line(path)}, args...)...)
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

var timeType = reflect.TypeOf(time.Time{})

// walk checks node against the Go type t and records field lines.
func (d *strictDoc) walk(n *yaml.Node, t reflect.Type, path string) error {
	if _, seen := d.lines[path]; !seen {
		d.lines[path] = n.Line
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return fmt.Errorf("%s:%d: YAML anchors and aliases are not supported in a %s", d.file, n.Line, d.kind)
	}
	if isNull(n) {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map:
			return nil
		}
	}
	if t.Kind() == reflect.Pointer {
		return d.walk(n, t.Elem(), path)
	}
	if t == timeType {
		return d.scalar(n, t, path)
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := yamlFields(t)
		return d.walkMapping(n, path, structKeys, func(k *yaml.Node) (reflect.Type, error) {
			f, ok := fields.byName[k.Value]
			if !ok {
				where := ""
				if path != "" {
					where = " in " + displayPath(path)
				}
				return nil, fmt.Errorf("%s:%d: unknown field %q%s (allowed: %s)", d.file, k.Line, k.Value, where, strings.Join(fields.names, ", "))
			}
			return f.Type, nil
		})
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return fmt.Errorf("%s:%d: field %q: want a list, got %s", d.file, n.Line, displayPath(path), kindName(n))
		}
		for i, c := range n.Content {
			if err := d.walk(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		return d.walkMapping(n, path, mapKeys, func(*yaml.Node) (reflect.Type, error) { return t.Elem(), nil })
	}
	return d.scalar(n, t, path)
}

// keyWords name a mapping's keys in errors: a struct's are field names,
// a map's keys.
type keyWords struct{ want, given string }

var (
	structKeys = keyWords{want: "a field name", given: "field"}
	mapKeys    = keyWords{want: "a key", given: "key"}
)

// walkMapping checks that n is a mapping whose keys are scalars, each given
// once, records each key's line and walks each value against the type
// valueType gives for its key (an error there: a key the type does not
// have).
func (d *strictDoc) walkMapping(n *yaml.Node, path string, words keyWords, valueType func(k *yaml.Node) (reflect.Type, error)) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s:%d: field %q: want a mapping, got %s", d.file, n.Line, displayPath(path), kindName(n))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s:%d: want %s, got %s", d.file, k.Line, words.want, kindName(k))
		}
		if first, dup := seen[k.Value]; dup {
			return fmt.Errorf("%s:%d: %s %q given twice (first at line %d)", d.file, k.Line, words.given, k.Value, first)
		}
		seen[k.Value] = k.Line
		t, err := valueType(k)
		if err != nil {
			return err
		}
		child := joinPath(path, k.Value)
		d.lines[child] = k.Line
		if err := d.walk(v, t, child); err != nil {
			return err
		}
	}
	return nil
}

func (d *strictDoc) scalar(n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("%s:%d: field %q: want %s, got %s", d.file, n.Line, displayPath(path), typeName(t), kindName(n))
	}
	if t.Kind() == reflect.String && n.Tag == "!!binary" {
		return fmt.Errorf("%s:%d: field %q: want %s, got binary data", d.file, n.Line, displayPath(path), typeName(t))
	}
	// yaml.v3 truncates 2.5 into an int field and reads 1 into a float;
	// only the second is harmless.
	bad := false
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		bad = n.ShortTag() != "!!int"
	case reflect.Float64, reflect.Float32:
		bad = n.ShortTag() != "!!int" && n.ShortTag() != "!!float"
	case reflect.Bool:
		bad = n.ShortTag() != "!!bool"
	}
	v := reflect.New(t)
	if err := n.Decode(v.Interface()); err != nil || bad {
		return fmt.Errorf("%s:%d: field %q: want %s, got %q", d.file, n.Line, displayPath(path), typeName(t), n.Value)
	}
	return nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// displayPath is the path as a person reads it: the leaf field name with
// its parents, without the document root.
func displayPath(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

func typeName(t reflect.Type) string {
	if t == timeType {
		return "a timestamp (RFC 3339)"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

type fieldSet struct {
	byName map[string]reflect.StructField
	names  []string
}

func yamlFields(t reflect.Type) fieldSet {
	fs := fieldSet{byName: map[string]reflect.StructField{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fs.byName[name] = f
		fs.names = append(fs.names, name)
	}
	return fs
}

// marshalYAML encodes v with two-space indents and lists of scalars in flow
// style ([a, b]), which keeps scope sets and module lists readable.
func marshalYAML(v any) ([]byte, error) {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	flowScalarLists(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func flowScalarLists(n *yaml.Node) {
	if n.Kind == yaml.SequenceNode {
		flat := true
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				flat = false
			}
		}
		if flat {
			n.Style = yaml.FlowStyle
			return
		}
		// A list of scalar lists (scope sets) reads best one set per line.
		for _, c := range n.Content {
			flowScalarLists(c)
		}
		return
	}
	for _, c := range n.Content {
		flowScalarLists(c)
	}
}
