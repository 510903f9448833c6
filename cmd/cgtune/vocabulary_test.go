package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"cgtune/presets"
)

// vocabularyPreset is a space written in the names cgtune prints (te,
// whole-layer) on MB 0.6, where the full-iteration graph is its own impl.
const vocabularyPreset = `version: 1
name: vocabulary
model: qwen3_30b_a3b
gpu: h100
space:
  impls: [none, local, te]
  scopes: [[whole-layer], [attn], [attn, moe_router], [full_iteration]]
  warmups: [1, 3]
mbridge: "0.6"
`

// Every name an output prints reads back as the candidate it names: the
// progress lines, the ranking table, the JSON ranking and sample events,
// validate's dry run. Given back to check and emit (as --candidate, or
// word by word as --impl/--scope/--warmup), each is the configuration
// the search ranked under that name.
func TestEveryPrintedNameReadsBack(t *testing.T) {
	isolate(t)
	preset := writeFile(t, "vocabulary.yaml", vocabularyPreset)
	dir := t.TempDir()
	args := []string{"--headless", "--preset", preset, "--engine", "estimate", "--strategy", "exhaustive"}
	code, js, events := cgtune(t, append(args, "--json", "--run-dir", filepath.Join(dir, "json"))...)
	if code != exitOK {
		t.Fatalf("--json: exit %d\n%s", code, events)
	}
	var res struct {
		Ranking []struct {
			Name   string                                `json:"name"`
			Result struct{ Candidate presets.Candidate } `json:"result"`
		} `json:"ranking"`
	}
	if err := json.Unmarshal([]byte(js), &res); err != nil || len(res.Ranking) < 4 {
		t.Fatalf("--json: %v, %d ranked", err, len(res.Ranking))
	}
	ranked := map[string]string{} // name → the key of the candidate ranked under it
	for _, r := range res.Ranking {
		ranked[r.Name] = r.Result.Candidate.Key()
	}
	// reads checks that a printed name parses back to the candidate
	// ranked under that name.
	reads := func(where, name string) {
		t.Helper()
		c, err := presets.ParseName(name)
		switch {
		case err != nil:
			t.Errorf("%s prints %q, which does not read back: %v", where, name, err)
		case ranked[name] == "":
			t.Errorf("%s prints %q, which names no ranked candidate", where, name)
		case c.Key() != ranked[name]:
			t.Errorf("%s prints %q: it reads back as %s, the search ranked %s", where, name, c.Key(), ranked[name])
		}
	}
	for name := range ranked {
		reads("the JSON ranking", name)
	}
	samples := 0
	for _, l := range strings.Split(events, "\n") {
		var ev struct {
			Event  string
			Sample struct{ Candidate string }
		}
		if json.Unmarshal([]byte(l), &ev) == nil && ev.Event == "sample" {
			samples++
			reads("a JSON sample event", ev.Sample.Candidate)
		}
	}
	run := filepath.Join(dir, "text")
	code, out, errb := cgtune(t, append(args, "--run-dir", run)...)
	if code != exitOK || samples == 0 {
		t.Fatalf("exit %d, %d sample events\n%s", code, samples, errb)
	}
	progress := regexp.MustCompile(`(?m)^\[\d+/\d+\] round \d+ GPU \d+ (.+?): `).FindAllStringSubmatch(errb, -1)
	for _, m := range progress {
		reads("a progress line", m[1])
	}
	cells := tableNames(out)
	for _, name := range cells {
		reads("the ranking table", name)
	}
	code, dry, errb := cgtune(t, "validate", run, "--launcher", "local", "--command", fakeJobCommand(t), "--dry-run", "--job-te", "yes")
	heads := regexp.MustCompile(`(?m)^# (.+)$`).FindAllStringSubmatch(dry, -1)
	if code != exitOK || len(progress) == 0 || len(cells) == 0 || len(heads) == 0 {
		t.Fatalf("%d progress lines, %d table rows, validate exit %d with %d jobs\n%s%s", len(progress), len(cells), code, len(heads), dry, errb)
	}
	for _, m := range heads {
		reads("validate --dry-run", m[1])
	}
	for name := range ranked {
		t.Run(name, func(t *testing.T) { sameAsItsHarnessValues(t, name) })
	}
}

// sameAsItsHarnessValues: check and emit take a printed name as
// --candidate and its words as --impl/--scope/--warmup ("--impl te
// --scope whole-layer"), and mean by both what the harness values mean.
func sameAsItsHarnessValues(t *testing.T, name string) {
	c, _ := presets.ParseName(name)
	base := []string{"--model", "qwen3_30b_a3b", "--gpu-type", "h100", "--mbridge", "0.6"}
	harness := []string{"--impl", c.Impl, "--warmup", strconv.Itoa(c.Warmup)}
	if len(c.Scopes) > 0 {
		harness = append(harness, "--scope", strings.Join(c.Scopes, ","))
	}
	words := strings.Fields(name)
	printed := []string{"--impl", words[0]}
	if len(words) == 3 {
		printed = append(printed, "--scope", words[1])
	}
	if c.Graphed() {
		printed = append(printed, "--warmup", strings.TrimPrefix(words[len(words)-1], "w"))
	}
	for _, cmd := range []string{"check", "emit"} {
		wantCode, want, wantErr := cgtune(t, append(append([]string{cmd}, base...), harness...)...)
		if wantCode == exitBadInput {
			t.Fatalf("%s with the harness's values %v: exit 2: %s", cmd, harness, wantErr)
		}
		for _, in := range [][]string{{"--candidate", name}, printed} {
			code, out, errb := cgtune(t, append(append([]string{cmd}, base...), in...)...)
			if code != wantCode || out != want {
				t.Errorf("%s %q: exit %d, want %d as with %v\n%s%s\nwant:\n%s%s", cmd, in, code, wantCode, harness, out, errb, want, wantErr)
			}
		}
	}
}

// tableNames are the CANDIDATE cells of the ranking table: the second
// column, columns being two or more spaces apart.
func tableNames(out string) []string {
	var names []string
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "RANK "):
			in = true
		case in && strings.TrimSpace(l) == "":
			return names
		case in:
			if f := regexp.MustCompile(`\s{2,}`).Split(l, -1); len(f) > 1 {
				names = append(names, f[1])
			}
		}
	}
	return names
}
