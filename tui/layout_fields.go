package tui

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"cgtune/presets"
	"cgtune/recipe"
)

// The layout editor's fields: the parallel layout and the recipe settings
// that decide how an MoE dispatches its tokens (the drop-and-pad capacity
// a "will fail" note recommends, the token dispatcher) and what is
// recomputed. They are edited on the selection's layout itself (its
// Dispatcher and recompute fields, the capacity settings in its Settings),
// so they reach the search, the saved preset and the report exactly as a
// layout does: the recipe is seeded from them before any --set.

// Recipe fields the editor keeps in Layout.Settings.
const (
	keyCapacity = "model.moe_expert_capacity_factor"
	keyPad      = "model.moe_pad_expert_input_to_capacity"
)

// LayoutSetKeys are the --set keys the layout editor shows and edits; the
// TUI applies their --set values to the layouts it selects (as edits)
// rather than letting them override what the person sets on screen.
var LayoutSetKeys = []string{keyCapacity, keyPad, "model.moe_token_dispatcher_type", "model.recompute_granularity", "model.recompute_num_layers"}

// none is how a field with no value (no capacity factor, no VP) shows.
const none = "—"

// layoutField is one editable cell of the layout grid.
type layoutField struct {
	label string
	// value reads the field from a layout of the model, as shown; nil for
	// the cells that are not part of the layout (GPU type, MB version).
	value func(mod presets.Model, l presets.Layout) string
	// get is the value shown for the selection.
	get func(s *modelScreen) string
	// step changes the value by one notch (+1 or -1); an error says why
	// the field does not apply.
	step func(s *modelScreen, dir int) error
	// set takes typed text; nil for fields that are not typed. accepts
	// says which characters typing takes (digits, and a point for a
	// factor).
	set     func(s *modelScreen, text string) error
	accepts func(c byte) bool
	// carry copies the field from one layout to another, so an edit
	// survives a change of GPU type; nil for the GPU type and MB.
	carry func(dst, src *presets.Layout)
}

func digit(c byte) bool        { return c >= '0' && c <= '9' }
func digitOrPoint(c byte) bool { return digit(c) || c == '.' }

// layoutGrid is the editor's two columns, row by row: the parallel layout,
// then the MoE's dispatch on the left and recompute on the right.
func layoutGrid() [][2]layoutField {
	return [][2]layoutField{
		{
			{label: "GPU type", get: func(s *modelScreen) string { return s.sel.layout.GPU }, step: func(s *modelScreen, dir int) error { s.cycleGPUType(dir); return nil }},
			{label: "MB", get: func(s *modelScreen) string { return s.sel.mbridge }, step: func(s *modelScreen, _ int) error { s.toggleMBridge(); return nil }},
		},
		{
			intField("GPUs", func(l *presets.Layout) *int { return &l.NumGPUs }, 1, true),
			layoutValue(layoutField{label: "Precision",
				value: func(_ presets.Model, l presets.Layout) string { return l.Precision },
				step: func(s *modelScreen, dir int) error {
					s.sel.layout.Precision = nextIn(presets.Precisions(), s.sel.layout.Precision, dir)
					return nil
				},
				carry: func(dst, src *presets.Layout) { dst.Precision = src.Precision }}),
		},
		{
			intField("TP", func(l *presets.Layout) *int { return &l.TP }, 1, true),
			intField("PP", func(l *presets.Layout) *int { return &l.PP }, 1, true),
		},
		{
			intField("VP", func(l *presets.Layout) *int { return &l.VP }, 0, false),
			intField("CP", func(l *presets.Layout) *int { return &l.CP }, 1, true),
		},
		{
			intField("EP", func(l *presets.Layout) *int { return &l.EP }, 1, true),
			intField("MBS", func(l *presets.Layout) *int { return &l.MBS }, 1, true),
		},
		{
			intField("GBS", func(l *presets.Layout) *int { return &l.GBS }, 1, true),
			intField("Seq", func(l *presets.Layout) *int { return &l.Seq }, 1, true),
		},
		{dispatcherField(), recomputeField()},
		{capacityField(), recomputeLayersField()},
		{padField(), {}},
	}
}

