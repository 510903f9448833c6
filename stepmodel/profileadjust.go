package stepmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"cgtune/internal/fileio"
	"cgtune/presets"
)

// ProfileAdjust is the user's correction of the emulation's costs, from a
// profile file (--profile-file FILE) and/or --profile-scale:
//
//	# cgtune profile adjustments
//	host_scale: 1.3            # multiplies every host time
//	gpu_scale: 1.0             # multiplies every GPU time of a framework profile
//	layers:                    # replace measured values (ms per layer per micro-batch)
//	  moe:                     # layer kind: dense, moe, mamba, attention, mlp, moe_only
//	    eager_fwd: {host_ms: 2.1, gpu_ms: 0.8}
//	    eager_bwd: {host_ms: 1.4}
//	    graphed:               # region: layer, attn, attn,moe_router,moe_preprocess, ...
//	      attn: {replay_host_ms: 0.06, gpu_ms: 0.5, graph_mib: 40}
//	other_fwd: {host_ms: 0.3}   # embedding, output layer, loss per micro-batch
//	other_bwd: {host_ms: 0.2}
//	optimizer: {host_ms: 4.0}   # per step, the part outside the layers
//	optimizer_per_layer: {host_ms: 0.5}  # per step, what each layer adds
//	step_start: {host_ms: 0.06}          # per step, zeroing the gradients
//	step_start_per_layer: {host_ms: 0.01}
//	pre_fwd_host_ms: 0.7        # of other_fwd, before the first layer
//	full_iteration: {replay_host_ms: 0.2, graph_mib_per_microbatch: 120}
//
// Overrides replace a cached profile's values and can only refine one;
// the scales apply after them. Without a profile only host_scale applies,
// to the per-op (PyTorch) host costs.
type ProfileAdjust struct {
	// Version may be given, as in cgtune's other YAML files (1).
	Version           int                      `yaml:"version,omitempty"`
	HostScale         *float64                 `yaml:"host_scale"`
	GPUScale          *float64                 `yaml:"gpu_scale"`
	Layers            map[string]LayerOverride `yaml:"layers"`
	OtherFwd          *HostGPUOverride         `yaml:"other_fwd"`
	OtherBwd          *HostGPUOverride         `yaml:"other_bwd"`
	Optimizer         *HostGPUOverride         `yaml:"optimizer"`
	OptimizerPerLayer *HostGPUOverride         `yaml:"optimizer_per_layer"`
	StepStart         *HostGPUOverride         `yaml:"step_start"`
	StepStartPerLayer *HostGPUOverride         `yaml:"step_start_per_layer"`
	PreFwdHostMs      *float64                 `yaml:"pre_fwd_host_ms"`
	FullIteration     *FullIterationOverride   `yaml:"full_iteration"`
	// Source names where the adjustment came from, for the results' notes.
	Source string `yaml:"-"`
	// Digest is the SHA-256 of the file it was read from (hex; "" when
	// none): a search records it, so that a resume with an edited file is
	// refused.
	Digest string `yaml:"-"`
}

// HostGPUOverride replaces a HostGPU's values that are set.
type HostGPUOverride struct {
	HostMs *float64 `yaml:"host_ms"`
	GPUMs  *float64 `yaml:"gpu_ms"`
}

// LayerOverride replaces a layer kind's values that are set.
type LayerOverride struct {
	EagerFwd *HostGPUOverride          `yaml:"eager_fwd"`
	EagerBwd *HostGPUOverride          `yaml:"eager_bwd"`
	Graphed  map[string]RegionOverride `yaml:"graphed"`
}

// RegionOverride replaces a graphed region's values that are set.
type RegionOverride struct {
	ReplayHostMs      *float64 `yaml:"replay_host_ms"`
	FirstReplayHostMs *float64 `yaml:"first_replay_host_ms"`
	GPUMs             *float64 `yaml:"gpu_ms"`
	GraphMiB          *float64 `yaml:"graph_mib"`
}

// FullIterationOverride replaces the full-iteration values that are set.
type FullIterationOverride struct {
	ReplayHostMs          *float64 `yaml:"replay_host_ms"`
	GraphMiBPerMicroBatch *float64 `yaml:"graph_mib_per_microbatch"`
}

