package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"cgtune/engine"
	"cgtune/search"
)

// Colours of the plot: measured and estimated figures differ, and the
// winner stands out.
var (
	colMeasured  = color.RGBA{R: 0x5A, G: 0x3F, B: 0xC0, A: 0xFF}
	colEstimated = color.RGBA{R: 0x9A, G: 0x67, B: 0x00, A: 0xFF}
	colWinner    = color.RGBA{R: 0x1E, G: 0x7F, B: 0x3C, A: 0xFF}
	colEager     = color.RGBA{R: 0x8A, G: 0x8A, B: 0x8A, A: 0xFF}
)

// maxPlotRows bounds the candidates plotted: past this many the labels no
// longer read, and the table has them all.
const maxPlotRows = 60

// Plot draws, side by side, each successful candidate's steady-state step
// time with its p10–p90 band (the eager step as a dashed line) and its
// graph memory at the job's scale, in ranking order (rank 1 on top), as
// SVG.
func Plot(in Input) ([]byte, error) {
	rows := plotted(in.Done.Ranking)
	if len(rows) == 0 {
		return nil, fmt.Errorf("no candidate finished: nothing to plot")
	}
	names := make([]string, len(rows))
	winner := ""
	if in.Done.Winner != nil {
		winner = in.Done.Winner.Result.Candidate.Key()
	}
	n := len(rows)
	for i, r := range rows {
		// NominalY puts the first name at the bottom: rank 1 goes last.
		names[n-1-i] = fmt.Sprintf("%s  #%d", r.Result.Candidate.Name(), r.Rank)
	}
	step, err := stepPlot(in, rows, names, winner)
	if err != nil {
		return nil, err
	}
	mem, err := memoryPlot(rows, winner)
	if err != nil {
		return nil, err
	}
	w := 11 * vg.Inch
	h := vg.Length(1.6+0.22*float64(n)) * vg.Inch
	c := vgsvg.New(w, h)
	drawSideBySide(draw.New(c), step, mem)
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// drawSideBySide draws two plots next to each other with aligned data
// areas, so a candidate's step and memory sit on one line.
func drawSideBySide(dc draw.Canvas, step, mem *plot.Plot) {
	canvases := layOut(dc, step, mem)
	step.Draw(canvases[0])
	mem.Draw(canvases[1])
}

// layOut places the two plots side by side and breaks each x-axis caption
// over lines that fit its plot's data area, where it is centred: a longer
// line would run into the next plot or off the page. The lines keep room
// for a wider font than the one measured: a viewer without Liberation
// Serif, the font the SVG names, draws the text in another.
func layOut(dc draw.Canvas, step, mem *plot.Plot) []draw.Canvas {
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 6, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	plots := []*plot.Plot{step, mem}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)[0]
	for i, p := range plots {
		area := p.DataCanvas(canvases[i])
		p.X.Label.Text = fitCaption(p.X.Label.TextStyle, p.X.Label.Text, (area.Max.X-area.Min.X)*captionRoom)
	}
	// Again: a caption over more lines takes more height.
	return plot.Align([][]*plot.Plot{plots}, tiles, dc)[0]
}

// captionRoom is the share of a data area's width a caption line takes
// in the font measured, leaving room for a substitute up to a sixth wider.
const captionRoom = 0.85

// fitCaption breaks each line of caption between words into lines at
// most width wide in style (a word wider than that stays whole).
func fitCaption(style text.Style, caption string, width vg.Length) string {
	var lines []string
	for _, line := range strings.Split(caption, "\n") {
		cur := ""
		for _, word := range strings.Fields(line) {
			switch {
			case cur == "":
				cur = word
			case style.Width(cur+" "+word) <= width:
				cur += " " + word
			default:
				lines = append(lines, cur)
				cur = word
			}
		}
		lines = append(lines, cur)
	}
	return strings.Join(lines, "\n")
}

// plotted are the ranked successes, at most maxPlotRows.
func plotted(rs []search.Ranked) []search.Ranked {
	var out []search.Ranked
	for _, r := range rs {
		if !r.Result.Failed() && len(out) < maxPlotRows {
			out = append(out, r)
		}
	}
	return out
}