// layoutValue fills get from value.
func layoutValue(f layoutField) layoutField {
	f.get = func(s *modelScreen) string { return f.value(s.sel.model, s.sel.layout) }
	return f
}

// intField edits an integer of the layout. Parallel degrees and sizes move
// in powers of two (what recipes use); VP moves by one, 0 meaning none.
func intField(label string, ptr func(*presets.Layout) *int, minV int, pow2 bool) layoutField {
	return layoutValue(layoutField{
		label: label,
		value: func(_ presets.Model, l presets.Layout) string {
			v := *ptr(&l)
			if label == "VP" && v == 0 {
				return none
			}
			if label != "VP" && v == 0 {
				v = 1 // unset degrees read as 1
			}
			return strconv.Itoa(v)
		},
		step: func(s *modelScreen, dir int) error {
			p := ptr(&s.sel.layout)
			v := max(*p, minV)
			switch {
			case pow2 && dir > 0:
				v *= 2
			case pow2:
				v /= 2
			default:
				v += dir
			}
			*p = max(v, minV)
			return nil
		},
		set: func(s *modelScreen, text string) error {
			v, err := strconv.Atoi(text)
			if err != nil {
				return fmt.Errorf("%q is not a whole number", text)
			}
			*ptr(&s.sel.layout) = v
			return nil
		},
		accepts: digit,
		carry:   func(dst, src *presets.Layout) { *ptr(dst) = *ptr(src) },
	})
}

// errDense is why the MoE fields do not apply.
func errDense(s *modelScreen) error {
	return fmt.Errorf("%s is dense: the MoE settings do not apply", s.sel.model.Name)
}

// dispatcherOf is the token dispatcher the recipe runs: the layout's, else
// alltoall, which the recipe takes for an MoE that names none.
func dispatcherOf(mod presets.Model, l presets.Layout) string {
	switch {
	case mod.Arch.MoE == nil:
		return none
	case l.Dispatcher != "":
		return l.Dispatcher
	}
	return "alltoall"
}

func dispatcherField() layoutField {
	return layoutValue(layoutField{label: "Dispatcher", value: dispatcherOf,
		step: func(s *modelScreen, dir int) error {
			if s.sel.model.Arch.MoE == nil {
				return errDense(s)
			}
			s.sel.layout.Dispatcher = nextIn(presets.Dispatchers(), dispatcherOf(s.sel.model, s.sel.layout), dir)
			return nil
		},
		carry: func(dst, src *presets.Layout) { dst.Dispatcher = src.Dispatcher }})
}

// setting is a recipe field of the layout's Settings, "" when unset (or
// null: MCore's None).
func setting(l presets.Layout, key string) string {
	v := strings.TrimSpace(l.Settings[key])
	if v == "null" || v == "None" {
		return ""
	}
	return v
}

// putSetting sets (or, with v "", unsets) a recipe field in the layout's
// own copy of Settings; a field the base layout sets is written as null
// to unset it, since leaving it out would bring the base's value back.
func putSetting(l *presets.Layout, base presets.Layout, key, v string) {
	l.Settings = maps.Clone(l.Settings)
	if l.Settings == nil {
		l.Settings = map[string]string{}
	}
	switch {
	case v != "":
		l.Settings[key] = v
	case setting(base, key) != "":
		l.Settings[key] = "null"
	default:
		delete(l.Settings, key)
	}
	if len(l.Settings) == 0 {
		l.Settings = nil
	}
}

