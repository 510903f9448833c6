package search

import (
	"math"
	"slices"
	"strings"
	"testing"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// res builds a successful result with a tight p10–p90 band.
func res(impl string, scopes []string, warmup int, stepMs float64, graphMiB int64) engine.Result {
	return engine.Result{
		Candidate: presets.Candidate{Impl: impl, Scopes: scopes, Warmup: warmup},
		Source:    engine.SourceMeasured,
		Step:      stepmodel.Stats{Median: stepMs, P10: stepMs * 0.999, P90: stepMs * 1.001, N: 8},
		Eager:     stepmodel.Stats{Median: 1000, P10: 999, P90: 1001, N: 5},
		CaptureMs: 100,
		Memory:    engine.Memory{DevicePeakMiB: 10000 + graphMiB, GraphMiB: graphMiB, GraphFullJobMiB: graphMiB},
	}
}

func order(rs []Ranked) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Result.Candidate.Key())
	}
	return out
}

func TestRankFasterWinsOutsideNoise(t *testing.T) {
	rs := Rank([]engine.Result{
		res(presets.ImplNone, nil, 3, 1000, 0),
		res(presets.ImplTE, []string{"attn"}, 3, 970, 4000), // 3 % faster: not noise
	}, RankOptions{})
	if got := order(rs); got[0] != "transformer_engine/attn/w3" {
		t.Errorf("order %v: the clearly faster candidate must win despite its memory", got)
	}
	if rs[0].Rank != 1 || rs[1].Rank != 2 || rs[0].Note != "" {
		t.Errorf("ranks %d %d, note %q", rs[0].Rank, rs[1].Rank, rs[0].Note)
	}
}

func TestRankTieBreaks(t *testing.T) {
	// Within 1 %: less graph memory first, whatever the step time.
	rs := Rank([]engine.Result{
		res(presets.ImplTE, []string{"attn"}, 3, 995, 4000),
		res(presets.ImplLocal, []string{"full_iteration"}, 3, 1000, 300),
	}, RankOptions{})
	if got := order(rs); got[0] != "local/full_iteration/w3" {
		t.Fatalf("order %v: less graph memory must win a tie", got)
	}
	if !strings.Contains(rs[0].Note, "less graph memory") || !strings.Contains(rs[1].Note, "tied with full_iteration w3 within noise") {
		t.Errorf("notes %q / %q", rs[0].Note, rs[1].Note)
	}

	// Same memory (within 5 %): fewer scopes, then none < te < local.
	rs = Rank([]engine.Result{
		res(presets.ImplLocal, []string{"attn"}, 3, 1000, 4000),
		res(presets.ImplTE, []string{"attn", "mlp"}, 3, 996, 4010),
		res(presets.ImplTE, []string{"attn"}, 3, 1001, 4001),
	}, RankOptions{})
	want := []string{"transformer_engine/attn/w3", "local/attn/w3", "transformer_engine/attn,mlp/w3"}
	if got := order(rs); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("order %v, want %v", got, want)
	}
	if !strings.Contains(rs[1].Note, "simpler impl") || !strings.Contains(rs[2].Note, "fewer scopes") {
		t.Errorf("notes %q / %q", rs[1].Note, rs[2].Note)
	}

	// A wide p10–p90 band widens the tie beyond 1 %.
	noisy := res(presets.ImplTE, []string{"attn"}, 3, 960, 4000)
	noisy.Step.P10, noisy.Step.P90 = 900, 1050
	rs = Rank([]engine.Result{noisy, res(presets.ImplNone, nil, 3, 1000, 0)}, RankOptions{})
	if got := order(rs); got[0] != "none/-/w3" {
		t.Errorf("order %v: a 4 %% gain inside a 15 %% spread is noise", got)
	}

	// A long tail above eager's median (one slow step) does not tie it
	// with a graph whose every p10–p90 value is faster than eager's p10.
	graphed := res(presets.ImplLocal, []string{}, 1, 209.9, 15620)
	graphed.Step.P10, graphed.Step.P90 = 208.9, 211.3
	eager := res(presets.ImplNone, nil, 0, 216.4, 0)
	eager.Step.P10, eager.Step.P90 = 213.5, 243.8
	rs = Rank([]engine.Result{eager, graphed}, RankOptions{})
	if got := order(rs); got[0] != "local/layer/w1" || rs[0].Tie != 0 {
		t.Errorf("order %v (tie %d): separate p10–p90 ranges 3 %% apart are not noise", got, rs[0].Tie)
	}
	// The same medians tie once eager's range reaches down into the graph's.
	eager.Step.P10 = 211
	rs = Rank([]engine.Result{eager, graphed}, RankOptions{})
	if got := order(rs); got[0] != "none/-/w0" {
		t.Errorf("order %v: overlapping p10–p90 ranges tie, and none takes no graph memory", got)
	}
}

