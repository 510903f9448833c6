package presets

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Every output names a candidate one way (Name) and every input reads that
// name back (ParseName, ResolveNames): "none", "te whole-layer w3",
// "te attn,moe_router w2", "local whole-layer w1", "full_iteration w3".
// The full-iteration graph is one name in both Megatron-Bridge
// generations although its overrides are spelled apart: impl local with
// scope full_iteration up to MB 0.4, impl full_iteration from MB 0.5
// (recipe.BuildOverrides writes each).

// Names outputs print for values the harness spells otherwise.
const (
	// ImplTEName is how outputs name impl transformer_engine.
	ImplTEName = "te"
	// WholeLayerName is how outputs name an empty scope list: each layer
	// graphed whole.
	WholeLayerName = "whole-layer"
	// FullIterationName names the full-iteration graph, impl and scope.
	FullIterationName = ScopeFullIteration
)

// ImplName is impl as outputs name it.
func ImplName(impl string) string {
	switch impl {
	case ImplTE:
		return ImplTEName
	case "":
		return ImplNone
	}
	return impl
}

// ScopeSetName is a scope list as outputs name it: the scopes joined with
// commas, or whole-layer for an empty list.
func ScopeSetName(scopes []string) string {
	if len(scopes) == 0 {
		return WholeLayerName
	}
	return strings.Join(scopes, ",")
}

// isFullIterationGraph reports whether c is the full-iteration graph as the
// search runs it: impl local with full_iteration alone.
func (c Candidate) isFullIterationGraph() bool {
	return c.Impl == ImplLocal && len(c.Scopes) == 1 && c.Scopes[0] == ScopeFullIteration
}

// Label names c without its warm-up: "none", "te whole-layer",
// "te attn,moe_router", "local whole-layer", "full_iteration".
func (c Candidate) Label() string {
	if len(c.WhatIf) > 0 {
		return c.plain().Label() + c.whatIfSuffix()
	}
	switch {
	case !c.Graphed():
		return ImplNone
	case c.isFullIterationGraph():
		return FullIterationName
	}
	return ImplName(c.Impl) + " " + ScopeSetName(c.Scopes)
}

// Name names c as every output prints it: the label and, when something
// is graphed, the warm-up ("te whole-layer w3"). ParseName reads it back.
func (c Candidate) Name() string {
	if len(c.WhatIf) > 0 {
		return c.plain().Name() + c.whatIfSuffix()
	}
	if !c.Graphed() {
		return c.Label()
	}
	return fmt.Sprintf("%s w%d", c.Label(), c.Warmup)
}

// plain is c without its what-if changes.
func (c Candidate) plain() Candidate {
	c.WhatIf = nil
	return c
}

// whatIfSuffix says a what-if row's changes after its name:
// "te attn,moe w3 [drop-and-pad, ep-overlap-off]".
func (c Candidate) whatIfSuffix() string {
	return " [" + strings.Join(c.WhatIf, ", ") + "]"
}

// InputImpls are the impls input takes: the harness's values, te, and
// full_iteration for the full-iteration graph.
func InputImpls() []string {
	return []string{ImplNone, ImplLocal, ImplTE, ImplTEName, FullIterationName}
}

// ParseImpl reads an impl as input may give it: a harness value
// (none, local, transformer_engine) or the name outputs print (te). An
// impl it does not know comes back as given, for the rules to name
// (PERF-01); full_iteration is a candidate, not an impl: ResolveNames
// reads it.
func ParseImpl(s string) string {
	if s == ImplTEName {
		return ImplTE
	}
	return s
}

// ParseScopes reads a scope list as input may give it: the harness's
// names, or whole-layer (also layer) alone for the empty list. Unknown
// names stay, for the rules to name (PERF-02).
func ParseScopes(list []string) []string {
	if len(list) == 1 && (list[0] == WholeLayerName || list[0] == "layer") {
		return []string{}
	}
	return list
}

