// Command compare sets the what-if rows of a search (cgtune --what-if)
// next to the same candidates in a search given the rows' changes with
// --set, as bench/whatif/run.sh writes them:
//
//	go run ./bench/whatif/compare OUT_DIR
//
// reads OUT_DIR/whatif.json and OUT_DIR/set.json (cgtune --headless
// --json) and prints a Markdown table for a dated document: for each
// what-if row, its step and its eager step with the changes against the
// --set search's step and eager step of the same candidate (one step,
// measured twice), its speed-up over the recipe's own eager step against
// the --set search's speed-up over its own, and how each change was
// priced.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"cgtune/internal/fileio"
	"cgtune/search"
)

// maxResultBytes bounds a search's JSON result.
const maxResultBytes = 64 << 20

// result is what cgtune --headless --json writes on stdout (the parts
// this table needs).
type result struct {
	search.DoneEvent
	Model   string            `json:"model"`
	GPUType string            `json:"gpu_type"`
	MBridge string            `json:"mbridge"`
	Engine  string            `json:"engine"`
	Sets    map[string]string `json:"sets"`
}

func load(path string) (result, error) {
	var r result
	data, err := fileio.ReadFileLimited(path, maxResultBytes)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// plainKey is a ranked row's candidate without its enabling changes.
func plainKey(r search.Ranked) string {
	c := r.Result.Candidate
	c.WhatIf = nil
	return c.Key()
}

// pair is a what-if row and the --set search's row of the same
// candidate (nil when that search did not rank it).
type pair struct {
	whatIf search.Ranked
	set    *search.Ranked
}

func pairs(whatIf, set result) []pair {
	var out []pair
	for _, w := range whatIf.WhatIf {
		p := pair{whatIf: w}
		for i := range set.Ranking {
			if plainKey(set.Ranking[i]) == plainKey(w) && !set.Ranking[i].Result.Failed() {
				p.set = &set.Ranking[i]
			}
		}
		out = append(out, p)
	}
	return out
}

// pct is b relative to a, as a signed percentage.
func pct(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%+.1f%%", 100*(b/a-1))
}

func ms(v float64) string {
	if v <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", v)
}

func times(v float64) string {
	if v <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.3f×", v)
}

// render writes the table.
func render(w io.Writer, whatIf, set result) {
	fmt.Fprintf(w, "%s on its %s recipe, MB %s, %s engine. What-if search: `--what-if`; the other: `%s`.\n\n",
		whatIf.Model, whatIf.GPUType, whatIf.MBridge, whatIf.Engine, setFlags(set.Sets))
	fmt.Fprintln(w, "| candidate | changes | source | step ms (what-if) | step ms (--set) | Δ | eager with the changes ms (what-if) | eager ms (--set) | Δ | × recipe's eager (what-if) | changes alone | graph gain | × own eager (--set) |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var priced []string
	for _, p := range pairs(whatIf, set) {
		r, wi := p.whatIf.Result, p.whatIf.WhatIf
		plain := r.Candidate
		plain.WhatIf = nil
		row := []string{fmt.Sprintf("%s w%d", plain.Label(), plain.Warmup), strings.Join(r.Candidate.WhatIf, ", "), string(r.Source)}
		if r.Failed() || wi == nil {
			row = append(row, "failed: "+r.Err)
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
			continue
		}
		setStep, setEager, setSpeedup := 0.0, 0.0, 0.0
		if p.set != nil {
			setStep, setEager, setSpeedup = p.set.Result.Step.Median, p.set.Result.Eager.Median, p.set.Result.Speedup
		}
		row = append(row, ms(r.Step.Median), ms(setStep), pct(setStep, r.Step.Median),
			ms(wi.ChangedEager.Median), ms(setEager), pct(setEager, wi.ChangedEager.Median),
			times(r.Speedup), times(wi.ChangeSpeedup), times(wi.GraphSpeedup), times(setSpeedup))
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		for _, c := range wi.Changes {
			line := fmt.Sprintf("- %s (%s): %s", c.Name, r.Source, c.Priced)
			if !slices.Contains(priced, line) {
				priced = append(priced, line)
			}
		}
		if wi.Baseline != "" {
			if line := "- × recipe's eager is over " + wi.Baseline; !slices.Contains(priced, line) {
				priced = append(priced, line)
			}
		}
	}
	fmt.Fprintln(w)
	for _, l := range priced {
		fmt.Fprintln(w, l)
	}
}

// setFlags writes --set values as the command line gave them.
func setFlags(sets map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(sets)) {
		parts = append(parts, "--set "+k+"="+sets[k])
	}
	return strings.Join(parts, " ")
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./bench/whatif/compare OUT_DIR (the folder bench/whatif/run.sh wrote)")
		os.Exit(2)
	}
	whatIf, err := load(filepath.Join(os.Args[1], "whatif.json"))
	if err == nil && len(whatIf.WhatIf) == 0 {
		err = fmt.Errorf("%s: no what-if row", filepath.Join(os.Args[1], "whatif.json"))
	}
	var set result
	if err == nil {
		set, err = load(filepath.Join(os.Args[1], "set.json"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	render(os.Stdout, whatIf, set)
}
