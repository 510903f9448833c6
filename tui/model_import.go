package tui

import (
	"fmt"
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"

	"cgtune/presets"
)

// The model screen's import: "i" asks for the path of a Megatron-Bridge
// ConfigContainer YAML, which the backend reads (the converter the
// built-in models are generated with) into a team preset, listed with the
// team presets and selected; `cgtune preset save` keeps it.

// importKey takes the keys while the path is typed.
func (s *modelScreen) importKey(msg tea.KeyPressMsg) tea.Cmd {
	switch msg.String() {
	case "esc":
		s.importing = false
	case "enter":
		path := strings.TrimSpace(s.importPath)
		if path == "" {
			s.setStatus("type the path of a ConfigContainer YAML (esc cancels)")
			return nil
		}
		s.importing = false
		s.setStatus("importing %s ...", path)
		return importMBConfig(s.backend, path, s.sel.mbridge)
	case "backspace":
		if s.importPath != "" {
			_, n := lastRune(s.importPath)
			s.importPath = s.importPath[:len(s.importPath)-n]
		}
	default:
		if msg.Text != "" && !strings.ContainsAny(msg.Text, "\n\r\t") {
			s.importPath += msg.Text
		}
	}
	return nil
}

func lastRune(s string) (rune, int) {
	r := []rune(s)
	last := r[len(r)-1]
	return last, len(string(last))
}

// onImported lists and selects an imported preset, or says why the file
// could not be imported.
func (s *modelScreen) onImported(msg presetImportedMsg) {
	if msg.err != nil {
		s.setError(fmt.Errorf("import %s: %w", msg.path, msg.err))
		return
	}
	p := msg.preset
	info := presets.PresetInfo{Name: p.Name, Path: msg.path, Source: "imported", Model: p.ModelName(), GPU: p.GPU}
	s.imported = slices.DeleteFunc(s.imported, func(x presets.PresetInfo) bool { return x.Name == p.Name })
	s.imported = append(s.imported, info)
	s.loaded[p.Name] = presetLoadedMsg{name: p.Name, preset: p}
	s.filter, s.filtering = "", false
	for i, it := range s.listItems() {
		if it.preset != nil && it.preset.Name == p.Name && it.preset.Source == "imported" {
			s.cursor = i
		}
	}
	s.applyPreset(p)
	s.setStatus("imported %s as %s (unsaved: cgtune preset save %s --mbridge-config %s keeps it)", msg.path, p.Name, p.Name, msg.path)
}