// ResolveNames is c with the names outputs print read as the harness's
// values: impl te is transformer_engine, the scope list [whole-layer] is
// the empty one, and impl full_iteration is impl local with the scope
// full_iteration (what MB's harness takes in every generation; the
// overrides spell it for the target release). A nil Scopes stays nil:
// "keep the recipe's scope" to the harness flags.
func ResolveNames(c Candidate) Candidate {
	c.Impl = ParseImpl(c.Impl)
	if c.Scopes != nil {
		c.Scopes = ParseScopes(slices.Clone(c.Scopes))
	}
	if c.Impl == FullIterationName {
		c.Impl = ImplLocal
		if !slices.Contains(c.Scopes, ScopeFullIteration) {
			c.Scopes = append([]string{ScopeFullIteration}, c.Scopes...)
		}
	}
	return c
}

// ParseName reads a candidate as outputs name it (Name: "te whole-layer
// w3", "full_iteration w2", "none"; the warm-up may be left out for
// DefaultWarmup) or as journals key it (Key: "transformer_engine/layer/w3").
// Impl and scope names must be ones cgtune knows.
func ParseName(s string) (Candidate, error) {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, " ["); i > 0 && strings.HasSuffix(s, "]") {
		c, err := ParseName(s[:i])
		if err != nil {
			return c, err
		}
		for _, ch := range strings.Split(s[i+2:len(s)-1], ",") {
			if ch = strings.TrimSpace(ch); ch != "" {
				c.WhatIf = append(c.WhatIf, ch)
			}
		}
		return c, nil
	}
	if strings.Count(s, "/") == 2 {
		return parseKey(s)
	}
	fields := strings.Fields(s)
	bad := fmt.Errorf("candidate %q: want a name as cgtune prints it (none, te whole-layer w3, te attn,moe_router w2, local whole-layer w1, full_iteration w3)", s)
	if len(fields) == 0 || len(fields) > 3 {
		return Candidate{}, bad
	}
	warm := DefaultWarmup
	if last := fields[len(fields)-1]; len(fields) > 1 && warmupRe.MatchString(last) {
		n, err := strconv.Atoi(last[1:])
		if err != nil || n > MaxWarmup {
			return Candidate{}, bad
		}
		warm, fields = n, fields[:len(fields)-1]
	}
	c := Candidate{Impl: ParseImpl(fields[0]), Scopes: []string{}, Warmup: warm}
	switch {
	case c.Impl == ImplNone && len(fields) == 1:
		c.Warmup = DefaultWarmup
		return c, nil
	case c.Impl == FullIterationName && len(fields) == 1:
		return ResolveNames(c), nil
	case len(fields) != 2 || (c.Impl != ImplLocal && c.Impl != ImplTE):
		return Candidate{}, bad
	}
	c.Scopes = ParseScopes(strings.Split(fields[1], ","))
	if !knownScopes(c.Scopes) {
		return Candidate{}, bad
	}
	return c, nil
}

// warmupRe is a warm-up as names end: w3.
var warmupRe = regexp.MustCompile(`^w[0-9]+$`)

// parseKey reads a journal key (impl/scopes/wN; "layer" for the whole
// layer, "-" for none).
func parseKey(key string) (Candidate, error) {
	bad := fmt.Errorf("candidate %q: want impl/scopes/wN as cgtune keys it (transformer_engine/attn,mlp/w2, local/layer/w3)", key)
	parts := strings.Split(key, "/")
	if !strings.HasPrefix(parts[2], "w") {
		return Candidate{}, bad
	}
	w, err := strconv.Atoi(parts[2][1:])
	if err != nil || w < 0 || w > MaxWarmup {
		return Candidate{}, bad
	}
	c := Candidate{Impl: ParseImpl(parts[0]), Scopes: []string{}, Warmup: w}
	if !slices.Contains(Impls, c.Impl) {
		return Candidate{}, bad
	}
	if c.Impl == ImplNone {
		return c, nil
	}
	if parts[1] != "-" {
		c.Scopes = ParseScopes(strings.Split(parts[1], ","))
	}
	if !knownScopes(c.Scopes) {
		return Candidate{}, bad
	}
	return c, nil
}

func knownScopes(list []string) bool {
	for _, s := range list {
		if !slices.Contains(Scopes, s) {
			return false
		}
	}
	return true
}
