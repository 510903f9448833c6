// Command threeway compares, candidate by candidate, what the megatron
// engine measured on real Megatron-Core with what the calibrated emulating
// engines give from the same framework profile: the cuda engine on this
// node's GPU and the estimate engine. It prints one table (step time,
// speed-up, graph memory, and each engine's error against megatron) and
// whether the acceptance holds: every speed-up within 15%, the same
// winner, graph memory within 25%.
//
//	go run ./bench/threeway --profile PROFILE.json --megatron RESULTS.json \
//	    (--model NAME [--gpu-type h100] | --preset FILE) [--drop-pad] [--mbridge 0.4] \
//	    [--gpu 0 | --no-cuda] [--json OUT.json]
//
// RESULTS.json is the megatron engine's results: a JSON array of results,
// an object with "results", or the headless search's --json output (its
// "ranking"). Exit 0 when the acceptance holds, 1 when it does not, 2 on
// bad input, 3 when the cuda engine cannot open the GPU.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"

	"cgtune/engine"
	"cgtune/engine/cuda"
	"cgtune/internal/fileio"
	"cgtune/internal/setup"
	"cgtune/presets"
	"cgtune/probes"
	"cgtune/search"
	"cgtune/stepmodel"
)

// Acceptance limits of the comparison.
const (
	speedupTol  = 0.15
	graphMemTol = 0.25
)

type options struct {
	profile, megatron, model, gpuType, preset, mbridge, jsonOut string
	dropPad, noCUDA                                             bool
	gpu                                                         int
	// runMicroBatches: the emulations run the micro-batches per step the
	// megatron engine ran (0: their default).
	runMicroBatches int
}

// ranMicroBatches is how many micro-batches per step the megatron
// engine's runs ran (0 when no result says).
func ranMicroBatches(rs []engine.Result) int {
	for _, r := range rs {
		if r.Raw != nil && r.Raw.MicroBatchesRun > 0 {
			return r.Raw.MicroBatchesRun
		}
	}
	return 0
}

// comparedGraphMiB is the graph memory of megatron result m and emulated
// result r that the table compares: the job's, or, where both ran the
// same slice of a stage that does not fit one GPU, the slice's as
// measured (the megatron engine scales its slice's graphs in proportion
// to the layers, the memory model as a fixed pool plus a part per layer;
// the measurement is what both share).
func comparedGraphMiB(m, r engine.Result) (mg, rg int64, slice bool) {
	if m.Raw != nil && r.SliceLayers > 0 && m.Raw.LayersBuilt == r.SliceLayers {
		return m.Memory.GraphMiB, r.Memory.GraphMiB, true
	}
	return m.Memory.JobGraphMiB(), r.Memory.JobGraphMiB(), false
}

func main() {
	var o options
	fl := flag.NewFlagSet("threeway", flag.ContinueOnError)
	fl.StringVar(&o.profile, "profile", "", "framework profile JSON (the megatron engine's, for this model and layout)")
	fl.StringVar(&o.megatron, "megatron", "", "the megatron engine's results JSON")
	fl.StringVar(&o.model, "model", "", "built-in model")
	fl.StringVar(&o.gpuType, "gpu-type", "h100", "GPU whose default layout the model uses")
	fl.StringVar(&o.preset, "preset", "", "team preset FILE (inline model and layout) instead of --model")
	fl.StringVar(&o.mbridge, "mbridge", "0.4", "Megatron-Bridge version of the candidates")
	fl.BoolVar(&o.dropPad, "drop-pad", false, "MoE with drop-and-pad experts (moe_expert_capacity_factor=1.0, padded)")
	fl.BoolVar(&o.noCUDA, "no-cuda", false, "leave out the cuda engine (no GPU)")
	fl.IntVar(&o.gpu, "gpu", 0, "GPU the cuda engine runs on")
	fl.StringVar(&o.jsonOut, "json", "", "also write the three results per candidate to this file")
	if err := fl.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	code, err := run(context.Background(), o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "threeway: "+err.Error())
	}
	os.Exit(code)
}

// fixedCosts prices every workload with one profile.
type fixedCosts struct{ p *stepmodel.FrameworkProfile }

func (f fixedCosts) CostsFor(_ *stepmodel.Workload, r stepmodel.Rates, h stepmodel.HostCosts) stepmodel.Costs {
	return stepmodel.Costs{Rates: r, Host: h, Profile: f.p}
}

