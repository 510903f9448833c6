package presets

import (
	"encoding/json"
	"strings"
)

// AttachedProfile is the framework profile a team preset carries
// (cgtune preset export --with-profile): the file a GPU node's profile
// cache holds for the preset's model, layout and GPU, so that a teammate's
// estimate without a GPU spends the same measured host costs. cgtune
// preset import installs it in the importing machine's profile cache.
type AttachedProfile struct {
	// Measured says where and when it was measured (GPU, driver, date,
	// host), for the people who read the file; Data is the judge.
	Measured string `yaml:"measured,omitempty" json:"measured,omitempty"`
	// Data is the profile file itself: JSON, as the profile cache holds it.
	Data string `yaml:"data" json:"data"`
}

// MaxProfileBytes bounds an attached profile: a profile is a few KiB (the
// costs of each layer kind and graphed region); a preset file stays within
// MaxYAMLBytes with it.
const MaxProfileBytes = 1 << 20

func (d *strictDoc) validateAttachedProfile(a *AttachedProfile, p string) error {
	switch {
	case strings.TrimSpace(a.Data) == "":
		return d.errf(p, "missing field \"data\" in %s (the framework profile, as cgtune preset export --with-profile writes it)", p)
	case len(a.Data) > MaxProfileBytes:
		return d.errf(joinPath(p, "data"), "field \"data\": %d bytes (allowed: at most %d)", len(a.Data), MaxProfileBytes)
	case !json.Valid([]byte(a.Data)):
		return d.errf(joinPath(p, "data"), "field \"data\": not a framework profile (want the JSON of a cgtune profile file)")
	case strings.ContainsRune(a.Measured, 0):
		return d.errf(joinPath(p, "measured"), "field \"measured\" contains a NUL byte")
	}
	return nil
}
