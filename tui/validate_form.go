package tui

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"cgtune/engine/job"
	"cgtune/search"
)

// The validation form: "v" on the results screen asks how to run the real
// training jobs (the launcher, the command template, how many of the top
// candidates, how many iterations each), as `cgtune validate` takes them
// on its command line, prefilled from --launcher and --command. enter
// checks the fields and shows the command for a last yes (valConfirm).

// Launchers are the launchers the form offers (cgtune validate --launcher).
var Launchers = []string{"local", "slurm"}

// Form fields, in order.
const (
	formLauncher = iota
	formCommand
	formTop
	formIters
	formFields
)

var formLabels = [formFields]string{"Launcher", "Command", "Top", "Iters"}

// maxFormNumber bounds the form's numbers: more candidates or iterations
// than a validation runs are a typo.
const maxFormNumber = 100_000

// validateForm is what the form holds while it is open.
type validateForm struct {
	field    int
	launcher string
	command  string
	top      string // typed numbers, checked on enter
	iters    string
	runDir   string // the search's run folder, which the jobs validate
	// plan is what the validation would run with the Top typed (nil
	// while the backend is asked), planErr why nothing can; planTop is
	// the Top they are for.
	plan    *ValidationPlan
	planErr error
	planTop int
}

// newValidateForm is the form for the search in runDir, prefilled from
// --launcher, --command and --job-iters; without a command the cursor
// starts on it.
func newValidateForm(opts Options, runDir string) *validateForm {
	launcher := opts.JobLauncher
	if launcher == "" {
		launcher = Launchers[0]
	}
	iters := opts.JobIters
	if iters <= 0 {
		iters = job.DefaultIters
	}
	f := &validateForm{launcher: launcher, command: opts.JobCommand, top: strconv.Itoa(validateTop), iters: strconv.Itoa(iters), runDir: runDir}
	if f.command == "" {
		f.field = formCommand
	}
	return f
}

// replan asks what the validation would run when the Top typed is a
// number it has not asked for yet.
func (f *validateForm) replan(ctx context.Context, b Backend) tea.Cmd {
	top, err := strconv.Atoi(f.top)
	if err != nil || top < 1 || top > maxFormNumber || top == f.planTop {
		return nil
	}
	f.plan, f.planErr, f.planTop = nil, nil, top
	return planValidationCmd(ctx, b, f.runDir, top)
}

// onPlan takes the backend's answer, if it is for the Top typed.
func (f *validateForm) onPlan(msg validatePlanMsg) {
	if msg.top != f.planTop {
		return
	}
	if msg.err != nil {
		f.planErr = msg.err
		return
	}
	f.plan = &msg.plan
}

// problems are the form's fields that cannot run, by field, with why.
func (f *validateForm) problems() map[int]string {
	out := map[int]string{}
	if strings.TrimSpace(f.command) == "" {
		out[formCommand] = "give the training command template, e.g. torchrun ... --train-iters {iters} {flags}"
	} else if _, err := job.ParseCommand(f.command, ""); err != nil {
		out[formCommand] = err.Error()
	}
	for _, n := range []struct {
		field int
		text  string
		min   int
	}{{formTop, f.top, 1}, {formIters, f.iters, 1}} {
		v, err := strconv.Atoi(n.text)
		if err != nil || v < n.min || v > maxFormNumber {
			out[n.field] = fmt.Sprintf("%q: want a whole number from %d to %d", n.text, n.min, maxFormNumber)
		}
	}
	return out
}

// firstProblem is the first field, in the form's order, that cannot run,
// and why.
func (f *validateForm) firstProblem() (field int, why string, bad bool) {
	problems := f.problems()
	for i := range formFields {
		if why, ok := problems[i]; ok {
			return i, why, true
		}
	}
	return 0, "", false
}

// request is the validation the form describes (its problems checked).
func (f *validateForm) request() ValidateRequest {
	top, _ := strconv.Atoi(f.top)
	iters, _ := strconv.Atoi(f.iters)
	return ValidateRequest{RunDir: f.runDir, Top: top, Launcher: f.launcher, Command: strings.TrimSpace(f.command), Iters: iters}
}

// key moves between the fields and edits the one under the cursor.
func (f *validateForm) key(msg tea.KeyPressMsg, k KeyMap) {
	switch s := msg.String(); {
	case s == "up" || s == "shift+tab":
		f.field = (f.field + formFields - 1) % formFields
	case s == "down" || s == "tab":
		f.field = (f.field + 1) % formFields
	case f.field == formLauncher && (key.Matches(msg, k.Toggle) || s == "left" || s == "right"):
		dir := 1
		if s == "left" {
			dir = -1
		}
		f.launcher = nextIn(Launchers, f.launcher, dir)
	case f.field == formCommand:
		f.command = editLine(f.command, msg)
	case f.field == formTop:
		f.top = editNumber(f.top, msg)
	case f.field == formIters:
		f.iters = editNumber(f.iters, msg)
	}
}

