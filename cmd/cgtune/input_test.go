package main

import (
	"fmt"
	"strings"
	"testing"

	"cgtune/presets"
)

// Before: a preset whose space lists warm-ups 0 to 1000 was accepted and
// planned for minutes, deaf to Ctrl-C; it is bad input, refused at once
// with the line, the bound and why.
func TestOversizedSpaceRefusedAtParse(t *testing.T) {
	isolate(t)
	var ws []string
	for w := range presets.MaxWarmup + 1 {
		ws = append(ws, fmt.Sprint(w))
	}
	preset := writeFile(t, "big.yaml", `version: 1
name: big
model: llama3_8b
gpu: h100
space:
  impls: [none, local, transformer_engine]
  warmups: [`+strings.Join(ws, ",")+`]
mbridge: "0.4"
`)
	for _, args := range [][]string{
		{"--headless", "--preset", preset, "--engine", "estimate"},
		{"check", "--preset", preset},
	} {
		code, out, errb := cgtuneWithin(t, args...)
		if code != exitBadInput || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, preset+":5: ") ||
			!strings.Contains(errb, "130131 candidates") || !strings.Contains(errb, "more than the 4096 cgtune plans: each is checked against the rules") {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", args, code, errb, out)
		}
	}
}
