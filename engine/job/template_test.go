package job

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cgtune/presets"
	"cgtune/recipe"
)

// hostile are values an untrusted preset could smuggle into a command.
var hostile = []string{
	"$(touch PWNED)", "`touch PWNED`", "a'b", `a"b`, "x\ntouch PWNED", "; touch PWNED", "&& touch PWNED",
	"$HOME", "${HOME}", "*", "~", "a b", `\`, "|", "> PWNED", "",
}

// TestRenderedValuesAreShellQuoted renders overrides holding hostile
// values into every placeholder, runs the command with bash, and checks
// that each value arrives as one literal argument and nothing ran.
func TestRenderedValuesAreShellQuoted(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	o := recipe.Overrides{Gen: presets.G3, Entries: []recipe.Entry{
		{Key: recipe.KeyImpl, Value: "local"},
		{Key: recipe.KeyModules, Value: hostile},
		{Key: recipe.KeyWarmup, Value: 3},
	}}
	// printf prints each argument on its own line, NUL-terminated so that
	// a newline inside one stays visible.
	tmpl, err := ParseCommand(`printf '%s\0' {flags}`, "")
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := renderCommand(tmpl, o, dir, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	got := printedArgs(t, dir, cmd)
	want, _ := o.MegatronLMFlagTokens(false)
	if !slices.Equal(got, want) {
		t.Errorf("arguments differ:\n got %q\nwant %q\ncommand: %s", got, want, cmd)
	}
	if _, err := os.Stat(filepath.Join(dir, "PWNED")); err == nil {
		t.Errorf("a value was executed: %s", cmd)
	}

	// The dotlist and run_script renderings, and the YAML file path.
	for _, ph := range []string{"dotlist", "run_script_flags", "yaml_file"} {
		t.Run(ph, func(t *testing.T) {
			tmpl, err := ParseCommand(`printf '%s\0' {`+ph+`}`, "")
			if err != nil {
				t.Fatal(err)
			}
			sub := filepath.Join(dir, "it's $(here)")
			cmd, err := renderCommand(tmpl, o, sub, map[string]string{})
			if err != nil {
				t.Fatal(err)
			}
			got := printedArgs(t, dir, cmd)
			var want []string
			switch ph {
			case "dotlist":
				want = o.DotlistTokens(false)
			case "run_script_flags":
				want, _ = o.FlagTokens(false)
			case "yaml_file":
				want = []string{filepath.Join(sub, "overrides.yaml")}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: got %q\nwant %q", ph, got, want)
			}
			if _, err := os.Stat(filepath.Join(dir, "PWNED")); err == nil {
				t.Errorf("%s: a value was executed: %s", ph, cmd)
			}
		})
	}
}

// printedArgs runs cmd (a printf '%s\0' of the arguments) with bash in
// dir and returns the arguments it printed.
func printedArgs(t *testing.T, dir, cmd string) []string {
	t.Helper()
	c := exec.Command("bash", "-c", cmd)
	c.Dir = dir
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, cmd)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

func TestQuote(t *testing.T) {
	for _, s := range append(hostile, "plain", "model.cuda_graph_impl=local", "--x") {
		out, err := exec.Command("bash", "-c", "printf %s "+Quote(s)).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != s {
			t.Errorf("Quote(%q) = %s came back as %q", s, Quote(s), out)
		}
	}
	if Quote("model.cuda_graph_impl=local") != "model.cuda_graph_impl=local" {
		t.Error("plain words should stay unquoted")
	}
}

func TestParseCommandErrors(t *testing.T) {
	for _, tc := range []struct{ tmpl, want string }{
		{"", "empty"},
		{"torchrun train.py", "no placeholder for the candidate's settings"},
		{"torchrun train.py {overides}", "unknown placeholder {overides}"},
		{`torchrun train.py "{flags}"`, "inside quotes"},
		{`torchrun train.py '{dotlist}'`, "inside quotes"},
		{"a\nb {bogus_thing}", "line 2: unknown placeholder"},
	} {
		t.Run(tc.tmpl, func(t *testing.T) {
			_, err := ParseCommand(tc.tmpl, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: error %v, want %q", tc.tmpl, err, tc.want)
			}
		})
	}
	if _, err := ParseCommand("x {overrides}", "yaml"); err == nil || !strings.Contains(err.Error(), "allowed: dotlist, flags, run_script_flags") {
		t.Errorf("bad format: %v", err)
	}
	// Shell braces stay shell: ${VAR}, {a,b}, { cmd; }, an escaped quote.
	tm, err := ParseCommand(`echo ${HOME} {a,b} \"; { true; } && run {flags} --iters {iters}`, "")
	if err != nil {
		t.Fatal(err)
	}
	got := tm.Expand(map[string]string{"flags": "F", "iters": "7"})
	if got != `echo ${HOME} {a,b} \"; { true; } && run F --iters 7` {
		t.Errorf("expanded to %s", got)
	}
	if !tm.Has(PhIters) || tm.Has(PhDotlist) {
		t.Error("Has is wrong")
	}
}

