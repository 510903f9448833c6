// Package setup builds one search: it maps the choices of a person (the
// headless flags, the TUI's request, a benchmark's options) to a
// search.Config once — the workload the recipe decides (MoE mode, layer
// spec, generation), the job GPU's memory, the GPU the estimate engine
// estimates for — and opens the engines that measure it: the megatron
// engine on the real framework, cuda workers (one `cgtune worker` process
// per GPU), in-process estimate engines, or the real training job, with
// the estimator that orders the candidates. The headless search, the
// TUI's backend and bench/threeway all set up through it.
//
// Errors are one line each; those that mean no usable GPU or driver wrap
// ErrNoGPU (cgtune exits 3 on them), the others are bad input.
package setup

import (
	"errors"
	"fmt"
)

// ErrNoGPU is what the errors of an engine that needs a GPU, a driver or
// the framework, and cannot have it, wrap.
var ErrNoGPU = errors.New("no usable GPU")

// noGPU is an error that wraps ErrNoGPU with the message of err alone,
// and wraps err too (the cause: a cancelled start, a missing driver).
type noGPU struct{ err error }

func (e noGPU) Error() string   { return e.err.Error() }
func (e noGPU) Unwrap() []error { return []error{ErrNoGPU, e.err} }

// noGPUf formats a message as fmt.Errorf does (%w wraps the cause) as an
// error that wraps ErrNoGPU.
func noGPUf(format string, args ...any) error {
	return noGPU{err: fmt.Errorf(format, args...)}
}
