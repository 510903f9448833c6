package recipe

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"cgtune/presets"
)

// LookupRule returns the rule with id (PERF-05, TC-18, ...).
func LookupRule(id string) (Rule, bool) {
	for _, r := range rules {
		if r.ID == id {
			return r, true
		}
	}
	return Rule{}, false
}

// Releases are the Megatron-Bridge versions whose start-up has the rule,
// as a range: "0.3-0.7", "0.5-0.7", "0.7".
func (r Rule) Releases() string {
	var in []string
	for _, v := range presets.MBridgeVersions {
		gen, mb, err := parseMB(v)
		if err == nil && r.AppliesTo(gen, mb) {
			in = append(in, v)
		}
	}
	switch len(in) {
	case 0:
		return "none"
	case 1:
		return in[0]
	}
	return in[0] + "-" + in[len(in)-1]
}

// Launchers names the launchers whose jobs meet the rule.
func (r Rule) Launchers() string {
	if r.Launcher == "" {
		return LauncherMB.String() + " and " + LauncherMLM.String()
	}
	return r.Launcher.String()
}

// Describe says in a few words what a violation ID stands for: a rule's
// Summary, or what WillFailID and ConfigID mean; "" for an unknown ID.
func Describe(id string) string {
	switch id {
	case WillFailID:
		return "its capture is known to fail"
	case ConfigID:
		return "the input cannot be applied"
	}
	if r, ok := LookupRule(id); ok {
		return r.Summary
	}
	return ""
}

// RuleIDs lists the rule IDs briefly, runs of three or more as ranges:
// "ARG-03, ARG-05..ARG-10, FSDP-01, MB-01..MB-15, ...".
func RuleIDs() string {
	byPrefix := map[string][]int{}
	for _, r := range rules {
		prefix, num, _ := strings.Cut(r.ID, "-")
		n, _ := strconv.Atoi(num)
		byPrefix[prefix] = append(byPrefix[prefix], n)
	}
	var parts []string
	for _, prefix := range slices.Sorted(maps.Keys(byPrefix)) {
		nums := byPrefix[prefix]
		slices.Sort(nums)
		for i := 0; i < len(nums); {
			j := i
			for j+1 < len(nums) && nums[j+1] == nums[j]+1 {
				j++
			}
			id := func(n int) string { return fmt.Sprintf("%s-%02d", prefix, n) }
			switch {
			case j-i >= 2:
				parts = append(parts, id(nums[i])+".."+id(nums[j]))
			case j > i:
				parts = append(parts, id(nums[i]), id(nums[j]))
			default:
				parts = append(parts, id(nums[i]))
			}
			i = j + 1
		}
	}
	return strings.Join(parts, ", ")
}
