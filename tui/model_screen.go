package tui

import (
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"cgtune/presets"
	"cgtune/recipe"
)

// Screen (a): the model, its architecture and its layout.

const (
	focusList   = 0
	focusLayout = 1
)

// modelScreen picks the model (a built-in or a team preset) and edits its
// layout, which make the session's selection: the list on the left
// (model_list.go), filtered as the person types; the model and the layout
// editor on the right (layout_editor.go).
type modelScreen struct {
	*common
	*session

	builtins []presets.Model
	presets  []presets.PresetInfo
	loaded   map[string]presetLoadedMsg // the team presets loaded, by name

	focus int // focusList or focusLayout
	// mbWanted is the MB version the person chose with v ("": the
	// --mbridge one); a built-in whose recipe needs another one takes
	// that one without changing what the next model starts from.
	mbWanted string

	// The list.
	filter    string
	filtering bool // "/" was pressed: printable keys go into the filter
	cursor    int  // index into the filtered items
	offset    int  // first list row shown

	// Importing a Megatron-Bridge config file: "i" was pressed and the
	// path is being typed; imported are the presets made so, unsaved.
	importing  bool
	importPath string
	imported   []presets.PresetInfo

	// The layout editor.
	row, col int    // layout grid cursor
	editing  bool   // digits are being typed into the field under the cursor
	edit     string // what has been typed
}

// newModelScreen starts with the --model (or the first built-in), or
// with the --preset, selected.
func newModelScreen(c *common, ses *session, builtins []presets.Model) *modelScreen {
	s := &modelScreen{common: c, session: ses, builtins: builtins, loaded: map[string]presetLoadedMsg{}}
	s.selectInitial()
	if p := c.opts.Preset; p != nil {
		s.loaded[p.Name] = presetLoadedMsg{name: p.Name, preset: *p}
		s.applyPreset(*p)
	}
	return s
}

// Init lists the team presets.
func (s *modelScreen) Init() tea.Cmd { return fetchPresets(s.backend) }

func (s *modelScreen) enter() tea.Cmd { return nil }

func (s *modelScreen) typing() bool {
	return (s.focus == focusList && s.filtering) || s.editing || s.importing
}

func (s *modelScreen) Update(msg tea.Msg) (tea.Cmd, handoff) {
	switch msg := msg.(type) {
	case presetsMsg:
		s.onPresets(msg)
	case presetLoadedMsg:
		return s.onPresetLoaded(msg), nil
	case presetImportedMsg:
		s.onImported(msg)
	case tea.KeyPressMsg:
		return s.key(msg)
	}
	return nil, nil
}

func (s *modelScreen) onPresets(msg presetsMsg) {
	if msg.err != nil {
		s.setError(fmt.Errorf("team presets: %w", msg.err))
	}
	s.presets = msg.list
	s.followSelection()
}

// selectInitial picks the --model (or the first built-in) on start.
func (s *modelScreen) selectInitial() {
	if len(s.builtins) == 0 {
		return
	}
	i := slices.IndexFunc(s.builtins, func(b presets.Model) bool { return b.Name == s.opts.Model })
	if s.opts.Model != "" && i < 0 {
		s.setStatus("unknown model %q; pick one from the list", s.opts.Model)
	}
	i = max(i, 0)
	s.cursor = i
	s.applyBuiltin(s.builtins[i], s.opts.GPUType)
}

// followSelection puts the list cursor on the selected preset once the
// list has arrived (a --preset selection is made before it does).
func (s *modelScreen) followSelection() {
	if s.sel.preset == "" {
		return
	}
	for i, it := range s.listItems() {
		if it.preset != nil && it.preset.Name == s.sel.preset {
			s.cursor = i
			return
		}
	}
}

// applyBuiltin selects a built-in model with its default layout for gpu
// (or for the GPU type in use), or where it has none its first GPU type's,
// and an MB version its recipe has, as the headless search chooses them
// (recipe.ChooseTarget); the layout's GPU type and MB cells show them.
func (s *modelScreen) applyBuiltin(b presets.Model, gpu string) {
	if gpu == "" {
		gpu = s.sel.layout.GPU
	}
	fromPreset := s.sel.preset != ""
	s.sel.model, s.sel.preset = b.Clone(), ""
	mb := s.mbWanted
	if mb == "" {
		mb = s.opts.MBridge
	}
	ch, err := recipe.ChooseTarget(b, gpu, false, mb, false)
	l := ch.Layout
	s.sel.layout, s.sel.base, s.sel.err, s.sel.mbridge = l, l.Clone(), err, ch.MBridge
	s.applyOptionSets()
	if fromPreset {
		// The space came with the preset; a built-in starts from the default.
		s.space = newSpaceChoice(presets.DefaultSpace())
	}
	s.validateLayout()
}

