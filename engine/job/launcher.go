package job

import (
	"context"
	"errors"
)

// Job states, in Slurm's words (squeue/sacct JOB STATE CODES); the local
// launcher uses the same names.
const (
	StatePending     = "PENDING"
	StateRunning     = "RUNNING"
	StateCompleting  = "COMPLETING"
	StateCompleted   = "COMPLETED"
	StateFailed      = "FAILED"
	StateTimeout     = "TIMEOUT"
	StateOutOfMemory = "OUT_OF_MEMORY"
	StateCancelled   = "CANCELLED"
	StateNodeFail    = "NODE_FAIL"
	// StateUnknown: the scheduler no longer knows the job (purged from
	// squeue, no accounting); the log decides.
	StateUnknown = "UNKNOWN"
	// StateSubmitting is cgtune's own: the job is being handed over.
	StateSubmitting = "SUBMITTING"
)

// terminal lists the states a job does not leave (Slurm's base states;
// CANCELLED is printed as "CANCELLED by UID" by sacct).
var terminal = map[string]bool{
	StateCompleted: true, StateFailed: true, StateTimeout: true, StateOutOfMemory: true,
	StateCancelled: true, StateNodeFail: true, "BOOT_FAIL": true, "DEADLINE": true,
	"PREEMPTED": true, "REVOKED": true, "SPECIAL_EXIT": true, StateUnknown: true,
}

// Status is where a job stands.
type Status struct {
	State    string `json:"state"`
	Reason   string `json:"reason,omitempty"` // Slurm's reason (Priority, Resources, NonZeroExitCode, ...)
	ExitCode int    `json:"exit_code,omitempty"`
	Done     bool   `json:"done"`
}

// Request is one job to launch.
type Request struct {
	Name      string // job name: letters, digits, '-', '_', '.'
	Command   string // the rendered shell command
	Dir       string // folder for the job's files (batch script, output)
	Candidate string // the candidate's key, for the log's header line
}

// Ref names a launched job so that a later cgtune can find it again.
type Ref struct {
	Launcher string `json:"launcher"`
	ID       string `json:"id"`
	Output   string `json:"output"` // the file the job's stdout and stderr go to
}

// Job is a launched job.
type Job interface {
	Ref() Ref
	// Status asks the launcher where the job stands.
	Status(ctx context.Context) (Status, error)
	// Cancel stops the job (scancel, or SIGTERM then SIGKILL to the local
	// process group); Status then reaches a terminal state.
	Cancel(ctx context.Context) error
}

// Launcher starts jobs: `local` on this node, `slurm` through sbatch.
type Launcher interface {
	Name() string
	Submit(ctx context.Context, r Request) (Job, error)
	// Attach finds a job an earlier cgtune launched; ErrNotAttachable when
	// the launcher cannot follow it (it ended and was purged, or the
	// launcher cannot attach at all).
	Attach(ctx context.Context, ref Ref) (Job, error)
	// Nodes and GPUs are what each job gets (0: not known).
	Nodes() int
	GPUs() int
}

// ErrNotAttachable: the job cannot be followed again; submit a new one.
var ErrNotAttachable = errors.New("job cannot be re-attached")
