package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"cgtune/stepmodel"
)

// estimateOutputs are the outputs of one estimate-engine search: stderr's
// first line, stdout's (the table's caption), the emitted file, the
// report, --json's basis, and the whole of stdout and stderr.
type estimateOutputs struct {
	first, caption, file, report, basis string
	all                                 string
}

func estimateSearch(t *testing.T, args ...string) estimateOutputs {
	t.Helper()
	dir := t.TempDir()
	base := append([]string{"--headless", "--engine", "estimate"}, args...)
	emit, rep := filepath.Join(dir, "o.yaml"), filepath.Join(dir, "r.md")
	code, out, errb := cgtune(t, append(base, "--emit", emit, "--report", rep, "--run-dir", filepath.Join(dir, "run"))...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb)
	}
	code, js, _ := cgtune(t, append(base, "--json", "--run-dir", filepath.Join(dir, "json"))...)
	var res struct{ Basis string }
	if err := json.Unmarshal([]byte(js), &res); code != exitOK || err != nil {
		t.Fatalf("--json: exit %d %v", code, err)
	}
	file, _ := os.ReadFile(emit)
	report, _ := os.ReadFile(rep)
	first, _, _ := strings.Cut(errb, "\n")
	caption, _, _ := strings.Cut(out, "\nRANK ")
	return estimateOutputs{first: first, caption: caption, file: string(file), report: string(report), basis: res.Basis,
		all: out + errb + string(file) + string(report)}
}

func (o estimateOutputs) each() map[string]string {
	return map[string]string{"stderr's first line": o.first, "the table's caption": o.caption, "the emitted file": o.file, "the report": o.report, "--json's basis": o.basis}
}

// calledMeasured finds an estimate called a measurement.
var calledMeasured = regexp.MustCompile(`measured by cgtune's estimate|estimate[^.;\n]{0,40}\bmeasured\)`)

// Every output of an estimate says what its host costs rest on and what a
// GPU run would add: without a framework profile, that graph gains are a
// lower bound; with one, which profile and where it was measured. None
// calls the estimate a measurement.
func TestEstimateOutputsSayWhatTheyRestOn(t *testing.T) {
	home(t)
	without := estimateSearch(t, "--model", "llama3_8b", "--gpu-type", "h100")
	for where, text := range without.each() {
		if !strings.Contains(text, "ESTIMATED") || !strings.Contains(text, "LOWER BOUND") || !strings.Contains(text, "a GPU run measures") {
			t.Errorf("without a profile, %s does not say the figures are an estimate, a lower bound, and what a GPU run adds:\n%s", where, text)
		}
	}
	if m := calledMeasured.FindString(without.all); m != "" {
		t.Errorf("an output calls the estimate measured: %q", m)
	}

	m := mustModel(t, "llama3_8b")
	l, _ := m.Layout("h100")
	dir, _ := stepmodel.DefaultProfileDir()
	if _, err := stepmodel.SaveProfile(dir, gpuNodeProfile(m, l)); err != nil {
		t.Fatal(err)
	}
	with := estimateSearch(t, "--model", "llama3_8b", "--gpu-type", "h100")
	origin := "NVIDIA H100 80GB HBM3, driver 580.65.06, 2026-11-30, host gpu-node-7"
	for where, text := range with.each() {
		if !strings.Contains(text, "ESTIMATED") || !strings.Contains(text, "framework profile") || !strings.Contains(text, " on "+origin) ||
			!strings.Contains(text, "a GPU run") || strings.Contains(text, "LOWER BOUND") {
			t.Errorf("with a profile, %s does not name it and where it was measured, or what a GPU run adds:\n%s", where, text)
		}
	}
}

// When every candidate lies within one tie band of the others, the
// ranking says in one line that the estimate cannot tell them apart; it
// says nothing of the kind when one stands apart.
func TestEstimateSaysWhenItCannotTellCandidatesApart(t *testing.T) {
	isolate(t)
	for _, tc := range []struct{ model, gpu string }{{"qwen3_30b_a3b", "h100"}, {"llama31_405b", "h100"}, {"gpt_oss_20b", "b300"}} {
		t.Run(tc.model, func(t *testing.T) {
			args := []string{"--headless", "--model", tc.model, "--gpu-type", tc.gpu, "--engine", "estimate"}
			code, js, _ := cgtune(t, append(args, "--json", "--run-dir", filepath.Join(t.TempDir(), "json"))...)
			var res struct {
				Ranking []struct {
					Tie       int     `json:"tie"`
					TieBandMs float64 `json:"tie_band_ms"`
					Result    struct {
						Error string `json:"error"`
						Step  struct {
							Median float64 `json:"median_ms"`
						} `json:"step"`
					} `json:"result"`
				} `json:"ranking"`
			}
			if err := json.Unmarshal([]byte(js), &res); code != exitOK || err != nil {
				t.Fatalf("--json: exit %d %v", code, err)
			}
			lo, hi, band, oneTie := 0.0, 0.0, 0.0, true
			for i, r := range res.Ranking {
				if r.Result.Error != "" {
					continue
				}
				s := r.Result.Step.Median
				if i == 0 || s < lo {
					lo = s
				}
				hi, band = max(hi, s), max(band, r.TieBandMs)
				oneTie = oneTie && r.Tie > 0
			}
			oneTie = oneTie && hi-lo <= band
			code, out, _ := cgtune(t, append(args, "--run-dir", filepath.Join(t.TempDir(), "text"))...)
			says := regexp.MustCompile(`(?m)^all \d+ candidates lie within one tie band \(.*\): the estimate cannot tell them apart`).MatchString(out)
			if code != exitOK || says != oneTie {
				t.Errorf("steps %.2f–%.2f ms, tie band ±%.2f ms: one tie %v, the ranking says so %v\n%s", lo, hi, band, oneTie, says, out)
			}
		})
	}
}
