// Package recipe is what cgtune knows of a Megatron-Bridge training recipe:
// the override schema of each Megatron-Bridge generation (Recipe, Field,
// Schema; its values set from --set, YAML files and a layout's settings),
// the rules Megatron-Bridge, Megatron-Core and the perf harness apply to it
// (rules.go: each rule names the file it was read from) and the linting
// that runs them in start-up order (Check, CheckWithCapture,
// ApplyHarnessFlags), so that a candidate is rejected with the message the
// real stack would print before anything runs; and the overrides a
// candidate needs (BuildOverrides, WinnerOverrides), rendered in every
// format cgtune emits (Overrides.Render, Formats).
//
// The generations themselves (presets.Generation, presets.ParseMBridge)
// stay in presets: a team preset names its Megatron-Bridge release, and
// the step model plans a capture per generation.
package recipe
