package setup

import (
	"errors"
	"fmt"
	"os"
	"time"

	"cgtune/presets"
	"cgtune/stepmodel"
)

// ProfileNotice says where the estimate engine's host costs for model m on
// layout l, estimated for gpu, come from: the framework profile cached for
// them, with where and when it was measured, or, without one, PyTorch's
// per-op costs, which make what graphs gain a lower bound
// (docs/accuracy.md).
func ProfileNotice(m presets.Model, l presets.Layout, gpu string) string {
	dir, err := stepmodel.DefaultProfileDir()
	if err != nil {
		return noProfileNotice(m, gpu, "there is no user cache folder for profiles")
	}
	p, path, err := stepmodel.FindProfile(dir, stepmodel.ModelKey(m), stepmodel.LayoutKey(l), gpu)
	switch {
	case p != nil:
		var modified time.Time
		if st, err := os.Stat(path); err == nil {
			modified = st.ModTime()
		}
		return fmt.Sprintf("framework profile: host costs measured with Megatron-Core on %s (%s; cgtune profile show %s); a GPU run (--engine megatron) measures the step itself",
			p.Origin(modified), p.Source, stepmodel.ProfileIDOf(dir, path))
	case errors.Is(err, stepmodel.ErrProfileVersion):
		return noProfileNotice(m, gpu, "the one cached is of an older format")
	}
	return noProfileNotice(m, gpu, "none is cached")
}

func noProfileNotice(m presets.Model, gpu, why string) string {
	return fmt.Sprintf("no framework profile of %s on this layout for %s (%s): host costs are PyTorch's per-op costs, far below Megatron-Core's, so what graphs gain is a LOWER BOUND; "+
		"a GPU run measures them: cgtune probe --framework on a GPU node, or import a preset exported there with --with-profile", m.Name, gpu, why)
}