// Warm-ups only change the job time, which decides between otherwise
// equal candidates: here the graphed step is faster than eager, so fewer
// eager warm-up steps make the shorter job.
func TestRankWarmupByJobTime(t *testing.T) {
	var rs []engine.Result
	for _, w := range []int{3, 1, 2} {
		rs = append(rs, res(presets.ImplTE, []string{"attn"}, w, 900, 4000))
	}
	ranked := Rank(rs, RankOptions{TrainIters: 50})
	if got := order(ranked); got[0] != "transformer_engine/attn/w1" || got[2] != "transformer_engine/attn/w3" {
		t.Errorf("order %v", got)
	}
	// JobMs = warm-up × eager + capture + (iters − warm-up) × step.
	if want := 1*1000 + 100 + 49*900.0; ranked[0].JobMs != want {
		t.Errorf("JobMs %v, want %v", ranked[0].JobMs, want)
	}
	none := res(presets.ImplNone, nil, 3, 1000, 0)
	if got := JobMs(none, 50); got != 50*1000 {
		t.Errorf("none JobMs %v", got)
	}
}

// Candidates that would not fit the job's GPU rank after those that do,
// with the reason; the winner is the best that fits; failures come last,
// unranked, with their error.
func TestRankMemoryFitAndFailures(t *testing.T) {
	big := res(presets.ImplLocal, []string{"full_iteration"}, 3, 800, 2000)
	big.Memory.GraphFullJobMiB = 75000 // the job captures many more micro-batches than the run
	failed := res(presets.ImplTE, []string{}, 3, 0, 0)
	failed.Err, failed.ErrKind = "capture failed: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", engine.FailureCapture
	ok := res(presets.ImplTE, []string{"attn"}, 3, 950, 4000)
	rs := Rank([]engine.Result{failed, big, ok}, RankOptions{JobGPUMemoryMiB: 80000})
	want := []string{"transformer_engine/attn/w3", "local/full_iteration/w3", "transformer_engine/layer/w3"}
	if got := order(rs); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("order %v, want %v", got, want)
	}
	if !rs[0].Fits || rs[1].Fits || !strings.Contains(rs[1].Note, "needs 85000 MiB in the job, more than the GPU's 80000 MiB") {
		t.Errorf("fits %v %v, note %q", rs[0].Fits, rs[1].Fits, rs[1].Note)
	}
	if JobPeakMiB(big) != 10000+75000 {
		t.Errorf("job peak %d", JobPeakMiB(big))
	}
	if rs[2].Rank != 0 || rs[2].Result.Err == "" {
		t.Errorf("failed candidate: rank %d, err %q", rs[2].Rank, rs[2].Result.Err)
	}
	if w := Winner(rs); w == nil || w.Result.Candidate.Key() != "transformer_engine/attn/w3" {
		t.Errorf("winner %v", w)
	}
	if w := Winner(Rank([]engine.Result{failed}, RankOptions{})); w != nil {
		t.Errorf("a failure won: %v", w)
	}
	// Without a job memory, everything fits.
	if rs := Rank([]engine.Result{big}, RankOptions{}); !rs[0].Fits {
		t.Error("no job memory given, but a candidate does not fit")
	}
}

