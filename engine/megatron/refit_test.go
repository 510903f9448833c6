package megatron

import (
	"strconv"
	"strings"
	"testing"

	"cgtune/stepmodel"
)

// Printing the runs and fitting them again gives the profile fitted from
// the runs themselves (to the printed precision), with the saved
// profile's key, spreads and collectives.
func TestRefitFromPrintedRuns(t *testing.T) {
	runs := syntheticRuns(true)
	want, err := Fit(runs, "dense")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("measured: eager, whole-layer and full-iteration runs at 1 and 8 layers, 4 micro-batches per step\n")
	for _, r := range runs {
		b.WriteString("  " + r.mode + ", " + itoa(r.layers) + " layer(s): " + describeRaw(r) + "\n")
	}
	old := &stepmodel.FrameworkProfile{Key: stepmodel.ProfileKey{GPU: "NVIDIA H200"}, Source: "probe",
		Layers: map[string]stepmodel.LayerProfile{"dense": {}}, Spread: map[string]stepmodel.StepSpread{"eager": {Below: 0.1, Above: 0.2}}}
	got, err := Refit(b.String(), old)
	if err != nil {
		t.Fatal(err)
	}
	l, wl := got.Layers["dense"], want.Layers["dense"]
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"layer forward host", l.EagerFwd.HostMs, wl.EagerFwd.HostMs},
		{"layer GPU", l.EagerFwd.GPUMs + l.EagerBwd.GPUMs, wl.EagerFwd.GPUMs + wl.EagerBwd.GPUMs},
		{"graphed replay", l.Graphed["layer"].ReplayHostMs, wl.Graphed["layer"].ReplayHostMs},
		{"first replay", l.Graphed["layer"].FirstReplayHostMs, wl.Graphed["layer"].FirstReplayHostMs},
		{"optimizer", got.Optimizer.HostMs, want.Optimizer.HostMs},
		{"full-iteration replay", got.FullIteration.ReplayHostMs, want.FullIteration.ReplayHostMs},
		{"step start", got.StepStart.HostMs, want.StepStart.HostMs},
		{"lead-in", got.PreFwdHostMs, want.PreFwdHostMs},
	} {
		t.Run(c.what, func(t *testing.T) {
			if d := c.got - c.want; d > 0.01 || d < -0.01 {
				t.Errorf("%s: %.4f, want %.4f", c.what, c.got, c.want)
			}
		})
	}
	if got.Key != old.Key || got.Spread["eager"] != old.Spread["eager"] || !strings.HasPrefix(got.Source, "probe; re-fitted") {
		t.Errorf("key %+v, spread %v, source %q: want the saved profile's", got.Key, got.Spread, got.Source)
	}
	// Lines printed before the step's start and lead-in were measured
	// still parse, with neither.
	older := "measured: eager, whole-layer and full-iteration runs at 1 and 8 layers, 4 micro-batches per step\n" +
		"  eager, 1 layer(s): host 26.26 ms (forward 14.41), forward-backward 26.32 ms, optimizer 6.29 ms, graphs 0 MiB\n" +
		"  eager, 8 layer(s): host 136.18 ms (forward 90.18), forward-backward 136.26 ms, optimizer 19.64 ms, graphs 0 MiB\n"
	if p, err := Refit(older, old); err != nil || p.PreFwdHostMs != 0 || p.StepStart.HostMs != 0 || p.OtherFwd.HostMs <= 0 {
		t.Errorf("older printed runs: %v, lead-in %v, start %v, other forward %v", err, p.PreFwdHostMs, p.StepStart, p.OtherFwd)
	}
	if _, err := Refit("no runs here", old); err == nil {
		t.Error("text without runs re-fitted")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