// applyPreset selects a loaded team preset: its model, layout, MB version
// and search space.
func (s *modelScreen) applyPreset(p presets.TeamPreset) {
	model, err := p.ResolveModel()
	if err != nil {
		s.setError(fmt.Errorf("preset %s: %w", p.Name, err))
		return
	}
	if err := p.FillLayout(); err != nil {
		s.setError(fmt.Errorf("preset %s: %w", p.Name, err))
		return
	}
	s.sel = selection{model: model, preset: p.Name, layout: p.Layout.Clone(), mbridge: p.MBridge, inline: p.ModelInline != nil}
	if s.sel.mbridge == "" {
		s.sel.mbridge = s.opts.MBridge
	}
	if s.sel.layout.GPU == "" {
		s.sel.layout.GPU = p.GPU
	}
	s.sel.base = s.sel.layout.Clone()
	s.applyOptionSets()
	s.space = newSpaceChoice(p.Space)
	s.validateLayout()
}

// applyOptionSets applies the --set values of the fields the layout
// editor shows to the selected layout, as edits of it.
func (s *modelScreen) applyOptionSets() {
	applyLayoutSets(&s.sel.layout, s.sel.base, s.opts.LayoutSets)
}

func (s *modelScreen) validateLayout() {
	if s.sel.model.Name == "" {
		return
	}
	s.sel.err = s.sel.model.ValidateLayout(s.sel.layout)
	if s.sel.err == nil {
		s.sel.err = checkRecipe(s.sel.model, s.sel.layout, s.sel.mbridge)
	}
	if s.sel.err == nil && s.statusErr && strings.HasPrefix(s.status, fixLayoutFirst) {
		// The message was about this layout, which is fixed now.
		s.clearStatus()
	}
}

// fixLayoutFirst starts the message enter gives on an invalid layout.
const fixLayoutFirst = "fix the layout first"

// onCursor makes the selection follow the list cursor; a team preset is
// loaded (once) through the backend.
func (s *modelScreen) onCursor() tea.Cmd {
	items := s.listItems()
	if len(items) == 0 {
		return nil
	}
	s.cursor = min(max(s.cursor, 0), len(items)-1)
	it := items[s.cursor]
	s.editing = false
	if it.builtin != nil {
		if s.sel.preset != "" || s.sel.model.Name != it.builtin.Name {
			s.applyBuiltin(*it.builtin, "")
		}
		return nil
	}
	if it.preset.Problem != "" {
		return nil
	}
	if got, ok := s.loaded[it.preset.Name]; ok {
		if got.err == nil && s.sel.preset != it.preset.Name {
			s.applyPreset(got.preset)
		}
		return nil
	}
	return loadPreset(s.backend, it.preset.Name)
}

func (s *modelScreen) onPresetLoaded(msg presetLoadedMsg) tea.Cmd {
	s.loaded[msg.name] = msg
	if msg.err != nil {
		s.setError(fmt.Errorf("preset %s: %w", msg.name, msg.err))
		return nil
	}
	items := s.listItems()
	if c := s.cursor; c < len(items) && items[c].preset != nil && items[c].preset.Name == msg.name {
		s.applyPreset(msg.preset)
	}
	return nil
}

func (s *modelScreen) key(msg tea.KeyPressMsg) (tea.Cmd, handoff) {
	if s.importing {
		return s.importKey(msg), nil
	}
	if key.Matches(msg, s.keys.Focus) {
		s.commitEdit()
		s.focus = 1 - s.focus
		return nil, nil
	}
	if key.Matches(msg, s.keys.Next) {
		return nil, s.next()
	}
	if s.focus == focusList {
		return s.listKey(msg), nil
	}
	return s.layoutKey(msg), nil
}

// next goes on to the GPUs with a model and a valid layout; a first enter
// ends the typing of a number or of the filter.
func (s *modelScreen) next() handoff {
	switch {
	case s.editing:
		s.commitEdit()
		return nil
	case s.filtering && len(s.listItems()) > 0:
		s.filtering = false
		return nil
	case s.focus == focusList && len(s.listItems()) == 0:
		s.setError(fmt.Errorf("no model or preset matches the filter %q: esc clears it", s.filter))
		return nil
	case s.sel.model.Name == "":
		s.setStatus("pick a model first")
		return nil
	case s.sel.err != nil:
		s.setError(fmt.Errorf("%s: %w", fixLayoutFirst, s.sel.err))
		return nil
	}
	return goTo{screenGPU}
}

