// Package stepmodel is cgtune's model of one training step, shared by
// every engine and by the search: the workload (the op trace of a stage's
// layers, Workload and LayerTrace), the capture plan a candidate makes of
// it (PlanCapture, CapturePlan), the costs of its ops (Costs, Rates, the
// GPU spec table), the schedule of a step on the host and the GPU
// (NewSchedule, Step, its timing and exposure), the spread of measured
// step times (Stats, Summarise, StepSpread), the memory model
// (PredictMemory, MemoryBreakdown), and the framework profile measured on
// the real framework with its store, its adjust file and the calibration
// against real jobs.
//
// It knows nothing of engines: engine's contract (Engine, Result) refers
// to its types, never the other way round.
package stepmodel
