package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"
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

// Colours of the plot: measured and estimated figures differ, the winner
// stands out, the recipe's setting is a dark line and the tie band a pale
// strip under the points.
var (
	colMeasured  = color.RGBA{R: 0x5A, G: 0x3F, B: 0xC0, A: 0xFF}
	colEstimated = color.RGBA{R: 0x9A, G: 0x67, B: 0x00, A: 0xFF}
	colWinner    = color.RGBA{R: 0x1E, G: 0x7F, B: 0x3C, A: 0xFF}
	colEager     = color.RGBA{R: 0x8A, G: 0x8A, B: 0x8A, A: 0xFF}
	colReference = color.RGBA{R: 0x30, G: 0x30, B: 0x30, A: 0xFF}
	colTieBand   = color.RGBA{R: 0xD5, G: 0xEE, B: 0xD9, A: 0xFF}
)

// maxPlotRows bounds the candidates plotted: past this many the labels no
// longer read, and the table has them all.
const maxPlotRows = 60

// Plot draws, side by side, each successful candidate's speed-up over
// the recipe's setting with its p10–p90 band (speedupPlot) and its graph
// memory at the job's scale, in ranking order (rank 1 on top), as SVG.
// The names are the rows' labels, beside the axis: none sits on a point.
func Plot(in Input) ([]byte, error) {
	rows := plotted(in.Done.Ranking)
	if len(rows) == 0 {
		return nil, fmt.Errorf("no candidate finished: nothing to plot")
	}
	winner := ""
	if in.Done.Winner != nil {
		winner = in.Done.Winner.Result.Candidate.Key()
	}
	step, err := speedupPlot(in, rows, rowNames(in, rows), winner)
	if err != nil {
		return nil, err
	}
	mem, err := memoryPlot(rows, winner)
	if err != nil {
		return nil, err
	}
	w := 11 * vg.Inch
	h := vg.Length(2.6+0.22*float64(len(rows))) * vg.Inch
	c := vgsvg.New(w, h)
	drawSideBySide(draw.New(c), step, mem)
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// rowNames label the plot's rows (the nominal axis puts the first at the
// bottom: rank 1 goes last), marking the winner, the recipe's setting and
// what does not fit the job's GPU.
func rowNames(in Input, rows []search.Ranked) []string {
	n := len(rows)
	names := make([]string, n)
	for i, r := range rows {
		name := fmt.Sprintf("%s  #%d", r.Result.Candidate.Name(), r.Rank)
		if w := in.Done.Winner; w != nil && w.Result.Candidate.Key() == r.Result.Candidate.Key() {
			name += "  (winner)"
		}
		if ref := in.Done.ReferenceKey(); ref != "" && ref == r.Result.Candidate.Key() {
			name += "  (the recipe's)"
		}
		if !r.Fits {
			name += "  (does not fit)"
		}
		names[n-1-i] = name
	}
	return names
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
	captions := []string{step.X.Label.Text, mem.X.Label.Text}
	// A caption over more lines takes more height, which can narrow the
	// data area: fit the captions again until their lines stay the same.
	for range 4 {
		canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)[0]
		same := true
		for i, p := range plots {
			area := p.DataCanvas(canvases[i])
			fitted := fitCaption(p.X.Label.TextStyle, captions[i], (area.Max.X-area.Min.X)*captionRoom)
			same = same && fitted == p.X.Label.Text
			p.X.Label.Text = fitted
		}
		if same {
			return canvases
		}
	}
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

// speedBase is what speed-ups are taken against: the recipe's setting
// when it finished (its step time), else eager; and how to name it.
func speedBase(in Input, rows []search.Ranked) (ms float64, name string) {
	if ref := in.Done.Reference; ref != nil && ref.Ranked != nil && !ref.Ranked.Result.Failed() && ref.Ranked.Result.Step.Median > 0 {
		return ref.Ranked.Result.Step.Median, "the recipe's setting, " + ref.Candidate.Name()
	}
	return eagerMs(rows), "eager"
}

// minSpan is the least share of the base the speed-up axis spans: a tie
// within noise (a few tenths of a percent) then looks like one, not like
// the gap an axis fitted to the points would draw.
const minSpan = 0.04

// axisRange is the speed-up axis over values xs (points, bands, lines):
// at least minSpan wide around them, with a margin on each side so that
// no point sits on the axis or its labels.
func axisRange(xs []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	if span := hi - lo; span < minSpan {
		mid := (lo + hi) / 2
		lo, hi = mid-minSpan/2, mid+minSpan/2
	}
	pad := (hi - lo) * 0.08
	return lo - pad, hi + pad
}

// tieBand is the winner's tie band in step time: the fastest of its tie
// group and the band around it, or, when it is tied with none, its own
// step and the search's tie band around that; ok is false without a
// winner or a band.
func tieBand(in Input) (center, band float64, ok bool) {
	w := in.Done.Winner
	if w == nil {
		return 0, 0, false
	}
	if w.Tie > 0 && w.TieBandMs > 0 {
		lead, _ := search.TieLeader(in.Done.Ranking, w.Tie)
		return lead.Result.Step.Median, w.TieBandMs, true
	}
	frac := in.Tie
	switch {
	case frac < 0:
		return 0, 0, false
	case frac == 0:
		frac = search.DefaultTie
	}
	return w.Result.Step.Median, frac * w.Result.Step.Median, true
}

// speedupPlot draws each candidate's speed-up over the base (speedBase:
// its step time over the candidate's, right is faster) with its p10–p90
// band, the winner in green, the recipe's setting as a solid line at 1,
// eager as a dashed one and the winner's tie band shaded.
func speedupPlot(in Input, rows []search.Ranked, names []string, winner string) (*plot.Plot, error) {
	base, baseName := speedBase(in, rows)
	if base <= 0 {
		return nil, fmt.Errorf("no step time to compare the candidates with")
	}
	p := plot.New()
	what := "the recipe's setting"
	if baseName == "eager" {
		what = "eager"
	}
	p.Title.Text = "Speed-up over " + what + " (median, p10–p90)"
	if in.estimated() {
		p.Title.Text = "Estimated speed-up over " + what
	}
	p.NominalY(names...)
	n := len(rows)
	var xs []float64
	caption := []string{fmt.Sprintf("× %s (right is faster)", baseName)}
	var legend []string
	if c, b, ok := tieBand(in); ok && c-b > 0 {
		lo, hi := base/(c+b), base/(c-b)
		band, err := plotter.NewPolygon(plotter.XYs{{X: lo, Y: -0.5}, {X: hi, Y: -0.5}, {X: hi, Y: float64(n) - 0.5}, {X: lo, Y: float64(n) - 0.5}})
		if err != nil {
			return nil, err
		}
		band.Color, band.LineStyle.Width = colTieBand, 0
		p.Add(band)
		xs = append(xs, lo, hi)
		legend = append(legend, fmt.Sprintf("shaded: the winner's tie band, ±%.2f ms", b))
	}
	pxs, err := addSpeedupPoints(p, rows, base, winner)
	if err != nil {
		return nil, err
	}
	xs = append(xs, pxs...)
	if baseName != "eager" {
		line, err := vLine(1, n, colReference, nil)
		if err != nil {
			return nil, err
		}
		p.Add(line)
		xs = append(xs, 1)
		legend = append(legend, "solid line: the recipe's")
	}
	if eager := eagerMs(rows); eager > 0 {
		line, err := vLine(base/eager, n, colEager, []vg.Length{vg.Points(4), vg.Points(3)})
		if err != nil {
			return nil, err
		}
		p.Add(line)
		xs = append(xs, base/eager)
		legend = append(legend, fmt.Sprintf("dashed: eager, %.1f ms", eager))
	}
	p.X.Label.Text = strings.Join(append(caption, strings.Join(append(legend, "green: the winner"), "; ")), "\n")
	p.X.Min, p.X.Max = axisRange(xs)
	p.X.Tick.Marker = ratioTicks{}
	p.Y.Min, p.Y.Max = -0.5, float64(n)-0.5
	p.Add(plotter.NewGrid())
	return p, nil
}

// addPoints adds points with their error bars in col, larger for the
// winner.
func addPoints(p *plot.Plot, pts plotter.XYs, errs plotter.XErrors, col color.Color, big bool) error {
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return err
	}
	sc.GlyphStyle.Color = col
	sc.GlyphStyle.Radius = vg.Points(3)
	if big {
		sc.GlyphStyle.Radius = vg.Points(4.5)
	}
	sc.GlyphStyle.Shape = draw.CircleGlyph{}
	eb, err := plotter.NewXErrorBars(struct {
		plotter.XYs
		plotter.XErrors
	}{pts, errs})
	if err != nil {
		return err
	}
	eb.LineStyle.Color = col
	eb.CapWidth = vg.Points(6)
	p.Add(sc, eb)
	return nil
}