func carrySetting(key string) func(dst, src *presets.Layout) {
	return func(dst, src *presets.Layout) {
		if v, ok := src.Settings[key]; ok {
			dst.Settings = maps.Clone(dst.Settings)
			if dst.Settings == nil {
				dst.Settings = map[string]string{}
			}
			dst.Settings[key] = v
		} else if _, ok := dst.Settings[key]; ok {
			dst.Settings = maps.Clone(dst.Settings)
			delete(dst.Settings, key)
		}
	}
}

// capacityChoices are the capacity factors +/- steps through ("" is none:
// dropless); any other factor can be typed.
var capacityChoices = []string{"", "1.0", "1.25", "1.5", "2.0", "4.0"}

// maxCapacityFactor bounds a typed capacity factor: an expert taking 64
// times its share of the tokens is already past any recipe.
const maxCapacityFactor = 64

func capacityField() layoutField {
	return layoutValue(layoutField{label: "Capacity",
		value: func(mod presets.Model, l presets.Layout) string {
			if v := setting(l, keyCapacity); v != "" && mod.Arch.MoE != nil {
				return v
			}
			return none
		},
		step: func(s *modelScreen, dir int) error {
			if s.sel.model.Arch.MoE == nil {
				return errDense(s)
			}
			putSetting(&s.sel.layout, s.sel.base, keyCapacity, nextIn(capacityChoices, setting(s.sel.layout, keyCapacity), dir))
			return nil
		},
		set: func(s *modelScreen, text string) error {
			if s.sel.model.Arch.MoE == nil {
				return errDense(s)
			}
			v, err := strconv.ParseFloat(text, 64)
			if err != nil || math.IsNaN(v) || v <= 0 || v > maxCapacityFactor {
				return fmt.Errorf("%q: want a factor above 0 and at most %d (- steps back to — for dropless)", text, maxCapacityFactor)
			}
			factor := strconv.FormatFloat(v, 'f', -1, 64)
			if !strings.Contains(factor, ".") {
				factor += ".0"
			}
			putSetting(&s.sel.layout, s.sel.base, keyCapacity, factor)
			return nil
		},
		accepts: digitOrPoint,
		carry:   carrySetting(keyCapacity),
	})
}

func padField() layoutField {
	return layoutValue(layoutField{label: "Pad",
		value: func(mod presets.Model, l presets.Layout) string {
			switch {
			case mod.Arch.MoE == nil:
				return none
			case setting(l, keyPad) == "true":
				return "on"
			}
			return "off"
		},
		step: func(s *modelScreen, _ int) error {
			if s.sel.model.Arch.MoE == nil {
				return errDense(s)
			}
			v := "true"
			if setting(s.sel.layout, keyPad) == "true" {
				v = "false"
				if setting(s.sel.base, keyPad) != "true" {
					v = "" // the default, as the base layout had it
				}
			}
			putSetting(&s.sel.layout, s.sel.base, keyPad, v)
			return nil
		},
		carry: carrySetting(keyPad),
	})
}

// recomputeOf is the recompute granularity the recipe runs.
func recomputeOf(l presets.Layout) string {
	switch {
	case l.FullRecompute():
		return "full"
	case l.RecomputeGranularity == "selective" || len(l.RecomputeModules) > 0:
		return "selective"
	}
	return "none"
}

func recomputeField() layoutField {
	return layoutValue(layoutField{label: "Recompute",
		value: func(_ presets.Model, l presets.Layout) string { return recomputeOf(l) },
		step: func(s *modelScreen, dir int) error {
			l := &s.sel.layout
			switch nextIn([]string{"none", "selective", "full"}, recomputeOf(*l), dir) {
			case "none":
				l.RecomputeGranularity, l.RecomputeModules, l.RecomputeLayers = "", nil, 0
			case "selective":
				// The base layout's modules when it recomputes selectively,
				// else MCore's default (core_attn).
				l.RecomputeGranularity, l.RecomputeLayers = "selective", 0
				l.RecomputeModules = nil
				if recomputeOf(s.sel.base) == "selective" {
					l.RecomputeModules = slices.Clone(s.sel.base.RecomputeModules)
				}
			case "full":
				// Full recompute needs recompute_num_layers (MCore
				// transformer_config.py): one layer per unit unless the
				// base layout says otherwise.
				l.RecomputeGranularity, l.RecomputeModules = "full", nil
				l.RecomputeLayers = 1
				if s.sel.base.FullRecompute() && s.sel.base.RecomputeLayers > 0 {
					l.RecomputeLayers = s.sel.base.RecomputeLayers
				}
			}
			return nil
		},
		carry: func(dst, src *presets.Layout) {
			dst.RecomputeGranularity, dst.RecomputeModules = src.RecomputeGranularity, slices.Clone(src.RecomputeModules)
			if !src.FullRecompute() {
				dst.RecomputeLayers = 0
			}
		},
	})
}