// Row is one candidate in the three engines.
type Row struct {
	Candidate presets.Candidate `json:"candidate"`
	Megatron  engine.Result     `json:"megatron"`
	CUDA      *engine.Result    `json:"cuda,omitempty"`
	Estimate  engine.Result     `json:"estimate"`
}

func run(ctx context.Context, o options, out io.Writer) (int, error) {
	if o.profile == "" || o.megatron == "" || (o.model == "") == (o.preset == "") {
		return 2, errors.New("give --profile, --megatron and one of --model or --preset")
	}
	prof, err := stepmodel.LoadProfile(o.profile)
	if err != nil {
		return 2, err
	}
	mres, err := loadResults(o.megatron)
	if err != nil {
		return 2, err
	}
	o.runMicroBatches = ranMicroBatches(mres)
	w, err := workload(o)
	if err != nil {
		return 2, err
	}
	if k := stepmodel.LayoutKey(w.Layout); prof.Key.Layout != "" && prof.Key.Layout != k {
		fmt.Fprintf(out, "note: the profile was measured for layout %s, the workload is %s\n", prof.Key.Layout, k)
	}
	costs := fixedCosts{prof}
	rates, ok := stepmodel.SpecFor(prof.Key.GPU)
	if !ok {
		rates, _ = stepmodel.SpecFor("h200")
	}
	// Both emulations run a slice of a stage that does not fit the GPU,
	// as the megatron engine does (engine.SliceWhenTooBig).
	var ce engine.Engine
	if !o.noCUDA {
		var opened *cuda.Engine
		if opened, rates, err = openCUDA(ctx, o.gpu, costs); err != nil {
			return 3, err
		}
		defer opened.Close()
		ce = engine.SliceWhenTooBig(opened)
	}
	est := setup.Estimate(rates, stepmodel.DefaultHostCosts(), engine.DeviceInfo{Name: prof.Key.GPU + " (estimated)"}, costs)
	var rows []Row
	var handedOn []string
	for _, m := range mres {
		if m.Source != engine.SourceFramework {
			// The megatron engine handed it to its fallback (TE without
			// TE): an emulation, nothing to compare the emulations with.
			handedOn = append(handedOn, m.Candidate.Name())
			continue
		}
		r := Row{Candidate: m.Candidate, Megatron: m}
		if ce != nil {
			x := ce.Run(ctx, w, m.Candidate, engine.RunOptions{}, nil)
			r.CUDA = &x
		}
		r.Estimate = est.Run(ctx, w, m.Candidate, engine.RunOptions{}, nil)
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return 2, fmt.Errorf("%s: no result measured on the framework (source %q)", o.megatron, engine.SourceFramework)
	}
	okAll := table(out, rows)
	if len(handedOn) > 0 {
		fmt.Fprintf(out, "left out (the megatron engine did not measure them on the framework): %s\n", strings.Join(handedOn, "; "))
	}
	if o.jsonOut != "" {
		data, _ := json.MarshalIndent(rows, "", " ")
		if err := fileio.WriteFileAtomic(o.jsonOut, append(data, '\n'), 0o644); err != nil {
			return 2, err
		}
	}
	if !okAll {
		return 1, nil
	}
	return 0, nil
}

