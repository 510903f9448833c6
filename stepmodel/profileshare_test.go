package stepmodel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The cache lists its profiles with IDs that depend only on their place,
// finds one by a unique prefix of its ID, refuses an ambiguous or too
// short one, and removing one takes the folders it leaves empty and
// nothing outside the cache.
func TestProfileCacheListLookupRemove(t *testing.T) {
	dir := t.TempDir()
	a, err := SaveProfile(dir, testProfile("llama3_8b", "tp1", "NVIDIA H200", "0.16.0"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := SaveProfile(dir, testProfile("llama3_8b", "tp1", "NVIDIA H200", "0.20.0"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := ListProfiles(dir)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	// The same place elsewhere has the same ID.
	other := t.TempDir()
	c, _ := SaveProfile(other, testProfile("llama3_8b", "tp1", "NVIDIA H200", "0.16.0"))
	if ProfileIDOf(dir, a) != ProfileIDOf(other, c) || ProfileIDOf(dir, a) == ProfileIDOf(dir, b) {
		t.Errorf("IDs: %s %s %s", ProfileIDOf(dir, a), ProfileIDOf(other, c), ProfileIDOf(dir, b))
	}
	id := ProfileIDOf(dir, a)
	if got, err := LookupProfile(dir, id[:MinProfileIDLen+1]); err != nil || got.Path != a {
		t.Errorf("lookup by prefix: %v %v", got.Path, err)
	}
	if _, err := LookupProfile(dir, id[:MinProfileIDLen-1]); err == nil || !strings.Contains(err.Error(), "at least") {
		t.Errorf("a too short prefix: %v", err)
	}
	if _, err := LookupProfile(dir, "ffffffffff"); err == nil || !strings.Contains(err.Error(), "no cached profile") {
		t.Errorf("an unknown ID: %v", err)
	}
	outside := CachedProfile{Path: filepath.Join(other, "x.json")}
	if err := RemoveProfile(dir, outside); err == nil {
		t.Error("a file outside the cache was removed")
	}
	for _, p := range []string{a, b} {
		got, err := LookupProfile(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := RemoveProfile(dir, got); err != nil {
			t.Fatal(err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the cache keeps empty folders: %v", entries)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the cache folder itself went: %v", err)
	}
}