func recomputeLayersField() layoutField {
	errNotFull := errors.New("recompute layers are for a full recompute: set Recompute to full first")
	return layoutValue(layoutField{label: "Rc layers",
		value: func(_ presets.Model, l presets.Layout) string {
			if !l.FullRecompute() || l.RecomputeLayers == 0 {
				return none
			}
			return strconv.Itoa(l.RecomputeLayers)
		},
		step: func(s *modelScreen, dir int) error {
			if !s.sel.layout.FullRecompute() {
				return errNotFull
			}
			s.sel.layout.RecomputeLayers = max(s.sel.layout.RecomputeLayers+dir, 1)
			return nil
		},
		set: func(s *modelScreen, text string) error {
			if !s.sel.layout.FullRecompute() {
				return errNotFull
			}
			v, err := strconv.Atoi(text)
			if err != nil {
				return fmt.Errorf("%q is not a whole number", text)
			}
			s.sel.layout.RecomputeLayers = v
			return nil
		},
		accepts: digit,
		carry: func(dst, src *presets.Layout) {
			if src.FullRecompute() {
				dst.RecomputeLayers = src.RecomputeLayers
			}
		},
	})
}

// checkRecipe is the inline check of the settings the grid edits, beyond
// the layout's own validation: what Megatron-Core's TransformerConfig
// refuses (Megatron-LM megatron/core/transformer/transformer_config.py,
// core 0.20) and the recipe the search would build (a setting the rules'
// schema does not take).
func checkRecipe(mod presets.Model, l presets.Layout, mbridge string) error {
	if mod.Arch.MoE != nil && setting(l, keyPad) == "true" && setting(l, keyCapacity) == "" {
		return errors.New("Pad: moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity (set Capacity)")
	}
	if l.FullRecompute() {
		perStage := mod.Arch.Layers / l.PPSize()
		if l.RecomputeLayers < 1 || l.RecomputeLayers > perStage {
			return fmt.Errorf("Rc layers: with recompute full, recompute_num_layers must be between 1 and num_layers_per_pipeline_rank: %d", perStage)
		}
	}
	if _, err := recipe.New(mod, l, mbridge); err != nil {
		return err
	}
	return nil
}

// applyLayoutSets writes --set values of LayoutSetKeys into a layout, as
// the recipe would read them.
func applyLayoutSets(l *presets.Layout, base presets.Layout, sets map[string]string) {
	for _, k := range LayoutSetKeys {
		v, ok := sets[k]
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		null := v == "null" || v == "None" || v == ""
		switch k {
		case keyCapacity, keyPad:
			if null {
				v = ""
			}
			putSetting(l, base, k, v)
		case "model.moe_token_dispatcher_type":
			if !null {
				l.Dispatcher = v
			}
		case "model.recompute_granularity":
			l.RecomputeGranularity = v
			if null {
				l.RecomputeGranularity, l.RecomputeModules, l.RecomputeLayers = "", nil, 0
			}
		case "model.recompute_num_layers":
			l.RecomputeLayers = 0
			if n, err := strconv.Atoi(v); err == nil {
				l.RecomputeLayers = n
			}
		}
	}
}