// yOf is the row of ranked candidate i on the nominal axis.
func yOf(i, n int) float64 { return float64(n - 1 - i) }

func stepPlot(in Input, rows []search.Ranked, names []string, winner string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Steady-state step time (median, p10–p90)"
	if in.estimated() {
		p.Title.Text = "Estimated step time (an estimate has no spread)"
	}
	p.X.Label.Text = "ms per step"
	p.NominalY(names...)
	n := len(rows)
	for _, group := range []struct {
		col  color.Color
		keep func(search.Ranked) bool
	}{
		{colMeasured, func(r search.Ranked) bool {
			return r.Result.Source != engine.SourceEstimated && r.Result.Candidate.Key() != winner
		}},
		{colEstimated, func(r search.Ranked) bool {
			return r.Result.Source == engine.SourceEstimated && r.Result.Candidate.Key() != winner
		}},
		{colWinner, func(r search.Ranked) bool { return r.Result.Candidate.Key() == winner }},
	} {
		var pts plotter.XYs
		var errs plotter.XErrors
		for i, r := range rows {
			if !group.keep(r) {
				continue
			}
			s := r.Result.Step
			pts = append(pts, plotter.XY{X: s.Median, Y: yOf(i, n)})
			errs = append(errs, struct{ Low, High float64 }{Low: s.Median - s.P10, High: s.P90 - s.Median})
		}
		if len(pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Color = group.col
		sc.GlyphStyle.Radius = vg.Points(3)
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		eb, err := plotter.NewXErrorBars(struct {
			plotter.XYs
			plotter.XErrors
		}{pts, errs})
		if err != nil {
			return nil, err
		}
		eb.LineStyle.Color = group.col
		eb.CapWidth = vg.Points(6)
		p.Add(sc, eb)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		lo, hi = min(lo, r.Result.Step.P10, r.Result.Step.Median), max(hi, r.Result.Step.P90, r.Result.Step.Median)
	}
	if eager := eagerMs(rows); eager > 0 {
		line, err := plotter.NewLine(plotter.XYs{{X: eager, Y: -0.5}, {X: eager, Y: float64(n) - 0.5}})
		if err != nil {
			return nil, err
		}
		line.Color = colEager
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(line)
		p.X.Label.Text = fmt.Sprintf("ms per step\ndashed: eager, %.1f ms; green: the winner", eager)
		lo, hi = min(lo, eager), max(hi, eager)
	}
	pad := max((hi-lo)*0.06, hi*0.0005)
	p.X.Min, p.X.Max = lo-pad, hi+pad
	p.Y.Min, p.Y.Max = -0.5, float64(n)-0.5
	p.Add(plotter.NewGrid())
	return p, nil
}

// eagerMs is the eager step the candidates were compared with (the
// winner's baseline, else the first one's).
func eagerMs(rows []search.Ranked) float64 {
	for _, r := range rows {
		if r.Result.Eager.Median > 0 {
			return r.Result.Eager.Median
		}
	}
	return 0
}

func memoryPlot(rows []search.Ranked, winner string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Graph memory at the job's scale"
	p.X.Label.Text = "MiB"
	n := len(rows)
	measured, estimated, win := make(plotter.Values, n), make(plotter.Values, n), make(plotter.Values, n)
	most := 0.0
	for i, r := range rows {
		v := float64(r.Result.Memory.JobGraphMiB())
		most = max(most, v)
		switch {
		case r.Result.Candidate.Key() == winner:
			win[n-1-i] = v
		case r.Result.Source == engine.SourceEstimated:
			estimated[n-1-i] = v
		default:
			measured[n-1-i] = v
		}
	}
	for _, b := range []struct {
		v   plotter.Values
		col color.Color
	}{{measured, colMeasured}, {estimated, colEstimated}, {win, colWinner}} {
		bars, err := plotter.NewBarChart(b.v, vg.Points(9))
		if err != nil {
			return nil, err
		}
		bars.Horizontal = true
		bars.Color = b.col
		bars.LineStyle.Width = 0
		p.Add(bars)
	}
	p.HideY()
	p.Y.Min, p.Y.Max = -0.5, float64(n)-0.5
	p.X.Min, p.X.Max = 0, max(most*1.05, 1)
	p.Add(plotter.NewGrid())
	return p, nil
}