// Later rounds (longer measurements of the survivors) rank before earlier
// ones; a derived none takes its eager baseline from the runs.
func TestRankRoundsAndEagerNone(t *testing.T) {
	early := entry{res: res(presets.ImplTE, []string{"attn"}, 3, 500, 4000), round: 1}
	late := entry{res: res(presets.ImplTE, []string{"mlp"}, 3, 900, 4000), round: 2}
	rs := rankEntries([]entry{early, late}, RankOptions{})
	if got := order(rs); got[0] != "transformer_engine/mlp/w3" || rs[0].Round != 2 {
		t.Errorf("order %v", got)
	}
	a, b := res(presets.ImplTE, []string{"attn"}, 3, 900, 4000), res(presets.ImplTE, []string{"mlp"}, 3, 900, 4000)
	b.Eager.Median = 1010
	n, ok := eagerAsNone([]engine.Result{a, b})
	if !ok || n.Candidate.Impl != presets.ImplNone || n.Step.Median != 1005 || n.Step.N != 10 || n.Memory.GraphMiB != 0 {
		t.Errorf("eager none %+v", n)
	}
	// Its p10–p90 is at least one baseline's own spread (here ±2% and
	// ±4%: the median of them, ±3%), not only the spread of the medians
	// (none here: the runs share one baseline).
	b.Eager.Median = 1000
	a.Eager.P10, a.Eager.P90 = 1000*0.98, 1000*1.02
	b.Eager.P10, b.Eager.P90 = 1000*0.96, 1000*1.04
	n, _ = eagerAsNone([]engine.Result{a, b})
	if math.Abs(n.Step.P10-970) > 1e-9 || math.Abs(n.Step.P90-1030) > 1e-9 {
		t.Errorf("eager none p10–p90 %.2f–%.2f, want 970–1030", n.Step.P10, n.Step.P90)
	}
}

// A framework search whose TE candidates the cuda engine measured instead
// takes the eager baseline from the framework's runs only.
func TestEagerNoneKeepsToTheTruestSource(t *testing.T) {
	fw := res(presets.ImplLocal, []string{}, 1, 500, 4000)
	fw.Source, fw.Eager.Median = engine.SourceFramework, 1200
	emu := res(presets.ImplTE, []string{"attn"}, 1, 90, 4000)
	emu.Source, emu.Eager.Median = engine.SourceMeasured, 91
	n, ok := eagerAsNone([]engine.Result{emu, fw, emu})
	if !ok || n.Step.Median != 1200 || n.Source != engine.SourceFramework || n.Step.N != fw.Eager.N {
		t.Errorf("eager none from mixed sources: %+v", n)
	}
}

// A candidate the cuda engine measured for the framework ranks by its own
// speed-up on the framework's eager baseline, not by its emulated step
// time: 90 ms against an emulated eager 91 ms is 1.011×, slower than the
// framework's 1200 → 500 ms, though 90 < 500.
func TestHandedOnResultsRankOnTheTruestBaseline(t *testing.T) {
	fw := res(presets.ImplLocal, []string{}, 1, 500, 4000)
	fw.Source, fw.Eager.Median = engine.SourceFramework, 1200
	emu := res(presets.ImplTE, []string{"attn"}, 1, 90, 4000)
	emu.Source, emu.Eager.Median = engine.SourceMeasured, 91
	rs := Rank([]engine.Result{emu, fw}, RankOptions{})
	if got := order(rs); got[0] != "local/layer/w1" {
		t.Fatalf("order %v: the emulated step time decided", got)
	}
	e := rs[1].Result
	if math.Abs(e.Step.Median-1200*90.0/91) > 1e-9 || e.Eager.Median != 1200 || !strings.Contains(strings.Join(e.Notes, " "), "on the framework eager baseline (1200.00 ms)") {
		t.Errorf("handed-on result: step %.3f eager %.3f notes %q", e.Step.Median, e.Eager.Median, e.Notes)
	}
	// One source alone is left as it is.
	if rs := Rank([]engine.Result{emu}, RankOptions{}); rs[0].Result.Step.Median != 90 {
		t.Errorf("a single source was rescaled: %.3f", rs[0].Result.Step.Median)
	}
}

