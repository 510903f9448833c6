package recipe

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cgtune/presets"
)

// diffCase is one line of the differential corpus (tools/mbdiff,
// docs/differential.md): a `cgtune check` command line and what
// Megatron-Bridge's own start-up did with it.
type diffCase struct {
	Model   string   `json:"model"`
	GPU     string   `json:"gpu"`
	MBridge string   `json:"mbridge"`
	Impl    *string  `json:"impl"`   // null: --impl not given
	Scopes  []string `json:"scopes"` // null: --scope not given
	Warmup  int      `json:"warmup"`
	// Base is the layout's recipe as the release's recipe function built
	// it, Set what the case changes on top of it (--set); both in --set
	// spelling.
	Base     map[string]string `json:"base"`
	Set      map[string]string `json:"set"`
	Accept   bool              `json:"accept"`
	Message  string            `json:"message"`
	RaisedBy string            `json:"raised_by"`
	Recipe   string            `json:"recipe"`
	Toggle   string            `json:"toggle"`
}

func (c diffCase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cgtune check --model %s --gpu-type %s --mbridge %s", c.Model, c.GPU, c.MBridge)
	if c.Impl != nil {
		fmt.Fprintf(&b, " --impl %s", *c.Impl)
	}
	if c.Scopes != nil {
		fmt.Fprintf(&b, " --scope %s", strings.Join(c.Scopes, ","))
	}
	fmt.Fprintf(&b, " --warmup %d", c.Warmup)
	for _, k := range slices.Sorted(maps.Keys(c.Set)) {
		fmt.Fprintf(&b, " --set %s=%s", k, c.Set[k])
	}
	fmt.Fprintf(&b, " (recipe %s)", c.Recipe)
	return b.String()
}

func readCorpus(t *testing.T, path string) []diffCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer gz.Close()
		r = gz
	}
	var out []diffCase
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var c diffCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// judge decides cases as `cgtune check` does, keeping each built-in model
// it looked up.
type judge map[string]presets.Model

// verdict is what `cgtune check --model M --gpu-type G --mbridge V --impl
// I --scope S --warmup N --set ...` decides for the case, on a layout whose
// recipe settings are the case's base (as a team preset's layout carries
// them): the rules' first violation's message, "" when it is valid. It
// stops short of the capture plan's WILL-FAIL verdict, a prediction about
// the GPU run that MB's start-up does not make.
func (j judge) verdict(c diffCase) (string, error) {
	m, ok := j[c.Model]
	if !ok {
		var err error
		if m, err = presets.LookupModel(c.Model); err != nil {
			return "", err
		}
		j[c.Model] = m
	}
	l, err := m.Layout(c.GPU)
	if err != nil {
		return "", err
	}
	l.Settings = c.Base
	cfg, err := New(m, l, c.MBridge)
	if err != nil {
		return "", err
	}
	for _, k := range slices.Sorted(maps.Keys(c.Set)) {
		if err := cfg.ApplySet(k + "=" + c.Set[k]); err != nil {
			return "", err
		}
	}
	cand := presets.Candidate{Scopes: c.Scopes, Warmup: c.Warmup}
	if c.Impl != nil {
		cand.Impl = *c.Impl
	}
	_, vs := ApplyHarnessFlags(cfg, cand, c.MBridge)
	if len(vs) == 0 {
		vs = slices.DeleteFunc(Check(cfg, c.MBridge).Violations, pastStartUp)
	}
	if len(vs) == 0 {
		return "", nil
	}
	return vs[0].Message, nil
}

// pastStartUp reports whether v is a check the harness does not reach:
// one of the running program (the first training iteration, the first
// forward step) or of Megatron-FSDP's wrapper, which asserts FSDP-01 when
// it wraps the built model (MLM megatron/core/distributed/fsdp/
// mcore_fsdp_adapter.py); the harness stops when the model is built.
func pastStartUp(v Violation) bool {
	r, ok := LookupRule(v.ID)
	return ok && (v.ID == "FSDP-01" || slices.Contains(r.stages, stageRuntime))
}

// disagreement says how cgtune's verdict on c differs from MB's; "" when
// they agree on accept/reject and on the first failure's message.
func (j judge) disagreement(c diffCase) string {
	got, err := j.verdict(c)
	switch {
	case err != nil:
		return fmt.Sprintf("%s\n\tcgtune cannot read it: %v", c, err)
	case (got == "") != c.Accept:
		return fmt.Sprintf("%s\n\tMB: %s\n\tcgtune: %s", c, verdictText(c.Accept, c.Message, c.RaisedBy), verdictText(got == "", got, ""))
	case got != c.Message:
		return fmt.Sprintf("%s\n\tMB: %q (%s)\n\tcgtune: %q", c, c.Message, c.RaisedBy, got)
	}
	return ""
}

func verdictText(accept bool, msg, by string) string {
	switch {
	case accept:
		return "valid"
	case by != "":
		return fmt.Sprintf("%q (%s)", msg, by)
	}
	return fmt.Sprintf("%q", msg)
}

// TestDifferentialCorpus checks cgtune's rule table against every case
// Megatron-Bridge's and Megatron-Core's own validators judged
// (testdata/differential, written by tools/mbdiff): the same verdict, and
// for a rejection the same first message.
func TestDifferentialCorpus(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "differential", "mb-*.jsonl*"))
	if len(files) == 0 {
		t.Fatal("no corpus in testdata/differential")
	}
	j := judge{}
	total, releases := 0, map[string]bool{}
	for _, f := range files {
		cs := readCorpus(t, f)
		accepted := 0
		var bad []string
		for _, c := range cs {
			releases[c.MBridge] = true
			if c.Accept {
				accepted++
			}
			if d := j.disagreement(c); d != "" {
				bad = append(bad, d)
			}
		}
		total += len(cs)
		t.Logf("%s: %d cases (%d accepted, %d rejected): %d agree", filepath.Base(f), len(cs), accepted, len(cs)-accepted, len(cs)-len(bad))
		if len(bad) > 0 {
			shown := bad[:min(len(bad), 10)]
			t.Errorf("%s: %d of %d cases disagree; the first %d:\n%s", filepath.Base(f), len(bad), len(cs), len(shown), strings.Join(shown, "\n"))
		}
	}
	if total < 1000 || !releases["0.4"] || !releases["0.6"] {
		t.Errorf("the corpus has %d cases of MB %v; want at least 1000, of 0.4 and 0.6", total, slices.Sorted(maps.Keys(releases)))
	}
}