// Limits of the values a profile adjustment may hold.
const (
	MinProfileScale = 0.01
	MaxProfileScale = 100.0
	maxOverrideMs   = 1e6
	maxOverrideMiB  = 1e7
)

var layerKindNames = []string{"dense", "moe", "mamba", "attention", "mlp", "moe_only"}

// LoadProfileAdjust reads a profile adjustment file. Errors are one line
// naming the file, the field and what is allowed.
func LoadProfileAdjust(path string) (*ProfileAdjust, error) {
	data, err := fileio.ReadFileLimited(path, presets.MaxYAMLBytes) // a FIFO or /dev/zero must not hang
	if err != nil {
		return nil, err
	}
	var a ProfileAdjust
	f, err := presets.DecodeStrictFile(path, "profile file", data, &a)
	if err != nil {
		return nil, err
	}
	a.Source = path
	sum := sha256.Sum256(data)
	a.Digest = hex.EncodeToString(sum[:])
	if err := a.check(f.Errorf); err != nil {
		return nil, err
	}
	return &a, nil
}

// ParseProfileScale parses --profile-scale: "host=1.3", "gpu=0.9" or both
// separated by a comma, into a (or a new) ProfileAdjust.
func ParseProfileScale(s string, a *ProfileAdjust) (*ProfileAdjust, error) {
	if a == nil {
		a = &ProfileAdjust{}
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("--profile-scale %q: want host=F and/or gpu=F, such as host=1.3", s)
		}
		switch strings.TrimSpace(k) {
		case "host":
			a.HostScale = &f
		case "gpu":
			a.GPUScale = &f
		default:
			return nil, fmt.Errorf("--profile-scale %q: unknown key %q (allowed: host, gpu)", s, k)
		}
	}
	if a.Source == "" {
		a.Source = "--profile-scale " + s
	} else {
		a.Source += " and --profile-scale " + s
	}
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("--profile-scale: %w", err)
	}
	return a, nil
}

// Validate checks every value: scales finite in [0.01, 100], times finite
// in [0, 1e6] ms, memory in [0, 1e7] MiB, known layer kinds. The error is
// the first value out of range, naming its field.
func (a *ProfileAdjust) Validate() error {
	return a.check(func(_, format string, args ...any) error { return fmt.Errorf(format, args...) })
}

// check is Validate with errf making each error (LoadProfileAdjust puts
// the file's line of the field before it).
func (a *ProfileAdjust) check(errf func(field, format string, args ...any) error) error {
	scale := func(field string, v *float64) error {
		if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0) || *v < MinProfileScale || *v > MaxProfileScale) {
			return errf(field, "field %s: %v (allowed: a number from %g to %g)", field, *v, MinProfileScale, MaxProfileScale)
		}
		return nil
	}
	val := func(field string, v *float64, limit float64, unit string) error {
		if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0 || *v > limit) {
			return errf(field, "field %s: %v (allowed: %s from 0 to %g)", field, *v, unit, limit)
		}
		return nil
	}
	hg := func(field string, o *HostGPUOverride) error {
		if o == nil {
			return nil
		}
		return firstErr(val(field+".host_ms", o.HostMs, maxOverrideMs, "ms"), val(field+".gpu_ms", o.GPUMs, maxOverrideMs, "ms"))
	}
	if a.Version != 0 && a.Version != presets.FileVersion {
		return errf("version", "field version: unsupported version %d (allowed: %d)", a.Version, presets.FileVersion)
	}
	errs := []error{scale("host_scale", a.HostScale), scale("gpu_scale", a.GPUScale),
		hg("other_fwd", a.OtherFwd), hg("other_bwd", a.OtherBwd), hg("optimizer", a.Optimizer), hg("optimizer_per_layer", a.OptimizerPerLayer),
		hg("step_start", a.StepStart), hg("step_start_per_layer", a.StepStartPerLayer),
		val("pre_fwd_host_ms", a.PreFwdHostMs, maxOverrideMs, "ms")}
	if f := a.FullIteration; f != nil {
		errs = append(errs, val("full_iteration.replay_host_ms", f.ReplayHostMs, maxOverrideMs, "ms"),
			val("full_iteration.graph_mib_per_microbatch", f.GraphMiBPerMicroBatch, maxOverrideMiB, "MiB"))
	}
	for _, k := range slices.Sorted(maps.Keys(a.Layers)) {
		l := a.Layers[k]
		if !slices.Contains(layerKindNames, k) {
			errs = append(errs, errf("layers."+k, "field layers.%s: unknown layer kind (allowed: %s)", k, strings.Join(layerKindNames, ", ")))
			continue
		}
		errs = append(errs, hg("layers."+k+".eager_fwd", l.EagerFwd), hg("layers."+k+".eager_bwd", l.EagerBwd))
		for _, r := range slices.Sorted(maps.Keys(l.Graphed)) {
			g, f := l.Graphed[r], "layers."+k+".graphed."+r
			if why := regionError(r); why != "" {
				errs = append(errs, errf(f, "field %s: %s", f, why))
				continue
			}
			errs = append(errs, val(f+".replay_host_ms", g.ReplayHostMs, maxOverrideMs, "ms"), val(f+".first_replay_host_ms", g.FirstReplayHostMs, maxOverrideMs, "ms"),
				val(f+".gpu_ms", g.GPUMs, maxOverrideMs, "ms"),
				val(f+".graph_mib", g.GraphMiB, maxOverrideMiB, "MiB"))
		}
	}
	return firstErr(errs...)
}

