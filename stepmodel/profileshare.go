package stepmodel

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"cgtune/internal/fileio"
	"cgtune/presets"
)

// The profile cache as a person manages it (cgtune profile list|show|rm)
// and as team presets carry its profiles from a GPU node to machines
// without one (cgtune preset export --with-profile, preset import).

// CachedProfile is one file of the profile cache.
type CachedProfile struct {
	// ID names the profile by its place in the cache (model, layout, GPU,
	// driver and framework versions): the same profile has the same ID on
	// every machine.
	ID       string            `json:"id"`
	Path     string            `json:"path"`
	Modified time.Time         `json:"modified"`
	Profile  *FrameworkProfile `json:"profile,omitempty"`
	// Problem is why the file is not used (another format version, a
	// broken file); the others are listed all the same.
	Problem string `json:"problem,omitempty"`
}

// profileIDLen is how many hex digits of the place's hash an ID has;
// MinProfileIDLen is the shortest prefix a lookup takes.
const (
	profileIDLen    = 10
	MinProfileIDLen = 4
)

// ProfileIDOf is the ID of the profile file at path in the cache dir.
func ProfileIDOf(dir, path string) string {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		rel = path
	}
	return profileID(rel)
}

func profileID(rel string) string {
	sum := sha256.Sum256([]byte(filepath.ToSlash(rel)))
	return hex.EncodeToString(sum[:])[:profileIDLen]
}

// ListProfiles is every profile file under dir (model/layout/gpu/NAME.json,
// as ProfilePath places them), by model, layout and GPU, newest first.
func ListProfiles(dir string) ([]CachedProfile, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "*", "*", "*", "*.json"))
	if err != nil {
		return nil, err
	}
	var out []CachedProfile
	for _, path := range matches {
		st, err := os.Lstat(path)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		rel, _ := filepath.Rel(dir, path)
		c := CachedProfile{ID: profileID(rel), Path: path, Modified: st.ModTime()}
		if c.Profile, err = LoadProfile(path); err != nil {
			c.Problem = err.Error()
		}
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b CachedProfile) int {
		if c := strings.Compare(filepath.Dir(a.Path), filepath.Dir(b.Path)); c != 0 {
			return c
		}
		return b.Modified.Compare(a.Modified)
	})
	return out, nil
}

