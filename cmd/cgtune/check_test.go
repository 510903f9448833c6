package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// cgtune runs one command line and returns the exit code, stdout and stderr.
func cgtune(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// argsName names a subtest by its command line, with the files of the
// test's temporary folders by their base names (stable across runs).
func argsName(args []string) string {
	words := make([]string, len(args))
	for i, a := range args {
		if filepath.IsAbs(a) {
			a = filepath.Base(a)
		}
		words[i] = a
	}
	return strings.Join(words, " ")
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// qwen3_30b_a3b on b200: a dropless MoE recipe without EP overlap (the
// h100 recipe turns it on, and TC-36 then rejects these graphs too).
func TestCheckAcceptance(t *testing.T) {
	code, out, errb := cgtune(t, "check", "--model", "qwen3_30b_a3b", "--gpu-type", "b200", "--impl", "transformer_engine", "--scope", "attn,moe")
	if code != exitInvalid {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errb)
	}
	if out != "TC-22: moe cuda graph is only supported with drop-padding MoE.\n" {
		t.Errorf("stdout %q", out)
	}
	if errb != "note: PERF-06: rng.te_rng_tracker=True, model.use_te_rng_tracker=True (CUDA graphs need the TE RNG tracker)\n" {
		t.Errorf("stderr %q", errb)
	}

	code, out, errb = cgtune(t, "check", "--model", "qwen3_30b_a3b", "--gpu-type", "b200", "--impl", "transformer_engine", "--scope", "attn,moe",
		"--set", "model.moe_expert_capacity_factor=1.0", "--set", "model.moe_pad_expert_input_to_capacity=true")
	if code != exitOK || out != "valid\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errb)
	}
}

func TestCheckBadInput(t *testing.T) {
	badYAML := writeFile(t, "bad.yaml", "model:\n  cuda_graph_impl: transformer_engine\n  cuda_graph_scop: [attn]\n")
	cases := []struct {
		args []string
		want string // stderr
	}{
		{[]string{"check", "--model", "nope"}, `unknown model "nope"`},
		{[]string{"check"}, "give --model M or --preset NAME|FILE"},
		{[]string{"check", "--model", "llama3_8b", "--preset", "x.yaml"}, "give --model or --preset, not both"},
		{[]string{"check", "--model", "llama3_8b", "--impl", "full"},
			"cgtune: PERF-01: argument --cuda_graph_impl: invalid is_cuda_graph_impl_valid value: 'full' (the harness takes none, local, transformer_engine; a full-iteration graph is --cuda_graph_impl local --cuda_graph_scope full_iteration)"},
		{[]string{"check", "--model", "llama3_8b", "--impl", "transformer_engine", "--scope", "attn,mlpp"},
			"cgtune: PERF-02: argument --cuda_graph_scope: invalid is_cuda_graph_scope_valid value: 'attn,mlpp' (the harness takes a comma-separated list of"},
		{[]string{"check", "--model", "llama3_8b", "--set", "model.xyz=1"}, "cgtune: --set model.xyz=1: unknown field model.xyz"},
		{[]string{"check", "--model", "llama3_8b", "--set", "model.cuda_graph_impl=foo"},
			`cgtune: --set model.cuda_graph_impl=foo: field model.cuda_graph_impl: bad value "foo" (allowed: none, local, transformer_engine, full_iteration)`},
		{[]string{"check", "--model", "llama3_8b", badYAML}, "cgtune: " + badYAML + ":3: unknown field model.cuda_graph_scop"},
		{[]string{"check", "--model", "llama3_8b", filepath.Join(t.TempDir(), "missing.yaml")}, "no such file or directory"},
		{[]string{"check", "--model", "llama3_8b", "--mbridge", "0.9"}, `--mbridge: unknown Megatron-Bridge version "0.9"`},
		{[]string{"check", "--model", "gpt_oss_20b", "--gpu-type", "h100"}, `model gpt_oss_20b has no layout for gpu "h100"`},
		{[]string{"check", "--model", "llama3_8b", "--warmup", "-1"}, "--warmup -1: must be >= 0"},
		{[]string{"check", "--model", "llama3_8b", "a.yaml", "b.yaml"}, "accepts at most 1 arg"},
		{[]string{"check", "--model", "llama3_8b", "--candidate", "te attn w3", "--impl", "te"}, "give --candidate or --impl, not both"},
		{[]string{"check", "--model", "llama3_8b", "--candidate", "te atn w3"}, `--candidate: candidate "te atn w3": want a name as cgtune prints it`},
		{[]string{"emit", "--candidate", "te attn w3", "--warmup", "2"}, "give --candidate or --warmup, not both"},
	}
	for _, tc := range cases {
		t.Run(argsName(tc.args), func(t *testing.T) {
			code, out, errb := cgtune(t, tc.args...)
			if code != exitBadInput || !strings.Contains(errb, tc.want) || out != "" {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errb, tc.want)
			}
		})
	}
}

