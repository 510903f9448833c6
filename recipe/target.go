package recipe

import (
	"fmt"
	"slices"
	"strings"

	"cgtune/presets"
)

// Choice is the default layout and Megatron-Bridge version a built-in
// model is searched with, and what was chosen in the person's stead.
type Choice struct {
	Layout  presets.Layout
	MBridge string
	// Notes say, one line each, what was picked because the model has no
	// layout for the GPU type asked for or its recipe needs another
	// Megatron-Bridge version.
	Notes []string
}

// ChooseTarget picks the layout and Megatron-Bridge version of model m for
// GPU type gpu and version mbridge, as the headless search and the TUI both
// do. A GPU type the model has no layout for is an error when the person
// named it (gpuGiven); otherwise the model's first GPU type stands in. A
// version that cannot build the layout's recipe (its settings need fields
// of another generation) is replaced, unless the person named it
// (mbGiven), by the nearest one that can: later versions first, as recipes
// only gain fields. The recipe's own error then tells what is wrong.
func ChooseTarget(m presets.Model, gpu string, gpuGiven bool, mbridge string, mbGiven bool) (Choice, error) {
	c := Choice{MBridge: mbridge}
	l, err := m.Layout(gpu)
	if err != nil {
		gpus := m.GPUs()
		if gpuGiven || len(gpus) == 0 {
			return c, err
		}
		if l, err = m.Layout(gpus[0]); err != nil {
			return c, err
		}
		c.Notes = append(c.Notes, fmt.Sprintf("%s has no layout for %s: using its %s layout (it has %s; --gpu-type picks one)",
			m.Name, gpu, gpus[0], strings.Join(gpus, ", ")))
	}
	c.Layout = l
	if mbGiven {
		return c, nil
	}
	var note string
	if c.MBridge, note = ChooseMBridge(m, l, mbridge); note != "" {
		c.Notes = append(c.Notes, note)
	}
	return c, nil
}

// ChooseMBridge is mbridge when it can build the recipe of model m on
// layout l, else the nearest version that can (later ones first, as
// recipes only gain fields) with a line saying why; mbridge and no line
// when none can (building the recipe then says what is wrong).
func ChooseMBridge(m presets.Model, l presets.Layout, mbridge string) (string, string) {
	_, why := New(m, l, mbridge)
	if why == nil {
		return mbridge, ""
	}
	for _, v := range nearestVersions(mbridge) {
		if _, err := New(m, l, v); err == nil {
			return v, fmt.Sprintf("using Megatron-Bridge %s: %s (--mbridge picks another)", v, mbridgeReason(why))
		}
	}
	return mbridge, ""
}

// nearestVersions are the Megatron-Bridge versions other than v: those
// after it in order, then those before it, nearest first.
func nearestVersions(v string) []string {
	all := presets.MBridgeVersions
	i := slices.Index(all, strings.TrimPrefix(v, "v"))
	if i < 0 {
		return slices.Clone(all)
	}
	out := slices.Clone(all[i+1:])
	for j := i - 1; j >= 0; j-- {
		out = append(out, all[j])
	}
	return out
}

// mbridgeReason is the recipe's refusal without its advice on --mbridge,
// which the choice has followed.
func mbridgeReason(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, " (allowed: --mbridge"); i > 0 {
		msg = msg[:i]
	}
	return msg
}
