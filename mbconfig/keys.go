package mbconfig

import (
	_ "embed"
	"strings"
)

// keysFile lists the keys the converter reads; the recipe dumper
// (tools/mbrecipes/dump.py) reads the same file to trim its dumps.
//
//go:embed keys.txt
var keysFile string

// Keys are the ConfigContainer keys the converter reads, in file order. A
// model.* key is read under model: and model.transformer:, a section key
// (env_vars, mixed_precision) as a whole.
func Keys() []string {
	var out []string
	for _, line := range strings.Split(keysFile, "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}
