package search

import (
	"fmt"
	"reflect"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/recipe"
	"cgtune/stepmodel"
)

// The reference of a search is the CUDA-graph setting the recipe ships
// (presets.Layout.CUDAGraph; none where it ships none), or the one a team
// preset names: what the user runs today. The search always measures it,
// and every result says how it compares.

// ReferenceFromRecipe and ReferenceFromPreset say where a search's
// reference came from.
const (
	ReferenceFromRecipe = "the recipe"
	ReferenceFromPreset = "the preset"
)

// Reference is the search's reference and how it did.
type Reference struct {
	Candidate presets.Candidate `json:"candidate"`
	// From is ReferenceFromRecipe or ReferenceFromPreset.
	From string `json:"from"`
	// Ranked is its row of the ranking (nil when it did not run or
	// failed; Why says which).
	Ranked *Ranked `json:"ranked,omitempty"`
	Why    string  `json:"why,omitempty"`
}

// KeepRecipe is what every output says when the recipe's own setting
// wins: nothing measured beats it beyond noise (a tie goes to it), so the
// answer is to change nothing.
const KeepRecipe = "keep the recipe's setting: nothing beats it beyond noise"

// keepPreset is KeepRecipe for a reference a team preset names.
const keepPreset = "keep the preset's reference setting: nothing beats it beyond noise"

// Keep is KeepRecipe, or its wording for a preset's reference.
func (r *Reference) Keep() string {
	if r != nil && r.From == ReferenceFromPreset {
		return keepPreset
	}
	return KeepRecipe
}

// Won reports whether the reference is the winner.
func (r *Reference) Won(winner *Ranked) bool {
	return r != nil && r.Ranked != nil && winner != nil && winner.Result.Candidate.Key() == r.Ranked.Result.Candidate.Key()
}

// Describe is one line: what the reference is and how the winner compares.
func (r *Reference) Describe(winner *Ranked) string {
	if r == nil {
		return ""
	}
	head := fmt.Sprintf("%s ships %s", r.From, r.Candidate.Name())
	if r.From == ReferenceFromPreset {
		head = fmt.Sprintf("the preset's reference is %s", r.Candidate.Name())
	}
	switch {
	case r.Ranked == nil:
		return fmt.Sprintf("%s: %s", head, r.Why)
	case winner == nil:
		return fmt.Sprintf("%s (rank %d, %.2f ms/step, %.3f× eager)", head, r.Ranked.Rank, r.Ranked.Result.Step.Median, r.Ranked.Result.Speedup)
	case r.Won(winner):
		return fmt.Sprintf("%s: %s, %s", head, r.Keep(), sourceText(winner.Result))
	}
	return fmt.Sprintf("%s (%.2f ms/step): the winner is %s, %s", head, r.Ranked.Result.Step.Median,
		gainText(winner.VsReference), sourceText(winner.Result))
}

// ReferenceKey is the key of the ranked reference ("" when it did not
// finish), for RankOptions.ReferenceKey.
func (d DoneEvent) ReferenceKey() string {
	if d.Reference == nil || d.Reference.Ranked == nil {
		return ""
	}
	return d.Reference.Ranked.Result.Candidate.Key()
}

// gainText says a speed-up over the reference in words.
func gainText(vs float64) string {
	switch {
	case vs <= 0:
		return "not comparable"
	case vs >= 1:
		return fmt.Sprintf("%.1f%% faster", 100*(vs-1))
	}
	return fmt.Sprintf("%.1f%% slower", 100*(1/vs-1))
}

// sourceText says what a result's figures come from: what measured it,
// or that it is an estimate, which is never called a measurement.
func sourceText(r engine.Result) string {
	switch r.Source {
	case engine.SourceFramework:
		return "measured by the framework on this GPU"
	case engine.SourceJob:
		return "measured by the training job"
	case engine.SourceMeasured:
		return "measured by cgtune's emulation on this GPU"
	}
	return "as cgtune's estimate puts it (not a measurement)"
}

// reference is the search's reference candidate and where it came from.
func (c Config) reference() (presets.Candidate, string) {
	if c.Reference != nil {
		ref := *c.Reference
		if ref.Scopes == nil {
			ref.Scopes = []string{}
		}
		return ref, ReferenceFromPreset
	}
	return c.Layout.ShippedGraph(), ReferenceFromRecipe
}

