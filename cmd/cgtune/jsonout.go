package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
)

// With --json, stderr carries one JSON object per line and nothing else:
// the search's events ({"event":"plan",...}), the notices cgtune prints
// before it ({"event":"notice","message":...}), the files it wrote
// ({"event":"wrote",...}) and the error it ends with ({"event":"error",...});
// stdout carries one object, headlessResult. docs/reference.md ("--json:
// the events and the result") documents the shape.

// jsonLine is one line of the --json stream: {"event":name, ...v's fields}.
func jsonLine(name string, v any) []byte {
	line := []byte(`{"event":` + quoteJSON(name))
	if b, err := json.Marshal(v); err == nil && len(b) > 2 && b[0] == '{' {
		line = append(append(line, ','), b[1:]...)
	} else {
		line = append(line, '}')
	}
	return append(line, '\n')
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// noticeEvent is a line cgtune says before the search (the engine it
// chose, that results are estimated, ...).
type noticeEvent struct {
	Message string `json:"message"`
}

// wroteEvent is a file cgtune wrote: the winner's overrides (--emit) or
// the report (--report) with its plot.
type wroteEvent struct {
	What    string `json:"what"` // overrides or report
	Path    string `json:"path"` // absolute
	Plot    string `json:"plot,omitempty"`
	Format  string `json:"format,omitempty"`
	MBridge string `json:"mbridge,omitempty"`
}

// errorEvent is the error cgtune exits with.
type errorEvent struct {
	Message  string `json:"message"`
	ExitCode int    `json:"exit_code"`
}

// notice prints a line for the person: "cgtune: ..." or a notice event.
func (p *progress) notice(msg string) {
	if p.json {
		p.w.Write(jsonLine("notice", noticeEvent{Message: msg}))
		return
	}
	fmt.Fprintln(p.w, "cgtune: "+msg)
}

// wrote says a file was written, with its absolute path.
func (p *progress) wrote(e wroteEvent) {
	if p.json {
		p.w.Write(jsonLine("wrote", e))
		return
	}
	switch {
	case e.What == "overrides":
		gen, _ := presets.ParseMBridge(e.MBridge)
		fmt.Fprintf(p.w, "wrote the winner's overrides (%s, MB %s, %s) to %s\n", e.Format, e.MBridge, gen, e.Path)
	case e.Plot != "":
		fmt.Fprintf(p.w, "wrote the report to %s and its plot to %s\n", e.Path, e.Plot)
	default:
		fmt.Fprintf(p.w, "wrote the report to %s (no candidate finished: no plot)\n", e.Path)
	}
}

// absPath is path made absolute for messages (as it was when the
// working folder cannot be read).
func absPath(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return path
}

// headlessResult is the --json object on stdout: the search's DoneEvent
// (ranking, winner, run folder, strategy, runs, notes), what was searched,
// and the winner's overrides, rendered in --format and as an object.
type headlessResult struct {
	search.DoneEvent
	// What was searched: the model, its layout (layout.gpu is the GPU
	// type, also as gpu_type), the Megatron-Bridge version and its API
	// generation, the engine, the job length and the tie band.
	Model      string            `json:"model"`
	Layout     presets.Layout    `json:"layout"`
	GPUType    string            `json:"gpu_type"`
	MBridge    string            `json:"mbridge"`
	Generation string            `json:"generation"`
	Engine     string            `json:"engine"`
	TrainIters int               `json:"train_iters"`
	Tie        string            `json:"tie"`
	Sets       map[string]string `json:"sets,omitempty"`
	// Overrides is the rendered text (as --emit writes it); OverridesObject
	// the same entries by section, e.g. {"model": {"cuda_graph_impl":
	// "local", ...}, "rng": {"te_rng_tracker": true}}.
	Overrides       string                    `json:"overrides,omitempty"`
	OverridesObject map[string]map[string]any `json:"overrides_object,omitempty"`
	// OverridesWhy says, by dotted key, why an override is there;
	// OverridesNotes are the lines that go with the overrides (the
	// reference, an estimate, what no recipe field can say).
	OverridesWhy   map[string]string `json:"overrides_why,omitempty"`
	OverridesNotes []string          `json:"overrides_notes,omitempty"`
	Format         string            `json:"format"`
	Emitted        string            `json:"emitted,omitempty"` // the absolute path --emit wrote
	// ReferenceText says what the recipe ships and how the winner
	// compares with it (the reference object has the figures).
	ReferenceText string `json:"reference_text,omitempty"`
	// KeepReference is set when the winner is the reference: keep the
	// recipe's setting, nothing beats it beyond noise (the overrides
	// restate it).
	KeepReference bool `json:"keep_reference,omitempty"`
	// Basis says what the figures rest on when they are estimated or
	// emulated: the framework profile the host costs come from (where it
	// was measured), or that graph gains are a lower bound without one,
	// and what a GPU run would add (search.Basis).
	Basis string `json:"basis,omitempty"`
	// OneTie says that every candidate lies within one tie band of the
	// others (search.OneTie).
	OneTie string `json:"one_tie,omitempty"`
	// DropsTokens says that the overrides make the recipe's dropless
	// experts drop-and-pad: tokens over an expert's capacity are dropped,
	// a change to training, with the speed-up it was ranked at.
	DropsTokens string `json:"drops_tokens,omitempty"`
}

// overridesObject is o's entries by section: the dotted key's first part
// is the section, the rest the field.
func overridesObject(o *recipe.Overrides) map[string]map[string]any {
	if o == nil {
		return nil
	}
	out := map[string]map[string]any{}
	for _, e := range o.Entries {
		section, field, ok := strings.Cut(e.Key, ".")
		if !ok {
			section, field = "", e.Key
		}
		if out[section] == nil {
			out[section] = map[string]any{}
		}
		out[section][field] = e.Value
	}
	return out
}

// overridesWhy is o's reasons by dotted key.
func overridesWhy(o *recipe.Overrides) map[string]string {
	if o == nil {
		return nil
	}
	out := map[string]string{}
	for _, e := range o.Entries {
		if e.Why != "" {
			out[e.Key] = e.Why
		}
	}
	return out
}

// newHeadlessResult describes the finished search d of cfg.
func (f *rootFlags) newHeadlessResult(d search.DoneEvent, cfg search.Config, rendered []byte, o *recipe.Overrides, emitted bool) headlessResult {
	gen, _ := presets.ParseMBridge(cfg.MBridge)
	r := headlessResult{
		DoneEvent: d, Model: cfg.Model.Name, Layout: cfg.Layout, GPUType: cfg.Layout.GPU,
		MBridge: cfg.MBridge, Generation: gen.String(), Engine: f.engine,
		TrainIters: cfg.TrainIters, Tie: tieFlag(cfg.Tie), Sets: cfg.Sets,
		Overrides: string(rendered), OverridesObject: overridesObject(o), OverridesWhy: overridesWhy(o), Format: f.format,
		ReferenceText: d.Reference.Describe(d.Winner),
		KeepReference: d.Reference.Won(d.Winner),
		Basis:         search.Basis(d.Ranking),
		OneTie:        search.OneTie(d.Ranking),
	}
	if o != nil {
		r.OverridesNotes, r.DropsTokens = o.Notes, o.DropsTokens
	}
	if emitted {
		r.Emitted = absPath(f.emit)
	}
	return r
}

// tieFlag is a tie band as --tie takes it: "0%" for none, the default for
// an unset one.
func tieFlag(t float64) string {
	switch {
	case t < 0:
		return "0%"
	case t == 0:
		return search.FormatTie(search.DefaultTie)
	}
	return search.FormatTie(t)
}
