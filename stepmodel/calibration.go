package stepmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"cgtune/internal/fileio"
	"cgtune/presets"
)

// Calibration is what real training jobs taught cgtune about one model and
// layout: the factor by which the emulating engines' host costs (the
// framework profile's, else the per-op ones, after the user's
// adjustments) must be scaled for their predictions to match the jobs. It
// is fitted by `cgtune validate` (from the jobs it ran) and `cgtune
// calibrate` (from logs a user points at), and read by the emulating
// engines through ProfileSet.Calibration, whose costs then say which
// calibration they used.
type Calibration struct {
	Model     string  `json:"model"`  // ModelKey
	Layout    string  `json:"layout"` // LayoutKey
	GPU       string  `json:"gpu,omitempty"`
	HostScale float64 `json:"host_scale"`
	// Source says what the fit came from: "validate RUN", "calibrate
	// eager.log graphed.log", ...
	Source string `json:"source"`
	// Jobs are the job ids (or log files) whose step times were fitted.
	Jobs    []string           `json:"jobs,omitempty"`
	Points  []CalibrationPoint `json:"points,omitempty"`
	Fitted  time.Time          `json:"fitted,omitzero"`
	Version int                `json:"version"`
	Notes   []string           `json:"notes,omitempty"`
}

// CalibrationVersion is the version of the calibration file format.
const CalibrationVersion = 1

// CalibrationPoint is one job's real step time and, once fitted, what the
// calibrated prediction is for it.
type CalibrationPoint struct {
	Candidate presets.Candidate `json:"candidate"`
	RealMs    float64           `json:"real_ms"`
	Job       string            `json:"job,omitempty"`
	// PredictedMs is the prediction at scale 1, FittedMs at HostScale.
	PredictedMs float64 `json:"predicted_ms,omitempty"`
	FittedMs    float64 `json:"fitted_ms,omitempty"`
}

// String is a one-line description for results and notes.
func (c Calibration) String() string {
	return fmt.Sprintf("host-cost scale %.3g for %s (%s, %s)", c.HostScale, c.Model, c.Source, c.Fitted.Format("2006-01-02"))
}

// CalibrationDir is where calibrations are kept:
// os.UserCacheDir()/cgtune/calibration.
func CalibrationDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "cgtune", "calibration"), nil
}

var fileSafeRe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// calibrationFile names the file of model and layoutKey: the model's name
// made safe for a file name and a hash of both (the key has spaces).
func calibrationFile(model, layoutKey string) string {
	h := sha256.Sum256([]byte(model + "\x00" + layoutKey))
	return fileSafeRe.ReplaceAllString(model, "_") + "-" + hex.EncodeToString(h[:6]) + ".json"
}

// LoadCalibration reads the calibration for model (ModelKey) and
// layoutKey (LayoutKey) from CalibrationDir; ok is false when there is
// none.
func LoadCalibration(model, layoutKey string) (Calibration, bool, error) {
	dir, err := CalibrationDir()
	if err != nil {
		return Calibration{}, false, err
	}
	return LoadCalibrationFrom(dir, model, layoutKey)
}

// maxCalibrationBytes bounds a calibration file: a scale and its points.
const maxCalibrationBytes = 16 << 20

// LoadCalibrationFrom reads a calibration from dir.
func LoadCalibrationFrom(dir, model, layoutKey string) (Calibration, bool, error) {
	path := filepath.Join(dir, calibrationFile(model, layoutKey))
	b, err := fileio.ReadFileLimited(path, maxCalibrationBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Calibration{}, false, nil
	}
	if err != nil {
		return Calibration{}, false, err
	}
	var c Calibration
	if err := json.Unmarshal(b, &c); err != nil {
		return Calibration{}, false, fmt.Errorf("%s: %w", path, err)
	}
	if c.Version != CalibrationVersion {
		return Calibration{}, false, fmt.Errorf("%s: version %d, this cgtune reads %d", path, c.Version, CalibrationVersion)
	}
	if c.Model != model || c.Layout != layoutKey {
		return Calibration{}, false, fmt.Errorf("%s holds model %s layout %q, not %s %q", path, c.Model, c.Layout, model, layoutKey)
	}
	if !(c.HostScale > 0) || math.IsInf(c.HostScale, 0) {
		return Calibration{}, false, fmt.Errorf("%s: field host_scale must be a positive number, got %v", path, c.HostScale)
	}
	return c, true, nil
}