// The tie band is an option: 3 % apart ties under a 5 % band (less graph
// memory wins) and not under the default 1 %; 0 % leaves only the spread.
func TestRankTieBand(t *testing.T) {
	rs := []engine.Result{
		res(presets.ImplTE, []string{"attn"}, 3, 970, 4000),
		res(presets.ImplNone, nil, 3, 1000, 0),
	}
	if got := order(Rank(rs, RankOptions{})); got[0] != "transformer_engine/attn/w3" {
		t.Errorf("default band: %v", got)
	}
	wide := Rank(rs, RankOptions{Tie: 0.05})
	if got := order(wide); got[0] != "none/-/w3" {
		t.Errorf("5%% band: %v", got)
	}
	if wide[0].Tie != 1 || wide[1].Tie != 1 || wide[0].TieBandMs != 0.05*970 {
		t.Errorf("tie group %d %d, band %v", wide[0].Tie, wide[1].Tie, wide[0].TieBandMs)
	}
	close := []engine.Result{res(presets.ImplTE, []string{"attn"}, 3, 996, 4000), res(presets.ImplNone, nil, 3, 1000, 0)}
	if got := Rank(close, RankOptions{Tie: NoTie}); got[0].Result.Candidate.Impl != presets.ImplTE || got[0].Tie != 0 {
		t.Errorf("no band: %v (tie %d)", order(got), got[0].Tie)
	}
	for in, want := range map[string]float64{"1%": 0.01, "0.5%": 0.005, " 2 % ": 0.02, "0%": NoTie} {
		t.Run(in, func(t *testing.T) {
			if got, err := ParseTie(in); err != nil || got != want {
				t.Errorf("ParseTie(%q) = %v, %v; want %v", in, got, err, want)
			}
		})
	}
	for _, bad := range []string{"1", "x%", "-1%", "100%", "NaN%", ""} {
		t.Run(bad, func(t *testing.T) {
			if _, err := ParseTie(bad); err == nil {
				t.Errorf("ParseTie(%q) accepted", bad)
			}
		})
	}
}

// --tie 0 and --tie 1 name the missing % sign, with the value to write,
// not the generic "want a percentage".
func TestParseTieNamesTheMissingPercentSign(t *testing.T) {
	for in, want := range map[string]string{
		"0":    `tie band "0": the % sign is missing: write 0% (allowed: a percentage from 0% to under 100%, such as 1% or 0.5%)`,
		"1":    `tie band "1": the % sign is missing: write 1% (allowed:`,
		" 0.5": `tie band " 0.5": the % sign is missing: write 0.5% (allowed:`,
	} {
		t.Run(in, func(t *testing.T) {
			if _, err := ParseTie(in); err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("ParseTie(%q): %v; want %s", in, err, want)
			}
		})
	}
	for _, in := range []string{"100", "-1", "x"} {
		t.Run(in, func(t *testing.T) {
			if _, err := ParseTie(in); err == nil || strings.Contains(err.Error(), "sign is missing") {
				t.Errorf("ParseTie(%q): %v; not a percentage without its sign", in, err)
			}
		})
	}
}

// The memory model's breakdown decides fit when the engine made one: a
// candidate whose breakdown does not fit never wins, however fast.
func TestRankBreakdownFit(t *testing.T) {
	fast := res(presets.ImplLocal, []string{"full_iteration"}, 3, 700, 100)
	fast.Memory.Breakdown = &stepmodel.MemoryBreakdown{Weights: 16000, Gradients: 32000, Optimizer: 24000, Activations: 9000, Graphs: 3000, Context: 600, Total: 84600, GPUMiB: 81559, Fits: false}
	slow := res(presets.ImplTE, []string{"attn"}, 3, 900, 4000)
	slow.Memory.Breakdown = &stepmodel.MemoryBreakdown{Total: 60000, GPUMiB: 81559, Fits: true}
	// No JobGPUMemoryMiB: without the breakdown both would fit.
	rs := Rank([]engine.Result{fast, slow}, RankOptions{})
	if w := Winner(rs); w == nil || w.Result.Candidate.Key() != "transformer_engine/attn/w3" {
		t.Fatalf("winner %v", w)
	}
	if rs[1].Fits || !strings.Contains(rs[1].Note, "needs 84600 MiB per GPU in the job (weights 16000") {
		t.Errorf("unfit note %q", rs[1].Note)
	}
	why := Reason(rs, RankOptions{})
	for _, want := range []string{"te attn w3 wins", "the only candidate that finished and fits", "1 faster candidate(s) would not fit the job's GPU and cannot win (full_iteration w3 needs 84600 MiB"} {
		if !strings.Contains(why, want) {
			t.Errorf("reason %q lacks %q", why, want)
		}
	}
}