// regionError says why r names no graphed region a profile keys its
// measurements by (Region): "" when it does. A name nothing looks up would
// be an adjustment silently without effect.
func regionError(r string) string {
	allowed := fmt.Sprintf("allowed: %s, %s, or cuda-graph modules joined by commas in this order: %s",
		RegionLayer, RegionMoEPostprocess, strings.Join(presets.LayerScopes, ", "))
	if r == string(RegionLayer) || r == string(RegionMoEPostprocess) {
		return ""
	}
	parts := strings.Split(r, ",")
	for _, p := range parts {
		if !slices.Contains(presets.LayerScopes, p) {
			return fmt.Sprintf("unknown region %q (%s)", p, allowed)
		}
	}
	if canon := strings.Join(presets.CanonicalScopes(parts), ","); canon != r {
		return fmt.Sprintf("region %q is looked up as %q (%s)", r, canon, allowed)
	}
	return ""
}

// Unapplied names the fields of a that do not change profile p's costs:
// with no profile (nil), every field but host_scale (the per-op host costs
// have nothing else to adjust); with one, the layer kinds it lacks.
func (a *ProfileAdjust) Unapplied(p *FrameworkProfile) []string {
	if a == nil {
		return nil
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(a.Layers)) {
		if _, ok := p.layer(k); !ok {
			out = append(out, "layers."+k)
		}
	}
	if p != nil {
		return out
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"gpu_scale", a.GPUScale != nil && *a.GPUScale != 1}, {"other_fwd", a.OtherFwd != nil}, {"other_bwd", a.OtherBwd != nil},
		{"optimizer", a.Optimizer != nil}, {"optimizer_per_layer", a.OptimizerPerLayer != nil},
		{"step_start", a.StepStart != nil}, {"step_start_per_layer", a.StepStartPerLayer != nil},
		{"pre_fwd_host_ms", a.PreFwdHostMs != nil}, {"full_iteration", a.FullIteration != nil},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// layer is p's profile of layer kind k (none when p is nil).
func (p *FrameworkProfile) layer(k string) (LayerProfile, bool) {
	if p == nil {
		return LayerProfile{}, false
	}
	l, ok := p.Layers[k]
	return l, ok
}

// firstErr is the first error that is not nil.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func set(dst *float64, v *float64) {
	if v != nil {
		*dst = *v
	}
}

func (o *HostGPUOverride) apply(x *HostGPU) {
	if o != nil {
		set(&x.HostMs, o.HostMs)
		set(&x.GPUMs, o.GPUMs)
	}
}