func TestCheckOverridesFile(t *testing.T) {
	// A G2 full-iteration file that forgot the NaN checks.
	p := writeFile(t, "fi.yaml", `model:
  cuda_graph_impl: local
  cuda_graph_scope: [full_iteration]
  use_te_rng_tracker: true
rng:
  te_rng_tracker: true
`)
	code, out, _ := cgtune(t, "check", "--model", "llama3_8b", p)
	want := "MB-03: check_for_nan_in_loss must be disabled when using full_iteration CUDA graph. Set rerun_state_machine.check_for_nan_in_loss=False.\n"
	if code != exitInvalid || out != want {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	// --set applies after the file. MB checks the loss half only; Megatron-LM's
	// launcher checks its one flag for both.
	code, out, _ = cgtune(t, "check", "--model", "llama3_8b", p, "--set", "rerun_state_machine.check_for_nan_in_loss=false")
	if code != exitOK || out != "valid\n" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	code, out, _ = cgtune(t, "check", "--model", "llama3_8b", p, "--set", "rerun_state_machine.check_for_nan_in_loss=false", "--launcher", "mlm")
	want = "ARG-03: --no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-scope=full_iteration for training. Note: If you are trying to use full_iteration CUDA graphs for inference, please use --cuda-graph-scope full_iteration_inference instead\n"
	if code != exitInvalid || out != want {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	code, out, _ = cgtune(t, "check", "--model", "llama3_8b", p, "--set", "rerun_state_machine.check_for_nan_in_loss=false", "--set", "ddp.check_for_nan_in_grad=false", "--launcher", "mlm")
	if code != exitOK || out != "valid\n" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	// The harness flags apply last and bring their companions.
	code, out, errb := cgtune(t, "check", "--model", "llama3_8b", p, "--impl", "local", "--scope", "full_iteration")
	if code != exitOK || out != "valid\n" || !strings.Contains(errb, "note: PERF-06: rerun_state_machine.check_for_nan_in_loss=False, ddp.check_for_nan_in_grad=False (full-iteration graph)\n") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errb)
	}
}

