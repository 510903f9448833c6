package tui

import (
	"slices"
	"strconv"

	"cgtune/presets"
)

// spaceChoice is the space as toggles.
type spaceChoice struct {
	impls   []bool // per presets.Impls
	whole   bool   // the whole layer (an empty scope list)
	scopes  []bool // per presets.Scopes
	warmups []int  // the warm-up values offered
	warmOn  []bool
	// explicit holds a preset's own scope sets; they are kept as they are
	// until the person toggles a scope, since toggles cannot show them.
	explicit [][]string
}

// warmupChoices are the warm-up counts offered besides a preset's own:
// MCore's default 3, and the values around it worth comparing.
var warmupChoices = []int{1, 2, 3, 5, 10}

func newSpaceChoice(s presets.Space) spaceChoice {
	c := spaceChoice{impls: make([]bool, len(presets.Impls)), scopes: make([]bool, len(presets.Scopes))}
	for i, im := range presets.Impls {
		c.impls[i] = slices.Contains(s.Impls, im)
	}
	if len(s.Scopes) == 0 {
		c.whole = true
		for i := range c.scopes {
			c.scopes[i] = true
		}
	} else {
		c.explicit = cloneSets(s.Scopes)
		for _, set := range s.Scopes {
			if len(set) == 0 {
				c.whole = true
			}
			for _, sc := range set {
				if i := slices.Index(presets.Scopes, sc); i >= 0 {
					c.scopes[i] = true
				}
			}
		}
	}
	c.warmups = slices.Clone(warmupChoices)
	for _, w := range s.Warmups {
		if !slices.Contains(c.warmups, w) {
			c.warmups = append(c.warmups, w)
		}
	}
	slices.Sort(c.warmups)
	c.warmOn = make([]bool, len(c.warmups))
	for i, w := range c.warmups {
		c.warmOn[i] = slices.Contains(s.Warmups, w)
	}
	return c
}

func cloneSets(s [][]string) [][]string {
	out := make([][]string, len(s))
	for i := range s {
		out[i] = slices.Clone(s[i])
		if out[i] == nil {
			out[i] = []string{}
		}
	}
	return out
}

// Space is the presets.Space the toggles describe. Everything on is the
// runner's default (nil Scopes: every subset); otherwise the scope sets
// are the whole layer (if on) and every non-empty subset of the scopes on.
func (c spaceChoice) Space() presets.Space {
	var s presets.Space
	for i, on := range c.impls {
		if on {
			s.Impls = append(s.Impls, presets.Impls[i])
		}
	}
	for i, on := range c.warmOn {
		if on {
			s.Warmups = append(s.Warmups, c.warmups[i])
		}
	}
	if c.explicit != nil {
		s.Scopes = cloneSets(c.explicit)
		return s
	}
	var on []string
	for i, v := range c.scopes {
		if v {
			on = append(on, presets.Scopes[i])
		}
	}
	if c.whole && len(on) == len(presets.Scopes) {
		return s
	}
	if c.whole {
		s.Scopes = append(s.Scopes, []string{})
	}
	// Subsets by size, then in the harness's scope order, so the list
	// reads from the simple to the elaborate.
	for size := 1; size <= len(on); size++ {
		for mask := 1; mask < 1<<len(on); mask++ {
			if popcount(mask) != size {
				continue
			}
			var set []string
			for j := range on {
				if mask&(1<<j) != 0 {
					set = append(set, on[j])
				}
			}
			s.Scopes = append(s.Scopes, set)
		}
	}
	return s
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// problem says why the toggles cannot make a space, "" when they can.
func (c spaceChoice) problem() string {
	s := c.Space()
	switch {
	case len(s.Impls) == 0:
		return "choose at least one impl"
	case len(s.Warmups) == 0:
		return "choose at least one warm-up value"
	case c.explicit == nil && !c.whole && !slices.Contains(c.scopes, true):
		return "choose the whole layer or at least one scope"
	}
	return ""
}

// toggleRows are the rows of the toggle grid.
func (c *spaceChoice) toggleRows() []toggleRow {
	var rows []toggleRow
	impl := toggleRow{label: "Impls"}
	for i, im := range presets.Impls {
		impl.items = append(impl.items, toggleItem{name: presets.ImplName(im), on: &c.impls[i]})
	}
	scope := toggleRow{label: "Scopes"}
	scope.items = append(scope.items, toggleItem{name: presets.WholeLayerName, on: &c.whole, scope: true})
	for i, sc := range presets.Scopes {
		scope.items = append(scope.items, toggleItem{name: sc, on: &c.scopes[i], scope: true})
	}
	warm := toggleRow{label: "Warm-up"}
	for i, w := range c.warmups {
		warm.items = append(warm.items, toggleItem{name: strconv.Itoa(w), on: &c.warmOn[i]})
	}
	return append(rows, impl, scope, warm)
}

type toggleRow struct {
	label string
	items []toggleItem
}

type toggleItem struct {
	name  string
	on    *bool
	scope bool // toggling it leaves a preset's explicit scope sets
}