// LookupProfile finds the cached profile id names: its ID, a prefix of
// one of at least MinProfileIDLen digits that names no other, or its path.
func LookupProfile(dir, id string) (CachedProfile, error) {
	all, err := ListProfiles(dir)
	if err != nil {
		return CachedProfile{}, err
	}
	var found []CachedProfile
	for _, c := range all {
		if c.Path == id || (len(id) >= MinProfileIDLen && strings.HasPrefix(c.ID, id)) {
			found = append(found, c)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		return CachedProfile{}, fmt.Errorf("profile %q names %d profiles; give more of its ID (cgtune profile list)", id, len(found))
	case len(id) < MinProfileIDLen:
		return CachedProfile{}, fmt.Errorf("profile %q: give at least %d digits of an ID that cgtune profile list shows", id, MinProfileIDLen)
	}
	return CachedProfile{}, fmt.Errorf("no cached profile %q in %s (cgtune profile list shows them)", id, dir)
}

// RemoveProfile deletes cached profile c and the folders of the cache it
// leaves empty. Only a file of the cache is removed: a path outside dir
// is refused.
func RemoveProfile(dir string, c CachedProfile) error {
	rel, err := filepath.Rel(dir, c.Path)
	if err != nil || strings.HasPrefix(rel, "..") || filepath.IsAbs(rel) {
		return fmt.Errorf("%s is not in the profile cache %s", c.Path, dir)
	}
	if err := os.Remove(c.Path); err != nil {
		return err
	}
	for d := filepath.Dir(c.Path); d != dir && strings.HasPrefix(d, dir); d = filepath.Dir(d) {
		if os.Remove(d) != nil { // not empty: the rest stays
			break
		}
	}
	return nil
}

// Origin says where and when p was measured: the GPU, driver, date (the
// profile's, else modified: its file's) and host where recorded.
func (p *FrameworkProfile) Origin(modified time.Time) string {
	parts := []string{p.Key.GPU}
	if p.Key.Driver != "" {
		parts = append(parts, "driver "+p.Key.Driver)
	}
	if t, err := time.Parse(time.RFC3339, p.Date); err == nil {
		parts = append(parts, t.UTC().Format("2006-01-02"))
	} else if !modified.IsZero() {
		parts = append(parts, modified.UTC().Format("2006-01-02")+" (cached)")
	}
	if p.Host != "" {
		parts = append(parts, "host "+p.Host)
	}
	return strings.Join(parts, ", ")
}

// PresetProfileKey is what a profile of team preset p's model, layout and
// GPU is cached under (FindProfile's model and layout).
func PresetProfileKey(p presets.TeamPreset) (model, layout string, err error) {
	m, err := p.ResolveModel()
	if err != nil {
		return "", "", err
	}
	return ModelKey(m), LayoutKey(p.Layout), nil
}

// AttachProfile gives preset p the newest profile cached under dir for its
// model, layout and GPU; a preset without one cached is an error that
// says how to measure it.
func AttachProfile(dir string, p *presets.TeamPreset) (*FrameworkProfile, error) {
	model, layout, err := PresetProfileKey(*p)
	if err != nil {
		return nil, err
	}
	prof, path, err := FindProfile(dir, model, layout, p.GPU)
	if err != nil {
		return nil, err
	}
	if prof == nil {
		return nil, fmt.Errorf("no framework profile of %s (%s) on %s is cached here (%s); measure it on a GPU node with cgtune probe --framework --preset %s",
			p.ModelName(), layout, p.GPU, dir, p.Name)
	}
	var modified time.Time
	if st, err := os.Stat(path); err == nil {
		modified = st.ModTime()
	}
	data, err := json.MarshalIndent(prof, "", "  ")
	if err != nil {
		return nil, err
	}
	p.Profile = &presets.AttachedProfile{Measured: prof.Origin(modified), Data: string(data) + "\n"}
	return prof, nil
}

// AttachedProfile reads the profile preset p carries: a profile this cgtune
// reads, of the preset's own model, layout and GPU (the search of the
// preset would not find another); nil when it carries none.
func AttachedProfile(p presets.TeamPreset) (*FrameworkProfile, error) {
	if p.Profile == nil {
		return nil, nil
	}
	var prof FrameworkProfile
	if err := json.Unmarshal([]byte(p.Profile.Data), &prof); err != nil {
		return nil, fmt.Errorf("preset %s: field profile.data: %w", p.Name, err)
	}
	if err := prof.Validate(); err != nil {
		return nil, fmt.Errorf("preset %s: field profile.data: %w", p.Name, err)
	}
	model, layout, err := PresetProfileKey(p)
	if err != nil {
		return nil, err
	}
	k := prof.Key
	if k.Model != model || k.Layout != layout || gpuKey(k.GPU) != gpuKey(p.GPU) {
		return nil, fmt.Errorf("preset %s: its profile is of %s (%s) on %s, not of the preset's %s (%s) on %s",
			p.Name, k.Model, k.Layout, k.GPU, model, layout, p.GPU)
	}
	return &prof, nil
}

// ProfileInstall is where InstallProfile puts a profile and whether it
// must replace a different one there.
type ProfileInstall struct {
	Path    string
	Same    bool // the cache holds this very profile there already
	Replace bool // the cache holds a different profile there
}

// PlanInstall says where prof goes in the cache under dir and what is
// there now, so that a caller can refuse before it writes anything.
func PlanInstall(dir string, prof *FrameworkProfile) (ProfileInstall, error) {
	in := ProfileInstall{Path: ProfilePath(dir, prof.Key)}
	old, err := fileio.ReadFileLimited(in.Path, presets.MaxProfileBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return in, nil
	case err != nil:
		return in, err
	}
	data, err := json.MarshalIndent(prof, "", "  ")
	if err != nil {
		return in, err
	}
	in.Same = bytes.Equal(old, append(data, '\n'))
	in.Replace = !in.Same
	return in, nil
}

// InstallProfile writes prof into the cache under dir (SaveProfile), where
// PlanInstall says; a different profile there is replaced only with
// overwrite, the same one is left as it is.
func InstallProfile(dir string, prof *FrameworkProfile, overwrite bool) (ProfileInstall, error) {
	in, err := PlanInstall(dir, prof)
	if err != nil || in.Same {
		return in, err
	}
	if in.Replace && !overwrite {
		return in, fmt.Errorf("a different framework profile is cached at %s; --force replaces it", in.Path)
	}
	_, err = SaveProfile(dir, prof)
	return in, err
}
