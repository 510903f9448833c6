package setup

import (
	"fmt"
	"path/filepath"
	"strings"

	"cgtune/presets"
	"cgtune/search"
	"cgtune/stepmodel"
)

// Profile scales or overrides the emulation's host and GPU costs
// (docs/reference.md: "Adjusting the costs"): --profile-scale and
// --profile-file.
type Profile struct {
	Scale string // host=F[,gpu=F]
	File  string // a YAML file of adjustments
}

// Args are the flags that give a worker process the same adjustments.
func (p Profile) Args() []string {
	var a []string
	if p.Scale != "" {
		a = append(a, "--profile-scale", p.Scale)
	}
	if p.File != "" {
		a = append(a, "--profile-file", p.File)
	}
	return a
}

// Adjust parses the adjustments; a bad value is bad input.
func (p Profile) Adjust() (*stepmodel.ProfileAdjust, error) {
	var a *stepmodel.ProfileAdjust
	var err error
	if p.File != "" {
		if a, err = stepmodel.LoadProfileAdjust(p.File); err != nil {
			return nil, fmt.Errorf("--profile-file %w", err)
		}
	}
	if p.Scale != "" {
		if a, err = stepmodel.ParseProfileScale(p.Scale, a); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Source is the cost source of an emulating engine for gpu: the profiles
// cached under the user cache folder, the adjustments and the host-cost
// scale calibrated from the real job (SavedCalibration).
func (p Profile) Source(gpu string) (*stepmodel.ProfileSet, error) {
	a, err := p.Adjust()
	if err != nil {
		return nil, err
	}
	dir, _ := stepmodel.DefaultProfileDir() // no cache folder: no profiles
	return &stepmodel.ProfileSet{Dir: dir, GPU: gpu, Adjust: a, Calibration: SavedCalibration}, nil
}

// costModel is what a search on engine computes with (search.CostModel):
// the engine, the adjustments (the file by its absolute path and what it
// holds) and the calibration saved for cfg's model and layout; the
// caller adds the estimate GPU.
func (p Profile) costModel(engineName string, cfg *search.Config) (search.CostModel, error) {
	c := search.CostModel{Engine: engineName, ProfileScale: p.Scale}
	if p.File != "" {
		a, err := p.Adjust()
		if err != nil {
			return c, err
		}
		c.ProfileFile, c.ProfileDigest = absolute(p.File), a.Digest
	}
	if scale, src, ok := SavedCalibration(stepmodel.ModelKey(cfg.Model), stepmodel.LayoutKey(cfg.Layout)); ok {
		c.Calibration = fmt.Sprintf("host costs ×%g (%s)", scale, src)
	}
	return c, nil
}

// absolute is path made absolute (as it is when that fails).
func absolute(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return path
}

// Unapplied are notices for the adjustments that cannot apply to model m
// on layout l emulated for gpu: without a framework profile cached for
// them only host_scale applies (to the per-op host costs), and a layer
// kind the profile does not have is not invented.
func (p Profile) Unapplied(m presets.Model, l presets.Layout, gpu string) []string {
	a, err := p.Adjust()
	if err != nil || a == nil {
		return nil
	}
	var prof *stepmodel.FrameworkProfile
	if dir, err := stepmodel.DefaultProfileDir(); err == nil {
		prof, _, _ = stepmodel.FindProfile(dir, stepmodel.ModelKey(m), stepmodel.LayoutKey(l), gpu)
	}
	fields := a.Unapplied(prof)
	if len(fields) == 0 {
		return nil
	}
	why := fmt.Sprintf("no framework profile of %s on this layout is cached for %s (cgtune probe --framework measures one), so only host_scale applies", m.Name, gpu)
	if prof != nil {
		why = "the cached framework profile has no such layer kind, and an adjustment refines a measurement, it does not invent one"
	}
	return []string{fmt.Sprintf("%s: %s are not used: %s", a.Source, strings.Join(fields, ", "), why)}
}

// Describe names the host costs an engine falls back to, with the
// adjustments.
func (p Profile) Describe(fallback string) string {
	s := "PyTorch per-op costs (" + fallback + ")"
	if p.Scale != "" || p.File != "" {
		s += ", adjusted by " + strings.TrimSpace(strings.Join(p.Args(), " "))
	}
	return s
}

// SavedCalibration hands the emulating engines the host-cost scale that
// cgtune validate or cgtune calibrate fitted from the real job for a model
// and layout (stepmodel.CalibrationFunc); their costs then name it, and
// every result they give says how to list and remove it. A damaged
// calibration file counts as none (cgtune calibrate writes a new one).
func SavedCalibration(model, layout string) (float64, string, bool) {
	c, ok, err := stepmodel.LoadCalibration(model, layout)
	if err != nil || !ok {
		return 0, "", false
	}
	return c.HostScale, CalibrationSource(c), true
}

// CalibrationSource says where a saved calibration came from and how to
// remove it.
func CalibrationSource(c stepmodel.Calibration) string {
	s := c.Source
	if !c.Fitted.IsZero() {
		s += ", fitted " + c.Fitted.Format("2006-01-02")
	}
	return s + "; cgtune calibrate --rm " + stepmodel.CalibrationID(c.Model, c.Layout) + " removes it"
}

// CalibrationNotice is the line a search prints when a saved calibration
// changes its emulated results ("" when none applies).
func CalibrationNotice(m presets.Model, l presets.Layout) string {
	scale, src, ok := SavedCalibration(stepmodel.ModelKey(m), stepmodel.LayoutKey(l))
	if !ok {
		return ""
	}
	return fmt.Sprintf("calibration: the emulated results (cuda, estimate) scale host costs ×%.3g for %s on this layout (%s; cgtune calibrate --list)", scale, m.Name, src)
}
