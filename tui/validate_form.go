package tui

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	jobs "cgtune/engine/job"
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
}

// openValidateForm opens the form, or says why there is nothing to
// validate.
func (m *Model) openValidateForm() {
	switch d := m.done; {
	case d == nil || d.RunDir == "":
		m.setError(errors.New("this search has no run folder to validate"))
	case d.Winner == nil:
		m.setError(errors.New("no candidate succeeded: nothing to validate"))
	default:
		launcher := m.opts.JobLauncher
		if launcher == "" {
			launcher = Launchers[0]
		}
		iters := m.opts.JobIters
		if iters <= 0 {
			iters = jobs.DefaultIters
		}
		f := &validateForm{launcher: launcher, command: m.opts.JobCommand, top: strconv.Itoa(validateTop), iters: strconv.Itoa(iters)}
		if f.command == "" {
			f.field = formCommand
		}
		m.resScr.val = validationPane{phase: valForm, form: f}
		m.setStatus("how to run the jobs: enter shows the command before anything runs")
	}
}

// problems are the form's fields that cannot run, by field, with why.
func (f *validateForm) problems() map[int]string {
	out := map[int]string{}
	if strings.TrimSpace(f.command) == "" {
		out[formCommand] = "give the training command template, e.g. torchrun ... --train-iters {iters} {flags}"
	} else if _, err := jobs.ParseCommand(f.command, ""); err != nil {
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

// request is the validation the form describes (its problems checked).
func (f *validateForm) request(runDir string) ValidateRequest {
	top, _ := strconv.Atoi(f.top)
	iters, _ := strconv.Atoi(f.iters)
	return ValidateRequest{RunDir: runDir, Top: top, Launcher: f.launcher, Command: strings.TrimSpace(f.command), Iters: iters}
}

func (m *Model) formKey(msg tea.KeyPressMsg) tea.Cmd {
	p := &m.resScr.val
	f := p.form
	k := m.keys
	switch s := msg.String(); {
	case s == "esc":
		p.phase, p.form = valOff, nil
		m.setStatus("nothing started")
	case s == "enter":
		if bad := f.problems(); len(bad) > 0 {
			for i := range formFields {
				if why, ok := bad[i]; ok {
					f.field = i
					m.setError(fmt.Errorf("%s: %s", formLabels[i], why))
					break
				}
			}
			return nil
		}
		p.req, p.phase = f.request(m.done.RunDir), valConfirm
		m.setStatus("read the command before it runs")
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
	case f.field == formTop || f.field == formIters:
		ptr := &f.top
		if f.field == formIters {
			ptr = &f.iters
		}
		switch {
		case s == "+" || s == "=" || s == "-":
			v, _ := strconv.Atoi(*ptr)
			if s == "-" {
				v--
			} else {
				v++
			}
			*ptr = strconv.Itoa(min(max(v, 1), maxFormNumber))
		case len(msg.Text) == 1 && digit(msg.Text[0]) && len(*ptr) < 6:
			*ptr += msg.Text
		case msg.Text == "": // backspace, ctrl+u: the number is edited, not typed over
			*ptr = editLine(*ptr, msg)
		}
	}
	return nil
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

// formPaste puts pasted text into the field under the cursor.
func (m *Model) formPaste(text string) {
	f := m.resScr.val.form
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

func (m *Model) formHelp() helpKeys {
	k := m.keys
	short := []key.Binding{withHelp(k.Up, "↑/↓", "field"), withHelp(k.Next, "enter", "review the command"), withHelp(k.Back, "esc", "cancel")}
	switch m.resScr.val.form.field {
	case formLauncher:
		short = append(short, withHelp(k.Toggle, "space/←/→", "launcher"))
	case formCommand:
		short = append(short, withHelp(k.Back, "ctrl+u", "clear"))
	default:
		short = append(short, withHelp(k.Inc, "0-9 +/-", "number"))
	}
	return helpKeys{short: short}
}

// formView draws the form: each field with its value, the cursor's marked,
// and under a field what is wrong with it.
func (m *Model) formView(w, h int) string {
	st := m.st
	f := m.resScr.val.form
	bad := f.problems()
	lines := []string{st.Title.Render("Validation on real jobs"),
		st.Muted.Render(wrap(fmt.Sprintf("Runs the top candidates of %s and the eager baseline as the real training job, one job each, and compares their iteration time with the prediction (as cgtune validate RUN does).", m.done.RunDir), w)),
		""}
	const labelW = 10
	for i := range formFields {
		var val string
		switch i {
		case formLauncher:
			for _, l := range Launchers {
				if l == f.launcher {
					val += "(•) " + l + "  "
				} else {
					val += "( ) " + l + "  "
				}
			}
		case formCommand:
			val = f.command
		case formTop:
			val = f.top + " graphed candidates, and eager"
		case formIters:
			val = f.iters + " iterations per job"
		}
		label := padRight(formLabels[i], labelW)
		cur := i == f.field
		if cur && (i == formCommand || i == formTop || i == formIters) {
			switch i {
			case formCommand:
				val += "▏"
			case formTop:
				val = f.top + "▏ graphed candidates, and eager"
			default:
				val = f.iters + "▏ iterations per job"
			}
		}
		mark := "  "
		if cur {
			mark = "› "
		}
		// The command shows whole, over as many lines as it needs.
		valLines := []string{val}
		if i == formCommand {
			valLines = commandLines(val, w-2-labelW)
		}
		for j, v := range valLines {
			lbl := label
			if j > 0 {
				lbl = strings.Repeat(" ", labelW)
			}
			line := mark + st.Label.Render(lbl) + st.Value.Render(v)
			if cur {
				line = st.Cursor.Render(mark+lbl) + st.Value.Render(v)
			}
			lines = append(lines, line)
			mark = "  "
		}
		if why, ok := bad[i]; ok && (i != formCommand || f.command != "" || cur) {
			lines = append(lines, st.Err.Render(hanging(strings.Repeat(" ", 2+labelW)+"✗ ", why, w)))
		}
	}
	lines = append(lines, "", st.Faint.Render(wrap("Placeholders: {flags} (Megatron-LM), {dotlist} (Megatron-Bridge), {overrides}, {run_script_flags}, {yaml_file}, {iters}, {candidate}, {job_dir}; the job must log every iteration (cgtune validate --help).", w)))
	prompt := st.Muted.Render(truncate("enter: review the command before it runs · esc: cancel", w))
	return fitBlock(strings.Join(lines, "\n"), w, h-1) + "\n" + prompt
}