// Apply returns a copy of p with the overrides and scales applied (p
// itself when a is nil).
func (a *ProfileAdjust) Apply(p *FrameworkProfile) *FrameworkProfile {
	if a == nil || p == nil {
		return p
	}
	q := cloneProfile(p)
	a.OtherFwd.apply(&q.OtherFwd)
	a.OtherBwd.apply(&q.OtherBwd)
	a.Optimizer.apply(&q.Optimizer)
	a.OptimizerPerLayer.apply(&q.OptimizerPerLayer)
	a.StepStart.apply(&q.StepStart)
	a.StepStartPerLayer.apply(&q.StepStartPerLayer)
	set(&q.PreFwdHostMs, a.PreFwdHostMs)
	if f := a.FullIteration; f != nil {
		set(&q.FullIteration.ReplayHostMs, f.ReplayHostMs)
		set(&q.FullIteration.GraphMiBPerMicroBatch, f.GraphMiBPerMicroBatch)
	}
	for k, o := range a.Layers {
		l, ok := q.Layers[k]
		if !ok {
			continue // an override refines a measurement; it does not invent one
		}
		o.EagerFwd.apply(&l.EagerFwd)
		o.EagerBwd.apply(&l.EagerBwd)
		for r, ro := range o.Graphed {
			if l.Graphed == nil {
				l.Graphed = map[string]GraphedRegion{}
			}
			g := l.Graphed[r]
			set(&g.ReplayHostMs, ro.ReplayHostMs)
			set(&g.FirstReplayHostMs, ro.FirstReplayHostMs)
			set(&g.GPUMs, ro.GPUMs)
			set(&g.GraphMiB, ro.GraphMiB)
			l.Graphed[r] = g
		}
		q.Layers[k] = l
	}
	host, gpu := 1.0, 1.0
	if a.HostScale != nil {
		host = *a.HostScale
	}
	if a.GPUScale != nil {
		gpu = *a.GPUScale
	}
	return scaleProfile(q, host, gpu, "adjusted by "+a.Source)
}

// ApplyHost scales the per-op host costs by host_scale.
func (a *ProfileAdjust) ApplyHost(h HostCosts) HostCosts {
	if a == nil || a.HostScale == nil || *a.HostScale == 1 {
		return h
	}
	h = h.Scaled(*a.HostScale)
	h.Source += " (" + a.Source + ")"
	return h
}

func cloneProfile(p *FrameworkProfile) *FrameworkProfile {
	q := *p
	q.Layers = make(map[string]LayerProfile, len(p.Layers))
	for k, l := range p.Layers {
		g := make(map[string]GraphedRegion, len(l.Graphed))
		for r, x := range l.Graphed {
			g[r] = x
		}
		l.Graphed = g
		q.Layers[k] = l
	}
	q.Spread = maps.Clone(p.Spread)
	q.Collectives = append([]CollectiveExposure(nil), p.Collectives...)
	q.Notes = append([]string(nil), p.Notes...)
	return &q
}

// scaleProfile multiplies a profile's host times by host and GPU times by
// gpu and says so in its source.
func scaleProfile(p *FrameworkProfile, host, gpu float64, why string) *FrameworkProfile {
	q := cloneProfile(p)
	hg := func(x *HostGPU) { x.HostMs *= host; x.GPUMs *= gpu }
	hg(&q.OtherFwd)
	hg(&q.OtherBwd)
	hg(&q.Optimizer)
	hg(&q.OptimizerPerLayer)
	hg(&q.StepStart)
	hg(&q.StepStartPerLayer)
	q.PreFwdHostMs *= host
	q.FullIteration.ReplayHostMs *= host
	for i := range q.Collectives {
		q.Collectives[i].EagerExposedHostMsPerLayer *= host
		q.Collectives[i].GraphedExposedHostMsPerLayer *= host
	}
	for k, l := range q.Layers {
		hg(&l.EagerFwd)
		hg(&l.EagerBwd)
		for r, g := range l.Graphed {
			g.ReplayHostMs *= host
			g.FirstReplayHostMs *= host
			g.GPUMs *= gpu
			l.Graphed[r] = g
		}
		q.Layers[k] = l
	}
	q.Source += "; " + why
	if host != 1 || gpu != 1 {
		q.Source += fmt.Sprintf(" (host ×%g, GPU ×%g)", host, gpu)
	}
	return q
}
