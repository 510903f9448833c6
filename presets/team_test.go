package presets

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "presets", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParsePresetValid(t *testing.T) {
	p, err := ParsePreset("qwen-gb200.yaml", readTestdata(t, "qwen-gb200.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := LookupModel("qwen3_30b_a3b")
	want, _ := m.Layout("gb200")
	if !reflect.DeepEqual(p.Layout, want) {
		t.Errorf("layout not filled from the model:\n got %+v\nwant %+v", p.Layout, want)
	}
	if len(p.Space.Scopes) != 3 || len(p.Space.Scopes[2]) != 0 || p.Space.Scopes[0][1] != "moe_router" {
		t.Errorf("scopes %v", p.Space.Scopes)
	}
	if g, _ := p.Generation(); g != G3 {
		t.Errorf("mbridge 0.6 is generation %v", g)
	}

	p, err = ParsePreset("llama-measured.yaml", readTestdata(t, "llama-measured.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := p.Result
	if r == nil || r.Winner.Impl != ImplLocal || !r.Winner.FullIteration() || r.StepMS != 812.5 || r.Engine != "measured" ||
		r.DriverVersion != "580.65.06" || !r.MeasuredAt.Equal(time.Date(2026, 9, 1, 10, 20, 30, 0, time.UTC)) {
		t.Errorf("result %+v", r)
	}
	if p.Layout.GPU != "h100" || p.Layout.CP != 2 {
		t.Errorf("explicit layout %+v", p.Layout)
	}

	p, err = ParsePreset("tiny-hybrid.yaml", readTestdata(t, "tiny-hybrid.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	im, err := p.ResolveModel()
	if err != nil || im.Name != "tiny_hybrid" || im.Kind() != "hybrid" || p.Layout.EP != 4 || p.Layout.GPU != "h100" {
		t.Errorf("inline model %+v layout %+v err %v", im, p.Layout, err)
	}
}

const basePreset = `version: 1
name: team-a
model: qwen3_30b_a3b
gpu: b200
space:
  impls: [none, transformer_engine]
  scopes:
    - [attn, moe_router]
  warmups: [3]
mbridge: "0.6"
`

var presetErrRe = regexp.MustCompile(`^bad\.yaml:(\d+): [^\n]+$`)

func TestParsePresetErrors(t *testing.T) {
	withResult := basePreset + "result:\n  winner: {impl: transformer_engine, scopes: [attn], warmup: 3}\n  step_ms: 10\n  eager_step_ms: 12\n  speedup: 1.2\n  memory_mib: 100\n  engine: measured\n"
	inline := strings.Replace(basePreset, "model: qwen3_30b_a3b\n", "model_inline:\n  name: x\n  arch: {layers: 2, hidden: 8, ffn_hidden: 8, heads: 2, kv_groups: 2, head_dim: 4, vocab: 10, hybrid_pattern: \"*-*\"}\n  layouts:\n    b200: {num_gpus: 8, precision: bf16, gbs: 8, mbs: 1, seq: 128}\n", 1)
	for _, tc := range []struct {
		name, src string
		line      int
		want      []string
	}{
		{"unknown field", strings.Replace(basePreset, "gpu: b200\n", "gpu: b200\ngpus: 8\n", 1), 5, []string{`unknown field "gpus"`, "allowed: version, name, description, model, model_inline, gpu, layout, space, reference, mbridge, result"}},
		{"unknown nested field", strings.Replace(basePreset, "  warmups: [3]\n", "  warmups: [3]\n  budget: 2m\n", 1), 10, []string{`unknown field "budget" in space`, "allowed: impls, scopes, warmups"}},
		{"bad impl", strings.Replace(basePreset, "[none, transformer_engine]", "[none, tee]", 1), 6, []string{`unknown impl "tee"`, "allowed: none, local, transformer_engine"}},
		{"bad scope", strings.Replace(basePreset, "[attn, moe_router]", "[attn, router]", 1), 8, []string{`unknown scope "router"`, "allowed: full_iteration, attn, mlp, moe, moe_router, moe_preprocess, mamba"}},
		{"unknown model", strings.Replace(basePreset, "qwen3_30b_a3b", "qwen3_31b", 1), 3, []string{`unknown model "qwen3_31b"`, "allowed: llama3_8b"}},
		{"unknown version", strings.Replace(basePreset, "version: 1", "version: 7", 1), 1, []string{`unsupported version "7"`, "allowed: 1"}},
		{"bad gpu", strings.Replace(basePreset, "gpu: b200", "gpu: a100", 1), 4, []string{`unknown value "a100"`, "allowed: h100, h200, b200"}},
		{"no layout for gpu", strings.Replace(strings.Replace(basePreset, "qwen3_30b_a3b", "gpt_oss_20b", 1), "gpu: b200", "gpu: h100", 1), 4, []string{`no layout for gpu "h100"`, "allowed: b300, gb200, gb300", "layout:"}},
		{"bad mbridge", strings.Replace(basePreset, `"0.6"`, `"0.9"`, 1), 10, []string{`unknown Megatron-Bridge version "0.9"`, "allowed: 0.3, 0.4, 0.5, 0.6, 0.7"}},
		{"missing mbridge", strings.Replace(basePreset, "mbridge: \"0.6\"\n", "", 1), 1, []string{`missing field "mbridge"`}},
		{"missing model", strings.Replace(basePreset, "model: qwen3_30b_a3b\n", "", 1), 1, []string{`missing field "model"`, "model_inline"}},
		{"negative warmup", strings.Replace(basePreset, "warmups: [3]", "warmups: [3, -1]", 1), 9, []string{`-1 is out of range`}},
		{"bad name", strings.Replace(basePreset, "name: team-a", "name: Team A", 1), 2, []string{`"Team A" is not a valid preset name`}},
		{"both models", strings.Replace(inline, "name: team-a\n", "name: team-a\nmodel: llama3_8b\n", 1), 4, []string{`"model" and "model_inline" are both set`}},
		{"inline pattern", inline, 5, []string{"has 3 layers", "but layers is 2"}},
		{"layout divisibility", strings.Replace(basePreset, "gpu: b200\n", "gpu: b200\nlayout: {num_gpus: 8, precision: bf16, tp: 3, gbs: 8, mbs: 1, seq: 128}\n", 1), 5, []string{"tp×pp×cp = 3×1×1 = 3 does not divide num_gpus 8"}},
		{"layout gpu mismatch", strings.Replace(basePreset, "gpu: b200\n", "gpu: b200\nlayout: {gpu: h100, num_gpus: 8, precision: bf16, gbs: 8, mbs: 1, seq: 128}\n", 1), 5, []string{`layout is "h100" but the preset's gpu is "b200"`}},
		{"bad engine", strings.Replace(withResult, "engine: measured", "engine: guessed", 1), 17, []string{`unknown value "guessed"`, "allowed: measured, estimated, job"}},
		{"nan step", strings.Replace(withResult, "step_ms: 10", "step_ms: .nan", 1), 13, []string{`"step_ms" must be a finite number`}},
		{"winner impl", strings.Replace(withResult, "{impl: transformer_engine,", "{impl: cuda,", 1), 12, []string{`unknown impl "cuda"`}},
		{"float for int", strings.Replace(basePreset, "warmups: [3]", "warmups: [2.5]", 1), 9, []string{`"space.warmups[0]"`, "want an integer", `"2.5"`}},
		{"bad timestamp", withResult + "  measured_at: yesterday\n", 18, []string{`"result.measured_at"`, "timestamp"}},
		{"tabs", "version: 1\n\tname: x\n", 2, []string{"bad.yaml:2:"}},
		{"job launcher", basePreset + "job:\n  launcher: ssh\n", 12, []string{`unknown value "ssh"`, "allowed: local, slurm"}},
		{"job partition", basePreset + "job:\n  launcher: slurm\n  partition: \"gpu\\n#SBATCH --wrap=x\"\n", 13, []string{`"partition"`, "characters Slurm does not take"}},
		{"job format", basePreset + "job:\n  format: yaml\n", 12, []string{`unknown value "yaml"`}},
		{"result job id", strings.Replace(withResult, "engine: measured", "engine: job\n  job: {launcher: slurm, ids: [\"12;rm -rf\"]}", 1), 18, []string{`is not a job id`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePreset("bad.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("no error for:\n%s", tc.src)
			}
			msg := err.Error()
			m := presetErrRe.FindStringSubmatch(msg)
			if m == nil {
				t.Fatalf("error %q is not one line starting with bad.yaml:LINE:", msg)
			}
			if m[1] != strconv.Itoa(tc.line) {
				t.Errorf("error %q: line %s, want %d", msg, m[1], tc.line)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestPresetJobRoundTrip(t *testing.T) {
	src := basePreset + "job:\n  launcher: slurm\n  command: torchrun pretrain_gpt.py --train-iters {iters} {flags} $(hostname)\n  format: flags\n  nodes: 2\n  gpus_per_node: 8\n  time: \"0:30:00\"\n  partition: batch\n" +
		"result:\n  winner: {impl: local, scopes: [full_iteration], warmup: 3}\n  step_ms: 10\n  eager_step_ms: 12\n  speedup: 1.2\n  memory_mib: 100\n  engine: job\n  job: {launcher: slurm, ids: [\"101\", \"100\"], nodes: 2, gpus: 16}\n"
	p, err := ParsePreset("team.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if p.Job == nil || p.Job.Command != "torchrun pretrain_gpt.py --train-iters {iters} {flags} $(hostname)" || p.Job.GPUsPerNode != 8 || p.Result.Job.GPUs != 16 || p.Result.Job.IDs[1] != "100" {
		t.Fatalf("job %+v result %+v", p.Job, p.Result)
	}
	out, err := MarshalPreset(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParsePreset("out.yaml", out)
	if err != nil || !reflect.DeepEqual(p.Job, q.Job) || !reflect.DeepEqual(p.Result.Job, q.Result.Job) {
		t.Errorf("round trip: %v\n%s", err, out)
	}
}

func TestMarshalPresetRoundTrip(t *testing.T) {
	for _, f := range []string{"qwen-gb200.yaml", "llama-measured.yaml", "tiny-hybrid.yaml"} {
		t.Run(f, func(t *testing.T) {
			p, err := ParsePreset(f, readTestdata(t, f))
			if err != nil {
				t.Fatal(err)
			}
			out, err := MarshalPreset(p)
			if err != nil {
				t.Fatal(err)
			}
			q, err := ParsePreset("out.yaml", out)
			if err != nil {
				t.Fatalf("%s: canonical form does not parse: %v\n%s", f, err, out)
			}
			if !reflect.DeepEqual(p, q) {
				t.Errorf("%s: round trip changed the preset:\n%+v\n%+v", f, p, q)
			}
			again, _ := MarshalPreset(q)
			if string(again) != string(out) {
				t.Errorf("%s: canonical form is not stable", f)
			}
		})
	}
}

func TestPresetValidateInCode(t *testing.T) {
	p := TeamPreset{Name: "x", Model: "llama3_8b", GPU: "h100", Space: DefaultSpace(), MBridge: DefaultMBridge}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "missing layout") {
		t.Errorf("Validate without layout = %v", err)
	}
	if err := p.FillLayout(); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	p.Space.Impls = append(p.Space.Impls, "none")
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), `"none" listed twice`) || strings.Contains(err.Error(), ":1:") {
		t.Errorf("duplicate impl: %v", err)
	}
}

// FuzzParsePreset: no input panics; an error is one line with FILE:LINE; an
// accepted preset survives MarshalPreset and parses back to the same value.
func FuzzParsePreset(f *testing.F) {
	entries, err := os.ReadDir(filepath.Join("testdata", "presets"))
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		f.Add(readTestdata(f, e.Name()))
	}
	f.Add([]byte(basePreset))
	f.Add([]byte("version: 1\nname: a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePreset("fuzz.yaml", data)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "fuzz.yaml:") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q is not one FILE:LINE line", msg)
			}
			return
		}
		// Whatever is accepted is within the size bounds (no overflow, no
		// runaway workload downstream).
		if m, err := p.ResolveModel(); err != nil || m.CheckSizes() != nil || p.Layout.CheckSizes() != nil {
			t.Fatalf("accepted preset out of bounds: %v %v %v", err, m.CheckSizes(), p.Layout.CheckSizes())
		}
		out, err := MarshalPreset(p)
		if err != nil {
			t.Fatalf("accepted preset does not marshal: %v", err)
		}
		q, err := ParsePreset("again.yaml", out)
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(normalized(p), normalized(q)) {
			t.Fatalf("round trip changed the preset:\n%#v\n%#v", p, q)
		}
	})
}

// normalized drops differences YAML cannot express: an empty list written
// out reads back as an empty list, but a missing one reads back as nil.
func normalized(p TeamPreset) TeamPreset {
	if p.Result != nil {
		r := *p.Result
		r.MeasuredAt = r.MeasuredAt.UTC().Round(0)
		if len(r.Winner.Scopes) == 0 {
			r.Winner.Scopes = nil
		}
		p.Result = &r
	}
	if len(p.Space.Scopes) == 0 {
		p.Space.Scopes = nil
	}
	for i, s := range p.Space.Scopes {
		if len(s) == 0 {
			p.Space.Scopes[i] = nil
		}
	}
	if len(p.Layout.RecomputeModules) == 0 {
		p.Layout.RecomputeModules = nil
	}
	if p.ModelInline != nil {
		m := *p.ModelInline
		ls := map[string]Layout{}
		for k, l := range m.Layouts {
			if len(l.RecomputeModules) == 0 {
				l.RecomputeModules = nil
			}
			ls[k] = l
		}
		m.Layouts = ls
		p.ModelInline = &m
	}
	return p
}