// The winner's reason names what decided it.
func TestReason(t *testing.T) {
	lead := Rank([]engine.Result{res(presets.ImplTE, []string{"attn"}, 3, 900, 4000), res(presets.ImplNone, nil, 3, 1000, 0)}, RankOptions{})
	if got := Reason(lead, RankOptions{}); !strings.Contains(got, "te attn w3 wins: 900.00 ms/step, 10.0% faster than the runner-up none (1000.00 ms/step), outside the tie band (±9.00 ms: 1% of the step") {
		t.Errorf("lead: %q", got)
	}
	tie := Rank([]engine.Result{res(presets.ImplTE, []string{"attn"}, 3, 995, 4000), res(presets.ImplLocal, []string{"full_iteration"}, 3, 1000, 300)}, RankOptions{})
	if got := Reason(tie, RankOptions{}); !strings.Contains(got, "full_iteration w3 wins a tie: 2 candidates are within ±9.95 ms") ||
		!strings.Contains(got, "of the fastest, te attn w3 (995.00 ms/step); it comes first on less graph memory (300 vs 4000 MiB)") {
		t.Errorf("tie: %q", got)
	}
	if got := Reason(nil, RankOptions{}); got != "no winner: no candidate finished" {
		t.Errorf("empty: %q", got)
	}
}

// Rerank gives what ranking the results under the new options gives, and
// keeps how derived results were derived.
func TestRerank(t *testing.T) {
	es := []entry{
		{res: res(presets.ImplTE, []string{"attn"}, 3, 970, 4000), round: 2},
		{res: res(presets.ImplTE, []string{"attn"}, 1, 970, 4000), round: 2, derived: true, note: "derived from w3"},
		{res: res(presets.ImplNone, nil, 3, 1000, 0), round: 2, derived: true, note: "eager baseline of the runs"},
	}
	first := rankEntries(es, RankOptions{})
	wide := Rerank(first, RankOptions{Tie: 0.05})
	want := rankEntries(es, RankOptions{Tie: 0.05})
	if strings.Join(order(wide), " ") != strings.Join(order(want), " ") || wide[0].Result.Candidate.Impl != presets.ImplNone {
		t.Errorf("rerank %v, want %v", order(wide), order(want))
	}
	for i := range wide {
		if wide[i].Note != want[i].Note || wide[i].Derived != want[i].Derived {
			t.Errorf("row %d: %q/%v, want %q/%v", i, wide[i].Note, wide[i].Derived, want[i].Note, want[i].Derived)
		}
	}
}

// Failed candidates are listed by impl and scopes, warm-ups in numeric
// order (w2 before w10), unranked.
func TestRankFailuresOrder(t *testing.T) {
	var rs []engine.Result
	for _, w := range []int{10, 2, 1} {
		r := res(presets.ImplTE, []string{}, w, 0, 0)
		r.Err, r.ErrKind = "capture failed", engine.FailureCapture
		rs = append(rs, r)
	}
	got := order(Rank(rs, RankOptions{}))
	if strings.Join(got, " ") != "transformer_engine/layer/w1 transformer_engine/layer/w2 transformer_engine/layer/w10" {
		t.Errorf("failures %v", got)
	}
}

// withSpeedup sets a result's speed-up over its eager baseline (1000 ms).
func withSpeedup(r engine.Result) engine.Result {
	r.Speedup = r.Eager.Median / r.Step.Median
	return r
}

