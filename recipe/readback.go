package recipe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"cgtune/presets"
)

// Reading rendered overrides back the way a user applies them: YAML onto
// the recipe (a recipe script's --config-file), the dotlist as Hydra
// overrides, the flags through the perf harness's argument parser, the
// Python assignments, the JSON object. cgtune checks what it writes this
// way: applied to the stock recipe, a recommendation must be what was
// ranked.

// RunScriptArgs is what the argument parser of MB's
// scripts/performance/run_script.py keeps of the tokens cgtune writes.
type RunScriptArgs struct {
	Impl   string   // --cuda_graph_impl; "" when not given
	Scopes []string // --cuda_graph_scope split on commas; nil when not given
	// Hydra are the tokens parse_known_args leaves over, which
	// run_script.py applies as Hydra overrides (set_cli_overrides) before
	// the flags (set_user_overrides).
	Hydra []string
}

// ParseRunScriptArgs parses tokens (exec arguments, not shell text) as MB's
// scripts/performance/argument_parser.py does for the two CUDA-graph flags,
// the same at v0.3.0 through v0.6.0 and HEAD: --cuda_graph_impl typed by
// is_cuda_graph_impl_valid (one of VALID_CUDA_GRAPH_IMPLS),
// --cuda_graph_scope by is_cuda_graph_scope_valid (arg.split(",") with every
// part in VALID_CUDA_GRAPH_SCOPES, so an empty value fails), either as
// "--flag value" or "--flag=value", the last one given winning; a value
// that starts with "-" is no value (argparse: expected one argument). Every
// token that does not start with "-" is left over (parse_known_args) for
// Hydra. Any other flag is refused: run_script.py would take it for one of
// its own or hand it to Hydra, which fails on it. Errors read as argparse's.
func ParseRunScriptArgs(toks []string) (RunScriptArgs, error) {
	var a RunScriptArgs
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if !strings.HasPrefix(t, "-") {
			a.Hydra = append(a.Hydra, t)
			continue
		}
		name, val, inline := strings.Cut(t, "=")
		if name != flagImpl && name != flagScope {
			return a, fmt.Errorf("run_script.py: %s is not a flag cgtune writes (the harness would take it for one of its own, or pass it to Hydra, which fails)", t)
		}
		if !inline {
			if i+1 >= len(toks) || strings.HasPrefix(toks[i+1], "-") {
				return a, fmt.Errorf("run_script.py: error: argument %s: expected one argument", name)
			}
			i++
			val = toks[i]
		}
		if name == flagImpl {
			if !slices.Contains(presets.Impls, val) {
				return a, fmt.Errorf("run_script.py: error: argument %s: invalid is_cuda_graph_impl_valid value: '%s'", name, val)
			}
			a.Impl = val
			continue
		}
		parts := strings.Split(val, ",")
		for _, p := range parts {
			if !slices.Contains(presets.Scopes, p) {
				return a, fmt.Errorf("run_script.py: error: argument %s: invalid is_cuda_graph_scope_valid value: '%s'", name, val)
			}
		}
		a.Scopes = parts
	}
	return a, nil
}

// ApplyRunScript applies run_script.py tokens to c as the harness does:
// the Hydra overrides, then the flags (ApplyHarnessFlags; the harness has
// no warm-up flag, so the recipe's warm-up stays). A token the parser or
// Hydra refuses is an error; what the harness raises is a violation.
func (c *Recipe) ApplyRunScript(toks []string, mbridge string) ([]string, []Violation, error) {
	a, err := ParseRunScriptArgs(toks)
	if err != nil {
		return nil, nil, err
	}
	for _, h := range a.Hydra {
		if err := c.ApplySet(h); err != nil {
			return nil, nil, err
		}
	}
	w, _ := c.Get(KeyWarmup)
	notes, vs := ApplyHarnessFlags(c, presets.Candidate{Impl: a.Impl, Scopes: a.Scopes, Warmup: w.Int}, mbridge)
	return notes, vs, nil
}

// ApplyRendered applies overrides rendered in format (Formats) to c, the
// way the user applies them; flags go through the perf harness
// (ApplyRunScript), whose violations come back. Comment lines are skipped;
// anything cgtune does not write is an error naming it.
func (c *Recipe) ApplyRendered(format string, data []byte, mbridge string) ([]Violation, error) {
	switch format {
	case "yaml":
		return nil, c.ApplyYAML(format, data)
	case "dotlist", "flags":
		toks, err := shellWords(data)
		if err != nil {
			return nil, err
		}
		if format == "flags" {
			_, vs, err := c.ApplyRunScript(toks, mbridge)
			return vs, err
		}
		for _, t := range toks {
			if err := c.ApplySet(t); err != nil {
				return nil, err
			}
		}
		return nil, nil
	case "python":
		return nil, c.applyPython(data)
	case "json":
		return nil, c.applyJSON(data)
	}
	return nil, fmt.Errorf("unknown format %q (allowed: %s)", format, strings.Join(Formats, ", "))
}

