package stepmodel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"cgtune/presets"
)

func tinyModel() (presets.Model, presets.Layout) {
	m := presets.Model{Name: "tiny", Arch: presets.Arch{Layers: 2, Hidden: 256, FFNHidden: 1024, Heads: 4, KVGroups: 4, HeadDim: 64, Vocab: 1000}}
	l := presets.Layout{NumGPUs: 1, GBS: 2, MBS: 1, Seq: 128}
	return m, l
}

// A model or layout past its bounds (one that never went through preset
// validation: the worker protocol, a journal) is refused at once rather
// than built layer by layer, and a cancelled context stops a build.
func TestBuildWorkloadIsBoundedAndCancellable(t *testing.T) {
	m, l := tinyModel()
	m.Arch.Layers = 100_000_000
	start := time.Now()
	_, err := BuildWorkload(m, l, WorkloadOptions{})
	if err == nil || !strings.Contains(err.Error(), `field "layers": 100000000 is out of range (allowed: 1 to 1024)`) {
		t.Errorf("10^8 layers: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusing took %s", d)
	}
	m, l = tinyModel()
	for _, bad := range []presets.Layout{
		{NumGPUs: 1, GBS: 2, MBS: 1, Seq: math.MaxInt},
		{NumGPUs: 1, GBS: 2, MBS: math.MaxInt / 2, Seq: 3},
		{NumGPUs: 1 << 62, GBS: 2, MBS: 1, Seq: 128},
		{NumGPUs: 8, GBS: 2, MBS: 1, Seq: 128, TP: 1 << 32, PP: 1 << 32},
	} {
		t.Run(fmt.Sprintf("gpus %d mbs %d seq %d tp %d pp %d", bad.NumGPUs, bad.MBS, bad.Seq, bad.TP, bad.PP), func(t *testing.T) {
			if _, err := BuildWorkload(m, bad, WorkloadOptions{}); err == nil || !strings.Contains(err.Error(), "out of range") {
				t.Errorf("%+v: %v", bad, err)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := BuildWorkloadContext(ctx, m, l, WorkloadOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled build: %v", err)
	}
	if _, err := (WorkloadSpec{Model: m, Layout: l}).BuildContext(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled spec build: %v", err)
	}
	if _, err := BuildWorkloadContext(context.Background(), m, l, WorkloadOptions{}); err != nil {
		t.Errorf("tiny model: %v", err)
	}
}

// MsDuration saturates at time.Duration's largest value for a time past
// its ~292 years, and gives 0 for NaN and negative times, instead of
// wrapping to a negative duration.
func TestMsDurationSaturates(t *testing.T) {
	for _, tc := range []struct {
		ms   float64
		want time.Duration
	}{
		{1500, 1500 * time.Millisecond}, {0, 0}, {-3, 0}, {math.NaN(), 0},
		{1e30, math.MaxInt64}, {math.Inf(1), math.MaxInt64}, {9.3e15, math.MaxInt64},
	} {
		t.Run(fmt.Sprint(tc.ms), func(t *testing.T) {
			if got := MsDuration(tc.ms); got != tc.want {
				t.Errorf("MsDuration(%g) = %v, want %v", tc.ms, got, tc.want)
			}
		})
	}
}
