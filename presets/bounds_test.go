package presets

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// inlinePreset is a valid preset with an inline model, with one line of
// the arch or the layout replaced.
func inlinePreset(arch, layout string) string {
	if arch == "" {
		arch = "{layers: 32, hidden: 4096, ffn_hidden: 14336, heads: 32, kv_groups: 8, head_dim: 128, vocab: 128256}"
	}
	if layout == "" {
		layout = "{num_gpus: 8, precision: bf16, tp: 1, pp: 1, cp: 1, ep: 1, gbs: 128, mbs: 1, seq: 8192}"
	}
	return "version: 1\nname: big\nmodel_inline:\n  name: big\n  arch: " + arch + "\n  layouts:\n    h100: " + layout +
		"\ngpu: h100\nspace: {impls: [none, local], warmups: [3]}\nmbridge: \"0.4\"\n"
}

// Each size past its bound, alone or as a product, is refused with the
// field and the allowed range, and the largest allowed sizes still
// validate: an unbounded size would make the search grow without end or
// overflow into negative products, times and memory.
func TestSizesAreBounded(t *testing.T) {
	for _, tc := range []struct{ arch, layout, want string }{
		{arch: "{layers: 100000000, hidden: 4096, ffn_hidden: 14336, heads: 32, kv_groups: 8, head_dim: 128, vocab: 128256}",
			want: `big.yaml:5: field "layers": 100000000 is out of range (allowed: 1 to 1024)`},
		{arch: "{layers: 32, hidden: 1099511627776, ffn_hidden: 14336, heads: 32, kv_groups: 8, head_dim: 128, vocab: 128256}",
			want: `field "hidden": 1099511627776 is out of range (allowed: 1 to 131072)`},
		{arch: "{layers: 32, hidden: 4096, ffn_hidden: 14336, heads: 32, kv_groups: 8, head_dim: 128, vocab: 128256, moe: {experts: 100000000, top_k: 2, ffn_hidden: 1024}}",
			want: `field "experts": 100000000 is out of range (allowed: 1 to 4096)`},
		{layout: "{num_gpus: 8, precision: bf16, gbs: 128, mbs: 4611686018427387903, seq: 8192}",
			want: `field "mbs": 4611686018427387903 is out of range (allowed: 1 to 65536)`},
		{layout: "{num_gpus: 8, precision: bf16, gbs: 128, mbs: 1, seq: 1000000000}",
			want: `field "seq": 1000000000 is out of range (allowed: 1 to 16777216)`},
		{layout: "{num_gpus: 8, precision: bf16, gbs: 128, mbs: 1, seq: 9223372036854775807}",
			want: `field "seq": 9223372036854775807 is out of range`},
		{layout: "{num_gpus: 4611686018427387904, precision: bf16, gbs: 128, mbs: 1, seq: 8192}",
			want: `field "num_gpus": 4611686018427387904 is out of range (allowed: 1 to 1048576)`},
		{layout: "{num_gpus: 8, precision: bf16, tp: 65536, pp: 65536, gbs: 128, mbs: 1, seq: 8192}",
			want: `tp×pp×cp = 65536×65536×1 is more than 1048576 GPUs`},
		{layout: "{num_gpus: 8, precision: bf16, gbs: 128, mbs: 4096, seq: 8192}",
			want: `mbs×seq = 4096×8192 tokens per micro-batch is more than 16777216`},
		{layout: "{num_gpus: 1048576, precision: bf16, gbs: 128, mbs: 65536, seq: 8}",
			want: `mbs×dp = 65536×1048576 is more than the largest gbs, 4194304`},
	} {
		t.Run(tc.arch, func(t *testing.T) {
			_, err := ParsePreset("big.yaml", []byte(inlinePreset(tc.arch, tc.layout)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s%s:\n got %v\nwant %s", tc.arch, tc.layout, err, tc.want)
			}
		})
	}
	// The largest values allowed still validate (with a divisible layout).
	big := inlinePreset("{layers: 1024, hidden: 131072, ffn_hidden: 1048576, heads: 4096, kv_groups: 4096, head_dim: 1024, vocab: 4194304}",
		"{num_gpus: 1048576, precision: bf16, tp: 4096, pp: 256, gbs: 4194304, mbs: 4, seq: 4194304}")
	if _, err := ParsePreset("big.yaml", []byte(big)); err != nil {
		t.Errorf("the largest sizes: %v", err)
	}
}

// Layout helpers never divide by a product that wrapped to zero, even for
// a layout no one validated, so they cannot panic on a division by zero.
func TestLayoutProductsSaturate(t *testing.T) {
	l := Layout{NumGPUs: 8, TP: 1 << 32, PP: 1 << 32, GBS: 128, MBS: math.MaxInt / 2}
	if l.DP() != 1 || l.MicroBatches() != 1 {
		t.Errorf("DP %d, MicroBatches %d", l.DP(), l.MicroBatches())
	}
	if err := l.CheckSizes(); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("CheckSizes = %v", err)
	}
	for _, tc := range []struct {
		xs []int
		p  int
		ok bool
	}{
		{[]int{3, 5, 7}, 105, true}, {[]int{math.MaxInt, 1}, math.MaxInt, true}, {[]int{math.MaxInt / 2, 3}, 0, false},
		{[]int{1 << 32, 1 << 31}, 0, false}, {[]int{1 << 31, 1 << 31}, 1 << 62, true}, {[]int{-1, 2}, 0, false}, {nil, 1, true},
	} {
		t.Run(fmt.Sprint(tc.xs), func(t *testing.T) {
			if p, ok := MulInts(tc.xs...); p != tc.p || ok != tc.ok {
				t.Errorf("MulInts(%v) = %d, %v", tc.xs, p, ok)
			}
		})
	}
}
