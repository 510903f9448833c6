package fileio

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cgtune/internal/fileio/fileiotest"
)

// ReadFileLimited refuses a FIFO and a character device such as
// /dev/zero, naming them, instead of blocking or growing without end.
func TestReadFileLimitedNeverHangs(t *testing.T) {
	for kind, p := range fileiotest.Hostile(t, t.TempDir()) {
		want := fileiotest.Refusal(kind)
		var err error
		fileiotest.Within(t, p, func() { _, err = ReadFileLimited(p, 4<<20) }) // 4 MiB: presets.MaxYAMLBytes
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", kind, err)
		}
	}
	ok := filepath.Join(t.TempDir(), "ok.yaml")
	must(t, os.WriteFile(ok, []byte("a: 1\n"), 0o644))
	if data, err := ReadFileLimited(ok, 5); err != nil || string(data) != "a: 1\n" {
		t.Errorf("a file of exactly the limit: %q %v", data, err)
	}
	if _, err := ReadFileLimited(ok, 4); err == nil || !strings.Contains(err.Error(), "larger than 4 bytes") {
		t.Errorf("a file over the limit: %v", err)
	}
}
