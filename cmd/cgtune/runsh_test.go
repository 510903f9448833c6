package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// run.sh builds in the repository and runs cgtune where it was called
// from, so the paths a person gives (a recipe to check, --emit, the TUI's
// w and r) are where they stand; env.sh keeps Go's caches in cgtune's
// cache folder under the home folder whatever XDG_CACHE_HOME says, so a
// run with another XDG_CACHE_HOME does not build from cold. The repository
// here is a copy of the scripts with a stand-in go that "builds" a cgtune
// which reports where it runs and with what.
func TestRunShRunsWhereTheCallerStands(t *testing.T) {
	for _, tool := range []string{"bash", "gcc", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH (env.sh would install it)", tool)
		}
	}
	src, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	repo, caller, home, xdg, stub := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	copyFile(t, filepath.Join(src, "run.sh"), filepath.Join(repo, "run.sh"), 0o755)
	copyFile(t, filepath.Join(src, "scripts", "env.sh"), filepath.Join(repo, "scripts", "env.sh"), 0o755)
	copyFile(t, filepath.Join(src, "go.mod"), filepath.Join(repo, "go.mod"), 0o644)
	want := regexp.MustCompile(`(?m)^go ([0-9.]+)$`).FindStringSubmatch(readString(t, filepath.Join(repo, "go.mod")))
	if want == nil {
		t.Fatal("go.mod names no go version")
	}
	// The stand-in go answers env.sh's version question and writes a
	// cgtune that prints its folder, Go's caches and its arguments.
	goStub := `#!/usr/bin/env bash
case "$1" in
env) echo go` + want[1] + ` ;;
build) mkdir -p bin; printf '#!/usr/bin/env bash\necho "pwd=$PWD"; echo "gocache=$GOCACHE"; echo "gomodcache=$GOMODCACHE"; echo "args=$*"; test -f "$3" && echo "found=$3"\n' > bin/cgtune; chmod +x bin/cgtune ;;
esac
`
	if err := os.WriteFile(filepath.Join(stub, "go"), []byte(goStub), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(caller, "mine.yaml"), []byte("model: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(repo, "run.sh"), "check", "--model", "mine.yaml")
	cmd.Dir = caller
	cmd.Env = append(filteredEnv("GOCACHE", "GOMODCACHE", "HOME", "XDG_CACHE_HOME", "PATH"),
		"HOME="+home, "XDG_CACHE_HOME="+xdg, "PATH="+stub+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run.sh: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	callerReal, _ := filepath.EvalSymlinks(caller)
	if p, _ := filepath.EvalSymlinks(got["pwd"]); p != callerReal {
		t.Errorf("cgtune ran in %q, want the caller's folder %q\n%s", got["pwd"], caller, out)
	}
	if got["found"] != "mine.yaml" {
		t.Errorf("cgtune did not find mine.yaml where the caller stands\n%s", out)
	}
	cache := filepath.Join(home, ".cache", "cgtune")
	for _, k := range []string{"gocache", "gomodcache"} {
		if !strings.HasPrefix(got[k], cache+string(os.PathSeparator)) || strings.HasPrefix(got[k], xdg) {
			t.Errorf("%s = %q, want it under %s whatever XDG_CACHE_HOME (%s) says", k, got[k], cache, xdg)
		}
	}
	if _, err := os.Stat(filepath.Join(repo, "bin", "cgtune")); err != nil {
		t.Errorf("the build did not happen in the repository: %v", err)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, mode); err != nil {
		t.Fatal(err)
	}
}

func readString(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// filteredEnv is the environment without the named variables.
func filteredEnv(drop ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, d := range drop {
			keep = keep && k != d
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}
