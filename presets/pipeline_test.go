package presets

import (
	"strings"
	"testing"
)

// The layouts parse as MCore's PipelineParallelLayerLayout.parse_str_to_list
// reads them: its docstring's example, and the strings MB's DeepSeek-V3
// recipes write.
func TestParsePipelineLayout(t *testing.T) {
	for _, tc := range []struct {
		s                 string
		stages, dec, mtp  int
		first, last, mid  PipelineChunk
		firstIdx, lastIdx int
	}{
		// "Ettt|(tt|)*29,m|L" is [[E,t,t,t]] + [[t,t]]*29 + [[m],[L]].
		{s: "Ettt|(tt|)*29,m|L", stages: 32, dec: 3 + 2*29, mtp: 1,
			first: PipelineChunk{Embedding: true, Decoder: 3}, mid: PipelineChunk{Decoder: 2}, last: PipelineChunk{Loss: true}},
		{s: "Et|(tt|)*30mL", stages: 32, dec: 61, mtp: 1,
			first: PipelineChunk{Embedding: true, Decoder: 1}, mid: PipelineChunk{Decoder: 2}, last: PipelineChunk{MTP: 1, Loss: true}},
		{s: "Et*4|(t*4|)*14tmL", stages: 16, dec: 61, mtp: 1,
			first: PipelineChunk{Embedding: true, Decoder: 4}, mid: PipelineChunk{Decoder: 4}, last: PipelineChunk{Decoder: 1, MTP: 1, Loss: true}},
	} {
		chunks, err := ParsePipelineLayout(tc.s)
		if err != nil {
			t.Fatalf("%s: %v", tc.s, err)
		}
		dec, mtp := 0, 0
		for _, c := range chunks {
			dec += c.Decoder
			mtp += c.MTP
		}
		if len(chunks) != tc.stages || dec != tc.dec || mtp != tc.mtp || chunks[0] != tc.first || chunks[len(chunks)-1] != tc.last || chunks[len(chunks)/2] != tc.mid {
			t.Errorf("%s: %d stages, %d decoder, %d mtp: %+v", tc.s, len(chunks), dec, mtp, chunks)
		}
	}
}

func TestParsePipelineLayoutRejects(t *testing.T) {
	for s, want := range map[string]string{
		"Etx|L":             `unknown layer character 'x'`,
		"E(tt|L":            "unbalanced parentheses",
		"Et)*2|L":           "unbalanced parentheses",
		"E(tt)|L":           "must be followed by *n",
		"E*|t|L":            "bad repeat count",
		"*t|L":              `"*" must follow`,
		"E(t)*9999999999|L": "bad repeat count",
	} {
		if _, err := ParsePipelineLayout(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", s, err, want)
		}
	}
}

// A layout must place the model's layers on PP × VP stages as MCore's
// validate_layer_layout demands.
func TestCheckPipelineLayout(t *testing.T) {
	chunks, _ := ParsePipelineLayout("Et|(tt|)*30mL")
	ok := Layout{PP: 8, VP: 4, MTPLayers: 1}
	if err := CheckPipelineLayout(chunks, 61, ok); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		l      Layout
		layers int
		want   string
	}{
		{Layout{PP: 8, VP: 2, MTPLayers: 1}, 61, "32 stages, but pp × vp = 8 × 2 = 16"},
		{ok, 60, "61 decoder layers (t), the model has 60"},
		{Layout{PP: 8, VP: 4}, 61, "1 MTP layers (m), mtp_layers is 0"},
	} {
		if err := CheckPipelineLayout(chunks, tc.layers, tc.l); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.l, err, tc.want)
		}
	}
	noLoss, _ := ParsePipelineLayout("Et|t")
	if err := CheckPipelineLayout(noLoss, 2, Layout{PP: 2}); err == nil || !strings.Contains(err.Error(), "loss (L)") {
		t.Errorf("no loss: %v", err)
	}
}