func TestCheckGenerations(t *testing.T) {
	args := []string{"check", "--model", "llama3_8b", "--impl", "local", "--scope", "attn"}
	if code, out, _ := cgtune(t, args...); code != exitOK || out != "valid\n" {
		t.Errorf("MB 0.4: exit %d, %q", code, out)
	}
	code, out, _ := cgtune(t, append(args, "--mbridge", "0.6")...)
	if code != exitInvalid || !strings.HasPrefix(out, `MB-05: Megatron Bridge supports model.cuda_graph_impl="local" only for full-iteration CUDA graphs with scopes ['attn'].`) {
		t.Errorf("MB 0.6: exit %d, %q", code, out)
	}
	// G3 spells the modules field; G2 rejects it as unknown.
	g3 := writeFile(t, "g3.yaml", "model:\n  cuda_graph_impl: transformer_engine\n  cuda_graph_modules: [attn]\n  use_te_rng_tracker: true\n")
	code, out, _ = cgtune(t, "check", "--model", "llama3_8b", "--mbridge", "0.6", g3)
	if code != exitInvalid || out != "TC-04: cuda_graph_scope and cuda_graph_modules cannot be set together.\n" {
		t.Errorf("G3 without cuda_graph_scope: null: exit %d, %q", code, out)
	}
	code, out, _ = cgtune(t, "check", "--model", "llama3_8b", "--mbridge", "0.6", g3, "--set", "model.cuda_graph_scope=null")
	if code != exitOK || out != "valid\n" {
		t.Errorf("G3: exit %d, %q", code, out)
	}
	code, _, errb := cgtune(t, "check", "--model", "llama3_8b", "--mbridge", "0.4", g3)
	if code != exitBadInput || !strings.Contains(errb, g3+":3: unknown field model.cuda_graph_modules (Megatron-Bridge 0.4 is G2") {
		t.Errorf("G2: exit %d, %q", code, errb)
	}
}

func TestCheckNotesAndWarmup(t *testing.T) {
	code, out, errb := cgtune(t, "check", "--model", "llama3_8b", "--set", "model.cuda_graph_impl=transformer_engine", "--set", "rng.te_rng_tracker=true")
	if code != exitOK || out != "valid\n" ||
		errb != "note: MB-02: model.use_te_rng_tracker=True because rng.te_rng_tracker=True (MB keeps the two in sync)\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errb)
	}
	off := []string{"check", "--model", "llama3_8b", "--mbridge", "0.6", "--impl", "transformer_engine", "--scope", "attn",
		"--set", "model.fine_grained_activation_offloading=true", "--set", "model.offload_modules=[core_attn]",
		"--set", "env.NVTE_CPU_OFFLOAD_V1=1"} // MB-21: with TE >= 2.10 MB needs it for any offloading
	code, out, _ = cgtune(t, append(off, "--warmup", "0")...)
	if code != exitInvalid || out != "TC-34: cuda_graph_warmup_steps must be greater than 0 when enabling fine-grained activation offloading.\n" {
		t.Errorf("warmup 0: exit %d, %q", code, out)
	}
	// Without --warmup the recipe's value stays.
	code, out, _ = cgtune(t, append(off, "--set", "model.cuda_graph_warmup_steps=0")...)
	if code != exitInvalid || !strings.HasPrefix(out, "TC-34:") {
		t.Errorf("warmup from --set: exit %d, %q", code, out)
	}
	if code, out, _ = cgtune(t, off...); code != exitOK {
		t.Errorf("default warmup: exit %d, %q", code, out)
	}
}

func TestCheckPreset(t *testing.T) {
	p := writeFile(t, "team.yaml", `version: 1
name: team
model: llama3_8b
gpu: h100
space:
  impls: [none, local, transformer_engine]
  warmups: [3]
mbridge: "0.6"
`)
	// The preset's MB release (0.6) applies: local per-layer is MB-05 there.
	code, out, _ := cgtune(t, "check", "--preset", p, "--impl", "local", "--scope", "attn")
	if code != exitInvalid || !strings.HasPrefix(out, "MB-05: ") {
		t.Errorf("exit %d, %q", code, out)
	}
	// --mbridge overrides it.
	if code, out, _ = cgtune(t, "check", "--preset", p, "--impl", "local", "--scope", "attn", "--mbridge", "0.4"); code != exitOK {
		t.Errorf("--mbridge 0.4: exit %d, %q", code, out)
	}
	bad := writeFile(t, "bad.yaml", "version: 1\nname: bad\nmodel: nope\ngpu: h100\n")
	if code, _, errb := cgtune(t, "check", "--preset", bad); code != exitBadInput || !strings.Contains(errb, "bad.yaml") {
		t.Errorf("bad preset: exit %d, %q", code, errb)
	}
}

