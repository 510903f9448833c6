package job

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// RunArgs are what a training log says of the model and layout it ran, by
// argument name: Megatron-LM's argument list (megatron/training/
// arguments.py _print_args: "  hidden_size ........ 4096", every argument)
// and Megatron-Bridge's configuration summary (src/megatron/bridge/
// training/config.py ConfigContainer.log_non_default_values, v0.4.0 to
// v0.6.0: "  hidden_size: 4096  (Mcore default: 0)" for the model's values
// that differ from Megatron-Core's, "  micro_batch_size: 1" for [train]).
// Only RunArgNames are kept; the first value printed wins (the model's
// section comes first).
type RunArgs map[string]string

// RunArgNames are the arguments RunArgs keeps: the model's shape and the
// parallel layout, as Megatron-LM and Megatron-Bridge name them
// (Megatron-LM's num_experts is Megatron-Bridge's num_moe_experts).
var RunArgNames = []string{
	"num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_experts", "num_moe_experts",
	"seq_length", "micro_batch_size", "global_batch_size", "world_size",
	"tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size", "expert_model_parallel_size",
}

var (
	mlmAnyArgRe = regexp.MustCompile(`^\s*([a-z_][a-z0-9_]*) \.+ (.*?)\s*$`)
	mbAnyArgRe  = regexp.MustCompile(`^\s*([a-z_][a-z0-9_]*): (.*?)(?:\s+\(Mcore default:.*)?$`)
)

// Line reads one line of the log.
func (a RunArgs) Line(s string) {
	s = linePrefix.ReplaceAllString(s, "")
	m := mlmAnyArgRe.FindStringSubmatch(s)
	if m == nil {
		m = mbAnyArgRe.FindStringSubmatch(s)
	}
	if m == nil || !slices.Contains(RunArgNames, m[1]) {
		return
	}
	if _, seen := a[m[1]]; !seen {
		a[m[1]] = strings.Trim(strings.TrimSpace(m[2]), `'"`)
	}
}

// Int is the argument's integer value; ok is false when the log does not
// print it or prints None.
func (a RunArgs) Int(name string) (v int, ok bool) {
	s, found := a[name]
	if !found {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// Printed reports whether the log printed the argument, None included.
func (a RunArgs) Printed(name string) bool {
	_, ok := a[name]
	return ok
}

// MaxLogLine is the longest line ReadLines hands on whole: a training
// log's lines are a few hundred bytes; a longer one is cut.
const MaxLogLine = 64 << 10

// ReadLines calls fn with each line of r (without its newline, numbered
// from 1). A line longer than MaxLogLine is cut to that length and the rest
// of it skipped, so a file without newlines costs no more memory than one
// line. A read error names the line it stopped at.
func ReadLines(r io.Reader, fn func(n int, line string)) error {
	br := bufio.NewReaderSize(r, MaxLogLine)
	n := 0
	for {
		chunk, err := br.ReadSlice('\n')
		line := string(chunk)
		for errors.Is(err, bufio.ErrBufferFull) {
			// Skip the rest of an over-long line.
			_, err = br.ReadSlice('\n')
		}
		if len(line) > 0 || (err == nil) {
			n++
			fn(n, strings.TrimSuffix(line, "\n"))
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("line %d: %w", n+1, err)
		}
	}
}
