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
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"

	"cgtune/internal/fileio"
	"cgtune/presets"
)

// Framework profiles are cached per GPU, driver, framework versions, model
// and layout under the user cache folder:
//
//	<cache>/cgtune/profiles/<model>/<layout>/<gpu>/<driver>_torch<v>_mcore<v>_te<v>_<spec>.json
//
// (os.UserCacheDir: ~/.cache on Linux). The megatron engine writes them
// (SaveProfile); the emulating engines read the newest one measured on
// the same GPU for the same model and layout, whatever the framework
// versions (the result names the profile's source).

// DefaultProfileDir is the profile cache folder.
func DefaultProfileDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "cgtune", "profiles"), nil
}

// ModelKey names a model in profile keys: a built-in model by its name,
// any other (an inline model, or a built-in name with another
// architecture) by its name and a hash of its architecture.
func ModelKey(m presets.Model) string {
	if b, err := presets.LookupModel(m.Name); err == nil && reflect.DeepEqual(b.Arch, m.Arch) {
		return m.Name
	}
	data, _ := json.Marshal(m.Arch)
	sum := sha256.Sum256(data)
	return m.Name + "@" + hex.EncodeToString(sum[:6])
}

// LayoutKey is a layout's per-rank shape as a stable string: everything
// that changes what one rank runs per layer and per step.
func LayoutKey(l presets.Layout) string {
	prec := l.Precision
	if prec == "" {
		prec = "bf16"
	}
	k := fmt.Sprintf("tp%d-pp%d-vp%d-cp%d-ep%d-etp%d-dp%d-mbs%d-gbs%d-seq%d-%s",
		l.TPSize(), l.PPSize(), l.VPSize(), l.CPSize(), l.EPSize(), l.ETPSize(), l.DP(), l.MBS, l.GBS, l.Seq, prec)
	if l.Dispatcher != "" {
		k += "-" + l.Dispatcher
	}
	if l.SequenceParallel {
		k += "-sp"
	}
	if len(l.RecomputeModules) > 0 {
		rc := append([]string(nil), l.RecomputeModules...)
		sort.Strings(rc)
		k += "-rc_" + strings.Join(rc, "_")
	}
	return k
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._@-]+`)

func slug(s string) string {
	s = strings.Trim(unsafeName.ReplaceAllString(s, "_"), "_")
	if s == "" {
		return "none"
	}
	return s
}

// ProfilePath is where a profile with key k is cached under dir.
func ProfilePath(dir string, k ProfileKey) string {
	name := fmt.Sprintf("%s_torch%s_mcore%s_te%s_%s_ws%d.json", slug(k.Driver), slug(k.Torch), slug(k.MCore), slug(k.TE), slug(k.LayerSpec), max(1, k.WorldSize))
	return filepath.Join(dir, slug(k.Model), slug(k.Layout), slug(gpuKey(k.GPU)), name)
}

// gpuKey normalises a GPU name ("NVIDIA H200", "H200 (estimated)", "h200")
// to the spec table's name where it has one.
func gpuKey(name string) string {
	n := strings.ToLower(name)
	for _, s := range Specs {
		for _, k := range s.Names {
			if strings.Contains(n, k) {
				return s.Names[0]
			}
		}
	}
	return strings.TrimSpace(n)
}

// SaveProfile writes p to its place under dir (atomically) and returns the path.
func SaveProfile(dir string, p *FrameworkProfile) (string, error) {
	if err := p.Validate(); err != nil {
		return "", err
	}
	path := ProfilePath(dir, p.Key)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return "", err
	}
	return path, fileio.WriteFileAtomic(path, append(data, '\n'), 0o644)
}

// maxProfileBytes bounds a cached framework profile: some KiB of costs; a
// FIFO or a huge file in the cache is not one.
const maxProfileBytes = 16 << 20

// LoadProfile reads and checks a profile file.
func LoadProfile(path string) (*FrameworkProfile, error) {
	data, err := fileio.ReadFileLimited(path, maxProfileBytes)
	if err != nil {
		return nil, err
	}
	var p FrameworkProfile
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &p, nil
}

// Validate checks a profile's version and that every time and size is a
// finite, non-negative number.
func (p *FrameworkProfile) Validate() error {
	if p.Version != ProfileVersion {
		return fmt.Errorf("%w: version %d (this cgtune reads version %d)", ErrProfileVersion, p.Version, ProfileVersion)
	}
	check := func(field string, v float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("profile field %s: %v (want a finite number >= 0)", field, v)
		}
		return nil
	}
	hg := func(field string, x HostGPU) error {
		if err := check(field+".host_ms", x.HostMs); err != nil {
			return err
		}
		return check(field+".gpu_ms", x.GPUMs)
	}
	errs := []error{hg("other_fwd", p.OtherFwd), hg("other_bwd", p.OtherBwd), hg("optimizer", p.Optimizer), hg("optimizer_per_layer", p.OptimizerPerLayer),
		check("full_iteration.replay_host_ms", p.FullIteration.ReplayHostMs),
		check("full_iteration.graph_mib_per_microbatch", p.FullIteration.GraphMiBPerMicroBatch)}
	seen := map[int]bool{}
	for i, c := range p.Collectives {
		f := fmt.Sprintf("collectives[%d]", i)
		if c.WorldSize < 2 || seen[c.WorldSize] {
			errs = append(errs, fmt.Errorf("profile field %s.world_size: %d (want 2 or more, each rank count once)", f, c.WorldSize))
		}
		seen[c.WorldSize] = true
		errs = append(errs, check(f+".eager_exposed_host_ms_per_layer", c.EagerExposedHostMsPerLayer),
			check(f+".graphed_exposed_host_ms_per_layer", c.GraphedExposedHostMsPerLayer))
	}
	for k, sp := range p.Spread {
		f := "spread." + k
		errs = append(errs, check(f+".below", sp.Below), check(f+".above", sp.Above))
		if sp.Below >= 1 {
			errs = append(errs, fmt.Errorf("profile field %s.below: %v (want a fraction of the median below 1)", f, sp.Below))
		}
	}
	for k, l := range p.Layers {
		errs = append(errs, hg("layers."+k+".eager_fwd", l.EagerFwd), hg("layers."+k+".eager_bwd", l.EagerBwd))
		for r, g := range l.Graphed {
			f := "layers." + k + ".graphed." + r
			errs = append(errs, check(f+".replay_host_ms", g.ReplayHostMs), check(f+".first_replay_host_ms", g.FirstReplayHostMs),
				check(f+".gpu_ms", g.GPUMs), check(f+".graph_mib", g.GraphMiB))
		}
	}
	return errors.Join(errs...)
}

// ErrProfileVersion is a profile file of another format version.
var ErrProfileVersion = errors.New("framework profile of another format")

// FindProfile is the newest cached profile under dir for the model and
// layout measured on gpu, and its path; nil when there is none. When the
// only profiles there are of another format version, the error wraps
// ErrProfileVersion (they are not used: the profile must be measured
// again).
func FindProfile(dir, model, layout, gpu string) (*FrameworkProfile, string, error) {
	base := filepath.Join(dir, slug(model), slug(layout), slug(gpuKey(gpu)))
	entries, err := fileio.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	var best *FrameworkProfile
	var bestPath string
	var bestTime int64
	var stale error
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		path := filepath.Join(base, e.Name())
		p, err := LoadProfile(path)
		if errors.Is(err, ErrProfileVersion) {
			stale = err
		}
		if err != nil {
			continue // a profile of another version or a broken file: not used
		}
		if t := info.ModTime().UnixNano(); best == nil || t > bestTime {
			best, bestPath, bestTime = p, path, t
		}
	}
	if best == nil && stale != nil {
		return nil, "", stale
	}
	return best, bestPath, nil
}

// CostSource decides the costs a workload is emulated with.
type CostSource interface {
	CostsFor(w *Workload, rates Rates, fallback HostCosts) Costs
}

// CalibrationFunc is the hook for a host-cost scale fitted from the real
// job's logs for a model (ModelKey) and layout (LayoutKey); ok is false
// when there is none. It multiplies the host costs after the user's
// adjustments.
type CalibrationFunc func(model, layout string) (hostScale float64, source string, ok bool)

// ProfileSet finds the framework profiles of the workloads an emulating
// engine runs, for one GPU, and applies the user's adjustments and the
// calibration. It is safe for concurrent use.
type ProfileSet struct {
	Dir         string         // profile cache folder ("" = none)
	GPU         string         // the GPU the engine emulates; only its profiles apply
	Adjust      *ProfileAdjust // the user's scale and overrides (nil = none)
	Calibration CalibrationFunc

	mu    sync.Mutex
	found map[string]*FrameworkProfile
	stale map[string]bool // model|layout whose only cached profiles are of an older format
}

// CostsFor is the costs of workload w: its profile (adjusted) where one is
// cached, else the per-op fallback (scaled by the user's host scale).
func (s *ProfileSet) CostsFor(w *Workload, rates Rates, fallback HostCosts) Costs {
	c := Costs{Rates: rates, Host: fallback}
	model, layout := ModelKey(w.Spec.Model), LayoutKey(w.Layout)
	if p, stale := s.find(model, layout); p != nil {
		c.Profile = s.Adjust.Apply(p)
	} else {
		c.Host = s.Adjust.ApplyHost(fallback)
		if stale {
			c.Host.Source += "; the cached framework profile is of an older format and was not used: measure it again with cgtune probe --framework"
		}
	}
	if s.Calibration != nil {
		if f, src, ok := s.Calibration(model, layout); ok && f > 0 && !math.IsInf(f, 0) {
			c.Calibration = fmt.Sprintf("host costs ×%.3g from %s", f, src)
			if c.Profile != nil {
				c.Profile = scaleProfile(c.Profile, f, 1, "calibrated ×"+fmt.Sprint(f)+" from "+src)
			} else {
				c.Host = c.Host.Scaled(f)
				c.Host.Source += " (calibrated from " + src + ")"
			}
		}
	}
	return c
}

// find is the cached profile of model and layout, and whether the only
// ones cached are of an older format.
func (s *ProfileSet) find(model, layout string) (*FrameworkProfile, bool) {
	if s.Dir == "" {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := model + "|" + layout
	if p, ok := s.found[key]; ok {
		return p, s.stale[key]
	}
	p, _, err := FindProfile(s.Dir, model, layout, s.GPU)
	if p == nil {
		// Not kept: a search measures the profile when none is cached
		// (its preparation), after the estimator may have looked.
		return nil, errors.Is(err, ErrProfileVersion)
	}
	if s.found == nil {
		s.found, s.stale = map[string]*FrameworkProfile{}, map[string]bool{}
	}
	s.found[key], s.stale[key] = p, false
	return p, false
}
