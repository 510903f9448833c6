package engine

// scaleTimes multiplies every time of one step in r by f: the step's and
// eager's statistics and each part of the step. What is not a time of the
// step stays: the speed-up (a ratio), the wall time the run itself took,
// the raw times as run (Raw), the memory. TestScaleTimesCoversEveryTime
// fails for a time field added to Result and not scaled here or named
// there as not one.
func (r *Result) scaleTimes(f float64) {
	r.Step, r.Eager = r.Step.Scaled(f), r.Eager.Scaled(f)
	for _, ms := range []*float64{&r.CaptureMs, &r.WarmupMs, &r.KernelSumMs, &r.FwdBwdMs, &r.FwdBwdKernelMs,
		&r.HostEnqueueMs, &r.EagerHostEnqueueMs, &r.CollectivesMs} {
		*ms *= f
	}
}