// vLine is a vertical line at x across the plot's n rows.
func vLine(x float64, n int, col color.Color, dashes []vg.Length) (*plotter.Line, error) {
	line, err := plotter.NewLine(plotter.XYs{{X: x, Y: -0.5}, {X: x, Y: float64(n) - 0.5}})
	if err != nil {
		return nil, err
	}
	line.Color, line.Dashes = col, dashes
	return line, nil
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

// ratioTicks marks a speed-up axis at round steps (1, 2 or 5 times a
// power of ten), about five of them, each labelled with as many decimals
// as the step needs, so that no two labels read the same.
type ratioTicks struct{}

func (ratioTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return nil
	}
	step := math.Pow(10, math.Floor(math.Log10((hi-lo)/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if (hi-lo)/(step*m) <= 6 {
			step *= m
			break
		}
	}
	decimals := max(0, int(math.Ceil(-math.Log10(step)-1e-9)))
	var ticks []plot.Tick
	for x := math.Ceil(lo/step) * step; x <= hi+step*1e-9; x += step {
		ticks = append(ticks, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', decimals, 64) + "×"})
	}
	return ticks
}

// addSpeedupPoints adds each candidate's speed-up over base with its
// p10–p90 whiskers, in its group's colour (measured, estimated, the
// winner), and returns the x values the axis must hold.
func addSpeedupPoints(p *plot.Plot, rows []search.Ranked, base float64, winner string) ([]float64, error) {
	n := len(rows)
	var xs []float64
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
			x, slow, fast := base/s.Median, base/max(s.P90, s.Median), base/max(min(s.P10, s.Median), 1e-9)
			pts = append(pts, plotter.XY{X: x, Y: yOf(i, n)})
			errs = append(errs, struct{ Low, High float64 }{Low: x - slow, High: fast - x})
			xs = append(xs, slow, fast)
		}
		if len(pts) == 0 {
			continue
		}
		if err := addPoints(p, pts, errs, group.col, group.col == colWinner); err != nil {
			return nil, err
		}
	}
	return xs, nil
}