// check knows what the search knows: a setting whose capture the capture
// plan rules out is invalid, with the reason the search gives.
func TestCheckKnowsCaptureFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		// qwen3_30b_a3b's b200 recipe leaves EP overlap off (TC-36 would
		// reject any local graph) and its MoE dropless.
		{"dropless MoE inside a full-iteration graph", []string{"--model", "qwen3_30b_a3b", "--gpu-type", "b200", "--impl", "local", "--scope", "full_iteration"},
			"WILL-FAIL: dropless MoE syncs with the host inside the full-iteration graph"},
		{"local mlp without attn", []string{"--model", "llama3_8b", "--impl", "local", "--scope", "mlp"},
			"WILL-FAIL: impl local with mlp and no attention graph on the layer: Megatron-Core fails when it builds the layer"},
		{"dropless MoE in a whole-layer graph from a file", []string{"--model", "qwen3_30b_a3b", "--gpu-type", "b200",
			writeFile(t, "layer.yaml", "model:\n  cuda_graph_impl: transformer_engine\n  cuda_graph_scope: []\n  use_te_rng_tracker: true\n")},
			"WILL-FAIL: dropless MoE syncs with the host inside the whole-layer graph of layer 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errb := cgtune(t, append([]string{"check"}, tc.args...)...)
			if code != exitInvalid || !strings.HasPrefix(out, tc.want) || strings.Count(out, "\n") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errb)
			}
		})
	}
	// Drop-and-pad MoE captures whole.
	code, out, errb := cgtune(t, "check", "--model", "qwen3_30b_a3b", "--gpu-type", "b200", "--impl", "local", "--scope", "full_iteration",
		"--set", "model.moe_expert_capacity_factor=1.0", "--set", "model.moe_pad_expert_input_to_capacity=true")
	if code != exitOK || out != "valid\n" {
		t.Errorf("drop-and-pad: exit %d, stdout %q, stderr %q", code, out, errb)
	}
}

// A whole-layer transformer_engine graph through MB 0.4's harness flags is
// the harness's TypeError; check says what to do instead.
func TestCheckWholeLayerTEFlagsSaysWhatToDo(t *testing.T) {
	code, out, _ := cgtune(t, "check", "--model", "llama3_8b", "--impl", "transformer_engine")
	if code != exitInvalid || !strings.HasPrefix(out, "PERF-05: 'NoneType' object is not iterable (") ||
		!strings.Contains(out, "model.cuda_graph_impl=transformer_engine model.cuda_graph_scope=[]") || !strings.Contains(out, "--format flags") {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	// What emit --format flags writes for it is what check then accepts as
	// the recipe's settings.
	code, flags, errb := cgtune(t, "emit", "--impl", "transformer_engine", "--format", "flags")
	if code != exitOK || strings.Contains(flags, "--cuda_graph_impl") {
		t.Fatalf("emit: exit %d, %q %q", code, flags, errb)
	}
	args := []string{"check", "--model", "llama3_8b"}
	for _, tok := range strings.Fields(flags) {
		args = append(args, "--set", strings.Trim(tok, "'"))
	}
	if code, out, errb := cgtune(t, args...); code != exitOK || out != "valid\n" {
		t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errb)
	}
}

