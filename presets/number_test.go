package presets

import (
	"strings"
	"testing"
)

// ParseFiniteFloat refuses NaN, Inf and values outside the allowed range
// (1e308, 0, -1 here), which strconv.ParseFloat alone accepts, and names
// the allowed range in each refusal.
func TestParseFiniteFloat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		err  string
	}{
		{"1.5", 1.5, ""}, {" 2 ", 2, ""}, {"0.01", 0.01, ""}, {"100", 100, ""},
		{"NaN", 0, "is not a finite number"}, {"nan", 0, "is not a finite number"}, {"Inf", 0, "is not a finite number"},
		{"-Inf", 0, "is not a finite number"}, {"1e309", 0, "is not a finite number"},
		{"1e308", 0, "is out of range"}, {"0", 0, "is out of range"}, {"-1", 0, "is out of range"}, {"100.5", 0, "is out of range"},
		{"abc", 0, "is not a number"}, {"", 0, "is not a number"}, {"0x1p-2", 0.25, ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseFiniteFloat(tc.in, 0.01, 100)
			switch {
			case tc.err == "" && (err != nil || got != tc.want):
				t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "allowed: a number from 0.01 to 100")):
				t.Errorf("%q: %v, %v; want an error %q", tc.in, got, err, tc.err)
			}
		})
	}
}
