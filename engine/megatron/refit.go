package megatron

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"cgtune/engine"
	"cgtune/stepmodel"
)

// runLine is one run as MeasureProfile reports it (describeRaw).
// A search that measured the profile first printed it with a prefix.
var runLine = regexp.MustCompile(`^\s*(?:framework profile: )?(\w+), (\d+) layer\(s\): host ([\d.]+) ms \(forward ([\d.]+)(?:, zero-grad ([\d.]+), lead-in ([\d.]+))?\), forward-backward ([\d.]+) ms, optimizer ([\d.]+) ms, graphs ([\d.]+) MiB(?:, layer calls ([\d.]+)/([\d.]+)/([\d.]+) ms)?`)

// microBatchesLine is the profile's "measured: ..." line.
var microBatchesLine = regexp.MustCompile(`(\d+) micro-batches per step`)

// Refit fits a profile again from the runs `cgtune probe --framework`
// printed (its output, text), so that a profile measured before a change
// to Fit can be re-fitted without the GPU. old is the profile that probe
// saved: its key, source, spreads and collective exposures are kept (the
// printed runs do not give them); failed runs are left out, as Fit leaves
// them.
func Refit(text string, old *stepmodel.FrameworkProfile) (*stepmodel.FrameworkProfile, error) {
	runs, err := parseRuns(text + "\n" + old.MeasuredAt)
	if err != nil {
		return nil, err
	}
	if len(old.Layers) != 1 {
		return nil, fmt.Errorf("the saved profile has %d layer kinds; a probe fits one", len(old.Layers))
	}
	var kind string
	for k := range old.Layers {
		kind = k
	}
	p, err := Fit(runs, kind)
	if err != nil {
		return nil, err
	}
	p.Key, p.Spread, p.Collectives = old.Key, old.Spread, old.Collectives
	p.Source = old.Source + "; re-fitted from its printed runs"
	return p, nil
}

func parseRuns(text string) ([]profileRun, error) {
	mbs := 0
	if m := microBatchesLine.FindStringSubmatch(text); m != nil {
		mbs, _ = strconv.Atoi(m[1])
	}
	if mbs == 0 {
		return nil, fmt.Errorf("no \"N micro-batches per step\" in the probe output or the saved profile")
	}
	var runs []profileRun
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		m := runLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		f := func(i int) float64 { v, _ := strconv.ParseFloat(m[i], 64); return v }
		runs = append(runs, profileRun{mode: m[1], layers: n, raw: &engine.RawTimes{LayersBuilt: n, MicroBatchesRun: mbs,
			HostMs: f(3), HostFwdMs: f(4), ZeroGradMs: f(5), LeadInMs: f(6), FwdBwdMs: f(7), OptMs: f(8), GraphMiB: f(9),
			ToFirstLayerMs: f(10), FirstLayerMs: f(11), LayerCallMs: f(12)}})
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("no measured runs in the probe output")
	}
	return runs, sc.Err()
}