// A graphed candidate slower than eager never ranks above a faster one,
// even when it wins every tie-break (less memory, fewer scopes): te attn
// at 0.997× stays below local full_iteration at 1.003× and below none.
func TestSlowerThanEagerNeverRanksAboveFaster(t *testing.T) {
	rs := Rank([]engine.Result{
		withSpeedup(res(presets.ImplTE, []string{"attn"}, 3, 1003, 100)),
		withSpeedup(res(presets.ImplLocal, []string{"full_iteration"}, 3, 997, 3800)),
		withSpeedup(res(presets.ImplNone, nil, 3, 1000, 0)),
	}, RankOptions{})
	got := order(rs)
	if got[len(got)-1] != "transformer_engine/attn/w3" {
		t.Errorf("order %v: te attn (slower than eager) must come last", got)
	}
	if rs[0].Tie == 0 || rs[0].Tie != rs[2].Tie {
		t.Errorf("the three are not one tie group: %+v", rs)
	}
	if !strings.Contains(rs[2].Note, "slower than eager") {
		t.Errorf("note %q does not say why", rs[2].Note)
	}
}

// The reference ranks first in its tie group even where the noise puts it
// a hair slower than eager (te attn at 0.997×, the issue's "slower than
// eager (1.000×)"): nothing in the group beats it beyond noise. Outside
// the band, the faster one still wins; and without a reference the
// slower-than-eager rule stands.
func TestReferenceStandsInItsTieGroupWhateverEagerSays(t *testing.T) {
	results := []engine.Result{
		withSpeedup(res(presets.ImplTE, []string{"attn"}, 3, 1003, 100)),
		withSpeedup(res(presets.ImplLocal, []string{"full_iteration"}, 3, 997, 3800)),
		withSpeedup(res(presets.ImplNone, nil, 3, 1000, 0)),
	}
	ref := results[0].Candidate.Key()
	rs := Rank(results, RankOptions{ReferenceKey: ref})
	if got := order(rs); got[0] != ref || Winner(rs).Result.Candidate.Key() != ref {
		t.Fatalf("order %v: the reference must rank first in its tie group", got)
	}
	if !strings.Contains(rs[1].Note, "the reference (the recipe's own setting) ranks first") {
		t.Errorf("note of the second %q", rs[1].Note)
	}
	if why := Reason(rs, RankOptions{ReferenceKey: ref}); !strings.Contains(why, "being the reference") {
		t.Errorf("why %q", why)
	}
	// 2% faster than the reference: beyond the 1% band.
	beyond := append(slices.Clone(results), withSpeedup(res(presets.ImplTE, []string{"attn", "mlp"}, 3, 983, 200)))
	if w := Winner(Rank(beyond, RankOptions{ReferenceKey: ref})); w.Result.Candidate.Key() != "transformer_engine/attn,mlp/w3" {
		t.Errorf("winner %s: a candidate faster beyond the band must beat the reference", w.Result.Candidate.Key())
	}
	if got := order(Rank(results, RankOptions{})); got[len(got)-1] != ref {
		t.Errorf("without a reference %v: te attn (slower than eager) must come last", got)
	}
}

// Tie groups are ordered by their fastest member, and the why line names
// the fastest candidate that fits when it is not the winner.
func TestTieGroupsInSpeedOrderAndWhyNamesTheFastest(t *testing.T) {
	rs := Rank([]engine.Result{
		withSpeedup(res(presets.ImplNone, nil, 3, 1000, 0)),
		withSpeedup(res(presets.ImplTE, []string{"attn"}, 3, 996, 500)),
		withSpeedup(res(presets.ImplLocal, []string{"full_iteration"}, 3, 900, 4000)),
		withSpeedup(res(presets.ImplLocal, nil, 3, 897, 6000)),
	}, RankOptions{})
	lead := map[int]float64{}
	for _, r := range rs {
		if l, ok := lead[r.Tie]; !ok || r.Result.Step.Median < l {
			lead[r.Tie] = r.Result.Step.Median
		}
	}
	for g := 1; g < len(lead); g++ {
		if lead[g] >= lead[g+1] {
			t.Errorf("tie group %d (fastest %.0f ms) ranks above group %d (fastest %.0f ms)", g, lead[g], g+1, lead[g+1])
		}
	}
	why := Reason(rs, RankOptions{})
	if w := Winner(rs); w == nil || w.Result.Candidate.Key() != "local/full_iteration/w3" {
		t.Fatalf("winner %+v", w)
	}
	if !strings.Contains(why, "fastest (897.00 ms/step)") && !strings.Contains(why, "local whole-layer w3") {
		t.Errorf("why %q does not name the fastest, local whole-layer", why)
	}
}

