package search

import (
	"time"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/recipe"
)

// Event is what a running search reports. The TUI and the headless printer
// consume the same stream; nothing in it refers to a terminal.
type Event interface{ isEvent() }

// Planned is one candidate of the space: valid (Violations empty) and
// queued, or rejected by the rules table and never run.
type Planned struct {
	Candidate  presets.Candidate  `json:"candidate"`
	Violations []recipe.Violation `json:"violations,omitempty"`
	// Also are the other spellings in the space that Megatron runs as
	// Candidate (its effective configuration, Canonical); Why says what
	// rewrote them. They are not run on their own.
	Also []presets.Candidate `json:"also,omitempty"`
	Why  []string            `json:"why,omitempty"`
	// PredictedFailure is why cgtune expects the capture to fail, for a
	// candidate run anyway (Config.RunPredictedFailures); its result says
	// whether the engine agreed.
	PredictedFailure string `json:"predicted_failure,omitempty"`
	// Estimate is the estimate engine's result for a valid candidate, used
	// for ordering, deadlines and the ETA (nil if none was made).
	Estimate *engine.Result `json:"estimate,omitempty"`
}

// Valid reports whether the rules accept the candidate.
func (p Planned) Valid() bool { return len(p.Violations) == 0 }

// Ranked is a finished candidate in the ranking.
type Ranked struct {
	Rank int `json:"rank"`
	// Name is the candidate as every output names it (presets.Candidate.Name).
	Name   string        `json:"name"`
	Result engine.Result `json:"result"`
	// JobMs is the job-level time for TrainIters steps: warm-up steps
	// eager, the capture, the remaining steps graphed.
	JobMs float64 `json:"job_ms"`
	// Fits is false when the measured peak would not fit the real job's GPU.
	Fits bool   `json:"fits"`
	Note string `json:"note,omitempty"` // why it ranks where it does (ties, memory)
	// Round is the search round the result comes from; later rounds
	// measured longer and rank before earlier ones.
	Round int `json:"round,omitempty"`
	// Derived marks a result that was not run itself: another warm-up of
	// the same impl×scope (same steady state), or none from the eager
	// baselines every run measures.
	Derived bool `json:"derived,omitempty"`
	// DerivedFrom is the warm-up whose run a derived warm-up's figures
	// come from (0: not derived from another warm-up).
	DerivedFrom int `json:"derived_from_warmup,omitempty"`
	// Tie numbers the group of candidates tied within noise this one
	// belongs to (1, 2, ... in rank order; 0: not tied); TieBandMs is the
	// group's band, ± around its fastest step.
	Tie       int     `json:"tie,omitempty"`
	TieBandMs float64 `json:"tie_band_ms,omitempty"`
	// Origin is what the search said of the result before ranking it
	// (how a derived result was derived), kept so Rerank can rank again.
	Origin string `json:"origin,omitempty"`
	// Emulated marks a result a cheaper engine predicted because the
	// truer one could not run the candidate here (Result.Delegated).
	Emulated bool `json:"emulated,omitempty"`
	// VsReference is the speed-up over the search's reference (the
	// recipe's shipped setting): its step time over this one's; 0 when
	// the reference did not finish.
	VsReference float64 `json:"vs_reference,omitempty"`
	// WhatIf is a what-if row's pricing (nil for a candidate the recipe
	// allows): its changes and their costs, its own eager step.
	WhatIf *WhatIf `json:"what_if,omitempty"`
}

// PlanEvent is the whole space, sent once before anything runs.
type PlanEvent struct {
	Space []Planned `json:"space"`
	Total int       `json:"total"` // candidate runs the strategy plans (all rounds)
}

// StartEvent: a candidate started on a GPU.
type StartEvent struct {
	Candidate presets.Candidate `json:"candidate"`
	GPU       int               `json:"gpu"`
	Round     int               `json:"round"`
	Steps     int               `json:"steps"` // measured steps it will take
}

// SampleEvent: one step of the running candidate on a GPU.
type SampleEvent struct {
	GPU    int               `json:"gpu"`
	Sample engine.StepSample `json:"sample"`
}

// ResultEvent: a candidate finished (or failed) on a GPU.
type ResultEvent struct {
	GPU    int           `json:"gpu"`
	Round  int           `json:"round"`
	Result engine.Result `json:"result"`
	// Resumed is true when the result came from the journal, not a run.
	Resumed bool          `json:"resumed,omitempty"`
	Done    int           `json:"done"`
	Total   int           `json:"total"`
	ETA     time.Duration `json:"eta"`
}

// MemoryEvent is an NVML reading of one GPU (at least twice a second while
// a search runs on a measuring engine).
type MemoryEvent struct {
	GPU      int   `json:"gpu"`
	UsedMiB  int64 `json:"used_mib"`
	TotalMiB int64 `json:"total_mib"`
	UtilGPU  int   `json:"util_gpu_pct"`
}

// WorkerEvent: a worker died or hung and was replaced.
type WorkerEvent struct {
	GPU     int    `json:"gpu"`
	Message string `json:"message"`
}

// PrepareEvent is a line of the search's preparation before it plans
// (Config.Prepare): what it measures first, and how that went.
type PrepareEvent struct {
	Message string `json:"message"`
}

// DoneEvent ends the stream.
type DoneEvent struct {
	Ranking     []Ranked `json:"ranking"`
	Winner      *Ranked  `json:"winner,omitempty"`
	Interrupted bool     `json:"interrupted"`
	RunDir      string   `json:"run_dir"`
	Err         string   `json:"error,omitempty"`
	Strategy    string   `json:"strategy"`
	Runs        int      `json:"runs"`    // candidate runs this search made
	Resumed     int      `json:"resumed"` // results taken from the journal instead
	// GPUTimeMs is the engines' time the runs took (resumed ones included);
	// simulated for estimated results.
	GPUTimeMs float64  `json:"gpu_time_ms"`
	Notes     []string `json:"notes,omitempty"` // how the strategy went (rounds, budget, derived results)
	// Emulation is the emulation's error measured in the search, when it
	// predicted candidates the framework could not run here.
	Emulation *EmulationCheck `json:"emulation,omitempty"`
	// Reference is the recipe's shipped setting (or a preset's) and how it
	// did; every ranked row's VsReference is over it.
	Reference *Reference `json:"reference,omitempty"`
	// KnownToFitMiB is RankOptions.KnownToFitMiB of the ranking.
	KnownToFitMiB int64 `json:"known_to_fit_mib,omitempty"`
	// Kept is what the journal holds, read back after an error writing it
	// (nil otherwise): Runs counts runs, not what reached the disk.
	Kept *JournalCount `json:"kept,omitempty"`
	// WhatIf are the what-if rows (Config.WhatIf), ranked on their own;
	// Accepted the enabling changes the user accepts (Config.Accept):
	// rows of those changes only rank in Ranking too.
	WhatIf   []Ranked `json:"what_if,omitempty"`
	Accepted []string `json:"accepted,omitempty"`
}

func (PlanEvent) isEvent()    {}
func (StartEvent) isEvent()   {}
func (SampleEvent) isEvent()  {}
func (ResultEvent) isEvent()  {}
func (MemoryEvent) isEvent()  {}
func (WorkerEvent) isEvent()  {}
func (DoneEvent) isEvent()    {}
func (PrepareEvent) isEvent() {}
