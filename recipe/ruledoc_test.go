package recipe

import "testing"

func TestRuleReleases(t *testing.T) {
	for id, want := range map[string]string{
		"TC-01":  "0.3-0.7", // every release's MCore
		"MB-13":  "0.5-0.7", // MB 0.4's check never matches a scope name
		"MB-09":  "0.7",
		"TC-13":  "0.3-0.4", // G2's MCore only
		"ARG-08": "0.4-0.7",
	} {
		r, ok := LookupRule(id)
		if !ok || r.Releases() != want {
			t.Errorf("%s: releases %q, want %q", id, r.Releases(), want)
		}
	}
	if _, ok := LookupRule("MB-16"); ok {
		t.Error("MB-16 is not in the table")
	}
}

func TestDescribe(t *testing.T) {
	r, _ := LookupRule("TC-18")
	if Describe("TC-18") != r.Summary || Describe(WillFailID) == "" || Describe(ConfigID) == "" || Describe("SPACE") != "" {
		t.Errorf("TC-18 %q, WILL-FAIL %q, CONFIG %q, SPACE %q", Describe("TC-18"), Describe(WillFailID), Describe(ConfigID), Describe("SPACE"))
	}
}
