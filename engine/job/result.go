package job

import (
	"fmt"

	"cgtune/engine"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// CaptureIteration is the iteration in which Megatron's training loop
// captures candidate c's graphs (0: none). Transformer Engine graphs are
// captured at the top of iteration cuda_graph_warmup_steps+1 (MLM
// megatron/training/training.py, MB src/megatron/bridge/training/train.py:
// create_cudagraphs when iteration - start == warmup); a full-iteration
// graph is FullCudaGraphWrapper's call number warmup (MLM
// megatron/core/full_cuda_graph.py), the same iteration; MCore's local
// per-layer graphs record during the first iteration and are captured at
// its end (schedules.py calls create_cudagraphs, which runs the
// cuda_graph_warmup_steps warm-up passes itself; MLM
// megatron/core/transformer/cuda_graphs.py), so iteration 2 replays.
func CaptureIteration(c presets.Candidate) int {
	switch {
	case !c.Graphed():
		return 0
	case c.Impl == presets.ImplLocal && !c.FullIteration():
		return 1
	}
	return c.Warmup + 1
}

// FirstMeasured is the first iteration whose time counts for candidate c:
// the one after the capture (MB docs/training/cuda-graphs.md: compare
// replay iterations only), and never iteration 1 or 2: the first pays
// lazy initialisation and autotuning, and Megatron-LM's second log line
// averages from iteration 1.
func FirstMeasured(c presets.Candidate) int {
	return max(CaptureIteration(c)+1, 3)
}

// Phase is the phase of iteration it for candidate c (engine.Phase*).
func Phase(c presets.Candidate, it Iteration) engine.Phase {
	switch {
	case it.First() >= FirstMeasured(c):
		return engine.PhaseMeasure
	case c.Graphed() && it.Iter == CaptureIteration(c) && it.Span == 1:
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
			if !c.Graphed() || it.Iter < CaptureIteration(c) {
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
	res := engine.Result{Candidate: c, Source: engine.SourceJob, Device: engine.DeviceInfo{Name: info.Launcher + " job " + info.ID}}
	info.State, info.ExitCode = st.State, st.ExitCode
	res.Job = &info
	s := splitSteps(c, rep.Iterations)
	res.Step = stepmodel.Summarise(s.measured)
	res.Eager = stepmodel.Summarise(s.eager)
	if !c.Graphed() {
		res.Eager = res.Step
	}
	switch {
	case res.Step.N > 0 && res.Eager.N > 0:
		res.Speedup = res.Eager.Median / res.Step.Median
	case res.Step.N > 0:
		// No ratio rather than 0: a speed-up of nothing over nothing.
		res.Notes = append(res.Notes, fmt.Sprintf("no speed-up over eager: the job ran no eager iteration before its graphs were captured (iteration %d); compare its step time with the eager job's (%s)", CaptureIteration(c), JobName(presets.Candidate{Impl: presets.ImplNone})))
	}
	switch {
	case CaptureIteration(c) == 1:
		// The first iteration also pays the job's start-up: its excess
		// over the steady state is not the capture's.
		res.Notes = append(res.Notes, "graphs captured in the first iteration, with the job's start-up: capture time not separable")
	case s.captureMs > 0 && res.Step.N > 0:
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
	if rep.CutLines > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d log lines were longer than %d KiB: only the last %d KiB of each were read (%d bytes skipped)",
			rep.CutLines, MaxLogLine>>10, MaxLogLine>>10, rep.CutBytes))
	}
	if rep.IterationsDropped > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("the log has %d more iteration lines than the %d cgtune keeps; they were not read", rep.IterationsDropped, maxIterations))
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
	case rep.ErrKind == engine.FailureNaN || rep.ErrKind == engine.FailureOOM || rep.ErrKind == engine.FailureCapture:
		// The job exited 0 but printed its own failure (a rank died and
		// the launcher did not propagate it, or a NaN was only warned).
		res.ErrKind, res.Err = rep.ErrKind, rep.Err
	case res.Step.N == 0:
		res.ErrKind = engine.FailureNoSteps
		res.Err = fmt.Sprintf("the log has no iteration times from iteration %d on (last iteration logged: %d of %d); "+
			"give the job enough iterations ({iters}) and --log-interval 1", FirstMeasured(c), s.lastIter, s.ofIters)
	}
	return res
}

// failure names why a job failed: the log's own error first, then what
// the launcher says.
func failure(rep Report, st Status) (kind engine.FailureKind, msg string) {
	state := st.State
	if st.Reason != "" && st.Reason != "None" {
		state += " (" + st.Reason + ")"
	}
	switch {
	case rep.ErrKind != "":
		return rep.ErrKind, rep.Err
	case st.State == StateTimeout:
		return engine.FailureTimeout, "the job hit its time limit: " + state
	case st.State == StateOutOfMemory:
		return engine.FailureOOM, "the job ran out of host memory: " + state
	case st.State == StateCancelled:
		return engine.FailureCancel, "the job was cancelled outside cgtune: " + state
	}
	msg = fmt.Sprintf("the job ended %s with exit code %d", state, st.ExitCode)
	if rep.Err != "" {
		msg += ": " + rep.Err
	}
	return engine.FailureCrash, msg
}

// FromLog is the Result a finished job's log gives for candidate c, as if
// the job completed (for logs a user points at: cgtune calibrate).
func FromLog(c presets.Candidate, rep Report, path string) engine.Result {
	return buildResult(c, rep, Status{State: StateCompleted, Done: true}, false, engine.JobInfo{Launcher: "log", ID: path, Output: path})
}
