package stepmodel

import (
	"math"
	"time"
)

// MsDuration converts a time in milliseconds (a step, a run, the engine
// time of a search) to a time.Duration for printing. It saturates instead
// of wrapping: time.Duration holds at most ~292 years, and a float past
// that converts to a negative number ("engine time -2562047h...").
func MsDuration(ms float64) time.Duration {
	switch {
	case math.IsNaN(ms) || ms <= 0:
		return 0
	case ms >= float64(math.MaxInt64/int64(time.Millisecond)):
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ms * float64(time.Millisecond))
}