// shellWords splits shell text into words as a POSIX shell would for the
// text cgtune writes: "#" comment lines, single and double quotes,
// backslash escapes and line continuations.
func shellWords(data []byte) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	s := string(data)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '#' && !inWord:
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case ch == '\\':
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
				continue
			}
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
				inWord = true
			}
		case ch == '\'' || ch == '"':
			end := strings.IndexByte(s[i+1:], ch)
			if end < 0 {
				return nil, fmt.Errorf("unterminated %c quote", ch)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i, inWord = i+1+end, true
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

var pythonLineRe = regexp.MustCompile(`^cfg\.([A-Za-z_][A-Za-z0-9_.]*) = (.+)$`)

// applyPython applies the "cfg.KEY = VALUE" assignments cgtune writes
// (Python literals: True, False, None, numbers, strings, lists of them).
func (c *Recipe) applyPython(data []byte) error {
	staged := c.Clone()
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := pythonLineRe.FindStringSubmatch(line)
		if m == nil {
			return fmt.Errorf("python:%d: not a cfg.KEY = VALUE assignment: %s", n+1, line)
		}
		r, err := pythonRaw(m[2])
		if err != nil {
			return fmt.Errorf("python:%d: %s: %w", n+1, m[1], err)
		}
		if err := staged.setRaw(m[1], r); err != nil {
			return fmt.Errorf("python:%d: %w", n+1, err)
		}
	}
	c.vals = staged.vals
	return nil
}

// pythonRaw reads one Python literal of the kinds cgtune writes.
func pythonRaw(s string) (raw, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "None":
		return raw{null: true}, nil
	case s == "True" || s == "False":
		return raw{tag: "!!bool", text: strings.ToLower(s)}, nil
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		r := raw{isList: true, elems: []raw{}}
		inner := strings.TrimSpace(s[1 : len(s)-1])
		if inner == "" {
			return r, nil
		}
		for _, p := range strings.Split(inner, ",") {
			e, err := pythonRaw(p)
			if err != nil || e.isList {
				return raw{}, fmt.Errorf("bad list element %q", strings.TrimSpace(p))
			}
			r.elems = append(r.elems, e)
		}
		return r, nil
	case strings.HasPrefix(s, `"`):
		u, err := strconv.Unquote(s)
		if err != nil {
			return raw{}, fmt.Errorf("bad string %s", s)
		}
		return raw{tag: "!!str", text: u}, nil
	case hydraIntRe.MatchString(s):
		return raw{tag: "!!int", text: s}, nil
	case hydraFloatRe.MatchString(s):
		return raw{tag: "!!float", text: s}, nil
	}
	return raw{}, fmt.Errorf("not a literal cgtune writes: %s", s)
}

// applyJSON applies the JSON object cgtune writes: dotted keys and their
// values; the reasons and notes (JSONWhyKey, JSONNotesKey) are skipped.
func (c *Recipe) applyJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	staged := c.Clone()
	for k, v := range obj {
		if k == JSONWhyKey || k == JSONNotesKey {
			continue
		}
		r, err := jsonRaw(v)
		if err != nil {
			return fmt.Errorf("json: %s: %w", k, err)
		}
		if err := staged.setRaw(k, r); err != nil {
			return fmt.Errorf("json: %w", err)
		}
	}
	c.vals = staged.vals
	return nil
}

func jsonRaw(v any) (raw, error) {
	switch x := v.(type) {
	case nil:
		return raw{null: true}, nil
	case bool:
		return raw{tag: "!!bool", text: strconv.FormatBool(x)}, nil
	case json.Number:
		if hydraIntRe.MatchString(x.String()) {
			return raw{tag: "!!int", text: x.String()}, nil
		}
		return raw{tag: "!!float", text: x.String()}, nil
	case string:
		return raw{tag: "!!str", text: x}, nil
	case []any:
		r := raw{isList: true, elems: []raw{}}
		for _, e := range x {
			er, err := jsonRaw(e)
			if err != nil || er.isList {
				return raw{}, errors.New("a list holds only scalars")
			}
			r.elems = append(r.elems, er)
		}
		return r, nil
	}
	return raw{}, fmt.Errorf("unsupported value %v", v)
}

// setRaw checks a value read from a file against the field of key and
// sets it.
func (c *Recipe) setRaw(key string, r raw) error {
	f, ok := c.field(key)
	if !ok {
		return errors.New(c.unknownField(key))
	}
	v, bad := coerce(f, r, c.gen)
	if bad != nil {
		return fmt.Errorf("field %s: bad value %q (allowed: %s)", key, bad.text, f.allowed(c.gen))
	}
	return c.override(key, v)
}
