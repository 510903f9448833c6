package presets

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"cgtune/internal/fileio"
)

// Where a preset was found, in search-path order.
const (
	SourceFlag = "--preset"
	SourceEnv  = "$CGTUNE_PRESETS"
	SourceUser = "user"
)

// PresetInfo describes one preset file on the search path.
type PresetInfo struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Source string `json:"source"` // SourceFlag, SourceEnv or SourceUser
	Model  string `json:"model,omitempty"`
	GPU    string `json:"gpu,omitempty"`
	// ShadowedBy is the path of the earlier preset of the same name that
	// wins; empty for the one Load returns.
	ShadowedBy string `json:"shadowed_by,omitempty"`
	// Problem is why the file could not be read as a preset; List keeps
	// going so one broken file in a shared folder does not hide the rest.
	Problem string `json:"problem,omitempty"`
}

// Store finds team presets on the search path and saves them in the user folder.
type Store struct {
	file    string   // --preset FILE
	envDirs []string // $CGTUNE_PRESETS folders, in order
	userDir string   // <user config dir>/cgtune/presets; "" when there is none
	// Warn, when set, is told about each entry of a presets folder that is
	// skipped because it is no file to read (a FIFO, a device, a folder, a
	// dangling link, one over MaxYAMLBytes): a shared folder with one odd
	// entry must neither hang cgtune nor hide the other presets.
	Warn func(msg string)
	// UserDirErr says why there is no user folder (nil: the usual
	// message), for a caller that asked os.UserConfigDir and was refused.
	UserDirErr error
}

// DefaultUserDir is where presets are saved: os.UserConfigDir()/cgtune/presets.
func DefaultUserDir() (string, error) {
	base, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return userPresetDir(base), nil
}

func userPresetDir(configDir string) string {
	return filepath.Join(configDir, "cgtune", "presets")
}

// NewStore makes a store searching presetFlag (a file; "" for none), then
// the colon-separated folders of envPresets, then the presets folder under
// userConfigDir (normally os.UserConfigDir(); "" for none).
func NewStore(presetFlag, envPresets, userConfigDir string) *Store {
	s := &Store{file: presetFlag}
	for _, d := range filepath.SplitList(envPresets) {
		if d != "" {
			s.envDirs = append(s.envDirs, d)
		}
	}
	if userConfigDir != "" {
		s.userDir = userPresetDir(userConfigDir)
	}
	return s
}

// UserDir is the folder Save writes to ("" when there is no user folder).
func (s *Store) UserDir() string { return s.userDir }

// SearchPath describes the places searched, in order, for messages.
func (s *Store) SearchPath() []string {
	var out []string
	if s.file != "" {
		out = append(out, s.file+" ("+SourceFlag+")")
	}
	for _, d := range s.envDirs {
		out = append(out, d+" ("+SourceEnv+")")
	}
	if s.userDir != "" {
		out = append(out, s.userDir+" (user)")
	}
	return out
}

func isPresetFile(name string) bool {
	return !strings.HasPrefix(name, ".") && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"))
}

func presetBase(name string) string {
	return strings.TrimSuffix(strings.TrimSuffix(name, ".yaml"), ".yml")
}

