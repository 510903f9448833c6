package presets

import (
	"slices"
	"strings"
	"testing"
)

// everyCandidate is every impl × every subset of the harness's scopes
// (full_iteration included, in and out of other sets) × a few warm-ups:
// every candidate an output can name, valid or not.
func everyCandidate() []Candidate {
	var out []Candidate
	n := len(Scopes)
	for _, impl := range Impls {
		for mask := 0; mask < 1<<n; mask++ {
			set := []string{}
			for i, s := range Scopes {
				if mask&(1<<i) != 0 {
					set = append(set, s)
				}
			}
			for _, w := range []int{0, 1, 3, 12} {
				c := Candidate{Impl: impl, Scopes: set, Warmup: w}
				if impl == ImplNone {
					if mask != 0 || w != DefaultWarmup {
						continue
					}
				}
				out = append(out, c)
			}
		}
	}
	return out
}

func TestEveryNameParsesBackToItsCandidate(t *testing.T) {
	seen := map[string]string{}
	for _, c := range everyCandidate() {
		name := c.Name()
		got, err := ParseName(name)
		if err != nil {
			t.Fatalf("%s (%s): %v", name, c.Key(), err)
		}
		if got.Key() != c.Key() {
			t.Errorf("ParseName(%q) = %s, want %s", name, got.Key(), c.Key())
		}
		if prev, ok := seen[name]; ok && prev != c.Key() {
			t.Errorf("name %q names two candidates: %s and %s", name, prev, c.Key())
		}
		seen[name] = c.Key()
		// Journals key candidates; a key reads back as well.
		if k, err := ParseName(c.Key()); err != nil || k.Key() != c.Key() {
			t.Errorf("ParseName(%q) = %s, %v", c.Key(), k.Key(), err)
		}
	}
}

func TestNamesAreOneSpelling(t *testing.T) {
	for _, tc := range []struct {
		c    Candidate
		want string
	}{
		{Candidate{Impl: ImplTE, Scopes: []string{}, Warmup: 3}, "te whole-layer w3"},
		{Candidate{Impl: ImplTE, Scopes: []string{ScopeAttn, ScopeMoERouter}, Warmup: 2}, "te attn,moe_router w2"},
		{Candidate{Impl: ImplLocal, Scopes: []string{}, Warmup: 1}, "local whole-layer w1"},
		{Candidate{Impl: ImplLocal, Scopes: []string{ScopeFullIteration}, Warmup: 3}, "full_iteration w3"},
		{Candidate{Impl: ImplNone, Scopes: []string{}, Warmup: 3}, "none"},
	} {
		if got := tc.c.Name(); got != tc.want {
			t.Errorf("%s: Name() = %q, want %q", tc.c.Key(), got, tc.want)
		}
		if strings.Contains(tc.c.Name(), ImplTE) {
			t.Errorf("%s: the name spells transformer_engine out", tc.c.Key())
		}
	}
}

func TestInputTakesThePrintedNames(t *testing.T) {
	for _, tc := range []struct {
		in   Candidate
		want string // key
	}{
		{Candidate{Impl: "te", Scopes: []string{"whole-layer"}, Warmup: 3}, "transformer_engine/layer/w3"},
		{Candidate{Impl: "te", Scopes: []string{"attn", "mlp"}, Warmup: 2}, "transformer_engine/attn,mlp/w2"},
		{Candidate{Impl: "full_iteration", Warmup: 3}, "local/full_iteration/w3"},
		{Candidate{Impl: "full_iteration", Scopes: []string{"full_iteration"}, Warmup: 1}, "local/full_iteration/w1"},
		{Candidate{Impl: "local", Scopes: []string{"full_iteration"}, Warmup: 3}, "local/full_iteration/w3"},
		{Candidate{Impl: "transformer_engine", Scopes: []string{"attn"}, Warmup: 3}, "transformer_engine/attn/w3"},
	} {
		if got := ResolveNames(tc.in).Key(); got != tc.want {
			t.Errorf("ResolveNames(%+v) = %s, want %s", tc.in, got, tc.want)
		}
	}
	// No --scope stays "keep the recipe's scope".
	if c := ResolveNames(Candidate{Impl: "te"}); c.Scopes != nil {
		t.Errorf("a nil scope list became %v", c.Scopes)
	}
	for name, want := range map[string]string{
		"te whole-layer":             "transformer_engine/layer/w3",
		"local full_iteration w2":    "local/full_iteration/w2",
		"  te attn,moe_router w1 ":   "transformer_engine/attn,moe_router/w1",
		"transformer_engine attn w2": "transformer_engine/attn/w2",
	} {
		c, err := ParseName(name)
		if err != nil || c.Key() != want {
			t.Errorf("ParseName(%q) = %s, %v; want %s", name, c.Key(), err, want)
		}
	}
	for _, bad := range []string{"", "tee attn w3", "te router w3", "te attn wx", "te attn w3 extra", "none attn", "full_iteration attn w3", "te/attn", "te/attn/3"} {
		if c, err := ParseName(bad); err == nil {
			t.Errorf("ParseName(%q) = %s, want an error", bad, c.Key())
		}
	}
	if !slices.Contains(InputImpls(), ImplTEName) || !slices.Contains(InputImpls(), FullIterationName) {
		t.Errorf("InputImpls() = %v lacks a printed impl name", InputImpls())
	}
}
