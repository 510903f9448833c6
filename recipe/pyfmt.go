package recipe

import "strings"

// Messages are compared byte for byte with what Python prints, so values in
// them are formatted as Python's str()/repr() would.

// pyRepr is repr() of a str.
func pyRepr(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}

// pyList is str() of a list of str: ['attn', 'mlp'].
func pyList(xs []string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = pyRepr(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// pySet is str() of a set of str: {'attn', 'mlp'}. Python iterates a set
// of strings in hash order, which changes from run to run; the elements
// are written in the order given.
func pySet(xs []string) string {
	l := pyList(xs)
	return "{" + l[1:len(l)-1] + "}"
}

// pyBool is str() of a bool.
func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}
