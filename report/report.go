// Package report writes a finished search as a Markdown report a teammate
// can read without cgtune: what was searched, the ranking with every
// figure and where it came from, the winner's overrides and why it won,
// the candidates that failed or were never run and the rule that stopped
// them, and a plot (SVG, beside the report) of step time with its p10–p90
// band and graph memory per candidate.
package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"cgtune/engine"
	"cgtune/internal/fileio"
	"cgtune/presets"
	"cgtune/search"
)

// Input is everything a report shows.
type Input struct {
	Version string    // cgtune's version
	Now     time.Time // when the report was written
	Model   presets.Model
	Layout  presets.Layout
	MBridge string
	// Engine is the engine that produced the results ("cuda", "estimate").
	Engine     string
	Strategy   string
	TrainIters int
	Tie        float64 // the ranking's tie band (search.RankOptions.Tie)
	// JobGPUMemoryMiB is the job GPU's memory fit was checked against (0:
	// not checked).
	JobGPUMemoryMiB int64
	Sets            map[string]string // --set overrides the rules saw
	Plan            []search.Planned
	Done            search.DoneEvent
	// Overrides are the winner's overrides rendered in Format (nil without
	// a winner).
	Overrides []byte
	Format    string
	// DropsTokens says that the winner's overrides make the recipe's
	// dropless experts drop-and-pad (recipe.Overrides's, with the speed-up
	// it was ranked at: search.DropsTokensLine); "" when they do not.
	DropsTokens string
}

func (in Input) estimated() bool {
	if in.Engine == "estimate" {
		return true
	}
	for _, r := range in.Done.Ranking {
		if r.Result.Source == engine.SourceEstimated {
			return true
		}
	}
	return false
}

func (in Input) rankOptions() search.RankOptions {
	d := in.Done
	return search.RankOptions{TrainIters: in.TrainIters, JobGPUMemoryMiB: in.JobGPUMemoryMiB, Tie: in.Tie,
		ReferenceKey: d.ReferenceKey(), KnownToFitMiB: d.KnownToFitMiB, Emulation: d.Emulation}
}

// PlotPath is where Write puts the plot of a report at mdPath: the same
// name with .svg.
func PlotPath(mdPath string) string {
	return strings.TrimSuffix(mdPath, filepath.Ext(mdPath)) + ".svg"
}

// Write writes the report to mdPath and its plot beside it (PlotPath),
// each atomically, the plot first so the report never links to a missing
// file. Without replace, neither may exist yet (each is created in one
// step, fileio.CreateFileAtomic), and a plot written for a report that
// then could not be is removed again. Without a finished candidate there
// is no plot and the report says so. It returns the plot's path ("" when
// none was written).
func Write(mdPath string, in Input, replace bool) (string, error) {
	if filepath.Ext(mdPath) == ".svg" {
		return "", fmt.Errorf("report %s: the report is Markdown (the plot goes beside it as .svg); give a .md path", mdPath)
	}
	write := fileio.CreateFileAtomic
	if replace {
		write = fileio.WriteFileAtomic
	}
	plotPath := PlotPath(mdPath)
	svg, perr := Plot(in)
	if perr == nil {
		if err := write(plotPath, svg, 0o644); err != nil {
			return "", fmt.Errorf("report plot: %w", err)
		}
	} else {
		plotPath = ""
	}
	plotName := ""
	if plotPath != "" {
		plotName = filepath.Base(plotPath)
	}
	if err := write(mdPath, Markdown(in, plotName), 0o644); err != nil {
		if plotPath != "" && !replace {
			// Ours, created a moment ago (through a link: the file it
			// leads to, never the link).
			if t, _, terr := fileio.Target(plotPath); terr == nil {
				os.Remove(t)
			}
		}
		return "", err
	}
	return plotPath, nil
}

// cell escapes text for a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// Markdown is the report; plotName is the plot file's name beside it (""
// for none).
func Markdown(in Input, plotName string) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	d := in.Done
	title := fmt.Sprintf("cgtune report: %s on %s", in.Model.Name, in.Layout.GPU)
	if d.Winner != nil {
		title += " — " + d.Winner.Result.Candidate.Name()
	}
	w("# %s\n\n", title)
	w("Written by cgtune %s on %s.", in.Version, in.Now.UTC().Format("2006-01-02 15:04 MST"))
	if in.estimated() {
		w(" **ESTIMATED: every figure below comes from cgtune's estimate engine (a timing model of the step); nothing ran on a GPU.**")
	}
	if basis := search.Basis(d.Ranking); basis != "" {
		w("\n\n**%s.**", basis)
	}
	if d.Interrupted {
		w(" **The search was interrupted: only the candidates that finished are ranked.**")
	}
	if d.Err != "" {
		w(" **The search stopped with an error: %s.**", d.Err)
	}
	w("\n\n")
	writeSetup(&b, in)
	writeWinner(&b, in)
	writeRanking(&b, in, plotName)
	writeWhatIf(&b, in)
	writeFailed(&b, in)
	writeRejected(&b, in)
	if len(d.Notes) > 0 {
		w("## How the search went\n\n")
		for _, n := range d.Notes {
			w("- %s\n", n)
		}
		w("\n")
	}
	return escapeHTML(printable(b.Bytes()))
}

