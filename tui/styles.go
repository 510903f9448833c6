package tui

import (
	"image/color"

	"charm.land/bubbles/v2/help"
	"charm.land/lipgloss/v2"

	"cgtune/engine"
)

// palette is every colour the TUI uses. Screens never name a colour: they
// use the Styles built from it, so a theme change is one edit here.
type palette struct {
	fg, muted, faint   color.Color
	accent, accentText color.Color
	ok, warn, err      color.Color
	info               color.Color
	estimateBg         color.Color
	estimateFg         color.Color
	border             color.Color
	barEmpty           color.Color
	selectBg           color.Color // behind the row under the cursor
	// Phases of the step chart: eager baseline, warm-up, capture, measured.
	phaseEager, phaseWarmup, phaseCapture, phaseMeasure color.Color
}

func newPalette(isDark bool) palette {
	ld := lipgloss.LightDark(isDark)
	c := lipgloss.Color
	return palette{
		fg:           ld(c("#1C1C1C"), c("#E4E4E4")),
		muted:        ld(c("#6C6C6C"), c("#9E9E9E")),
		faint:        ld(c("#B0B0B0"), c("#5F5F5F")),
		accent:       ld(c("#5A3FC0"), c("#9D86FF")),
		accentText:   ld(c("#FFFFFF"), c("#1C1C1C")),
		ok:           ld(c("#1E7F3C"), c("#5FD787")),
		warn:         ld(c("#9A6700"), c("#FFD75F")),
		err:          ld(c("#C0262D"), c("#FF6B6B")),
		info:         ld(c("#0B6E99"), c("#5FD7FF")),
		estimateBg:   ld(c("#9A6700"), c("#FFD75F")),
		estimateFg:   ld(c("#FFFFFF"), c("#1C1C1C")),
		border:       ld(c("#C6C6C6"), c("#4E4E4E")),
		barEmpty:     ld(c("#D0D0D0"), c("#3A3A3A")),
		selectBg:     ld(c("#E6E0FF"), c("#2F2A4F")),
		phaseEager:   ld(c("#8A8A8A"), c("#8A8A8A")),
		phaseWarmup:  ld(c("#9A6700"), c("#FFD75F")),
		phaseCapture: ld(c("#C0262D"), c("#FF8787")),
		phaseMeasure: ld(c("#5A3FC0"), c("#9D86FF")),
	}
}

// Styles is every style the TUI renders with, built once from the palette
// (or plain, for NO_COLOR) and carried in the frame the screens share
// (common), never global.
type Styles struct {
	// Plain is set when colour is off: affordances that colour alone would
	// carry (the current step, the cursor row) get a glyph instead.
	Plain bool

	App        lipgloss.Style // "cgtune" in the header
	Step       lipgloss.Style // a step of the breadcrumb not reached yet
	StepDone   lipgloss.Style // a step already passed
	StepActive lipgloss.Style // the current step
	Estimate   lipgloss.Style // the ESTIMATE badge
	Measured   lipgloss.Style // the MEASURED badge
	Rule       lipgloss.Style // horizontal separators

	Title  lipgloss.Style // section titles
	Label  lipgloss.Style // "Layers", "TP", ...
	Value  lipgloss.Style // values next to labels
	Muted  lipgloss.Style // secondary text
	Faint  lipgloss.Style // rejected candidates, unreachable things
	Accent lipgloss.Style
	OK     lipgloss.Style
	Warn   lipgloss.Style
	Err    lipgloss.Style
	Info   lipgloss.Style

	Header lipgloss.Style // table headers
	Cursor lipgloss.Style // the row or field under the cursor
	// Selected is laid over the row under the cursor in a list whose rows
	// carry their own colour (a candidate that will fail, one the rules
	// reject): bold on a highlight, the row's colour kept (CursorOn).
	Selected lipgloss.Style
	Focused  lipgloss.Style // title of the pane that has the keyboard
	Box      lipgloss.Style // bordered panels
	Prompt   lipgloss.Style // the one-line prompts (path, preset name)
	Status   lipgloss.Style
	StatusOK lipgloss.Style
	StatusEr lipgloss.Style

	BarFull, BarEmpty color.Color // progress bars and gauges; nil when plain
	Phase             map[engine.Phase]lipgloss.Style

	Help help.Styles
}

