package job

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Placeholders of a --command template. Each expands to shell words that
// are already quoted, so a template writes them bare, never inside quotes.
const (
	// PhOverrides is the candidate's overrides in the template's default
	// format (Template.Format: dotlist unless set).
	PhOverrides = "overrides"
	// PhDotlist is the Hydra dotlist for Megatron-Bridge run_recipe.py and
	// other OmegaConf entry points: model.cuda_graph_impl=local ...
	PhDotlist = "dotlist"
	// PhFlags is Megatron-LM pretrain_gpt.py arguments:
	// --cuda-graph-impl local --cuda-graph-warmup-steps 3 ...
	PhFlags = "flags"
	// PhRunScriptFlags is Megatron-Bridge scripts/performance/run_script.py
	// arguments: --cuda_graph_impl local --cuda_graph_scope ... and Hydra
	// overrides for the rest.
	PhRunScriptFlags = "run_script_flags"
	// PhYAMLFile is the path of a YAML file holding the overrides (MB's
	// --config-file).
	PhYAMLFile = "yaml_file"
	PhIters    = "iters"     // training iterations the job should run
	PhCand     = "candidate" // the candidate's name, e.g. full_iteration w3
	PhJobDir   = "job_dir"   // the job's own folder (for its checkpoints or extra logs)
)

// commandPlaceholders are the names a --command template may use.
var commandPlaceholders = []string{PhOverrides, PhDotlist, PhFlags, PhRunScriptFlags, PhYAMLFile, PhIters, PhCand, PhJobDir}

// overridePlaceholders carry the candidate's settings; a template needs one.
var overridePlaceholders = []string{PhOverrides, PhDotlist, PhFlags, PhRunScriptFlags, PhYAMLFile}

// OverrideFormats are what {overrides} may stand for.
var OverrideFormats = []string{PhDotlist, PhFlags, PhRunScriptFlags}

var placeholderRe = regexp.MustCompile(`^[a-z_]+$`)

// segment is a piece of a parsed template: literal text or a placeholder.
type segment struct {
	text string
	ph   string
}

// Template is a parsed command template.
type Template struct {
	Text   string
	Format string // what {overrides} renders: dotlist (default), flags, run_script_flags
	segs   []segment
}

// ParseCommand checks a --command template: its placeholders are known,
// written outside quotes, and at least one of them carries the
// candidate's settings.
func ParseCommand(text, format string) (Template, error) {
	if strings.TrimSpace(text) == "" {
		return Template{}, fmt.Errorf("the command template is empty")
	}
	if strings.ContainsRune(text, 0) {
		return Template{}, fmt.Errorf("the command template contains a NUL byte")
	}
	if format == "" {
		format = PhDotlist
	}
	if !slices.Contains(OverrideFormats, format) {
		return Template{}, fmt.Errorf("overrides format %q: allowed: %s", format, strings.Join(OverrideFormats, ", "))
	}
	segs, err := parsePlaceholders(text, commandPlaceholders, true)
	if err != nil {
		return Template{}, err
	}
	if !slices.ContainsFunc(segs, func(s segment) bool { return slices.Contains(overridePlaceholders, s.ph) }) {
		return Template{}, fmt.Errorf("the command template has no placeholder for the candidate's settings: add {overrides} (or {dotlist}, {flags}, {run_script_flags}, {yaml_file})")
	}
	return Template{Text: text, Format: format, segs: segs}, nil
}

// Has reports whether the template uses placeholder ph.
func (t Template) Has(ph string) bool {
	return slices.ContainsFunc(t.segs, func(s segment) bool { return s.ph == ph })
}

// Expand replaces every placeholder by vals[name] (already shell words).
func (t Template) Expand(vals map[string]string) string {
	return expand(t.segs, vals)
}

func expand(segs []segment, vals map[string]string) string {
	var b strings.Builder
	for _, s := range segs {
		if s.ph == "" {
			b.WriteString(s.text)
		} else {
			b.WriteString(vals[s.ph])
		}
	}
	return b.String()
}

// parsePlaceholders splits text at {name} placeholders. Braces that are
// shell syntax stay text: ${VAR}, {a,b}, { cmd; }. A {name} that looks
// like a placeholder but is not one of known is an error (a typo would
// otherwise run the job without its settings). With shell, a placeholder
// inside single or double quotes is an error: it expands to quoted words,
// which quotes around it would turn into literal quote characters.
func parsePlaceholders(text string, known []string, shell bool) ([]segment, error) {
	var segs []segment
	var lit strings.Builder
	var squote, dquote, escaped bool
	line := 1
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == '\n' {
			line++
		}
		if shell {
			switch {
			case escaped:
				escaped = false
				lit.WriteByte(c)
				continue
			case c == '\\' && !squote:
				escaped = true
				lit.WriteByte(c)
				continue
			case c == '\'' && !dquote:
				squote = !squote
			case c == '"' && !squote:
				dquote = !dquote
			}
		}
		if c == '{' && !(i > 0 && text[i-1] == '$') {
			if end := strings.IndexByte(text[i:], '}'); end > 1 {
				name := text[i+1 : i+end]
				if placeholderRe.MatchString(name) {
					if !slices.Contains(known, name) {
						return nil, fmt.Errorf("template line %d: unknown placeholder {%s} (allowed: {%s})", line, name, strings.Join(known, "}, {"))
					}
					if squote || dquote {
						return nil, fmt.Errorf("template line %d: placeholder {%s} is inside quotes; write it bare: it expands to words that are already shell-quoted", line, name)
					}
					if lit.Len() > 0 {
						segs = append(segs, segment{text: lit.String()})
						lit.Reset()
					}
					segs = append(segs, segment{ph: name})
					i += end
					continue
				}
			}
		}
		lit.WriteByte(c)
	}
	if lit.Len() > 0 {
		segs = append(segs, segment{text: lit.String()})
	}
	return segs, nil
}

var shellSafeRe = regexp.MustCompile(`^[A-Za-z0-9_./,:=@%+-]+$`)

// Quote makes s one shell word: as it is when it holds only characters no
// POSIX shell treats specially, else in single quotes (a single quote
// inside written as '\”). Newlines, $(...), backticks and quotes all end
// up literal.
func Quote(s string) string {
	if shellSafeRe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// QuoteAll quotes each word and joins them with spaces.
func QuoteAll(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}