// ratio is a speed-up over eager with its unit; "—" for a result without
// one (its notes say why), never 0.000.
func ratio(s float64, unit string) string {
	if s <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.3f%s", s, unit)
}

// escapeHTML writes each "<" outside fenced code blocks as "&lt;":
// Markdown passes HTML through, so a model's display name or a note
// holding "<script>" would otherwise be markup in the viewer, not text. A
// fenced block (the overrides) shows its text as it is and is left alone;
// its fences are found as CommonMark finds them (fenceOf), so a fence a
// value writes cannot leave a tag outside code unescaped. Code spans are
// escaped too: whether a backtick pairs with one on another line depends
// on the whole paragraph, and a "<" there shows as "&lt;", which is safe.
func escapeHTML(md []byte) []byte {
	var out bytes.Buffer
	var open string // the fence of the block we are in ("" outside)
	for _, line := range strings.SplitAfter(string(md), "\n") {
		fence, info := fenceOf(line)
		switch {
		case open == "" && fence != "" && !(fence[0] == '`' && strings.Contains(info, "`")):
			open = fence
		case open != "" && fence != "" && fence[0] == open[0] && len(fence) >= len(open) && strings.TrimSpace(info) == "":
			open = ""
		case open == "":
			line = strings.ReplaceAll(line, "<", "&lt;")
		}
		out.WriteString(line)
	}
	return out.Bytes()
}

// fenceOf is the code fence line starts with (CommonMark: up to three
// spaces, then three or more backticks or tildes) and what follows it;
// fence is "" for any other line.
func fenceOf(line string) (fence, info string) {
	rest := strings.TrimLeft(line, " ")
	if len(line)-len(rest) > 3 || len(rest) < 3 || (rest[0] != '`' && rest[0] != '~') {
		return "", ""
	}
	n := len(rest) - len(strings.TrimLeft(rest, rest[:1]))
	if n < 3 {
		return "", ""
	}
	return rest[:n], rest[n:]
}

// escapeSeq is an ANSI escape sequence: CSI (colours, cursor moves), OSC
// (window titles, hyperlinks, ended by BEL or ESC \) or a two-byte one.
var escapeSeq = regexp.MustCompile(`\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])`)

// printable drops from the report what a terminal or a viewer would act on
// instead of showing: escape sequences, the other control characters (tabs
// and newlines stay) and Unicode's bidirectional controls, which reorder
// the text around them. Names and display names come from preset and model
// files, values from --set, errors from jobs' logs: none is cgtune's own.
func printable(md []byte) []byte {
	return []byte(strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r):
			return -1
		}
		return r
	}, escapeSeq.ReplaceAllString(string(md), "")))
}

