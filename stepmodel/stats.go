package stepmodel

import (
	"math"
	"sort"
)

// Stats summarises a set of step times in milliseconds.
type Stats struct {
	Median float64 `json:"median_ms"`
	P10    float64 `json:"p10_ms"`
	P90    float64 `json:"p90_ms"`
	N      int     `json:"n"`
}

// Scaled is s with its times multiplied by f.
func (s Stats) Scaled(f float64) Stats {
	s.Median, s.P10, s.P90 = s.Median*f, s.P10*f, s.P90*f
	return s
}

// Summarise computes median/p10/p90 (nearest rank on the sorted values).
func Summarise(ms []float64) Stats {
	if len(ms) == 0 {
		return Stats{}
	}
	s := append([]float64(nil), ms...)
	sort.Float64s(s)
	at := func(p float64) float64 {
		i := int(math.Round(p * float64(len(s)-1)))
		return s[i]
	}
	var med float64
	if n := len(s); n%2 == 1 {
		med = s[n/2]
	} else {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Stats{Median: med, P10: at(0.10), P90: at(0.90), N: len(s)}
}
