package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"cgtune/presets"
)

// tableHeader is the ranking table's header line and its first row.
func tableHeader(t *testing.T, out string) (header, first string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "RANK  ") && i+1 < len(lines) {
			return l, lines[i+1]
		}
	}
	t.Fatalf("no ranking table in:\n%s", out)
	return "", ""
}

// tableRowsOf are the ranking table's rows, each split into its columns
// by the header's column starts.
func tableRowsOf(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(out, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "RANK  ") {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatalf("no ranking table in:\n%s", out)
	}
	header := []rune(lines[start])
	var names []string
	var at []int
	for i := 0; i < len(header); {
		j := i
		for j < len(header) && !(header[j] == ' ' && j+1 < len(header) && header[j+1] == ' ') {
			j++
		}
		names, at = append(names, string(header[i:j])), append(at, i)
		for j < len(header) && header[j] == ' ' {
			j++
		}
		i = j
	}
	var rows []map[string]string
	for _, l := range lines[start+1:] {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "source: ") || strings.HasPrefix(l, "notes by rank") {
			break
		}
		r := []rune(l)
		row := map[string]string{}
		for k, n := range names {
			end := len(r)
			if k+1 < len(at) && at[k+1] < len(r) {
				end = at[k+1]
			}
			if at[k] < len(r) {
				row[n] = strings.TrimSpace(string(r[at[k]:end]))
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// The headless ranking fits 160 columns for every built-in model (the
// estimate engine, each model on its first GPU type's recipe): one row per
// measured configuration, the warm-ups derived from its run folded into
// it, notes under the table, and no note names a layer kind the model
// lacks.
func TestRankingFits160ColumnsForEveryModel(t *testing.T) {
	isolate(t)
	for _, name := range presets.BuiltinModelNames() {
		t.Run(name, func(t *testing.T) {
			m, err := presets.LookupModel(name)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			code, out, errb := cgtune(t, "--headless", "--model", name, "--gpu-type", m.GPUs()[0], "--engine", "estimate",
				"--run-dir", filepath.Join(dir, "run"), "--emit", filepath.Join(dir, "o.yaml"))
			if code != exitOK {
				t.Fatalf("exit %d\n%s", code, errb)
			}
			for i, l := range strings.Split(out, "\n") {
				if n := utf8.RuneCountInString(l); n > tableWidth {
					t.Errorf("line %d is %d columns wide: %q", i+1, n, l)
				}
			}
			rows := tableRowsOf(t, out)
			seen := map[string]bool{}
			last := 0
			for i, r := range rows {
				// Ranks go down the table; failures, unranked, come last.
				n, err := strconv.Atoi(r["RANK"])
				switch {
				case r["RANK"] == dash:
					last = math.MaxInt
				case err != nil || n <= last:
					t.Errorf("row %d is ranked %q after rank %d", i+1, r["RANK"], last)
				default:
					last = n
				}
				c, err := presets.ParseName(r["CANDIDATE"])
				if err != nil {
					t.Fatalf("row %d: %v", i+1, err)
				}
				if seen[c.Label()] {
					t.Errorf("%s has two rows: its warm-ups share one run", c.Label())
				}
				seen[c.Label()] = true
			}
			if strings.Contains(out, "derived from w") {
				t.Errorf("a row says it was derived instead of being folded:\n%s", out)
			}
			if !m.Arch.HasMamba() && strings.Contains(out, presets.ScopeMamba) {
				t.Errorf("%s has no Mamba layer, yet the ranking names one:\n%s", name, out)
			}
			if m.Arch.MoE == nil && strings.Contains(out, "moe") {
				t.Errorf("%s has no MoE layer, yet the ranking names one:\n%s", name, out)
			}
		})
	}
}

// Halving runs one warm-up of each impl×scope and derives the others: the
// table shows each such run once, under the rank of its best warm-up, the
// others in SAME RUN with their ranks; every result the JSON ranks is in
// the table once, under the rank the JSON gives it.
func TestRankingFoldsTheWarmupsOfOneRun(t *testing.T) {
	isolate(t)
	code, out, errb := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb)
	}
	code, js, _ := cgtune(t, "--headless", "--model", "llama3_8b", "--engine", "estimate", "--json")
	var res struct {
		Ranking []struct {
			Rank        int    `json:"rank"`
			Name        string `json:"name"`
			DerivedFrom int    `json:"derived_from_warmup"`
		} `json:"ranking"`
	}
	if err := json.Unmarshal([]byte(js), &res); code != exitOK || err != nil {
		t.Fatalf("--json: exit %d %v", code, err)
	}
	rank, from := map[string]string{}, map[string]int{}
	for _, r := range res.Ranking {
		rank[r.Name], from[r.Name] = strconv.Itoa(r.Rank), r.DerivedFrom
	}
	shown := map[string]int{}
	rows := tableRowsOf(t, out)
	folded := 0
	for _, r := range rows {
		name := r["CANDIDATE"]
		shown[name]++
		if r["RANK"] != rank[name] {
			t.Errorf("%s is ranked %s in the table, %s in the JSON", name, r["RANK"], rank[name])
		}
		if r["SAME RUN"] == dash {
			continue
		}
		c, _ := presets.ParseName(name)
		for _, w := range strings.Split(r["SAME RUN"], ", ") {
			folded++
			warm, at, _ := strings.Cut(w, " #")
			n, err := strconv.Atoi(strings.TrimPrefix(warm, "w"))
			other := c
			other.Warmup = n
			switch {
			case err != nil || n == c.Warmup:
				t.Errorf("%s: SAME RUN %q", name, r["SAME RUN"])
			case rank[other.Name()] != at:
				t.Errorf("%s: SAME RUN says %s is rank %s, the JSON %s", name, other.Name(), at, rank[other.Name()])
			case from[other.Name()] == 0 && from[name] == 0:
				t.Errorf("%s and %s were both run, yet share a row", name, other.Name())
			}
			shown[other.Name()]++
		}
	}
	for name := range rank {
		if shown[name] != 1 {
			t.Errorf("%s is in the table %d times", name, shown[name])
		}
	}
	if folded == 0 || len(rows) >= len(res.Ranking) {
		t.Errorf("%d table rows, %d folded warm-ups, for %d ranked results:\n%s", len(rows), folded, len(res.Ranking), out)
	}
	if !strings.Contains(out, "\nnotes by rank:\n   1  the recipe's own setting") {
		t.Errorf("the notes are not under the table keyed by rank:\n%s", out)
	}
}
