package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readmeCommand is a command of a README code block as a reader would
// type it, with what the README says of it.
type readmeCommand struct {
	line    string // the command, continuation lines joined
	comment string // what follows it after "  # "
	exit    int    // the exit status it is shown with
}

// readmeComment is a command's trailing comment: two spaces or more, then #.
var readmeComment = regexp.MustCompile(`\s{2,}#\s?(.*)$`)

// verdictLine is a line `cgtune check` prints for a broken rule.
var verdictLine = regexp.MustCompile(`^(?:[A-Z]+-\d+|WILL-FAIL): `)

// readmeCommands are the commands of README's ```sh blocks in order. In
// a block with "$ " prompts, the prompted lines are the commands and the
// lines under one are its output (a check verdict among them means exit
// 1); in any other block every line but a comment is a command, its
// trailing comment saying "exit N" where it does not exit 0.
func readmeCommands(t *testing.T, readme string) []readmeCommand {
	t.Helper()
	var cmds []readmeCommand
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(readme, -1)
	for _, b := range blocks {
		lines := strings.Split(strings.TrimRight(b[1], "\n"), "\n")
		prompted := strings.Contains("\n"+b[1], "\n$ ")
		for i := 0; i < len(lines); i++ {
			l := lines[i]
			if prompted {
				var ok bool
				if l, ok = strings.CutPrefix(l, "$ "); !ok {
					continue
				}
			}
			if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
				continue
			}
			for strings.HasSuffix(strings.TrimSpace(readmeComment.ReplaceAllString(l, "")), `\`) && i+1 < len(lines) {
				i++
				l = strings.TrimSuffix(strings.TrimSpace(l), `\`) + " " + strings.TrimSpace(lines[i])
			}
			c := readmeCommand{line: l}
			if m := readmeComment.FindStringSubmatchIndex(l); m != nil {
				c.line, c.comment = l[:m[0]], l[m[2]:m[3]]
			}
			if n, ok := strings.CutPrefix(c.comment, "exit "); ok {
				c.exit, _ = strconv.Atoi(strings.Fields(n)[0])
			}
			for prompted && i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "$ ") {
				i++
				if verdictLine.MatchString(lines[i]) {
					c.exit = 1
				}
			}
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// notRun says why a README command is not run here, "" when it is: what
// it needs (its comment starts "needs"), the set-up commands the README
// starts with, and the TUI, which needs a terminal.
func notRun(c readmeCommand) string {
	f := strings.Fields(c.line)
	switch {
	case strings.HasPrefix(c.comment, "needs"):
		return c.comment
	case f[0] == "./run.sh" || f[0] == "./test.sh":
		return "a set-up command"
	case f[0] == "cgtune" && (len(f) == 1 || strings.HasPrefix(f[1], "-")) && !strings.Contains(c.line, "--headless") &&
		!strings.Contains(c.line, "--version") && !strings.Contains(c.line, "--help"):
		return "the TUI needs a terminal"
	}
	return ""
}

// buildCgtune builds the cgtune of this checkout into dir.
func buildCgtune(t *testing.T, dir string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goBin, "build", "-o", filepath.Join(dir, "cgtune"), ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

// Every command in the README's code blocks that needs no GPU runs as
// written: cgtune built from this checkout on PATH, a fresh home, one
// folder for them all in the README's order (a command may read what an
// earlier one wrote), and the exit status the README shows it with.
func TestReadmeCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cgtune and runs the README's searches")
	}
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > 350 {
		t.Errorf("README is %d lines; at most 350", n)
	}
	cmds := readmeCommands(t, string(data))
	root := t.TempDir()
	bin, home, work := filepath.Join(root, "bin"), filepath.Join(root, "home"), filepath.Join(root, "work")
	for _, d := range []string{bin, home, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	buildCgtune(t, bin)
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "HOME" && k != "PATH" && !strings.HasPrefix(k, "XDG_") && !strings.HasPrefix(k, "CGTUNE_") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	ran := 0
	for _, c := range cmds {
		if why := notRun(c); why != "" {
			t.Logf("not run (%s): %s", why, c.line)
			continue
		}
		ran++
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", c.line)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.CombinedOutput()
		cancel()
		code := 0
		if err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
		if code != c.exit {
			t.Errorf("README command exits %d, the README shows %d:\n%s\n%.3000s", code, c.exit, c.line, out)
		}
	}
	if ran < 10 {
		t.Errorf("only %d README commands ran", ran)
	}
}