// scanDir lists the preset files of a folder; a missing folder is empty
// (the user folder does not exist until the first save). Entries that are
// not regular files of a sane size are skipped (see Store.Warn).
func (s *Store) scanDir(dir, source string) ([]PresetInfo, error) {
	entries, err := fileio.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []PresetInfo
	for _, e := range entries {
		if !isPresetFile(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := fileio.Readable(p, MaxYAMLBytes); err != nil {
			if s.Warn != nil {
				s.Warn(fmt.Sprintf("skipped %s (%s): %v", p, source, err))
			}
			continue
		}
		info := PresetInfo{Name: presetBase(e.Name()), Path: p, Source: source}
		fillInfo(&info, true)
		out = append(out, info)
	}
	return out, nil
}

// fillInfo reads the file to get its model and GPU, or the problem with it.
func fillInfo(info *PresetInfo, nameFromFile bool) {
	p, err := loadPresetFile(info.Path)
	if err != nil {
		info.Problem = err.Error()
		return
	}
	if nameFromFile && p.Name != info.Name {
		info.Problem = fmt.Sprintf("%s: name %q does not match the file name (want name: %s)", info.Path, p.Name, info.Name)
		return
	}
	info.Name = p.Name
	info.Model = p.ModelName()
	info.GPU = p.GPU
}

func loadPresetFile(path string) (TeamPreset, error) {
	data, err := fileio.ReadFileLimited(path, MaxYAMLBytes)
	if err != nil {
		return TeamPreset{}, err
	}
	return ParsePreset(path, data)
}

// List returns every preset file on the search path, in precedence order
// and by name within each place; a name found earlier shadows later ones.
func (s *Store) List() ([]PresetInfo, error) {
	var all []PresetInfo
	if s.file != "" {
		info := PresetInfo{Path: s.file, Source: SourceFlag, Name: presetBase(filepath.Base(s.file))}
		fillInfo(&info, false)
		all = append(all, info)
	}
	for _, d := range s.envDirs {
		got, err := s.scanDir(d, SourceEnv)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
	}
	if s.userDir != "" {
		got, err := s.scanDir(s.userDir, SourceUser)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
	}
	winner := map[string]string{}
	for i := range all {
		if w, ok := winner[all[i].Name]; ok {
			all[i].ShadowedBy = w
			continue
		}
		winner[all[i].Name] = all[i].Path
	}
	return all, nil
}

// Find returns where the preset called name is found first.
func (s *Store) Find(name string) (PresetInfo, error) {
	if !ValidName(name) {
		return PresetInfo{}, fmt.Errorf("invalid preset name %q (allowed: [a-z0-9][a-z0-9._-]*)", name)
	}
	all, err := s.List()
	if err != nil {
		return PresetInfo{}, err
	}
	for _, info := range all {
		if info.Name == name {
			return info, nil
		}
	}
	where := strings.Join(s.SearchPath(), ", ")
	if where == "" {
		where = "nothing (no --preset, no $CGTUNE_PRESETS, no user config folder)"
	}
	return PresetInfo{}, fmt.Errorf("preset %q not found (searched: %s)", name, where)
}

// Load returns the preset called name from the first place that has it.
func (s *Store) Load(name string) (TeamPreset, error) {
	info, err := s.Find(name)
	if err != nil {
		return TeamPreset{}, err
	}
	if info.Problem != "" {
		return TeamPreset{}, errors.New(info.Problem)
	}
	return loadPresetFile(info.Path)
}

// LoadFile reads one preset file, wherever it is.
func (s *Store) LoadFile(path string) (TeamPreset, error) { return loadPresetFile(path) }

// NoUserDir is why presets cannot be saved (there is no user folder).
func (s *Store) NoUserDir() error {
	if s.UserDirErr != nil {
		return fmt.Errorf("no user config folder to save presets in: %w", s.UserDirErr)
	}
	return errors.New("no user config folder to save presets in (set $XDG_CONFIG_HOME or $HOME)")
}

func (s *Store) userPath(name string) (string, error) {
	if s.userDir == "" {
		return "", s.NoUserDir()
	}
	return filepath.Join(s.userDir, name+".yaml"), nil
}

// Save writes p to the user folder as NAME.yaml, atomically. It refuses to
// replace an existing preset unless overwrite is set, with an error that
// is an fs.ErrExist.
func (s *Store) Save(p TeamPreset, overwrite bool) (string, error) {
	if err := p.FillLayout(); err != nil {
		return "", fmt.Errorf("preset %s: %w", p.Name, err)
	}
	data, err := MarshalPreset(p)
	if err != nil {
		return "", err
	}
	path, err := s.userPath(p.Name)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(s.userDir, 0o755); err != nil {
		return "", err
	}
	if overwrite {
		err = fileio.WriteFileAtomic(path, data, 0o644)
	} else {
		// Created under its name in one step: of two saves racing for
		// one name, one fails here instead of the last one winning.
		err = fileio.CreateFileAtomic(path, data, 0o644)
	}
	if errors.Is(err, fs.ErrExist) {
		return "", presetExists{p.Name, path}
	}
	if err != nil {
		return "", err
	}
	return path, nil
}

// presetExists is Save's refusal to replace a preset; it is an fs.ErrExist.
type presetExists struct{ name, path string }

func (e presetExists) Error() string {
	return fmt.Sprintf("preset %q already exists at %s; use --force to replace it", e.name, e.path)
}

func (e presetExists) Is(target error) bool { return target == fs.ErrExist }

// ExportTo writes the preset called name in canonical form to w. The layout
// is always written out, so the copy does not depend on the model defaults
// of the cgtune version that reads it.
func (s *Store) ExportTo(name string, w io.Writer) error {
	p, err := s.Load(name)
	if err != nil {
		return err
	}
	data, err := MarshalPreset(p)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// Export writes the preset called name to the file dst, atomically. It
// never writes over the preset's own file, and replaces an existing dst
// only when overwrite is set.
func (s *Store) Export(name, dst string, overwrite bool) error {
	if dst == "" || dst == "-" {
		return fmt.Errorf("export of %s: %q is not a file; write to standard output with ExportTo", name, dst)
	}
	info, err := s.Find(name)
	if err != nil {
		return err
	}
	if fileio.SameFile(dst, info.Path) {
		return fmt.Errorf("%s is the preset %s itself (%s); export it to another file", dst, name, info.Path)
	}
	p, err := s.Load(name)
	if err != nil {
		return err
	}
	data, err := MarshalPreset(p)
	if err != nil {
		return err
	}
	if overwrite {
		return fileio.WriteFileAtomic(dst, data, 0o644)
	}
	if err := fileio.CreateFileAtomic(dst, data, 0o644); errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists already; use --force to replace it", dst)
	} else if err != nil {
		return err
	}
	return nil
}

// Import copies the preset file at path into the user folder. It never
// replaces a preset silently: if one of that name is anywhere on the search
// path it fails, naming it and --force, unless overwrite is set.
func (s *Store) Import(path string, overwrite bool) (TeamPreset, string, error) {
	p, err := loadPresetFile(path)
	if err != nil {
		return TeamPreset{}, "", err
	}
	if !overwrite {
		if info, err := s.Find(p.Name); err == nil {
			return TeamPreset{}, "", fmt.Errorf("preset %q already exists at %s (%s); use --force to replace it", p.Name, info.Path, info.Source)
		}
	}
	dst, err := s.Save(p, overwrite)
	if err != nil {
		return TeamPreset{}, "", err
	}
	return p, dst, nil
}

// Remove deletes the preset called name from the user folder. Presets found
// through --preset or $CGTUNE_PRESETS belong to someone else (often a shared
// checkout) and are never removed.
func (s *Store) Remove(name string) (string, error) {
	info, err := s.Find(name)
	if err != nil {
		return "", err
	}
	if info.Source != SourceUser {
		// A user copy may still exist below the one that shadows it.
		if up, perr := s.userPath(name); perr == nil {
			if _, serr := os.Stat(up); serr == nil {
				return "", fmt.Errorf("preset %q is found first at %s (%s); the user copy %s is shadowed by it; remove the file by hand if that is what you want", name, info.Path, info.Source, up)
			}
		}
		return "", fmt.Errorf("preset %q is at %s (%s), not in the user folder; cgtune only removes presets it saved", name, info.Path, info.Source)
	}
	if err := os.Remove(info.Path); err != nil {
		return "", err
	}
	return info.Path, nil
}

// Shadowing reports the preset that Load would return instead of the user
// folder's copy of name, if an earlier place on the search path has one;
// after a save or import, a person needs to know their copy is hidden.
func (s *Store) Shadowing(name string) (PresetInfo, bool) {
	all, err := s.List()
	if err != nil {
		return PresetInfo{}, false
	}
	i := slices.IndexFunc(all, func(p PresetInfo) bool { return p.Name == name })
	if i < 0 || all[i].Source == SourceUser {
		return PresetInfo{}, false
	}
	return all[i], true
}
