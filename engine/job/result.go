package job

import (
	"fmt"

	"cgtune/engine"
	"cgtune/presets"
)

// FirstMeasured is the first iteration whose time counts for candidate c.
// Megatron's training loop runs cuda_graph_warmup_steps eager iterations,
// captures in the next one (TE: at the top of iteration warmup+1; full
// iteration: FullCudaGraphWrapper's call number warmup; local: the
// managers record and capture within the first iterations), so the
// steady state starts at warmup+2 (MB docs/training/cuda-graphs.md:
// compare replay iterations only). Iterations 1 and 2 never count:
// the first pays lazy initialisation and autotuning, and Megatron-LM's
// second log line averages from iteration 1.
func FirstMeasured(c presets.Candidate) int {
	if !c.Graphed() {
		return 3
	}
	return max(c.Warmup+2, 3)
}

// Phase is the phase of iteration it for candidate c (engine.Phase*).
func Phase(c presets.Candidate, it Iteration) string {
	switch {
	case it.First() >= FirstMeasured(c):
		return engine.PhaseMeasure
	case c.Graphed() && it.Iter == c.Warmup+1 && it.Span == 1:
		return engine.PhaseCapture
	}
	return engine.PhaseWarmup
}

// steps splits a log's iterations for candidate c: the measured ones, the
// eager warm-up ones that are past the first two iterations, the capture
// iteration's time (0 if not logged on its own) and the warm-up's total.
type steps struct {
	measured, eager   []float64
	captureMs         float64
	warmupMs          float64
	averaged          bool // some measured line averaged several iterations
	lastIter, ofIters int
}

func splitSteps(c presets.Candidate, its []Iteration) steps {
	var s steps
	for _, it := range its {
		s.lastIter, s.ofIters = max(s.lastIter, it.Iter), it.Of
		switch Phase(c, it) {
		case engine.PhaseMeasure:
			s.measured = append(s.measured, it.Ms)
			if it.Span > 1 {
				s.averaged = true
			}
		case engine.PhaseCapture:
			s.captureMs = it.Ms
		default:
			if !c.Graphed() || it.Iter <= c.Warmup {
				s.warmupMs += it.Ms * float64(it.Span)
				if it.First() >= 3 {
					s.eager = append(s.eager, it.Ms)
				}
			}
		}
	}
	return s
}

// buildResult turns a finished job (its final state and its log) into a
// Result. ok says whether the launcher reports success (or cgtune stopped
// the job itself after enough iterations).
func buildResult(c presets.Candidate, rep Report, st Status, stoppedByUs bool, info engine.JobInfo) engine.Result {
	res := engine.Result{Candidate: c, Source: engine.Job, Device: engine.DeviceInfo{Name: info.Launcher + " job " + info.ID}}
	info.State, info.ExitCode = st.State, st.ExitCode
	res.Job = &info
	s := splitSteps(c, rep.Iterations)
	res.Step = engine.Summarise(s.measured)
	res.Eager = engine.Summarise(s.eager)
	if !c.Graphed() {
		res.Eager = res.Step
	}
	if res.Step.N > 0 && res.Eager.N > 0 {
		res.Speedup = res.Eager.Median / res.Step.Median
	}
	if s.captureMs > 0 && res.Step.N > 0 {
		res.CaptureMs = max(0, s.captureMs-res.Step.Median)
	}
	res.WarmupMs = s.warmupMs
	if rep.MaxReservedMiB > 0 {
		res.Memory.ProcessPeakMiB = int64(rep.MaxReservedMiB + 0.5)
		res.Memory.DevicePeakMiB = res.Memory.ProcessPeakMiB
		res.Notes = append(res.Notes, fmt.Sprintf("peak memory: the most the PyTorch allocator reserved on any rank that reported (%s memory report)", rep.MemoryFormat))
	}
	if s.averaged {
		res.Notes = append(res.Notes, "the log averages several iterations per line (log_interval > 1): percentiles are of line averages; use --log-interval 1")
	}
	if rep.NaNIterations > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("the log counts %d NaN iterations", rep.NaNIterations))
	}
	if stoppedByUs {
		res.Notes = append(res.Notes, fmt.Sprintf("cgtune stopped the job after iteration %d", s.lastIter))
	}
	ok := st.State == StateCompleted || stoppedByUs || (st.State == StateUnknown && rep.ErrKind == "" && rep.Err == "")
	switch {
	case !ok:
		res.ErrKind, res.Err = failure(rep, st)
	case rep.ErrKind == engine.ErrNaN || rep.ErrKind == engine.ErrOOM || rep.ErrKind == engine.ErrCapture:
		// The job exited 0 but printed its own failure (a rank died and
		// the launcher did not propagate it, or a NaN was only warned).
		res.ErrKind, res.Err = rep.ErrKind, rep.Err
	case res.Step.N == 0:
		res.ErrKind = engine.ErrNoSteps
		res.Err = fmt.Sprintf("the log has no iteration times from iteration %d on (last iteration logged: %d of %d); "+
			"give the job enough iterations ({iters}) and --log-interval 1", FirstMeasured(c), s.lastIter, s.ofIters)
	}
	return res
}

// failure names why a job failed: the log's own error first, then what
// the launcher says.
func failure(rep Report, st Status) (kind, msg string) {
	state := st.State
	if st.Reason != "" && st.Reason != "None" {
		state += " (" + st.Reason + ")"
	}
	switch {
	case rep.ErrKind != "":
		return rep.ErrKind, rep.Err
	case st.State == StateTimeout:
		return engine.ErrTimeout, "the job hit its time limit: " + state
	case st.State == StateOutOfMemory:
		return engine.ErrOOM, "the job ran out of host memory: " + state
	case st.State == StateCancelled:
		return engine.ErrCancel, "the job was cancelled outside cgtune: " + state
	}
	msg = fmt.Sprintf("the job ended %s with exit code %d", state, st.ExitCode)
	if rep.Err != "" {
		msg += ": " + rep.Err
	}
	return engine.ErrCrash, msg
}

// FromLog is the Result a finished job's log gives for candidate c, as if
// the job completed (for logs a user points at: cgtune calibrate).
func FromLog(c presets.Candidate, rep Report, path string) engine.Result {
	return buildResult(c, rep, Status{State: StateCompleted, Done: true}, false, engine.JobInfo{Launcher: "log", ID: path, Output: path})
}
