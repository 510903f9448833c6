// Package testmodel looks built-in models up for tests, which fail at once
// on a name or GPU type the presets do not have.
package testmodel

import (
	"testing"

	"cgtune/presets"
)

// Builtin is built-in model name and its default layout on gpu.
func Builtin(t testing.TB, name, gpu string) (presets.Model, presets.Layout) {
	t.Helper()
	m, err := presets.LookupModel(name)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Layout(gpu)
	if err != nil {
		t.Fatal(err)
	}
	return m, l
}
