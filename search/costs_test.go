package search

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/engine"
)

// A resume with another cost model (another --profile-scale,
// --estimate-gpu, profile file) than the journal's is refused, naming
// what changed: their results must not be ranked together. A journal
// that recorded none (an older cgtune's) resumes as before.
func TestResumeRefusesAnotherCostModel(t *testing.T) {
	m, l := builtin(t, "llama3_8b", "h100")
	dir := filepath.Join(t.TempDir(), "run")
	saved := CostModel{Engine: "estimate", EstimateGPU: "h100", ProfileScale: "host=50"}
	cfg := Config{Model: m, Layout: l, Engines: []engine.Engine{&fakeEngine{}}, Strategy: StrategyExhaustive, RunDir: dir, Budget: -1, Costs: saved}
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	cfg.Resume = true
	for _, tc := range []struct {
		change func(*CostModel)
		want   string
	}{
		{func(c *CostModel) { c.ProfileScale = "" }, "--profile-scale changed"},
		{func(c *CostModel) { c.EstimateGPU = "b200" }, "--estimate-gpu changed"},
		{func(c *CostModel) { c.ProfileFile, c.ProfileDigest = "/p.yaml", "abc" }, "--profile-file changed"},
		{func(c *CostModel) { c.Calibration = "host costs ×1.3" }, "the saved calibration changed"},
	} {
		other := cfg
		tc.change(&other.Costs)
		var changed *CostsChangedError
		err := CheckResumable(other)
		if !errors.As(err, &changed) || !strings.Contains(err.Error(), "cannot resume "+dir+": "+tc.want) {
			t.Errorf("%s: CheckResumable: %v", tc.want, err)
		}
		if _, err := Run(context.Background(), other, nil); !errors.As(err, &changed) {
			t.Errorf("%s: Run: %v", tc.want, err)
		}
	}
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Errorf("the same cost model: %v", err)
	}
	// A journal without a cost model (zero) is not checked.
	old := filepath.Join(t.TempDir(), "old")
	cfg.Resume, cfg.RunDir, cfg.Costs = false, old, CostModel{}
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	cfg.Resume, cfg.Costs = true, saved
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Errorf("resume of a journal without a cost model: %v", err)
	}
}
