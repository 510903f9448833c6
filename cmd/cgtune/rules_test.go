package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"cgtune/recipe"
	"cgtune/search"
)

// cgtune rules lists every rule once, in the table's order, each with what
// it checks, its releases and its kind.
func TestRulesListsEveryRule(t *testing.T) {
	code, out, errb := cgtune(t, "rules")
	if code != exitOK || errb != "" {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[0], "CHECKS") || !strings.Contains(lines[0], "SOURCE") {
		t.Errorf("header %q", lines[0])
	}
	rules := recipe.Rules()
	if len(lines)-1 != len(rules) {
		t.Fatalf("%d rows for %d rules", len(lines)-1, len(rules))
	}
	for i, r := range rules {
		row := lines[i+1]
		if f := strings.Fields(row); f[0] != r.ID || !strings.Contains(row, r.Summary) || !strings.Contains(row, " "+r.Releases()+" ") || !strings.Contains(row, r.Kind.String()) {
			t.Errorf("row %d %q for %s", i+1, row, r.ID)
		}
	}
	// Megatron-LM's launcher checks are marked as such.
	for _, l := range lines {
		if strings.HasPrefix(l, "ARG-07 ") && !strings.Contains(l, " mlm ") {
			t.Errorf("ARG-07 row %q", l)
		}
	}
}

// cgtune rules ID explains one: the condition, Megatron-Core's exact
// message, the fields it reads and what to change; the ID in any case.
func TestRulesExplainsOne(t *testing.T) {
	code, out, errb := cgtune(t, "rules", "tc-36")
	if code != exitOK || errb != "" {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	for _, want := range []string{
		"TC-36: ",
		"  kind:     reject\n",
		"MLM megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__",
		// MLM transformer_config.py's assert, as it prints it.
		"  message:  CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm\n",
		"model.overlap_moe_expert_parallel_comm",
		"comm_overlap.overlap_moe_expert_parallel_comm",
		"\n  when:     ", "\n  reads:    ", "\n  fix:      ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	// A rule with a message per check lists them whole.
	_, out, _ = cgtune(t, "rules", "MB-18")
	if !strings.Contains(out, "  messages: (the first that applies)\n") ||
		!strings.Contains(out, "\n    overlap_moe_expert_parallel_comm is only supported when num_moe_experts > 1,                     but got {num_moe_experts}\n") {
		t.Errorf("MB-18:\n%s", out)
	}
}

func TestRulesUnknownID(t *testing.T) {
	for _, id := range []string{"TC-99", "MB-16", "SPACE", ""} {
		code, out, errb := cgtune(t, "rules", id)
		if code != exitBadInput || out != "" || !strings.HasPrefix(errb, "cgtune: unknown rule "+`"`+id+`"`+" (allowed: ARG-03, ARG-05..ARG-10, ") ||
			!strings.Contains(errb, "TC-15..TC-39") || strings.Count(errb, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", id, code, out, errb)
		}
	}
	if code, _, errb := cgtune(t, "rules", "TC-36", "TC-37"); code != exitBadInput {
		t.Errorf("two IDs: exit %d, %q", code, errb)
	}
}

// The plan line says what its counts mean: each rule with what it checks,
// most rejections first; SPACE and WILL-FAIL too.
func TestPlanLineSaysWhatItsCountsMean(t *testing.T) {
	isolate(t)
	code, _, errb := cgtune(t, "--headless", "--model", "qwen3_30b_a3b", "--engine", "estimate", "--strategy", "exhaustive",
		"--run-dir", filepath.Join(t.TempDir(), "run"))
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb)
	}
	var plan string
	for _, l := range strings.Split(errb, "\n") {
		if strings.HasPrefix(l, "plan: ") {
			plan = l
		}
	}
	_, list, ok := strings.Cut(plan, " rejected: ")
	if !ok {
		t.Fatalf("plan line %q", plan)
	}
	last := -1
	for _, part := range strings.Split(list, ", ") {
		m := regexp.MustCompile(`^(\S+) \((.+)\) ×(\d+)$`).FindStringSubmatch(part)
		if m == nil {
			t.Fatalf("count %q in %q", part, plan)
		}
		want := recipe.Describe(m[1])
		if m[1] == search.SpaceID {
			want = "captures nothing on the model"
		}
		n, _ := strconv.Atoi(m[3])
		if want == "" || m[2] != want || (last >= 0 && n > last) {
			t.Errorf("%q: label %q, want %q; counts out of order in %q", part, m[2], want, plan)
		}
		last = n
	}
	if !strings.Contains(list, "TC-18 (") || !strings.Contains(list, "SPACE (") {
		t.Errorf("plan line %q", plan)
	}
}