// Halving promotes a round's fastest candidates, not those the final
// ranking's tie-breaks (less memory) would put first: with a tie band wide
// enough to tie every arm, the round-1 survivors are still the fastest.
func TestHalvingPromotesTheFastest(t *testing.T) {
	rs := []Ranked{}
	for i, r := range []engine.Result{
		withSpeedup(res(presets.ImplTE, []string{"attn"}, 3, 990, 100)),
		withSpeedup(res(presets.ImplTE, []string{"mlp"}, 3, 985, 200)),
		withSpeedup(res(presets.ImplLocal, nil, 3, 960, 6000)),
		withSpeedup(res(presets.ImplLocal, []string{"full_iteration"}, 3, 955, 7000)),
	} {
		rs = append(rs, Ranked{Result: r, Rank: i + 1})
	}
	ranked := rankEntries([]entry{{res: rs[0].Result}, {res: rs[1].Result}, {res: rs[2].Result}, {res: rs[3].Result}}, RankOptions{Tie: 0.05})
	if order(ranked)[0] == "local/full_iteration/w3" {
		t.Fatalf("the test needs a ranking whose tie-breaks put a slower arm first: %v", order(ranked))
	}
	got := order(promotionOrder(ranked))
	if got[0] != "local/full_iteration/w3" || got[1] != "local/layer/w3" {
		t.Errorf("promotion order %v, want the two fastest first", got)
	}
}

// Results of one eager pool measured as it filled are compared with its
// fullest state; another pool's results keep their own baseline.
func TestResultsOfOnePoolShareItsFullestBaseline(t *testing.T) {
	pooled := func(r engine.Result, pool string, eagerMs float64, n int) engine.Result {
		r.Source, r.EagerPool = engine.SourceFramework, pool
		r.Eager = stepmodel.Stats{Median: eagerMs, P10: eagerMs * 0.9, P90: eagerMs * 1.1, N: n}
		r.Speedup = eagerMs / r.Step.Median
		return r
	}
	none := pooled(res(presets.ImplNone, nil, 3, 180, 0), "a", 180, 33)
	none.Notes = []string{"eager baseline: 33 steps of 3 runs pooled"}
	early := pooled(res(presets.ImplLocal, nil, 1, 75, 500), "a", 180, 33)
	late := pooled(res(presets.ImplLocal, []string{presets.ScopeFullIteration}, 1, 74, 500), "a", 150, 49)
	late.Notes = []string{"optimizer: fused", "eager baseline: 49 steps of 4 runs pooled"}
	other := pooled(res(presets.ImplLocal, []string{"attn"}, 1, 70, 500), "b", 300, 60)
	got := map[string]Ranked{}
	for _, r := range Rank([]engine.Result{none, early, late, other}, RankOptions{}) {
		got[r.Result.Candidate.Key()] = r
	}
	if e := got[early.Candidate.Key()].Result; e.Eager.Median != 150 || math.Abs(e.Speedup-2) > 1e-9 {
		t.Errorf("early result: eager %.1f ms, speed-up %.3f; want the fullest pool's 150 ms and 2.000", e.Eager.Median, e.Speedup)
	}
	if n := got[none.Candidate.Key()].Result; !slices.Equal(n.Notes, []string{"eager baseline: 49 steps of 4 runs pooled"}) {
		t.Errorf("eager run's notes %q: want the fullest pool's note in place of its own", n.Notes)
	}
	if n := got[none.Candidate.Key()].Result; n.Step.Median != 150 || n.Speedup != 1 {
		t.Errorf("eager run: step %.1f ms, speed-up %.3f; want the pool's 150 ms and 1", n.Step.Median, n.Speedup)
	}
	if o := got[other.Candidate.Key()].Result; o.Eager.Median != 300 {
		t.Errorf("another pool's result took eager %.1f ms; want its own 300", o.Eager.Median)
	}
}
