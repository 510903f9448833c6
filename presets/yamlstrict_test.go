package presets

import (
	"strings"
	"testing"
)

// walkDoc has both kinds of mapping the strict walk checks: structs (the
// top level, inner) with known field names and a map (sizes) with any keys.
type walkDoc struct {
	Version int            `yaml:"version"`
	Sizes   map[string]int `yaml:"sizes"`
	Inner   struct {
		A int `yaml:"a"`
	} `yaml:"inner"`
}

// A struct's and a map's keys are checked alike (scalars, each given
// once, the value's type) and their errors name the key as the mapping
// calls it and its line.
func TestStrictWalkChecksStructAndMapKeysAlike(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"struct key twice", "inner:\n  a: 1\n  a: 2\n", `w.yaml:3: field "a" given twice (first at line 2)`},
		{"map key twice", "sizes:\n  x: 1\n  x: 2\n", `w.yaml:3: key "x" given twice (first at line 2)`},
		{"struct key a list", "inner:\n  ? [a]\n  : 1\n", `w.yaml:2: want a field name, got a list`},
		{"map key a list", "sizes:\n  ? [x]\n  : 1\n", `w.yaml:2: want a key, got a list`},
		{"unknown field", "inner:\n  b: 1\n", `w.yaml:2: unknown field "b" in inner (allowed: a)`},
		{"map value type", "sizes:\n  x: big\n", `w.yaml:2: field "sizes.x": want an integer, got "big"`},
		{"struct value type", "inner:\n  a: [1]\n", `w.yaml:2: field "inner.a": want an integer, got a list`},
		{"struct not a mapping", "inner: [1]\n", `w.yaml:1: field "inner": want a mapping, got a list`},
		{"map not a mapping", "sizes: 3\n", `w.yaml:1: field "sizes": want a mapping, got "3"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out walkDoc
			_, err := DecodeStrictFile("w.yaml", "test file", []byte(tc.src), &out)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	var out walkDoc
	f, err := DecodeStrictFile("w.yaml", "test file", []byte("version: 1\nsizes:\n  x: 1\n  y: 2\ninner:\n  a: 3\n"), &out)
	if err != nil || out.Sizes["y"] != 2 || out.Inner.A != 3 {
		t.Fatalf("good file: %v, %+v", err, out)
	}
	// Every key's line is kept, a map's as a struct's.
	if got := f.Errorf("sizes.y", "bad").Error(); !strings.HasPrefix(got, "w.yaml:4: ") {
		t.Errorf("sizes.y located as %q, want line 4", got)
	}
	if got := f.Errorf("inner.a", "bad").Error(); !strings.HasPrefix(got, "w.yaml:6: ") {
		t.Errorf("inner.a located as %q, want line 6", got)
	}
}