// editNumber applies a key to a typed number: +/- step it, digits append,
// backspace and ctrl+u edit it (it is not typed over).
func editNumber(n string, msg tea.KeyPressMsg) string {
	switch s := msg.String(); {
	case s == "+" || s == "=" || s == "-":
		v, _ := strconv.Atoi(n)
		if s == "-" {
			v--
		} else {
			v++
		}
		return strconv.Itoa(min(max(v, 1), maxFormNumber))
	case len(msg.Text) == 1 && digit(msg.Text[0]) && len(n) < 6:
		return n + msg.Text
	case msg.Text == "":
		return editLine(n, msg)
	}
	return n
}

// editLine applies a key to a line of text: typing appends, backspace and
// ctrl+w delete, ctrl+u clears.
func editLine(s string, msg tea.KeyPressMsg) string {
	switch msg.String() {
	case "backspace":
		if r := []rune(s); len(r) > 0 {
			return string(r[:len(r)-1])
		}
		return s
	case "ctrl+u":
		return ""
	case "ctrl+w":
		t := strings.TrimRight(s, " /")
		if i := strings.LastIndexAny(t, " /"); i >= 0 {
			return t[:i+1]
		}
		return ""
	}
	if msg.Text != "" && msg.Mod&^tea.ModShift == 0 {
		return s + msg.Text
	}
	return s
}

// paste puts pasted text into the field under the cursor.
func (f *validateForm) paste(text string) {
	text = strings.TrimRight(text, "\r\n")
	switch f.field {
	case formCommand:
		f.command += text
	case formTop:
		f.top += strings.TrimSpace(text)
	case formIters:
		f.iters += strings.TrimSpace(text)
	}
}

// helpKeys offer enter unless the backend said nothing of the search can
// run as jobs.
func (f *validateForm) helpKeys(k KeyMap) helpKeys {
	short := []key.Binding{withHelp(k.Up, "↑/↓", "field"), withHelp(k.Next, "enter", "review the command"), withHelp(k.Back, "esc", "cancel")}
	if f.planErr != nil {
		short = slices.Delete(short, 1, 2)
	}
	switch f.field {
	case formLauncher:
		short = append(short, withHelp(k.Toggle, "space/←/→", "launcher"))
	case formCommand:
		short = append(short, withHelp(k.Back, "ctrl+u", "clear"))
	default:
		short = append(short, withHelp(k.Inc, "0-9 +/-", "number"))
	}
	return helpKeys{short: short}
}

// formLabelW is the width of the form's labels.
const formLabelW = 10

// View draws the form: each field with its value, the cursor's marked,
// and under a field what is wrong with it; then which jobs it will run
// and which of the top candidates it skips, with why, before anything
// starts. What the form does and its placeholders show where the height
// leaves room.
func (f *validateForm) View(st Styles, w, h int) string {
	bad := f.problems()
	var fields []string
	for i := range formFields {
		cur := i == f.field
		fields = append(fields, f.fieldLines(st, i, w)...)
		if why, ok := bad[i]; ok && (i != formCommand || f.command != "" || cur) {
			fields = append(fields, styleLines(st.Err, hanging(strings.Repeat(" ", 2+formLabelW)+"✗ ", why, w))...)
		}
	}
	plan := f.planLines(st, w)
	about := styleLines(st.Muted, wrap(fmt.Sprintf("Runs the top candidates of %s and the eager baseline as the real training job, one job each, and compares their iteration time with the prediction (as cgtune validate RUN does).", f.runDir), w))
	places := styleLines(st.Faint, wrap("Placeholders: {flags} (Megatron-LM), {dotlist} (Megatron-Bridge), {overrides}, {run_script_flags}, {yaml_file}, {iters}, {candidate}, {job_dir}; the job must log every iteration (cgtune validate --help).", w))
	lines := []string{st.Title.Render("Validation on real jobs")}
	lines = append(lines, fields...)
	room := h - len(lines) - len(plan)
	gap := []string{}
	if room > 0 {
		gap, room = []string{""}, room-1
	}
	// The extras in the order they give way: the bottom line (the key
	// help says it too), what the form does, the placeholders.
	prompt := []string{st.Muted.Render(truncate("enter: review the command before it runs · esc: cancel", w))}
	if room < 1 {
		prompt = nil
	}
	room -= len(prompt)
	if len(about)+1 <= room {
		lines = append(append(lines[:1], append(about, "")...), fields...)
		room -= len(about) + 1
	}
	lines = append(append(lines, gap...), plan...)
	if len(places)+1 <= room {
		lines = append(append(lines, ""), places...)
	}
	return fitBlock(strings.Join(lines, "\n"), w, h-len(prompt)) + "\n" + strings.Join(prompt, "\n")
}

