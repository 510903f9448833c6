package presets

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseFiniteFloat reads a number given by a person (an environment
// variable, a flag) that must be finite and within [lo, hi]. NaN, ±Inf and
// values such as 1e308 pass a plain "> 0" check and then poison every sum
// they reach (a JSON encoder refuses NaN at the end of a search), so they
// are refused here, at the edge. The error says what is allowed; the
// caller puts the name of the setting in front.
func ParseFiniteFloat(text string, lo, hi float64) (float64, error) {
	allowed := fmt.Sprintf("allowed: a number from %g to %g", lo, hi)
	x, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	switch {
	case err != nil && !isRangeErr(err):
		return 0, fmt.Errorf("%q is not a number (%s)", text, allowed)
	case err != nil || math.IsInf(x, 0) || math.IsNaN(x):
		return 0, fmt.Errorf("%q is not a finite number (%s)", text, allowed)
	case x < lo || x > hi:
		return 0, fmt.Errorf("%q is out of range (%s)", text, allowed)
	}
	return x, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