// An MB recipe is judged by MB's own checks: qwen3_235b_a22b's h100 recipe
// delays wgrad with EP overlap, which MB (MB-11) allows from TE 2.7.0;
// Megatron-LM's launcher check (ARG-07, TE 2.8.0) applies only to a job it
// starts.
func TestCheckJudgesByTheLauncher(t *testing.T) {
	base := []string{"check", "--model", "qwen3_235b_a22b", "--gpu-type", "h100", "--impl", "none", "--set", "te_version=2.7.1"}
	for _, tc := range []struct {
		extra []string
		code  int
		out   string
	}{
		{nil, exitOK, "valid\n"},
		{[]string{"--launcher", "mb"}, exitOK, "valid\n"},
		{[]string{"--launcher", "mlm"}, exitInvalid, "ARG-07: overlap_grad_reduce is only supported with TE >= 2.8.0 when enabling delay_wgrad_compute\n"},
	} {
		args := append(slices.Clone(base), tc.extra...)
		t.Run(argsName(args), func(t *testing.T) {
			code, out, errb := cgtune(t, args...)
			if code != tc.code || out != tc.out {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, %q", code, out, errb, tc.code, tc.out)
			}
		})
	}
	code, out, errb := cgtune(t, "check", "--model", "qwen3_235b_a22b", "--gpu-type", "h100", "--impl", "none", "--set", "te_version=2.6")
	if code != exitInvalid || !strings.HasPrefix(out, "MB-11: TE version >= 2.7.0 is required") {
		t.Errorf("TE 2.6: exit %d, stdout %q, stderr %q", code, out, errb)
	}
	code, _, errb = cgtune(t, append(slices.Clone(base), "--launcher", "torchrun")...)
	if code != exitBadInput || !strings.Contains(errb, `--launcher: unknown launcher "torchrun" (allowed: mb, mlm)`) {
		t.Errorf("--launcher torchrun: exit %d, stderr %q", code, errb)
	}
}

// qwen3_30b_a3b's h100 recipe turns EP communication overlap on in its
// comm_overlap config, which MB copies onto the model: an override of the
// model's field would be lost, so it is refused, naming the key that wins.
func TestCheckRefusesAnOverrideCommOverlapOverwrites(t *testing.T) {
	code, out, errb := cgtune(t, "check", "--model", "qwen3_30b_a3b", "--gpu-type", "h100", "--set", "model.overlap_moe_expert_parallel_comm=false")
	want := "cgtune: --set model.overlap_moe_expert_parallel_comm=false: the recipe's comm_overlap.overlap_moe_expert_parallel_comm (true) wins: " +
		"Megatron-Bridge copies it onto model.overlap_moe_expert_parallel_comm when it starts " +
		"(MB src/megatron/bridge/training/comm_overlap.py CommOverlapConfig.setup); set comm_overlap.overlap_moe_expert_parallel_comm=false instead\n"
	if code != exitBadInput || out != "" || errb != want {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errb)
	}
}

// The worked example of README's "cgtune check" section runs as written:
// each "$ cgtune check ..." line (with its continuations) prints the lines
// shown under it, the notes on stderr first.
func TestCheckReadmeExample(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "### `cgtune check`")
	_, block, ok2 := strings.Cut(section, "```sh\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README has no cgtune check example")
	}
	type example struct {
		args []string
		want []string
	}
	var examples []example
	lines := strings.Split(strings.TrimRight(block, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		cmd, ok := strings.CutPrefix(lines[i], "$ cgtune ")
		if !ok {
			continue
		}
		for strings.HasSuffix(cmd, `\`) && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(cmd, `\`) + " " + strings.TrimSpace(lines[i])
		}
		e := example{args: strings.Fields(cmd)}
		for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "$ ") {
			i++
			e.want = append(e.want, lines[i])
		}
		examples = append(examples, e)
	}
	ran := 0
	for _, e := range examples {
		if len(e.want) == 0 {
			continue // shown without its output
		}
		ran++
		t.Run(argsName(e.args), func(t *testing.T) {
			_, out, errb := cgtune(t, e.args...)
			got := strings.Split(strings.TrimRight(errb+out, "\n"), "\n")
			if !slices.Equal(got, e.want) {
				t.Errorf("got:\n%s\nREADME shows:\n%s", strings.Join(got, "\n"), strings.Join(e.want, "\n"))
			}
		})
	}
	if ran < 2 {
		t.Errorf("README's check example has %d commands with their output", ran)
	}
}
