package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"cgtune/presets"
)

// installRepo is a copy of run.sh and env.sh with a stand-in go whose
// build writes a cgtune that answers --version and records the build's
// flags; it returns the repository and the stand-in's folder.
func installRepo(t *testing.T) (repo, stub string) {
	t.Helper()
	for _, tool := range []string{"bash", "gcc", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH (env.sh would install it)", tool)
		}
	}
	src, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	repo, stub = t.TempDir(), t.TempDir()
	copyFile(t, filepath.Join(src, "run.sh"), filepath.Join(repo, "run.sh"), 0o755)
	copyFile(t, filepath.Join(src, "scripts", "env.sh"), filepath.Join(repo, "scripts", "env.sh"), 0o755)
	copyFile(t, filepath.Join(src, "go.mod"), filepath.Join(repo, "go.mod"), 0o644)
	want := regexp.MustCompile(`(?m)^go ([0-9.]+)$`).FindStringSubmatch(readString(t, filepath.Join(repo, "go.mod")))
	if want == nil {
		t.Fatal("go.mod names no go version")
	}
	goStub := `#!/usr/bin/env bash
case "$1" in
env) echo go` + want[1] + ` ;;
build) mkdir -p bin; echo "$*" > bin/build-args; printf '#!/usr/bin/env bash\necho "cgtune 0.1.0-test"\n' > bin/cgtune; chmod +x bin/cgtune ;;
esac
`
	if err := os.WriteFile(filepath.Join(stub, "go"), []byte(goStub), 0o755); err != nil {
		t.Fatal(err)
	}
	return repo, stub
}

// runInstall runs run.sh install with args in a fresh home whose PATH is
// the stand-in go's folder, extra and the system's.
func runInstall(t *testing.T, repo, stub, home string, extraPath string, args ...string) (string, error) {
	t.Helper()
	path := stub + string(os.PathListSeparator) + os.Getenv("PATH")
	if extraPath != "" {
		path = extraPath + string(os.PathListSeparator) + path
	}
	cmd := exec.Command(filepath.Join(repo, "run.sh"), append([]string{"install"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(filteredEnv("GOCACHE", "GOMODCACHE", "HOME", "XDG_CACHE_HOME", "PATH"), "HOME="+home, "PATH="+path)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ./run.sh install builds and puts cgtune in ~/.local/bin, or DIR/bin with
// --prefix, says where and whether that folder is on PATH, passes the
// revision to the build, and never replaces a program that is no cgtune.
func TestRunShInstall(t *testing.T) {
	repo, stub := installRepo(t)
	home := t.TempDir()
	out, err := runInstall(t, repo, stub, home, "")
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	dest := filepath.Join(home, ".local", "bin", "cgtune")
	if got, err := exec.Command(dest, "--version").Output(); err != nil || !strings.HasPrefix(string(got), "cgtune ") {
		t.Fatalf("%s --version: %v %q", dest, err, got)
	}
	for _, want := range []string{"installed cgtune to " + dest, filepath.Dir(dest) + " is not on PATH", "export PATH="} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q:\n%s", want, out)
		}
	}
	if args := readString(t, filepath.Join(repo, "bin", "build-args")); !strings.Contains(args, "-X main.revision=") {
		t.Errorf("the build was not given the revision: go %s", args)
	}

	// On PATH it says so; installing again replaces its own cgtune.
	out, err = runInstall(t, repo, stub, home, filepath.Dir(dest))
	if err != nil || !strings.Contains(out, filepath.Dir(dest)+" is on PATH") {
		t.Errorf("install again with the folder on PATH: %v\n%s", err, out)
	}

	prefix := filepath.Join(t.TempDir(), "opt")
	out, err = runInstall(t, repo, stub, home, "", "--prefix", prefix)
	if err != nil || !strings.Contains(out, "installed cgtune to "+filepath.Join(prefix, "bin", "cgtune")) {
		t.Errorf("install --prefix: %v\n%s", err, out)
	}

	// Someone else's program of that name stays.
	other := filepath.Join(t.TempDir(), "other")
	foreign := filepath.Join(other, "bin", "cgtune")
	if err := os.MkdirAll(filepath.Dir(foreign), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(foreign, []byte("#!/bin/sh\necho not mine\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = runInstall(t, repo, stub, home, "", "--prefix", other)
	if err == nil || !strings.Contains(out, foreign+" exists and is not a cgtune") {
		t.Errorf("install over a foreign program: %v\n%s", err, out)
	}
	if readString(t, foreign) != "#!/bin/sh\necho not mine\n" {
		t.Error("the foreign program was replaced")
	}
	if out, err := runInstall(t, repo, stub, home, "", "--prefxi", other); err == nil || !strings.Contains(out, "unknown argument --prefxi") {
		t.Errorf("install with a misspelt flag: %v\n%s", err, out)
	}
}

// cgtune version and --version print the same: cgtune's version with the
// revision it was built from, the Go it was built with and every
// Megatron-Bridge version it knows with its generation.
func TestVersion(t *testing.T) {
	defer func(r string) { revision = r }(revision)
	revision = "0123456789ab-dirty"
	code, out, errb := cgtune(t, "version")
	if code != exitOK {
		t.Fatalf("version: exit %d %s", code, errb)
	}
	want := []string{"cgtune " + version + " (revision 0123456789ab-dirty)", runtime.Version(), "default " + presets.DefaultMBridge}
	for _, v := range presets.MBridgeVersions {
		gen, _ := presets.ParseMBridge(v)
		want = append(want, v+" ("+gen.String()+")")
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("version lacks %q:\n%s", w, out)
		}
	}
	if code, flag, _ := cgtune(t, "--version"); code != exitOK || flag != out {
		t.Errorf("--version: exit %d\n%s\nwant\n%s", code, flag, out)
	}
}
