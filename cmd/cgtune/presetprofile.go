package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/spf13/cobra"

	"cgtune/internal/fileio"
	"cgtune/presets"
	"cgtune/stepmodel"
)

// A team preset may carry the framework profile a GPU node measured for
// its model, layout and GPU (presets.AttachedProfile): preset export
// --with-profile and preset save --with-profile put the cached one in, the
// TUI's save does with --save-with-profile, and preset import installs it
// in the importing machine's profile cache, where the estimate engine
// finds it.

// attachCachedProfile gives p the profile cached for it; flag names what
// asked for it in the refusal.
func attachCachedProfile(p *presets.TeamPreset, flag string) (*stepmodel.FrameworkProfile, error) {
	dir, err := profileDir()
	if err != nil {
		return nil, err
	}
	prof, err := stepmodel.AttachProfile(dir, p)
	if err != nil {
		return nil, fail(exitBadInput, "%s: %w", flag, err)
	}
	return prof, nil
}

// exportWithProfile writes preset name with the framework profile cached
// for it (or, with none cached here, the one it carries already) to
// output (standard output for "" or "-"), atomically, replacing a file
// only with force and never the preset's own.
func exportWithProfile(cmd *cobra.Command, s *presets.Store, name, output string, force bool) error {
	info, err := s.Find(name)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	p, err := s.Load(name)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	carried := p.Profile
	if _, err := attachCachedProfile(&p, "--with-profile"); err != nil {
		if carried == nil {
			return err
		}
		p.Profile = carried // none cached here: the one it came with goes on
	}
	data, err := presets.MarshalPreset(p)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	what := fmt.Sprintf("%s with its framework profile (measured on %s)", name, p.Profile.Measured)
	if output == "" || output == "-" {
		if _, err := cmd.OutOrStdout().Write(data); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "exported %s\n", what)
		return nil
	}
	if fileio.SameFile(output, info.Path) {
		return fail(exitBadInput, "%s is the preset %s itself (%s); export it to another file", output, name, info.Path)
	}
	if force {
		err = fileio.WriteFileAtomic(output, data, 0o644)
	} else if err = fileio.CreateFileAtomic(output, data, 0o644); errors.Is(err, fs.ErrExist) {
		return fail(exitBadInput, "%s exists already; use --force to replace it", output)
	}
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "exported %s to %s\n", what, absPath(output))
	return nil
}

// presetProfile is the profile a preset file to import carries, checked
// before anything is written: a profile of the preset's own model, layout
// and GPU, and no different one cached in its place unless force.
type presetProfile struct {
	prof  *stepmodel.FrameworkProfile
	dir   string
	force bool
}

func checkImportProfile(s *presets.Store, path string, force bool) (*presetProfile, error) {
	p, err := s.LoadFile(path)
	if err != nil {
		return nil, fail(exitBadInput, "%w", err)
	}
	prof, err := stepmodel.AttachedProfile(p)
	if err != nil || prof == nil {
		if err != nil {
			err = fail(exitBadInput, "%s: %w", path, err)
		}
		return nil, err
	}
	dir, err := profileDir()
	if err != nil {
		return nil, err
	}
	in, err := stepmodel.PlanInstall(dir, prof)
	if err != nil {
		return nil, fail(exitBadInput, "%w", err)
	}
	if in.Replace && !force {
		return nil, fail(exitBadInput, "%s carries a framework profile, and a different one is cached at %s; --force replaces it (cgtune profile show %s shows the cached one)",
			path, in.Path, stepmodel.ProfileIDOf(dir, in.Path))
	}
	return &presetProfile{prof: prof, dir: dir, force: force}, nil
}

// install puts the profile in the cache and says where.
func (pp *presetProfile) install(w io.Writer) error {
	if pp == nil {
		return nil
	}
	in, err := stepmodel.InstallProfile(pp.dir, pp.prof, pp.force)
	if err != nil {
		return fail(exitBadInput, "%w", err)
	}
	how := "installed its framework profile"
	if in.Same {
		how = "its framework profile is cached already"
	}
	fmt.Fprintf(w, "%s (measured on %s): %s (cgtune profile show %s)\n", how, pp.prof.Origin(time.Time{}), in.Path, stepmodel.ProfileIDOf(pp.dir, in.Path))
	return nil
}

// carriedProfileNote says, when preset p (read from where) carries a
// framework profile that this machine's cache does not hold, how to
// install it; "" otherwise. A search reads profiles from the cache only,
// so what it estimates does not depend on which file named the preset.
func carriedProfileNote(p presets.TeamPreset, where string) string {
	prof, err := stepmodel.AttachedProfile(p)
	if err != nil {
		return fmt.Sprintf("the framework profile preset %s carries is not used: %v", p.Name, err)
	}
	dir, derr := stepmodel.DefaultProfileDir()
	if prof == nil || derr != nil {
		return ""
	}
	if in, err := stepmodel.PlanInstall(dir, prof); err == nil && in.Same {
		return ""
	}
	return fmt.Sprintf("preset %s carries a framework profile (measured on %s) that this machine's profile cache does not hold: cgtune preset import %s installs it",
		p.Name, p.Profile.Measured, where)
}
