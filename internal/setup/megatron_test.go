package setup

import (
	"fmt"
	"testing"

	"cgtune/presets"
)

// The framework probe measures the exposure at the rank count the layout
// can use on the GPUs given: TP×EP's divisors among them.
func TestUsableRanksForExposure(t *testing.T) {
	for _, tc := range []struct{ tp, ep, gpus, want int }{{2, 1, 2, 2}, {1, 1, 2, 1}, {4, 1, 2, 2}, {2, 4, 8, 8}, {2, 1, 3, 1}} {
		t.Run(fmt.Sprintf("tp%d ep%d gpus%d", tc.tp, tc.ep, tc.gpus), func(t *testing.T) {
			l := presets.Layout{TP: tc.tp, EP: tc.ep}
			if got := UsableRanks(l, tc.gpus); got != tc.want {
				t.Errorf("TP %d EP %d on %d GPUs: %d ranks, want %d", tc.tp, tc.ep, tc.gpus, got, tc.want)
			}
		})
	}
}
