package report

import (
	"fmt"
	"image/color"
	"regexp"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/search"
)

// tiedInput is a search whose candidates lie within 0.3% of one another,
// the recipe's setting among them: steps of 29640–29730 ms, as the
// estimate gives a model whose candidates it cannot tell apart.
func tiedInput(t *testing.T) (Input, presets.Candidate) {
	in := input(t)
	ref := presets.Candidate{Impl: presets.ImplTE, Scopes: []string{"moe_router", "moe_preprocess"}, Warmup: 3}
	results := []engine.Result{
		result(presets.ImplTE, []string{"attn", "moe_router"}, 3, 29640, 0, 32, engine.SourceEstimated),
		result(ref.Impl, ref.Scopes, 3, 29700, 0, 32, engine.SourceEstimated),
		result(presets.ImplTE, []string{"attn"}, 3, 29730, 0, 32, engine.SourceEstimated),
	}
	for i := range results {
		results[i].Eager.Median = 29690
		results[i].Speedup = 29690 / results[i].Step.Median
	}
	rs := search.Rank(results, search.RankOptions{ReferenceKey: ref.Key()})
	in.Done.Ranking, in.Done.Winner, in.Engine = rs, search.Winner(rs), "estimate"
	for i := range rs {
		if rs[i].Result.Candidate.Key() == ref.Key() {
			r := rs[i]
			in.Done.Reference = &search.Reference{Candidate: ref, From: search.ReferenceFromRecipe, Ranked: &r}
		}
	}
	return in, ref
}

// The plot's axis is the speed-up over the recipe's setting, wide enough
// that a tie within 0.3% looks like one, and no point sits on its edge
// (where the row labels are).
func TestPlotAxisShowsATieAsATie(t *testing.T) {
	in, _ := tiedInput(t)
	rows := plotted(in.Done.Ranking)
	p, err := speedupPlot(in, rows, rowNames(in, rows), in.Done.Winner.Result.Candidate.Key())
	if err != nil {
		t.Fatal(err)
	}
	base := in.Done.Reference.Ranked.Result.Step.Median
	span := p.X.Max - p.X.Min
	lo, hi := 2.0, 0.0
	for _, r := range rows {
		x := base / r.Result.Step.Median
		lo, hi = min(lo, x), max(hi, x)
		if x-p.X.Min < span/20 || p.X.Max-x < span/20 {
			t.Errorf("%s at %.4f sits on the axis's edge [%.4f, %.4f]", r.Result.Candidate.Name(), x, p.X.Min, p.X.Max)
		}
	}
	if p.X.Min > 1 || p.X.Max < 1 || (hi-lo)/span > 0.25 {
		t.Errorf("axis [%.4f, %.4f] for speed-ups %.4f–%.4f: it must hold the recipe's 1.00 and show a 0.3%% spread as small", p.X.Min, p.X.Max, lo, hi)
	}
	if !strings.Contains(p.Title.Text, "peed-up over the recipe's setting") || !strings.Contains(p.X.Label.Text, "× the recipe's setting, te moe_router,moe_preprocess w3") {
		t.Errorf("title %q, caption %q", p.Title.Text, p.X.Label.Text)
	}
}

// The plot draws the winner's tie band and the recipe's setting, and its
// row labels, beside the axis, mark the winner and the recipe's row.
func TestPlotMarksTheRecipeTheWinnerAndTheTieBand(t *testing.T) {
	in, ref := tiedInput(t)
	rows := plotted(in.Done.Ranking)
	names := strings.Join(rowNames(in, rows), "\n")
	winner := in.Done.Winner.Result.Candidate.Name()
	if !strings.Contains(names, winner+"  #1  (winner)") || !regexp.MustCompile(regexp.QuoteMeta(ref.Name())+`  #\d+.*  \(the recipe's\)`).MatchString(names) {
		t.Errorf("row labels:\n%s", names)
	}
	p, err := speedupPlot(in, rows, rowNames(in, rows), in.Done.Winner.Result.Candidate.Key())
	if err != nil || !strings.Contains(p.X.Label.Text, "shaded: the winner's tie band") || !strings.Contains(p.X.Label.Text, "solid line: the recipe's") {
		t.Errorf("caption %q (%v)", p.X.Label.Text, err)
	}
	svg, err := Plot(in)
	band, line := svgColour(colTieBand), svgColour(colReference)
	if err != nil || !strings.Contains(string(svg), band) || !strings.Contains(string(svg), line) {
		t.Errorf("the plot draws no tie band (%s) or recipe line (%s): %v", band, line, err)
	}
	// Without the recipe's setting among the results, the speed-ups are
	// over eager, and no line claims to be the recipe's.
	in.Done.Reference = nil
	svg, err = Plot(in)
	if err != nil || strings.Contains(string(svg), line) || !strings.Contains(string(svg), "peed-up over eager") {
		t.Errorf("without a reference: %v", err)
	}
}

// svgColour is c as the SVG writes it.
func svgColour(c color.RGBA) string { return fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B) }

// The speed-up axis's labels are round steps, none read twice.
func TestRatioTicksReadApart(t *testing.T) {
	for _, r := range [][2]float64{{0.9786, 1.0231}, {0.5, 2.4}, {0.999, 1.0012}, {0.8, 1.6}} {
		ticks := ratioTicks{}.Ticks(r[0], r[1])
		seen := map[string]bool{}
		for _, tk := range ticks {
			if seen[tk.Label] || tk.Value < r[0] || tk.Value > r[1] {
				t.Errorf("%v: tick %q at %v", r, tk.Label, tk.Value)
			}
			seen[tk.Label] = true
		}
		if len(ticks) < 3 || len(ticks) > 7 {
			t.Errorf("%v: %d ticks", r, len(ticks))
		}
	}
}