func writeSetup(b *bytes.Buffer, in Input) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	m, l, a := in.Model, in.Layout, in.Model.Arch
	w("## What was searched\n\n| | |\n|---|---|\n")
	arch := fmt.Sprintf("%d layers, hidden %d, %d heads, vocab %d", a.Layers, a.Hidden, a.Heads, a.Vocab)
	if a.MoE != nil {
		arch += fmt.Sprintf("; MoE: %d experts, top-%d", a.MoE.Experts, a.MoE.TopK)
	}
	if a.HybridPattern != "" {
		arch += "; hybrid " + a.HybridPattern
	}
	name := m.Name
	if m.Display != "" {
		name += " (" + m.Display + ")"
	}
	w("| Model | %s: %s |\n", cell(name), cell(arch))
	w("| Layout | %d× %s, %s: TP %d, PP %d, VP %s, CP %d, EP %d; GBS %d, MBS %d, sequence %d; DP %d, %d micro-batches per step |\n",
		l.NumGPUs, l.GPU, l.Precision, l.TPSize(), l.PPSize(), vpText(l), l.CPSize(), l.EPSize(), l.GBS, l.MBS, l.Seq, l.DP(), l.MicroBatches())
	if l.Source != "" {
		w("| Layout source | %s |\n", cell(l.Source))
	}
	gen, _ := presets.ParseMBridge(in.MBridge)
	w("| Megatron-Bridge | %s (%s: %s) |\n", in.MBridge, gen, genText(gen))
	if len(in.Sets) > 0 {
		var sets []string
		for _, k := range sortedKeys(in.Sets) {
			sets = append(sets, "`"+k+"="+in.Sets[k]+"`")
		}
		w("| Recipe overrides the rules saw | %s |\n", strings.Join(sets, " "))
	}
	if dev, ok := device(in.Done); ok {
		gpu := dev.Name
		if dev.Driver != "" {
			gpu += ", driver " + dev.Driver
		}
		if dev.CUDA != "" {
			gpu += ", CUDA " + dev.CUDA
		}
		if dev.MemoryMiB > 0 {
			gpu += fmt.Sprintf(", %d MiB", dev.MemoryMiB)
		}
		w("| GPU | %s |\n", cell(gpu))
	}
	if src := sourceNote(in.Done); src != "" {
		w("| Engine | %s: %s |\n", in.Engine, cell(strings.TrimPrefix(strings.TrimPrefix(src, "estimated: "), "measured: ")))
	}
	w("| Search | %s; %s; tie band %s; job of %d iterations |\n", in.Strategy, runsText(in.Done), tieText(in.Tie), trainIters(in))
	if in.JobGPUMemoryMiB > 0 {
		w("| Job GPU memory | %d MiB (fit is checked against it) |\n", in.JobGPUMemoryMiB)
	}
	if in.Done.RunDir != "" {
		w("| Run folder | `%s` |\n", in.Done.RunDir)
	}
	w("\n")
}

func vpText(l presets.Layout) string {
	if l.VP <= 0 {
		return "none"
	}
	return fmt.Sprint(l.VP)
}

func genText(g presets.Generation) string {
	if g == presets.G2 {
		return "cuda_graph_scope; full iteration is impl local with scope full_iteration"
	}
	return "cuda_graph_modules; full iteration is impl full_iteration"
}

func tieText(t float64) string {
	switch {
	case t == 0:
		return search.FormatTie(search.DefaultTie) + " or overlapping measured p10–p90 ranges"
	case t < 0:
		return "overlapping measured p10–p90 ranges only"
	}
	return search.FormatTie(t) + " or overlapping measured p10–p90 ranges"
}

func trainIters(in Input) int {
	if in.TrainIters > 0 {
		return in.TrainIters
	}
	return search.DefaultTrainIters
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// device is the GPU the results were measured on or estimated for.
func device(d search.DoneEvent) (engine.DeviceInfo, bool) {
	for _, r := range d.Ranking {
		if r.Result.Device.Name != "" {
			return r.Result.Device, true
		}
	}
	return engine.DeviceInfo{}, false
}

// sourceNote is where the engine's rates and host costs came from: the
// first note of a result that says so.
func sourceNote(d search.DoneEvent) string {
	for _, r := range d.Ranking {
		for _, n := range r.Result.Notes {
			if strings.HasPrefix(n, "estimated: ") || strings.HasPrefix(n, "measured: ") || strings.Contains(n, "host costs") {
				return n
			}
		}
	}
	return ""
}

func writeWinner(b *bytes.Buffer, in Input) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	d := in.Done
	w("## Winner\n\n")
	if d.Winner == nil {
		w("%s.\n\n", upperFirst(search.Reason(d.Ranking, in.rankOptions())))
		if line := d.Reference.Describe(nil); line != "" {
			w("Reference: %s.\n\n", line)
		}
		return
	}
	r := d.Winner.Result
	w("**%s**: %.2f ms per step against %.2f ms eager (%s), capture %.0f ms, %d MiB of graph memory in the job, %.1f s for a %d-iteration job (%s).\n\n",
		r.Candidate.Name(), r.Step.Median, r.Eager.Median, ratio(r.Speedup, "×"), r.CaptureMs, r.Memory.JobGraphMiB(), d.Winner.JobMs/1000, trainIters(in), r.Source)
	if in.DropsTokens != "" {
		// Next to the speed-up: what the recipe gives up for it.
		w("**A change to training:** %s.\n\n", in.DropsTokens)
	}
	w("Why: %s.\n\n", search.Reason(d.Ranking, in.rankOptions()))
	if line := d.Reference.Describe(d.Winner); line != "" {
		w("Reference: %s.\n\n", line)
	}
	if d.Emulation != nil {
		w("Emulation: %s.\n\n", d.Emulation.Describe())
	}
	if also := aliases(in.Plan, in.Model.Arch, r.Candidate); len(also) > 0 {
		w("Megatron runs these spellings as the same configuration: %s.\n\n", strings.Join(also, ", "))
	}
	if in.Overrides != nil {
		lang := map[string]string{"yaml": "yaml", "json": "json", "python": "python"}[in.Format]
		if lang == "" {
			lang = "sh"
		}
		w("Recipe overrides (%s, Megatron-Bridge %s):\n\n```%s\n%s```\n\n", in.Format, in.MBridge, lang, ensureNewline(string(in.Overrides)))
	}
}

