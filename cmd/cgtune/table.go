package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/search"
)

// tableWidth is what the headless ranking's lines fit by default: the
// table, the notes under it and the lines after them.
const tableWidth = 160

// column is one column of a table the headless search prints: its head
// and its cell for a row of type R.
type column[R any] struct {
	head string
	cell func(R) string
}

// writeTable writes rows under their columns' heads, each column as wide
// as its widest cell, two spaces apart; every table printed under the
// ranking goes through it, so that they read alike.
func writeTable[R any](w io.Writer, cols []column[R], rows []R) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	cells := make([]string, len(cols))
	for i, c := range cols {
		cells[i] = c.head
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
	for _, r := range rows {
		for i, c := range cols {
			cells[i] = c.cell(r)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
}

// wrapLine is prefix and text broken at spaces into lines of at most
// width characters, the lines after the first indented as deep as prefix
// (a word longer than a line stays whole).
func wrapLine(prefix, text string, width int) string {
	indent := strings.Repeat(" ", utf8.RuneCountInString(prefix))
	return prefix + wrap(text, width-len(indent), indent)
}

// tableRow is a row of the ranking table: a measured configuration with
// the warm-ups folded into it (search.Row) and its note.
type tableRow struct {
	search.Row
	note string
}

// rankingTable is the ranking as the headless search prints it: one row
// per measured configuration, ranked as the search ranked its best
// warm-up, the notes of each row under the table keyed by that rank (in a
// NOTE column with wide).
type rankingTable struct {
	d    search.DoneEvent
	plan []search.Planned
	cfg  search.Config
	rows []tableRow
	wide bool
}

func newRankingTable(d search.DoneEvent, plan []search.Planned, cfg search.Config, wide bool) *rankingTable {
	t := &rankingTable{d: d, plan: plan, cfg: cfg, wide: wide}
	for _, r := range search.Rows(d.Ranking) {
		t.rows = append(t.rows, tableRow{Row: r})
	}
	for i := range t.rows {
		t.rows[i].note = t.rowNote(t.rows[i].Row)
	}
	return t
}

// columns are the table's columns: the spread and the source only where
// they tell something (an estimate has no spread; one source is said
// under the table), every one with wide.
func (t *rankingTable) columns() []column[tableRow] {
	num := func(f func(r tableRow) string) func(r tableRow) string {
		return func(r tableRow) string {
			if r.Result.Failed() {
				return dash
			}
			return f(r)
		}
	}
	cols := []column[tableRow]{
		{"RANK", func(r tableRow) string { return rankText(r.Ranked) }},
		{"CANDIDATE", func(r tableRow) string { return r.Result.Candidate.Name() }},
		{"SAME RUN", func(r tableRow) string { return sameRunText(r.Row) }},
		{"STEP MS", num(func(r tableRow) string { return fmt.Sprintf("%.2f", r.Result.Step.Median) })},
	}
	if t.wide || t.anySpread() {
		cols = append(cols, column[tableRow]{"P10–P90", num(func(r tableRow) string { return spreadText(r.Result) })})
	}
	cols = append(cols,
		column[tableRow]{"SPEED-UP", num(func(r tableRow) string { return speedupText(r.Result.Speedup, "×") })},
		column[tableRow]{"VS RECIPE", num(func(r tableRow) string { return vsText(r.VsReference) })},
		column[tableRow]{"CAPTURE MS", num(func(r tableRow) string { return fmt.Sprintf("%.0f", r.Result.CaptureMs) })},
		column[tableRow]{"GRAPH MiB", num(func(r tableRow) string { return fmt.Sprint(r.Result.Memory.JobGraphMiB()) })},
		column[tableRow]{"JOB S", num(func(r tableRow) string { return fmt.Sprintf("%.1f", r.JobMs/1000) })},
		column[tableRow]{"FITS", num(func(r tableRow) string {
			if r.Fits {
				return "yes"
			}
			return "NO"
		})},
		column[tableRow]{"TIE", num(func(r tableRow) string {
			if r.Tie == 0 {
				return dash
			}
			return fmt.Sprint(r.Tie)
		})},
	)
	if t.wide || len(t.sources()) > 1 {
		cols = append(cols, column[tableRow]{"SOURCE", func(r tableRow) string { return string(r.Result.Source) }})
	}
	if t.wide {
		cols = append(cols, column[tableRow]{"NOTE", func(r tableRow) string { return r.note }})
	}
	return cols
}

// sameRunText lists the other warm-ups whose figures come from the row's
// run, each with its rank: "w2 #3, w3 #4".
func sameRunText(r search.Row) string {
	if len(r.Shared) == 0 {
		return dash
	}
	ws := make([]string, len(r.Shared))
	for i, s := range r.Shared {
		ws[i] = fmt.Sprintf("w%d #%s", s.Result.Candidate.Warmup, rankText(s))
	}
	return strings.Join(ws, ", ")
}

func (t *rankingTable) anySpread() bool {
	for _, r := range t.rows {
		if !r.Result.Failed() && spreadText(r.Result) != dash {
			return true
		}
	}
	return false
}

// sources are the sources of the table's results, in order of first use.
func (t *rankingTable) sources() []engine.Source {
	var out []engine.Source
	seen := map[engine.Source]bool{}
	for _, r := range t.rows {
		if s := r.Result.Source; !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// rowNote is what a row's note says: whether it is the recipe's setting,
// why it ranks where it does (ties, memory), a failure, and the other
// spellings of it that name only layers the model has. How a folded
// warm-up was derived is the SAME RUN column's business.
func (t *rankingTable) rowNote(r search.Row) string {
	res := r.Result
	note := strings.TrimPrefix(strings.TrimPrefix(r.Note, r.Origin), "; ")
	if res.Failed() {
		note = fmt.Sprintf("%s failed (%s): %s", res.Candidate.Name(), res.ErrKind, res.Err)
	}
	if r.Derived && r.Origin != "" && !strings.HasPrefix(r.Origin, "derived from w") {
		note = joinParts(r.Origin, note) // none, from the runs' eager baselines
	}
	return joinParts(referenceMark(t.d, res.Candidate), t.withRanks(note), t.aliasText(res.Candidate))
}

// withRanks adds the rank of each candidate a note names ("tied with te
// attn w3 (rank 2) within noise").
func (t *rankingTable) withRanks(note string) string {
	for _, r := range t.d.Ranking {
		if r.Result.Failed() || r.Rank <= 0 {
			continue
		}
		name := r.Result.Candidate.Name()
		note = strings.ReplaceAll(note, "with "+name+" within", fmt.Sprintf("with %s (rank %d) within", name, r.Rank))
		note = strings.ReplaceAll(note, "fastest, "+name+")", fmt.Sprintf("fastest, %s, rank %d)", name, r.Rank))
	}
	return note
}

// aliasText is "also spelled: ..." for a row whose plan row has other
// spellings naming only layers the model has.
func (t *rankingTable) aliasText(c presets.Candidate) string {
	for _, p := range t.plan {
		if p.Candidate.Key() != c.Key() {
			continue
		}
		also := search.ShownAlso(p, t.cfg.Model.Arch)
		if len(also) == 0 {
			return ""
		}
		names := make([]string, len(also))
		for i, a := range also {
			names[i] = a.Name()
		}
		return "also spelled: " + strings.Join(names, ", ")
	}
	return ""
}

// print writes the caption (what an estimate's figures rest on), the
// table, the notes by rank and what the columns mean.
func (t *rankingTable) print(w io.Writer) {
	basis := search.Basis(t.d.Ranking)
	if basis != "" {
		fmt.Fprintln(w, wrapLine("", basis, tableWidth))
	}
	writeTable(w, t.columns(), t.rows)
	if src := t.sources(); len(src) == 1 && basis == "" {
		fmt.Fprintf(w, "source: %s (%s)\n", src[0], sourceMeaning(src[0]))
	}
	if !t.wide {
		t.printNotes(w)
	}
	if t.anyShared() {
		fmt.Fprintln(w, wrapLine("", "SAME RUN: the other warm-ups whose figures come from the row's run, with their ranks (the warm-up does not change the steady state; their capture and job times are scaled)", tableWidth))
	}
	if line := t.dropLine(); line != "" {
		fmt.Fprintln(w, wrapLine("every row: ", line, tableWidth))
	}
}

// dropLine says, when the search's recipe makes the stock recipe's
// dropless experts drop-and-pad (a --set, a preset's layout), that tokens
// over an expert's capacity are dropped, a change to training, with the
// speed-up over the recipe's setting the winner was ranked with under it.
func (t *rankingTable) dropLine() string {
	r := t.d.Winner
	for i := 0; r == nil && i < len(t.rows); i++ {
		if !t.rows[i].Result.Failed() {
			r = &t.rows[i].Ranked
		}
	}
	if r == nil {
		return ""
	}
	drop := recipe.NewRecommender(t.cfg.Target()).Overrides(r.Result.Candidate).DropsTokens
	if drop == "" {
		return ""
	}
	return search.DropsTokensLine(drop, *r)
}

func (t *rankingTable) anyShared() bool {
	for _, r := range t.rows {
		if len(r.Shared) > 0 {
			return true
		}
	}
	return false
}

// printNotes writes each row's note under the table, keyed by its rank
// (a dash for a failure, whose note names it), wrapped to the table's
// width.
func (t *rankingTable) printNotes(w io.Writer) {
	head := false
	for _, r := range t.rows {
		if r.note == "" {
			continue
		}
		if !head {
			fmt.Fprintln(w, "\nnotes by rank:")
			head = true
		}
		fmt.Fprintln(w, wrapLine(fmt.Sprintf("%4s  ", rankText(r.Ranked)), r.note, tableWidth))
	}
}

// sourceMeaning says what a result's source is, for the line under a
// table of one source.
func sourceMeaning(s engine.Source) string {
	switch s {
	case engine.SourceFramework:
		return "measured on Megatron-Core on this node"
	case engine.SourceJob:
		return "measured by the training job"
	case engine.SourceMeasured:
		return "measured by cgtune's emulation on this GPU"
	}
	return "estimated, not measured"
}
