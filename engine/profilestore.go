package engine

// ProfileSource finds the framework profile that applies to a workload
// (with the user's adjustments applied), or nil when there is none.
type ProfileSource interface {
	ProfileFor(w *Workload) *FrameworkProfile
}