func ensureNewline(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// aliases are the other spellings the plan merged into candidate c that
// name only layers the model has (search.ShownAlso).
func aliases(plan []search.Planned, a presets.Arch, c presets.Candidate) []string {
	for _, p := range plan {
		if p.Candidate.Key() == c.Key() {
			var out []string
			for _, a := range search.ShownAlso(p, a) {
				out = append(out, a.Name())
			}
			return out
		}
	}
	return nil
}

func spread(r engine.Result) string {
	if r.Source == engine.SourceEstimated || r.Step.N < 2 || r.Step.P10 == r.Step.P90 {
		return "—"
	}
	return fmt.Sprintf("%.2f–%.2f", r.Step.P10, r.Step.P90)
}

func writeRanking(b *bytes.Buffer, in Input, plotName string) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	d := in.Done
	w("## Ranking\n\n")
	if plotName != "" {
		w("![Speed-up with its p10–p90 band and the winner's tie band, and graph memory, per candidate](%s)\n\n", plotName)
	}
	w("| # | Candidate | Step ms | p10–p90 | × eager | × recipe | Capture ms | Graph MiB | Job s | Fits | Tie | Source | Note |\n")
	w("|---:|---|---:|---|---:|---:|---:|---:|---:|---|---:|---|---|\n")
	ranked := 0
	for _, r := range d.Ranking {
		res := r.Result
		if res.Failed() {
			continue
		}
		ranked++
		fits := "yes"
		if !r.Fits {
			fits = "**no**"
		}
		tie := "—"
		if r.Tie > 0 {
			tie = fmt.Sprint(r.Tie)
		}
		name := res.Candidate.Name()
		if d.Winner != nil && res.Candidate.Key() == d.Winner.Result.Candidate.Key() {
			name = "**" + name + "** ★"
		}
		note := r.Note
		if also := aliases(in.Plan, in.Model.Arch, res.Candidate); len(also) > 0 {
			note = strings.TrimPrefix(note+"; also: "+strings.Join(also, ", "), "; ")
		}
		if r.Derived {
			note = strings.TrimPrefix(note+"; not run itself", "; ")
		}
		if d.ReferenceKey() == res.Candidate.Key() {
			note = strings.TrimPrefix("the reference; "+note, "; ")
		}
		vs := "—"
		if r.VsReference > 0 {
			vs = fmt.Sprintf("%.3f", r.VsReference)
		}
		w("| %d | %s | %.2f | %s | %s | %s | %.0f | %d | %.1f | %s | %s | %s | %s |\n", r.Rank, cell(name), res.Step.Median, spread(res), ratio(res.Speedup, ""),
			vs, res.CaptureMs, res.Memory.JobGraphMiB(), r.JobMs/1000, fits, tie, res.Source, cell(note))
	}
	if ranked == 0 {
		w("| | no candidate finished | | | | | | | | | | | |\n")
	}
	w("\n")
	var ties []string
	for _, r := range d.Ranking {
		if r.Tie > 0 && !slices.Contains(ties, fmt.Sprint(r.Tie)) {
			ties = append(ties, fmt.Sprint(r.Tie))
			lead, n := search.TieLeader(d.Ranking, r.Tie)
			w("- Tie %d: %d candidates within ±%.2f ms of the fastest of them, %s (%.2f ms).\n", r.Tie, n, r.TieBandMs, lead.Result.Candidate.Name(), lead.Result.Step.Median)
		}
	}
	if line := search.OneTie(d.Ranking); line != "" {
		w("- **%s.**\n", upperFirst(line))
	}
	if len(ties) > 0 {
		w("- %s.\n\n", upperFirst(search.TieRule))
	}
	writeBreakdown(b, in)
	w("### Where each figure comes from\n\n")
	w("- **Source** says how a row's figures were obtained: *measured* — run on the GPU above by cgtune's CUDA engine, timed with CUDA events, memory from NVML; *estimated* — computed by the estimate engine from the GPU's rates and the framework's host costs; *framework* — the framework's own measurement; *job* — the real training job's log.\n")
	w("- **Step ms** is the median steady-state step after capture; **p10–p90** the 10th and 90th percentiles of the measured steps (an estimate computes one step time, so it has none: —); **× eager** the eager step divided by the step.\n")
	w("- **Capture ms** includes the warm-up passes and graph instantiation; **Graph MiB** is the graph memory scaled to the real job's captured micro-batches and layers.\n")
	w("- **Job s** is computed, not measured: the warm-up steps eager, the capture, then the rest of the %d iterations graphed.\n", trainIters(in))
	w("- **Fits** compares the per-GPU memory the job would need with the job GPU's memory: the memory model's breakdown when the engine made one, else the run's peak with its graph memory scaled to the job.\n")
	w("- **Tie**: candidates within the tie band (%s) of a group's fastest tie; the order inside a group comes from the tie-breaks, not the step time.\n\n", tieText(in.Tie))
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// runsText says how many runs the search made now and, for a resumed
// one, how many it read back from the journal instead of running.
func runsText(d search.DoneEvent) string {
	runs := func(n int) string {
		if n == 1 {
			return "1 run"
		}
		return fmt.Sprintf("%d runs", n)
	}
	if d.Resumed == 0 {
		return runs(d.Runs)
	}
	return fmt.Sprintf("%s now, %s read back from the journal (%d in all)", runs(d.Runs), runs(d.Resumed), d.Runs+d.Resumed)
}

// writeBreakdown shows the memory model's per-GPU breakdown of every
// ranked candidate the engine made one for, in ranking order.
func writeBreakdown(b *bytes.Buffer, in Input) {
	var rows []search.Ranked
	for _, r := range in.Done.Ranking {
		if r.Result.Memory.Breakdown != nil && !r.Result.Failed() {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("### Memory per GPU in the job (MiB)\n\n| Candidate | Weights | Gradients | Optimizer | Activations | Graphs | Context | Total | GPU | Fits |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		m := r.Result.Memory.Breakdown
		fits := "yes"
		if !m.Fits {
			fits = "**no**"
		}
		w("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", cell(r.Result.Candidate.Name()), m.Weights, m.Gradients, m.Optimizer, m.Activations, m.Graphs, m.Context, m.Total, m.GPUMiB, fits)
	}
	w("\n")
}

func writeFailed(b *bytes.Buffer, in Input) {
	var failed []search.Ranked
	for _, r := range in.Done.Ranking {
		if r.Result.Failed() {
			failed = append(failed, r)
		}
	}
	if len(failed) == 0 {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## Candidates that failed when run\n\n| Candidate | Error | Message |\n|---|---|---|\n")
	for _, r := range failed {
		w("| %s | %s | %s |\n", cell(r.Result.Candidate.Name()), r.Result.ErrKind, cell(r.Result.Err))
	}
	w("\n")
}

// writeRejected lists the candidates never run, grouped by the rule that
// stopped them (with the message Megatron would print).
func writeRejected(b *bytes.Buffer, in Input) {
	type group struct {
		id, msg string
		names   []string
	}
	var groups []*group
	find := func(id, msg string) *group {
		for _, g := range groups {
			if g.id == id && g.msg == msg {
				return g
			}
		}
		g := &group{id: id, msg: msg}
		groups = append(groups, g)
		return g
	}
	for _, p := range in.Plan {
		if p.Valid() {
			continue
		}
		v := p.Violations[0]
		g := find(v.ID, v.Message)
		name := p.Candidate.Name()
		if len(p.Violations) > 1 {
			name += fmt.Sprintf(" (+%d more rules)", len(p.Violations)-1)
		}
		g.names = append(g.names, name)
		for _, a := range p.Also {
			g.names = append(g.names, a.Name())
		}
	}
	if len(groups) == 0 {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## Candidates not run, and the rule that stopped them\n\n")
	w("Rule ids name Megatron-Bridge, Megatron-Core and perf-harness checks (`cgtune check` prints the same); WILL-FAIL is a capture cgtune knows fails; SPACE a candidate that captures nothing on this model.\n\n")
	w("| Rule | Message | Candidates |\n|---|---|---|\n")
	for _, g := range groups {
		names := g.names
		more := ""
		if len(names) > 12 {
			more = fmt.Sprintf(" and %d more", len(names)-12)
			names = names[:12]
		}
		w("| %s | %s | %s%s |\n", g.id, cell(g.msg), cell(strings.Join(names, ", ")), more)
	}
	w("\n")
}