// withReference is the space's candidates with the reference added when
// the space lacks it: the search always measures it.
func withReference(cands []presets.Candidate, ref presets.Candidate) []presets.Candidate {
	for _, c := range cands {
		if c.Key() == ref.Key() {
			return cands
		}
	}
	return append(cands, ref)
}

// referenceRow is the key of the plan row the reference runs as (a row
// may carry it as another spelling) and, when it cannot run, why.
func referenceRow(plan []Planned, ref presets.Candidate) (key, why string) {
	for _, p := range plan {
		match := p.Candidate.Key() == ref.Key()
		for _, a := range p.Also {
			match = match || a.Key() == ref.Key()
		}
		if !match {
			continue
		}
		if !p.Valid() {
			v := p.Violations[0]
			return "", fmt.Sprintf("not run: %s %s", v.ID, v.Message)
		}
		return p.Candidate.Key(), ""
	}
	return "", "not in the plan"
}

// referenceOf finds the reference's row in a ranking and sets every
// row's speed-up over it.
func referenceOf(rs []Ranked, key string) *Ranked {
	var ref *Ranked
	for i := range rs {
		if key != "" && rs[i].Result.Candidate.Key() == key && !rs[i].Result.Failed() {
			ref = &rs[i]
		}
	}
	if ref == nil {
		return nil
	}
	setVsReference(rs, ref)
	c := *ref
	return &c
}

// setVsReference sets every row's speed-up over ref, the reference's row
// (nothing without one).
func setVsReference(rs []Ranked, ref *Ranked) {
	if ref == nil {
		return
	}
	for i := range rs {
		switch r := rs[i].Result; {
		case r.Failed() || r.Step.Median <= 0:
		case !ref.Result.Candidate.Graphed() && r.Speedup > 0:
			// The reference is eager: each result's own eager baseline
			// measured it, in the same process and more often than the
			// reference's single run.
			rs[i].VsReference = r.Speedup
			if !r.Candidate.Graphed() {
				rs[i].VsReference = 1
			}
		default:
			rs[i].VsReference = ref.Result.Step.Median / r.Step.Median
		}
	}
}

// knownToFit is the model's total for the reference when the search's
// model and layout are a built-in recipe's own and the recipe ships the
// reference: Megatron-Bridge runs that job on this GPU, so a total the
// model puts over the GPU is the model's error, and no candidate that
// needs no more than the reference is judged not to fit. 0 when the
// anchor does not apply (another layout, a user's reference, settings
// that move memory) or is not needed.
func (r *runner) knownToFit(refKey string) int64 {
	cfg := r.cfg
	ref, from := cfg.reference()
	if from != ReferenceFromRecipe || refKey == "" || !isBuiltinRecipe(cfg) {
		return 0
	}
	gpuMiB := stepmodel.JobGPUMiB(r.w.Layout, cfg.JobGPUMemoryMiB)
	b := stepmodel.PredictMemory(r.w, stepmodel.PlanCapture(r.w, ref, r.w.Spec.Options.Generation), nil, gpuMiB, stepmodel.MemoryOptions{})
	if b.Fits {
		return 0
	}
	return b.Total
}

// isBuiltinRecipe reports whether the config's model and layout are a
// built-in preset's, unchanged, with no override that moves memory.
func isBuiltinRecipe(cfg Config) bool {
	m, err := presets.LookupModel(cfg.Model.Name)
	if err != nil || !reflect.DeepEqual(m.Arch, cfg.Model.Arch) {
		return false
	}
	l, err := m.Layout(cfg.Layout.GPU)
	if err != nil {
		return false
	}
	l.Source = cfg.Layout.Source // h200 notes that it borrows h100's
	if !reflect.DeepEqual(l, cfg.Layout) {
		return false
	}
	mb := cfg.mbridge()
	plain, err1 := recipe.MoEWorkload(stepmodel.WorkloadOptions{}, cfg.Model, cfg.Layout, mb, nil)
	set, err2 := recipe.MoEWorkload(stepmodel.WorkloadOptions{}, cfg.Model, cfg.Layout, mb, cfg.Sets)
	return err1 == nil && err2 == nil && reflect.DeepEqual(plain, set)
}
