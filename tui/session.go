package tui

import (
	"fmt"
	"strings"
	"time"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/search"
	"cgtune/stepmodel"
)

// session is the search that several screens read: as it is set up (the
// recipe on the model screen, the engine and GPUs on the GPU screen, the
// space and its settings on the space screen) and, once started, as it
// runs and ends. The root model owns it; screens hold a pointer to it.
type session struct {
	sel      selection
	space    spaceChoice
	strategy string
	budget   time.Duration
	tie      float64 // the ranking's tie band (search.RankOptions.Tie)
	whatIf   bool    // the search adds what-if rows (Request.WhatIf)

	estimate bool // the estimate engine instead of the GPUs
	gpus     []engine.GPUStatus
	driver   DriverInfo
	gpuSel   map[int]bool // by NVML index

	trainIters int // Options.TrainIters

	run  *runState         // the search started last; nil before the first
	done *search.DoneEvent // its outcome, once the runner sent it
}

// selection is the recipe the person is tuning: the model, where it came
// from, its layout for the chosen GPU type and the MB version.
type selection struct {
	model  presets.Model
	preset string // team preset it was loaded from, "" for a built-in
	layout presets.Layout
	// base is the layout as it came (the recipe's default for the GPU
	// type, or the preset's), which edits are told against.
	base    presets.Layout
	mbridge string
	inline  bool  // the preset carries its own model rather than naming a built-in
	err     error // the layout's validation error, shown inline
}

// request is the search as set up so far.
func (s *session) request() Request {
	r := Request{
		Model:      s.sel.model,
		Layout:     s.sel.searchLayout(),
		MBridge:    s.sel.mbridge,
		Space:      s.space.Space(),
		Strategy:   s.strategy,
		Budget:     s.budget,
		Tie:        s.tie,
		TrainIters: s.trainIters,
		Estimate:   s.estimate,
		WhatIf:     s.whatIf,
	}
	if !s.estimate {
		for _, g := range s.gpus {
			if s.gpuSel[g.Index] {
				r.GPUs = append(r.GPUs, g.Index)
			}
		}
	}
	return r
}

// ranRequest is the request of the search started last: what its results
// are of, not what the screens say now; the one set up before any.
func (s *session) ranRequest() Request {
	if s.run != nil {
		return s.run.req
	}
	return s.request()
}

// baseName says where the unedited layout comes from, for messages.
func (sel *selection) baseName() string {
	if sel.preset != "" {
		return "preset " + sel.preset
	}
	return "the recipe's default"
}

// layoutChanges are the fields whose value differs from the layout the
// selection started from (base): the one source of what the screens call
// edited, what the "edited:" line lists and what a change of GPU type
// keeps. A field set back to the base's value is no longer an edit.
func (sel *selection) layoutChanges() []layoutField {
	var out []layoutField
	for _, row := range layoutGrid() {
		for _, f := range row {
			if f.value != nil && f.value(sel.model, sel.layout) != f.value(sel.model, sel.base) {
				out = append(out, f)
			}
		}
	}
	return out
}

// layoutEdits are the changed fields as "TP 2 (was 1)".
func (sel *selection) layoutEdits() []string {
	var out []string
	for _, f := range sel.layoutChanges() {
		out = append(out, fmt.Sprintf("%s %s (was %s)", f.label, f.value(sel.model, sel.layout), f.value(sel.model, sel.base)))
	}
	return out
}

// editedLabels are the changed fields' labels.
func (sel *selection) editedLabels() []string {
	var out []string
	for _, f := range sel.layoutChanges() {
		out = append(out, f.label)
	}
	return out
}

// searchLayout is the layout a search (and a saved preset, and the
// report) takes: the selection's, its source saying what was edited.
func (sel *selection) searchLayout() presets.Layout {
	l := sel.layout.Clone()
	if edits := sel.layoutEdits(); len(edits) > 0 {
		l.Source = "edited in cgtune: " + strings.Join(edits, ", ")
		if sel.base.Source != "" {
			l.Source += "; from " + sel.base.Source
		}
	}
	return l
}

// jobGPUMiB is the memory of the GPU the real job runs on (the layout's
// GPU type), 0 when the spec table does not know it.
func jobGPUMiB(req Request) int64 {
	if spec, ok := stepmodel.SpecFor(req.Layout.GPU); ok {
		return spec.MemoryMiB
	}
	return 0
}
