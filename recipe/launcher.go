package recipe

import (
	"fmt"
	"regexp"
	"strings"
)

// Launcher is the program that starts the training job. It decides which
// start-up checks a configuration meets: a Megatron-Bridge recipe is judged
// by MB and the Megatron-Core and Transformer Engine it pins; Megatron-LM's
// own launcher checks (validate_args in MLM megatron/training/arguments.py,
// the ARG-* rules) run only where the job is Megatron-LM's pretrain_gpt.py.
type Launcher string

const (
	// LauncherMB is Megatron-Bridge: its training scripts, run_recipe.py
	// and the perf harness (scripts/performance). The default.
	LauncherMB Launcher = "mb"
	// LauncherMLM is Megatron-LM's pretrain_gpt.py.
	LauncherMLM Launcher = "mlm"
)

// Launchers lists the launchers in the order flags document them.
var Launchers = []Launcher{LauncherMB, LauncherMLM}

// String names the launcher for people.
func (l Launcher) String() string {
	if l == LauncherMLM {
		return "Megatron-LM's pretrain_gpt.py"
	}
	return "Megatron-Bridge"
}

// ParseLauncher reads a --launcher value.
func ParseLauncher(s string) (Launcher, error) {
	for _, l := range Launchers {
		if string(l) == s {
			return l, nil
		}
	}
	return "", fmt.Errorf("unknown launcher %q (allowed: mb, mlm)", s)
}

// pretrainGPTRe finds Megatron-LM's GPT training script as a word of a
// command line (a path ending in it, or the bare name).
var pretrainGPTRe = regexp.MustCompile(`(^|[\s/'"])pretrain_gpt\.py($|[\s'";])`)

// LauncherOf is the launcher a training command line runs: Megatron-LM's
// when it runs pretrain_gpt.py, else Megatron-Bridge's.
func LauncherOf(command string) Launcher {
	if pretrainGPTRe.MatchString(strings.TrimSpace(command)) {
		return LauncherMLM
	}
	return LauncherMB
}

// Option changes how Check and the functions built on it judge a
// configuration.
type Option func(*options)

type options struct {
	launcher Launcher
}

// WithLauncher judges the configuration as launcher l starts it.
func WithLauncher(l Launcher) Option {
	return func(o *options) { o.launcher = l }
}

func optionsOf(opts []Option) options {
	o := options{launcher: LauncherMB}
	for _, f := range opts {
		f(&o)
	}
	if o.launcher == "" {
		o.launcher = LauncherMB
	}
	return o
}