// CalibrationID names the calibration of model and layoutKey in
// `cgtune calibrate --list` and --rm: its file's name without ".json".
func CalibrationID(model, layoutKey string) string {
	return strings.TrimSuffix(calibrationFile(model, layoutKey), ".json")
}

// SavedCalibration is one calibration file of the folder: the calibration,
// or why it cannot be read.
type SavedCalibration struct {
	ID   string
	Path string
	Calibration
	Err error
}

// ListCalibrations lists the calibrations in dir by ID; a folder that does
// not exist holds none.
func ListCalibrations(dir string) ([]SavedCalibration, error) {
	ents, err := fileio.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []SavedCalibration
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		sc := SavedCalibration{ID: strings.TrimSuffix(name, ".json"), Path: filepath.Join(dir, name)}
		b, err := fileio.ReadFileLimited(sc.Path, 1<<20)
		if err == nil {
			err = json.Unmarshal(b, &sc.Calibration)
		}
		if err == nil && sc.Version != CalibrationVersion {
			err = fmt.Errorf("version %d, this cgtune reads %d", sc.Version, CalibrationVersion)
		}
		if err == nil && CalibrationID(sc.Model, sc.Layout) != sc.ID {
			err = fmt.Errorf("holds model %s layout %q, whose file is %s", sc.Model, sc.Layout, calibrationFile(sc.Model, sc.Layout))
		}
		sc.Err = err
		out = append(out, sc)
	}
	return out, nil
}

// RemoveCalibration deletes the calibration id (as ListCalibrations names
// it) from dir and returns its path.
func RemoveCalibration(dir, id string) (string, error) {
	if id == "" || id != filepath.Base(id) || strings.HasPrefix(id, ".") {
		return "", fmt.Errorf("calibration %q: give an ID as cgtune calibrate --list prints it", id)
	}
	path := filepath.Join(dir, id+".json")
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("no calibration %q in %s (cgtune calibrate --list lists them)", id, dir)
		}
		return "", err
	}
	return path, nil
}

// SaveCalibration writes c into CalibrationDir, replacing the one for the
// same model and layout; it returns the file's path.
func SaveCalibration(c Calibration) (string, error) {
	dir, err := CalibrationDir()
	if err != nil {
		return "", err
	}
	return c.SaveTo(dir)
}

// SaveTo writes c into dir atomically.
func (c Calibration) SaveTo(dir string) (string, error) {
	if c.Model == "" || c.Layout == "" {
		return "", errors.New("calibration without model or layout")
	}
	if !(c.HostScale > 0) || math.IsInf(c.HostScale, 0) {
		return "", fmt.Errorf("calibration host scale %v is not a positive number", c.HostScale)
	}
	c.Version = CalibrationVersion
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, calibrationFile(c.Model, c.Layout))
	return path, fileio.WriteFileAtomic(path, append(b, '\n'), 0o644)
}

// Predictor predicts candidate c's step time (ms) with the framework host
// costs scaled by scale.
type Predictor func(scale float64, c presets.Candidate) (float64, error)

// Bounds of a fitted host-cost scale.
const (
	MinHostScale = 0.05
	MaxHostScale = 50
)

