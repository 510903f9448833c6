package presets

import (
	"slices"
	"strings"
	"testing"
)

func TestPipelineStagesExpandsMCoreSyntax(t *testing.T) {
	// The example of MCore's parse_str_to_list docstring and Kimi K2's
	// layout as MB HEAD's recipe writes it.
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Ettt|(tt|)*2,m|L", []string{"Ettt", "tt", "tt", "m", "L"}},
		{"Et|(tt|)*2L", []string{"Et", "tt", "tt", "L"}},
		{"Et*3|t*2L", []string{"Ettt", "ttL"}},
	} {
		got, err := PipelineStages(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("PipelineStages(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"Ex|L", "E(t|)*99999999|L"} {
		if _, err := PipelineStages(bad); err == nil {
			t.Errorf("PipelineStages(%q): no error", bad)
		}
	}
}

func TestLayoutPipelineLayoutChecks(t *testing.T) {
	m := Model{Name: "toy", Arch: Arch{Layers: 4, Hidden: 64, FFNHidden: 256, Heads: 4, KVGroups: 4, HeadDim: 16, Vocab: 100},
		Layouts: map[string]Layout{}}
	base := Layout{GPU: "h100", NumGPUs: 2, Precision: "bf16", PP: 2, GBS: 8, MBS: 1, Seq: 128}
	for _, tc := range []struct {
		layout string
		vp     int
		mtp    int
		want   string // "" valid
	}{
		{"Ett|ttL", 0, 0, ""},
		{"Et|t|t|tL", 2, 0, ""},
		{"Et|t|t|tL", 0, 0, "virtual pipeline of 2 but vp is 1"},
		{"Et|t|t|tL", 3, 0, "virtual pipeline of 2 but vp is 3"},
		{"Ett|tL", 0, 0, "3 decoder layers (t) but the model has 4"},
		{"Ett|t|tL", 0, 0, "3 stages is not a multiple of pp (2)"},
		{"tt|EttL", 0, 0, "the embedding (E) must come first"},
		{"Ett|ttmL", 0, 0, "1 MTP layers (m) but mtp_layers is 0"},
		{"Ett|ttmL", 0, 1, ""},
	} {
		l := base
		l.PipelineLayout, l.VP, l.MTPLayers = tc.layout, tc.vp, tc.mtp
		err := m.ValidateLayout(l)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.layout, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pipeline_layout")):
			t.Errorf("%q: error %v, want one naming pipeline_layout and %q", tc.layout, err, tc.want)
		}
	}
}