// NewStyles builds the styles for a dark or light background; noColor
// gives plain styles (https://no-color.org).
func NewStyles(isDark, noColor bool) Styles {
	if noColor {
		return plainStyles()
	}
	p := newPalette(isDark)
	n := lipgloss.NewStyle
	s := Styles{
		App:        n().Bold(true).Foreground(p.accent),
		Step:       n().Foreground(p.faint),
		StepDone:   n().Foreground(p.muted),
		StepActive: n().Bold(true).Foreground(p.accentText).Background(p.accent),
		Estimate:   n().Bold(true).Foreground(p.estimateFg).Background(p.estimateBg),
		Measured:   n().Bold(true).Foreground(p.accentText).Background(p.ok),
		Rule:       n().Foreground(p.border),
		Title:      n().Bold(true).Foreground(p.accent),
		Label:      n().Foreground(p.muted),
		Value:      n().Foreground(p.fg),
		Muted:      n().Foreground(p.muted),
		Faint:      n().Foreground(p.faint),
		Accent:     n().Foreground(p.accent),
		OK:         n().Foreground(p.ok),
		Warn:       n().Foreground(p.warn),
		Err:        n().Foreground(p.err),
		Info:       n().Foreground(p.info),
		Header:     n().Bold(true).Foreground(p.muted),
		Cursor:     n().Bold(true).Foreground(p.accent),
		Selected:   n().Bold(true).Background(p.selectBg),
		Focused:    n().Bold(true).Foreground(p.accent).Underline(true),
		Box:        n().Border(lipgloss.RoundedBorder()).BorderForeground(p.border).Padding(0, 1),
		Prompt:     n().Bold(true).Foreground(p.accent),
		Status:     n().Foreground(p.muted),
		StatusOK:   n().Foreground(p.ok),
		StatusEr:   n().Foreground(p.err).Bold(true),
		BarFull:    p.accent,
		BarEmpty:   p.barEmpty,
		Phase: map[engine.Phase]lipgloss.Style{
			engine.PhaseEager:   n().Foreground(p.phaseEager),
			engine.PhaseWarmup:  n().Foreground(p.phaseWarmup),
			engine.PhaseCapture: n().Foreground(p.phaseCapture),
			engine.PhaseMeasure: n().Foreground(p.phaseMeasure),
		},
	}
	s.Help = help.Styles{
		Ellipsis:       n().Foreground(p.faint),
		ShortKey:       n().Foreground(p.accent),
		ShortDesc:      n().Foreground(p.muted),
		ShortSeparator: n().Foreground(p.faint),
		FullKey:        n().Foreground(p.accent),
		FullDesc:       n().Foreground(p.muted),
		FullSeparator:  n().Foreground(p.faint),
	}
	return s
}

// plainStyles have no colour and no attributes, so NO_COLOR output (and
// the golden files) are plain text; borders stay, as they are characters.
func plainStyles() Styles {
	n := lipgloss.NewStyle()
	return Styles{
		Plain: true,
		App:   n, Step: n, StepDone: n, StepActive: n, Estimate: n, Measured: n, Rule: n,
		Title: n, Label: n, Value: n, Muted: n, Faint: n, Accent: n, OK: n, Warn: n, Err: n, Info: n,
		Header: n, Cursor: n, Selected: n, Focused: n, Prompt: n, Status: n, StatusOK: n, StatusEr: n,
		Box: n.Border(lipgloss.RoundedBorder()).Padding(0, 1),
		Phase: map[engine.Phase]lipgloss.Style{
			engine.PhaseEager: n, engine.PhaseWarmup: n, engine.PhaseCapture: n, engine.PhaseMeasure: n,
		},
		Help: help.Styles{Ellipsis: n, ShortKey: n, ShortDesc: n, ShortSeparator: n, FullKey: n, FullDesc: n, FullSeparator: n},
	}
}

// CursorOn is row's style for the row under the cursor: the row's own
// colour, bold on the selection highlight. Plain styles have no colour to
// carry it; their lists mark the row with a glyph instead.
func (s Styles) CursorOn(row lipgloss.Style) lipgloss.Style {
	if s.Plain {
		return row
	}
	return row.Inherit(s.Selected)
}

// Gauge is the style of a gauge's filled part at frac: the warning colours
// as it fills up.
func (s Styles) Gauge(frac float64) lipgloss.Style {
	switch {
	case s.Plain:
		return lipgloss.NewStyle()
	case frac >= 0.9:
		return s.Err
	case frac >= 0.7:
		return s.Warn
	}
	return lipgloss.NewStyle().Foreground(s.BarFull)
}

// GaugeEmpty is the style of a gauge's empty part.
func (s Styles) GaugeEmpty() lipgloss.Style { return lipgloss.NewStyle().Foreground(s.BarEmpty) }