func TestOverridesPlaceholderFollowsFormat(t *testing.T) {
	o := recipe.BuildOverrides(presets.Candidate{Impl: presets.ImplLocal, Scopes: []string{"full_iteration"}, Warmup: 2}, "0.6")
	for format, want := range map[string]string{
		"dotlist":          "model.cuda_graph_impl=full_iteration",
		"flags":            "--cuda-graph-impl full_iteration --cuda-graph-warmup-steps 2 --no-check-for-nan-in-loss-and-grad",
		"run_script_flags": "--cuda_graph_impl local --cuda_graph_scope full_iteration",
	} {
		t.Run(format, func(t *testing.T) {
			tm, err := ParseCommand("run {overrides}", format)
			if err != nil {
				t.Fatal(err)
			}
			cmd, err := renderCommand(tm, o, t.TempDir(), map[string]string{})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(cmd, "run "+want) {
				t.Errorf("%s: %s", format, cmd)
			}
		})
	}
}

func TestSlurmOptionsRejectInjection(t *testing.T) {
	good := SlurmOptions{Nodes: 2, GPUsPerNode: 8, Time: "0:30:00", Partition: "batch,debug", Account: "my-acct_1"}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range hostile {
		for _, o := range []SlurmOptions{
			{Nodes: 1, Partition: bad}, {Nodes: 1, Account: bad}, {Nodes: 1, Time: bad},
		} {
			t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
				if bad == "" {
					return
				}
				if err := o.Check(); err == nil {
					t.Errorf("%+v accepted", o)
				}
			})
		}
	}
	for _, o := range []SlurmOptions{{Nodes: 0}, {Nodes: 1, GPUsPerNode: -1}, {Nodes: 1, Time: "1:2:3:4"}} {
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			if err := o.Check(); err == nil {
				t.Errorf("%+v accepted", o)
			}
		})
	}
}

func TestBatchScript(t *testing.T) {
	s, err := NewSlurm(SlurmOptions{Nodes: 2, GPUsPerNode: 8, Time: "30", Partition: "gpu", Account: "perf"}, "")
	if err != nil {
		t.Fatal(err)
	}
	script := s.Script(Request{Name: "cgtune-local-layer-w3", Command: "srun torchrun train.py --x 'a b'", Candidate: "local/layer/w3"})
	for _, want := range []string{
		"#!/bin/bash\n", "#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n#SBATCH --time=30\n#SBATCH --partition=gpu\n#SBATCH --account=perf\n",
		"#SBATCH --exclusive\n", `echo "[cgtune] candidate" local/layer/w3 "job ${SLURM_JOB_ID}`, "\nsrun torchrun train.py --x 'a b'\n",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %q:\n%s", want, script)
		}
	}
	if s.GPUs() != 16 || s.Nodes() != 2 {
		t.Errorf("nodes %d GPUs %d", s.Nodes(), s.GPUs())
	}
	// Without GPUs requested there is no --gpus-per-node line.
	s, _ = NewSlurm(SlurmOptions{Nodes: 1}, "")
	if strings.Contains(s.Script(Request{Command: "x"}), "#SBATCH --gpus-per-node") {
		t.Error("--gpus-per-node=0 written")
	}
	for _, tc := range []struct{ tmpl, want string }{
		{"#!/bin/bash\necho hi\n", "{command} exactly once"},
		{"#!/bin/bash\n{command}\n{command}\n", "{command} exactly once"},
		{"echo\n{command}\n", "interpreter line"},
		{"#!/bin/bash\n{comand}\n", "unknown placeholder {comand}"},
	} {
		t.Run(tc.tmpl, func(t *testing.T) {
			_, err := NewSlurm(SlurmOptions{Nodes: 1}, tc.tmpl)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: %v, want %q", tc.tmpl, err, tc.want)
			}
			// cgtune validate names the template file for these (errors.Is).
			if !errors.Is(err, ErrBatchTemplate) || !strings.HasPrefix(err.Error(), "batch template: ") {
				t.Errorf("%q: %v does not wrap ErrBatchTemplate", tc.tmpl, err)
			}
		})
	}
}
