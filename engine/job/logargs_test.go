package job

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// What the logs of the testdata say of their model and layout: Megatron-
// LM's argument list and Megatron-Bridge's configuration summary.
func TestRunArgs(t *testing.T) {
	// The captured jobs' pretrain_gpt.py arguments, as their command lines give them.
	captured := map[string]int{"num_layers": 8, "hidden_size": 2048, "ffn_hidden_size": 8192, "num_attention_heads": 16,
		"seq_length": 1024, "micro_batch_size": 1, "global_batch_size": 4, "world_size": 1, "tensor_model_parallel_size": 1,
		"pipeline_model_parallel_size": 1, "context_parallel_size": 1, "expert_model_parallel_size": 1}
	for _, tc := range []struct {
		file string
		want map[string]int
		none []string
	}{
		{"testdata/mlm_pretrain_gpt_full_iteration.log", map[string]int{"hidden_size": 2048}, []string{"num_layers", "num_moe_experts"}},
		{"testdata/mb_run_recipe_te.log", map[string]int{"num_moe_experts": 128}, []string{"hidden_size"}},
		{"testdata/captured/cgtune-none.log", captured, []string{"num_moe_experts"}},
		{"testdata/captured/cgtune-local-layer-w1.log", captured, []string{"num_moe_experts"}},
		{"testdata/captured/cgtune-local-full_iteration-w1.log", captured, []string{"num_moe_experts"}},
		{"testdata/mb_perf_qwen3_30b_a3b_h100.log", map[string]int{"num_layers": 48, "hidden_size": 2048, "num_attention_heads": 32,
			"num_moe_experts": 128, "expert_model_parallel_size": 16, "micro_batch_size": 1, "global_batch_size": 1024},
			[]string{"seq_length", "tensor_model_parallel_size"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			args := RunArgs{}
			if err := ReadLines(f, func(_ int, l string) { args.Line(l) }); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if got, ok := args.Int(k); !ok || got != v {
					t.Errorf("%s = %v, %v; want %d (all: %v)", k, got, ok, v, args)
				}
			}
			for _, k := range tc.none {
				if args.Printed(k) {
					t.Errorf("%s read as %q", k, args[k])
				}
			}
		})
	}
	// A torchrun prefix and None.
	args := RunArgs{}
	args.Line("[default0]:  num_experts ..................................... None")
	args.Line("  num_layers: 48  (Mcore default: 0)")
	args.Line("  cuda_graph_impl ........ local")
	if _, ok := args.Int("num_experts"); ok || !args.Printed("num_experts") {
		t.Errorf("None: %v", args)
	}
	if n, ok := args.Int("num_layers"); !ok || n != 48 || args.Printed("cuda_graph_impl") {
		t.Errorf("args %v", args)
	}
}

type failingReader struct{ after string }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.after == "" {
		return 0, errors.New("input/output error")
	}
	n := copy(p, r.after)
	r.after = r.after[n:]
	return n, nil
}

// ReadLines takes lines of any length (an over-long one is cut, the lines
// after it still read, with their numbers), and a read error names the
// line it stopped at.
func TestReadLines(t *testing.T) {
	long := strings.Repeat("x", 5*MaxLogLine)
	var got []string
	var nums []int
	err := ReadLines(strings.NewReader("first\n"+long+"\nthird\nlast"), func(n int, l string) {
		nums, got = append(nums, n), append(got, l)
	})
	if err != nil || len(got) != 4 || got[0] != "first" || len(got[1]) != MaxLogLine || got[2] != "third" || got[3] != "last" || nums[3] != 4 {
		t.Errorf("err %v, %d lines %v, first lengths %d", err, len(got), nums, len(got[1]))
	}
	// No newline at all: one cut line, not an error.
	got = nil
	if err := ReadLines(io.LimitReader(zeros{}, 20<<20), func(_ int, l string) { got = append(got, l) }); err != nil || len(got) != 1 {
		t.Errorf("zeros: err %v, %d lines", err, len(got))
	}
	err = ReadLines(&failingReader{after: "a\nb\n"}, func(int, string) {})
	if err == nil || !strings.Contains(err.Error(), "line 3: input/output error") {
		t.Errorf("read error: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