// planLines say which jobs the form will run (the eager baseline and the
// top candidates the jobs' framework can build) and which candidates it
// skips, with why, as `cgtune validate RUN` would.
func (f *validateForm) planLines(st Styles, w int) []string {
	labelW := 2 + formLabelW // under the fields' values
	if w < 80 {
		labelW = len("Skips ") // a narrow window needs the room more
	}
	label := func(l string) string { return padRight(l, labelW) }
	switch {
	case f.planErr != nil:
		return styleLines(st.Err, hanging(label("Runs")+"✗ ", f.planErr.Error(), w))
	case f.plan == nil:
		return []string{st.Faint.Render(truncate(label("Runs")+"asking which candidates the jobs can build…", w))}
	}
	lines := styleLines(st.Value, hanging(label("Runs"), planText(*f.plan), w))
	for i, sk := range skipGroups(f.plan.Skipped) {
		l := ""
		if i == 0 {
			l = "Skips"
		}
		lines = append(lines, styleLines(st.Warn, hanging(label(l), sk, w))...)
	}
	graphed := len(f.plan.Targets) - 1 + len(f.plan.Skipped)
	if top, _ := strconv.Atoi(f.top); graphed < top {
		lines = append(lines, styleLines(st.Muted, hanging(label(""), fmt.Sprintf("the search has %d graphed candidates that succeeded and fit (one per impl and scopes), not %d", graphed, top), w))...)
	}
	return lines
}

// skipGroups are the skipped candidates as "a w3, b w3: why", those
// skipped for the same reason together (a framework without Transformer
// Engine skips every transformer_engine candidate alike).
func skipGroups(skipped []search.Skipped) []string {
	var whys []string
	names := map[string][]string{}
	for _, sk := range skipped {
		if _, ok := names[sk.Why]; !ok {
			whys = append(whys, sk.Why)
		}
		names[sk.Why] = append(names[sk.Why], sk.Candidate.Name())
	}
	out := make([]string, len(whys))
	for i, why := range whys {
		out[i] = strings.Join(names[why], ", ") + ": " + why
	}
	return out
}

// planText names the jobs a plan runs: "3 jobs: eager, te attn w3, ...".
func planText(p ValidationPlan) string {
	var names []string
	for _, t := range p.Targets {
		n := t.Candidate.Name()
		if !t.Candidate.Graphed() {
			n = "eager"
		}
		names = append(names, n)
	}
	return fmt.Sprintf("%d jobs: %s", len(names), strings.Join(names, ", "))
}

// fieldLines are field i's label and value, marked when it has the
// cursor; the command shows whole, over as many lines as it needs.
func (f *validateForm) fieldLines(st Styles, i, w int) []string {
	cur := i == f.field
	val := f.fieldValue(i, cur)
	label := padRight(formLabels[i], formLabelW)
	mark := "  "
	if cur {
		mark = "› "
	}
	valLines := []string{val}
	if i == formCommand {
		valLines = commandLines(val, w-2-formLabelW)
	}
	var lines []string
	for j, v := range valLines {
		lbl := label
		if j > 0 {
			lbl = strings.Repeat(" ", formLabelW)
		}
		line := mark + st.Label.Render(lbl) + st.Value.Render(v)
		if cur {
			line = st.Cursor.Render(mark+lbl) + st.Value.Render(v)
		}
		lines = append(lines, line)
		mark = "  "
	}
	return lines
}

// fieldValue is field i's value as shown, with the text cursor when it
// is typed into (cur).
func (f *validateForm) fieldValue(i int, cur bool) string {
	bar := ""
	if cur {
		bar = "▏"
	}
	switch i {
	case formLauncher:
		val := ""
		for _, l := range Launchers {
			if l == f.launcher {
				val += "(•) " + l + "  "
			} else {
				val += "( ) " + l + "  "
			}
		}
		return val
	case formCommand:
		return f.command + bar
	case formTop:
		return f.top + bar + " graphed candidates, and eager"
	}
	return f.iters + bar + " iterations per job"
}