// cycleGPUType moves to the next GPU type the model has a layout for: its
// default layout there, with the fields the person edited kept.
func (s *modelScreen) cycleGPUType(dir int) {
	gpus := s.sel.model.GPUs()
	if len(gpus) < 2 {
		s.setStatus("%s has a layout for %s only", s.sel.model.Name, strings.Join(gpus, ", "))
		return
	}
	gpu := nextIn(gpus, s.sel.layout.GPU, dir)
	l, err := s.sel.model.Layout(gpu)
	if err != nil {
		s.setError(err)
		return
	}
	base := l.Clone()
	for _, f := range s.sel.layoutChanges() {
		if f.carry != nil {
			f.carry(&l, &s.sel.layout)
		}
	}
	s.sel.layout, s.sel.base = l, base
	s.validateLayout()
	// What the status calls kept is what the "edited:" line lists: an
	// edit that is the new GPU type's default is not one any more.
	if kept := s.sel.editedLabels(); len(kept) > 0 {
		s.setStatus("layout: %s's default for %s, with your %s", s.sel.model.Name, gpu, strings.Join(kept, ", "))
		return
	}
	s.setStatus("layout: %s's default for %s", s.sel.model.Name, gpu)
}

// toggleMBridge cycles through the Megatron-Bridge versions cgtune knows.
func (s *modelScreen) toggleMBridge() {
	s.sel.mbridge = nextIn(presets.MBridgeVersions, s.sel.mbridge, 1)
	s.mbWanted = s.sel.mbridge
	s.validateLayout() // the recipe's fields depend on the version
}

// canContinue reports whether enter goes on to the GPUs: a model is
// selected and its layout is valid.
func (s *modelScreen) canContinue() bool {
	return s.sel.model.Name != "" && s.sel.err == nil
}

// helpKeys put first what the person came to do: continue (when the
// selection can), then move; enter is not offered while the layout is
// invalid, as it only says so.
func (s *modelScreen) helpKeys() helpKeys {
	k := s.keys
	if s.importing {
		return helpKeys{short: []key.Binding{
			withHelp(k.Import, "path", "type the ConfigContainer YAML's path"), withHelp(k.Next, "enter", "import"),
			withHelp(k.Back, "esc", "cancel"), withHelp(k.Quit, "ctrl+c", "quit"),
		}}
	}
	if s.focus == focusList && s.filtering {
		return helpKeys{short: []key.Binding{
			withHelp(k.Filter, "a-z 0-9", "filter"), withHelp(k.Next, "enter", "done"), withHelp(k.ClearFilter, "esc", "clear"),
			withHelp(k.Up, "↑/↓", "model"), withHelp(k.Quit, "ctrl+c", "quit"),
		}}
	}
	var next []key.Binding
	if s.canContinue() {
		next = []key.Binding{k.Next}
	}
	if s.focus == focusList {
		short := append(next,
			withHelp(k.Up, "↑/↓", "model"),
			k.GPUType,
			withHelp(k.Focus, "tab", "layout"),
			k.Filter,
			withHelp(k.MBridge, "v", "MB version"),
			k.Quit,
		)
		return helpKeys{short: short, full: [][]key.Binding{
			{withHelp(k.Up, "↑/↓", "move"), withHelp(k.PageDown, "pgup/pgdn", "page"), k.Filter, withHelp(k.ClearFilter, "esc", "clear filter"), k.Import},
			{withHelp(k.GPUType, "g/←/→", "gpu type"), withHelp(k.MBridge, "v", "MB version"), withHelp(k.Focus, "tab", "edit layout")},
			append(next, k.Quit, k.Help),
		}}
	}
	if s.editing {
		return helpKeys{short: []key.Binding{
			withHelp(k.Next, "enter", "set"), withHelp(k.Next, "0-9", "type"), withHelp(k.Back, "esc", "cancel"),
		}}
	}
	short := append(next,
		withHelp(k.Up, "arrows", "field"),
		withHelp(k.Inc, "+/-", "change"),
		withHelp(k.Inc, "0-9", "type"),
		withHelp(k.Focus, "tab", "list"),
		k.GPUType, withHelp(k.MBridge, "v", "MB version"),
		k.Quit,
	)
	return helpKeys{short: short, full: [][]key.Binding{
		{withHelp(k.Up, "↑/↓/←/→", "field"), withHelp(k.Inc, "+/-", "change"), withHelp(k.Inc, "0-9", "type a number")},
		{k.GPUType, k.MBridge, withHelp(k.Focus, "tab/esc", "model list")},
		append(next, k.Quit, k.Help),
	}}
}

// --- view ---------------------------------------------------------------

func (s *modelScreen) View(w, h int) string {
	listW := modelListWidth(w)
	right := s.detailView(w-listW-3, h)
	return sideBySide(s.listView(listW, h), listW, right, 3)
}

// modelListWidth is the model list's width in a window w wide; the
// detail (and the layout editor) gets the rest less a gap of 3.
func modelListWidth(w int) int {
	switch {
	case w >= 120:
		return 50
	case w < 80:
		// A small window: the layout editor needs the room more.
		return 24
	}
	return 30
}
