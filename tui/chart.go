package tui

import (
	"fmt"
	"strings"

	"charm.land/lipgloss/v2"

	"cgtune/engine"
)

// The run screen's step chart: the step times of one candidate as bars,
// the range on the left and a strip of phase letters under them.

// legend names the phase letters of the chart's strip; an estimate's
// steady steps (m) are computed, not measured.
func (c stepChart) legend() string {
	if c.estimate {
		return "e eager · w warm-up · c capture · m estimated"
	}
	return "e eager · w warm-up · c capture · m measured"
}

// chartAxisW is the width of the chart's value axis.
const chartAxisW = 8

// stepChart is what the chart shows: the samples of a candidate on a GPU.
type stepChart struct {
	run  *liveRun // nil, or without samples: waiting for the first step
	gpu  int
	what string // what the samples are: "step time", "previous candidate", ...
	// estimate: the samples are the estimate engine's, computed.
	estimate bool
}

func (c stepChart) samples() []engine.StepSample {
	if c.run == nil {
		return nil
	}
	return c.run.samples
}

// extraLines is 1 when the legend does not fit beside the phase strip
// and takes a line of its own.
func (c stepChart) extraLines(w int) int {
	if c.legendApart(w) {
		return 1
	}
	return 0
}

func (c stepChart) legendApart(w int) bool {
	n := len(c.samples())
	plotW := max(w-chartAxisW, 4)
	bw := min(max(plotW/max(min(n, plotW), 1), 1), 3)
	return chartAxisW+min(n, plotW)*bw+2+len([]rune(c.legend())) > w
}

// lines draws the chart w wide: a title, h rows of bars with the range on
// the left, and a strip of phase letters (e eager, w warm-up, c capture,
// m the steady steps) so the chart reads without colour too. The capture step is
// off the scale: it is many steps long, and on the same scale the
// step-to-step variation would not show.
func (c stepChart) lines(st Styles, w, h int) []string {
	if len(c.samples()) == 0 {
		lines := []string{st.Title.Render("Step time") + "  " + st.Faint.Render("waiting for the first step…")}
		for range h + 1 + c.extraLines(w) {
			lines = append(lines, "")
		}
		return lines
	}
	plotW := max(w-chartAxisW, 4)
	shown := c.run.samples
	if len(shown) > plotW {
		shown = shown[len(shown)-plotW:]
	}
	// Few samples get wider bars, so a short run still reads as a chart.
	bw := min(max(plotW/max(len(shown), 1), 1), 3)
	sc := chartScaleOf(shown)
	vals, phases := chartColumns(shown, bw, sc.hi)
	lines := []string{truncate(c.title(st, sc), w)}
	lines = append(lines, chartRows(st, vals, phases, plotW, h, sc)...)
	return append(lines, c.strip(st, phases, w)...)
}

// chartScale is the range the bars are drawn over: the samples' but the
// capture's, which the title gives.
type chartScale struct {
	lo, hi  float64
	capture float64 // the longest capture step, 0 when none is shown
	scaled  int     // the samples on the scale
}

func chartScaleOf(shown []engine.StepSample) chartScale {
	var sc chartScale
	for _, x := range shown {
		if x.Phase == engine.PhaseCapture {
			sc.capture = max(sc.capture, x.StepMs)
			continue
		}
		if sc.scaled == 0 {
			sc.lo, sc.hi = x.StepMs, x.StepMs
		}
		sc.lo, sc.hi = min(sc.lo, x.StepMs), max(sc.hi, x.StepMs)
		sc.scaled++
	}
	if sc.scaled == 0 {
		sc.lo, sc.hi = sc.capture, sc.capture
	}
	return sc
}

// chartColumns are the bars' values and phases, bw columns per sample.
func chartColumns(shown []engine.StepSample, bw int, hi float64) (vals []float64, phases []engine.Phase) {
	vals = make([]float64, 0, len(shown)*bw)
	phases = make([]engine.Phase, 0, len(shown)*bw)
	for _, x := range shown {
		v := x.StepMs
		if x.Phase == engine.PhaseCapture {
			v = hi // drawn full height, its value is in the title
		}
		for range bw {
			vals = append(vals, v)
			phases = append(phases, x.Phase)
		}
	}
	return vals, phases
}

func (c stepChart) title(st Styles, sc chartScale) string {
	last := c.run.samples[len(c.run.samples)-1]
	info := fmt.Sprintf("%s on GPU %d · %s · last %s ms", c.run.cand.Name(), c.gpu, c.what, fmtMs(last.StepMs))
	if sc.capture > 0 && sc.scaled > 0 {
		info += fmt.Sprintf(" · capture %s ms, off the scale", fmtMs(sc.capture))
	}
	return st.Title.Render("Step time") + "  " + st.Muted.Render(info)
}

// chartRows are the h rows of bars, the top and bottom of the range on
// the axis.
func chartRows(st Styles, vals []float64, phases []engine.Phase, plotW, h int, sc chartScale) []string {
	phaseStyle := func(i int) lipgloss.Style { return st.Phase[phases[i]] }
	bars := barChart(vals, plotW, h, phaseStyle)
	lines := make([]string, 0, len(bars))
	for i, b := range bars {
		axis := ""
		switch i {
		case 0:
			axis = fmtMs(sc.hi)
		case len(bars) - 1:
			axis = fmtMs(sc.lo)
		}
		lines = append(lines, st.Faint.Render(padLeft(axis, chartAxisW-2)+" ┤")+b)
	}
	return lines
}

// strip is the phase letters under the bars, and the legend beside them
// or under them.
func (c stepChart) strip(st Styles, phases []engine.Phase, w int) []string {
	var strip strings.Builder
	for _, p := range phases {
		letter := "?"
		if p != "" {
			letter = string(p)[:1]
		}
		strip.WriteString(st.Phase[p].Render(letter))
	}
	stripLine := st.Faint.Render(padLeft("", chartAxisW-2)+"  ") + strip.String()
	if c.legendApart(w) {
		return []string{truncate(stripLine, w), st.Faint.Render(truncate(padLeft("", chartAxisW)+c.legend(), w))}
	}
	return []string{stripLine + st.Faint.Render("  "+c.legend())}
}