// loadResults reads the megatron engine's results in any of the shapes it
// writes them.
func loadResults(path string) ([]engine.Result, error) {
	data, err := fileio.ReadFileLimited(path, 256<<20)
	if err != nil {
		return nil, err
	}
	var list []engine.Result
	if json.Unmarshal(data, &list) == nil && len(list) > 0 {
		return list, nil
	}
	var obj struct {
		Results []engine.Result `json:"results"`
		Ranking []struct {
			Result engine.Result `json:"result"`
		} `json:"ranking"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	list = obj.Results
	for _, r := range obj.Ranking {
		list = append(list, r.Result)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%s: no results (want an array of results, \"results\" or a search's \"ranking\")", path)
	}
	return list, nil
}

func workload(o options) (*stepmodel.Workload, error) {
	var m presets.Model
	var l presets.Layout
	if o.preset != "" {
		p, err := presets.NewStore(o.preset, "", "").LoadFile(o.preset)
		if err != nil {
			return nil, err
		}
		if m, err = p.ResolveModel(); err != nil {
			return nil, err
		}
		l = p.Layout
	} else {
		var err error
		if m, err = presets.LookupModel(o.model); err != nil {
			return nil, err
		}
		if l, err = m.Layout(o.gpuType); err != nil {
			return nil, err
		}
	}
	gen, err := presets.ParseMBridge(o.mbridge)
	if err != nil {
		return nil, err
	}
	opt := stepmodel.WorkloadOptions{Generation: gen, RunMicroBatches: o.runMicroBatches}
	if o.dropPad {
		dropless := false
		opt.Dropless = &dropless
	}
	return stepmodel.BuildWorkload(m, l, opt)
}

// openCUDA opens the cuda engine with this GPU's probe results (cached by
// `cgtune probe`, or measured now) and the profile's costs.
func openCUDA(ctx context.Context, gpu int, costs stepmodel.CostSource) (*cuda.Engine, stepmodel.Rates, error) {
	spec, _ := stepmodel.SpecFor("h200")
	e, err := cuda.New(cuda.Options{Ordinal: gpu, Rates: spec, Host: stepmodel.DefaultHostCosts()})
	if err != nil {
		return nil, stepmodel.Rates{}, err
	}
	rep, ok := probes.Report{}, false
	if dir, err := probes.DefaultCacheDir(); err == nil {
		rep, ok = probes.LoadCached(dir, e.Device())
	}
	if !ok {
		if rep, err = probes.Run(ctx, e, probes.Options{}); err != nil {
			e.Close()
			return nil, stepmodel.Rates{}, err
		}
	}
	e.Close()
	e, err = cuda.New(cuda.Options{Ordinal: gpu, Rates: rep.Rates, Host: rep.Host, Costs: costs})
	return e, rep.Rates, err
}

func rel(got, want float64) float64 {
	if want == 0 {
		return math.Inf(1)
	}
	return (got - want) / want
}

// ranking is search.Rank's order of one engine's results (ties within
// the default band or overlapping measured p10–p90 ranges go to less graph
// memory, then the simpler scope).
func ranking(rows []Row, pick func(Row) *engine.Result) []search.Ranked {
	var rs []engine.Result
	for _, r := range rows {
		if x := pick(r); x != nil {
			rs = append(rs, *x)
		}
	}
	return search.Rank(rs, search.RankOptions{})
}

// winnerOf is the candidate the search would recommend from a ranking,
// not the bare fastest median, so that two configurations the framework
// runs identically (local attn and whole layer on GPTModel) do not decide
// the comparison by noise.
func winnerOf(ranked []search.Ranked) string {
	if w := search.Winner(ranked); w != nil {
		return w.Result.Candidate.Name()
	}
	return "-"
}

// winner is winnerOf one engine's ranking.
func winner(rows []Row, pick func(Row) *engine.Result) string {
	return winnerOf(ranking(rows, pick))
}

// tiedWithWinner are the candidates of a ranking tied with its winner
// (within the band or overlapping p10–p90 ranges), and the band.
func tiedWithWinner(ranked []search.Ranked) (map[string]bool, float64) {
	w := search.Winner(ranked)
	tied := map[string]bool{}
	if w == nil || w.Tie == 0 {
		return tied, 0
	}
	for _, r := range ranked {
		if r.Tie == w.Tie {
			tied[r.Result.Candidate.Name()] = true
		}
	}
	return tied, w.TieBandMs
}

// tieNote says which emulated winners that differ from megatron's are
// tied with it on megatron's own measurements (its ranking): the
// framework cannot tell them apart, though the strict check still counts
// a different winner.
func tieNote(megatron []search.Ranked, emulated map[string]string) string {
	tied, band := tiedWithWinner(megatron)
	wm := winnerOf(megatron)
	var in []string
	for _, name := range []string{"cuda", "estimate"} {
		if w, ok := emulated[name]; ok && w != wm && tied[w] {
			in = append(in, fmt.Sprintf("%s's %s", name, w))
		}
	}
	if len(in) == 0 {
		return ""
	}
	return fmt.Sprintf("\nwithin megatron's noise: %s is tied with megatron's winner on megatron's own results (±%.2f ms); counted as a different winner above",
		strings.Join(in, " and "), band)
}

// table prints the rows and the acceptance; it reports whether it holds.
func table(out io.Writer, rows []Row) bool {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CANDIDATE\tMEGATRON MS\tX\tGRAPH MIB\t|\tCUDA MS\tX\tΔX\tGRAPH MIB\tΔMEM\t|\tEST MS\tX\tΔX\tGRAPH MIB\tΔMEM\t")
	ok := true
	for _, r := range rows {
		m := r.Megatron
		ms := "failed: " + firstLine(m.Err)
		if !m.Failed() {
			ms = fmt.Sprintf("%.2f\t%.3f\t%d", m.Step.Median, m.Speedup, m.Memory.JobGraphMiB())
		} else {
			ms += "\t-\t-"
		}
		est := r.Estimate
		cudaCell, cudaOK := cell(r.CUDA, m)
		estCell, estOK := cell(&est, m)
		ok = ok && cudaOK && estOK
		fmt.Fprintf(tw, "%s\t%s\t|\t%s\t|\t%s\t\n", r.Candidate.Name(), ms, cudaCell, estCell)
	}
	tw.Flush()
	ok = winners(out, rows) && ok
	var failed []string
	for _, r := range rows {
		if r.Megatron.Failed() {
			failed = append(failed, r.Candidate.Name())
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(out, "\nnot compared (failed on the framework, no speed-up to compare): %s", strings.Join(failed, "; "))
	}
	verdict := "HOLDS"
	if !ok {
		verdict = "FAILS"
	}
	fmt.Fprintf(out, "\nacceptance (speed-up within %.0f%%, same winner, graph memory within %.0f%%): %s\n", 100*speedupTol, 100*graphMemTol, verdict)
	if len(rows) > 0 && len(rows[0].Estimate.Notes) > 0 {
		fmt.Fprintf(out, "host costs: %s\n", strings.TrimPrefix(rows[0].Estimate.Notes[0], "estimated: "))
	}
	return ok
}

// cell is an emulating engine's columns for result r (nil: not run)
// beside megatron's m, marking a speed-up or graph memory past its
// tolerance with "!"; ok is false where r breaks the acceptance.
func cell(r *engine.Result, m engine.Result) (_ string, ok bool) {
	if r == nil {
		return "-\t-\t-\t-\t-", true
	}
	if r.Failed() {
		if m.Failed() {
			return "failed\t-\t-\t-\t-", true
		}
		return "FAILED\t-\t-\t-\t-", false
	}
	if m.Failed() {
		// No speed-up to compare with. An emulated winner that the
		// framework cannot run still fails the winner check.
		return fmt.Sprintf("%.2f\t%.3f\t(megatron failed)\t%d\t-", r.Step.Median, r.Speedup, r.Memory.JobGraphMiB()), true
	}
	ok = true
	dx := rel(r.Speedup, m.Speedup)
	mark := ""
	if math.Abs(dx) > speedupTol {
		ok, mark = false, "!"
	}
	dm, memMark := "-", ""
	mg, rg, slice := comparedGraphMiB(m, *r)
	if r.Candidate.Graphed() && mg > 0 {
		d := rel(float64(rg), float64(mg))
		if math.Abs(d) > graphMemTol {
			ok, memMark = false, "!"
		}
		dm = fmt.Sprintf("%+.0f%%%s", 100*d, memMark)
		if slice {
			dm += " (slice)"
		}
	}
	return fmt.Sprintf("%.2f\t%.3f\t%+.1f%%%s\t%d\t%s", r.Step.Median, r.Speedup, 100*dx, mark, rg, dm), ok
}

// winners prints each engine's winner (and which of them megatron's own
// noise cannot tell from its winner); it reports whether they agree.
func winners(out io.Writer, rows []Row) bool {
	megatron := ranking(rows, func(r Row) *engine.Result { return &r.Megatron })
	wm := winnerOf(megatron)
	we := winner(rows, func(r Row) *engine.Result { return &r.Estimate })
	fmt.Fprintf(out, "\nwinner: megatron %s, estimate %s", wm, we)
	ok := we == wm
	emulated := map[string]string{"estimate": we}
	if rows[0].CUDA != nil {
		wc := winner(rows, func(r Row) *engine.Result { return r.CUDA })
		fmt.Fprintf(out, ", cuda %s", wc)
		ok = ok && wc == wm
		emulated["cuda"] = wc
	}
	fmt.Fprint(out, tieNote(megatron, emulated))
	return ok
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}
