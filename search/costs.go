package search

import (
	"fmt"
	"path/filepath"
	"strings"

	"cgtune/presets"
)

// CostModel is what a search's figures are computed with besides the
// workload: the engine, the GPU the estimates are for, the user's cost
// adjustments and the calibration fitted from real jobs. A resume that
// computed them another way would rank results of two models side by
// side, so the journal keeps it (Fingerprint.Costs) and a resume must
// match it.
type CostModel struct {
	Engine      string `json:"engine,omitempty"`
	EstimateGPU string `json:"estimate_gpu,omitempty"`
	// ProfileScale is --profile-scale as given.
	ProfileScale string `json:"profile_scale,omitempty"`
	// ProfileFile is --profile-file's absolute path and ProfileDigest the
	// SHA-256 of what it held: an edited file is another cost model.
	ProfileFile   string `json:"profile_file,omitempty"`
	ProfileDigest string `json:"profile_digest,omitempty"`
	// Calibration is the host-cost calibration saved for the model and
	// layout when the search started ("" for none).
	Calibration string `json:"calibration,omitempty"`
}

// Describe lists the parts that are set, as flags where they are flags.
func (c CostModel) Describe() string {
	var parts []string
	add := func(name, v string) {
		if v != "" {
			parts = append(parts, name+" "+v)
		}
	}
	add("--engine", c.Engine)
	add("--estimate-gpu", c.EstimateGPU)
	add("--profile-scale", c.ProfileScale)
	add("--profile-file", c.ProfileFile)
	if c.ProfileDigest != "" {
		parts = append(parts, "(sha256 "+c.ProfileDigest[:min(12, len(c.ProfileDigest))]+")")
	}
	add("calibration", c.Calibration)
	if len(parts) == 0 {
		return "no adjustments"
	}
	return strings.Join(parts, " ")
}

// changed names the parts of c that differ in d.
func (c CostModel) changed(d CostModel) []string {
	var out []string
	for _, p := range []struct {
		name string
		a, b string
	}{
		{"--engine", c.Engine, d.Engine},
		{"--estimate-gpu", c.EstimateGPU, d.EstimateGPU},
		{"--profile-scale", c.ProfileScale, d.ProfileScale},
		{"--profile-file", c.ProfileFile, d.ProfileFile},
		{"the content of --profile-file", c.ProfileDigest, d.ProfileDigest},
		{"the saved calibration", c.Calibration, d.Calibration},
	} {
		if p.a != p.b && !(p.name == "the content of --profile-file" && c.ProfileFile != d.ProfileFile) {
			out = append(out, p.name)
		}
	}
	return out
}

// CostsChangedError refuses a resume whose cost model is not the one the
// search in Dir was started with.
type CostsChangedError struct {
	Dir        string
	Saved, Now CostModel
}

func (e *CostsChangedError) Error() string {
	return fmt.Sprintf("cannot resume %s: %s changed (the search ran with %s; this resume with %s), and results computed two ways cannot be ranked together; resume without changing them (left out, the saved ones are taken) or start a new run",
		e.Dir, strings.Join(e.Saved.changed(e.Now), ", "), e.Saved.Describe(), e.Now.Describe())
}

// CheckResumable refuses a resume of the search in cfg.RunDir by cfg when
// it is another search or computed another way (Run refuses it too; a
// caller that writes into the run folder first asks before).
func CheckResumable(cfg Config) error {
	gen, err := presets.ParseMBridge(cfg.mbridge())
	if err != nil {
		return err
	}
	cfg.Workload = planOptions(cfg, cfg.mbridge(), gen)
	return checkResumable(cfg)
}

// checkResumable refuses, before anything is prepared or planned, a resume
// (cfg.Resume; a new search passes) of the search in cfg.RunDir by
// another search or cost model; a journal that cannot be read is left to
// openJournal to report.
func checkResumable(cfg Config) error {
	if !cfg.Resume {
		return nil
	}
	pj, err := readJournal(cfg.RunDir, filepath.Join(cfg.RunDir, JournalFile), nil)
	if err != nil {
		return nil
	}
	return pj.fp.resumableBy(cfg.fingerprint(), cfg.RunDir)
}