// FitHostScale finds the host-cost scale for which predict matches the
// jobs' step times best. With the eager baseline and at least one graphed
// job it fits the speed-ups (each graphed job's step time over the eager
// one's), which the host cost decides and which a global error in the
// modelled GPU time cancels out of; with graphed jobs alone it fits the
// step times themselves, and says that any GPU-time error then goes into
// the scale. It refuses eager jobs alone (the eager step cannot tell host
// cost from GPU time: any error of the modelled GPU time would become the
// scale) and a fit that ends at a bound of the scale (MinHostScale,
// MaxHostScale: no host cost explains the jobs, as when they ran another
// model or layout). The points come back with their predictions at scale 1
// and at the fit.
func FitHostScale(points []CalibrationPoint, predict Predictor) (float64, []CalibrationPoint, []string, error) {
	if len(points) == 0 {
		return 0, nil, nil, errors.New("no job step times to fit")
	}
	eager := -1
	graphed := 0
	for i, p := range points {
		if !(p.RealMs > 0) {
			return 0, nil, nil, fmt.Errorf("%s: step time %v ms is not positive", p.Candidate.Key(), p.RealMs)
		}
		if p.Candidate.Graphed() {
			graphed++
		} else if eager < 0 {
			eager = i
		}
	}
	if graphed == 0 {
		return 0, nil, nil, errors.New("only eager runs (cuda_graph_impl none): a fit needs at least one graphed run, whose step time against eager's is what the host cost decides")
	}
	ratios := eager >= 0
	var notes []string
	if !ratios {
		notes = append(notes, "fitted on step times alone (no eager run to pair the graphed ones with): an error of the modelled GPU time goes into the host-cost scale")
	}
	var firstErr error
	cost := func(s float64) float64 {
		pred := make([]float64, len(points))
		for i, p := range points {
			ms, err := predict(s, p.Candidate)
			if err != nil || !(ms > 0) {
				if firstErr == nil {
					firstErr = fmt.Errorf("%s: no prediction (%w)", p.Candidate.Key(), err)
				}
				return math.Inf(1)
			}
			pred[i] = ms
		}
		var sum float64
		for i, p := range points {
			var d float64
			switch {
			case !ratios:
				d = math.Log(pred[i] / p.RealMs)
			case i == eager || !p.Candidate.Graphed():
				continue
			default:
				d = math.Log(pred[i]/pred[eager]) - math.Log(p.RealMs/points[eager].RealMs)
			}
			sum += d * d
		}
		return sum
	}
	// A coarse geometric grid, then golden-section search around its best.
	lo, hi := math.Log(MinHostScale), math.Log(MaxHostScale)
	const n = 100
	best, bestCost := gridBest(cost, lo, hi, n)
	if math.IsInf(bestCost, 1) {
		return 0, nil, nil, firstErr
	}
	scale := math.Exp(goldenSection(cost, lo+(hi-lo)*float64(max(0, best-1))/n, lo+(hi-lo)*float64(min(n, best+1))/n))
	if best == 0 || best == n {
		return 0, nil, nil, fmt.Errorf("the fit reached the bound %.3g of the host-cost scale (allowed %g to %g): the runs differ from the model by more than host cost explains (of another model or layout?); nothing saved", scale, float64(MinHostScale), float64(MaxHostScale))
	}
	out := make([]CalibrationPoint, len(points))
	for i, p := range points {
		p.PredictedMs, _ = predict(1, p.Candidate)
		p.FittedMs, _ = predict(scale, p.Candidate)
		out[i] = p
	}
	return scale, out, notes, nil
}

// gridBest is the index i of 0..n whose scale exp(lo+(hi-lo)·i/n) costs
// least, and that cost (+Inf when none has a cost).
func gridBest(cost func(float64) float64, lo, hi float64, n int) (int, float64) {
	best, bestCost := 0, math.Inf(1)
	for i := 0; i <= n; i++ {
		if c := cost(math.Exp(lo + (hi-lo)*float64(i)/float64(n))); c < bestCost {
			best, bestCost = i, c
		}
	}
	return best, bestCost
}

// goldenSection narrows the log-scale interval [a, b] around cost's
// minimum by golden-section search and returns its middle.
func goldenSection(cost func(float64) float64, a, b float64) float64 {
	g := (math.Sqrt(5) - 1) / 2
	x1, x2 := b-g*(b-a), a+g*(b-a)
	c1, c2 := cost(math.Exp(x1)), cost(math.Exp(x2))
	for i := 0; i < 40; i++ {
		if c1 <= c2 {
			b, x2, c2 = x2, x1, c1
			x1 = b - g*(b-a)
			c1 = cost(math.Exp(x1))
		} else {
			a, x1, c1 = x1, x2, c2
			x2 = a + g*(b-a)
			c2 = cost(math.Exp(x2))
		}
	}
	return (a + b) / 2
}
