package wholemodel

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"strings"

	"cgtune/internal/fileio"
)

// EachLine calls each with every line of a bench's JSON-lines output at
// path (gzip-compressed where it ends in .gz), stopping at its first error.
func EachLine(path string, each func(line []byte) error) error {
	f, err := fileio.OpenFileLimited(path, fileio.Unbounded)
	if err != nil {
		return err
	}
	defer f.Close()
	var in io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		if in, err = gzip.NewReader(f); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if err := each(sc.Bytes()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// ShapeName is a case's name in the benches' tables: with the allocator
// configuration it ran with where the name does not say it.
func ShapeName(name string, env map[string]string) string {
	if v := env["PYTORCH_CUDA_ALLOC_CONF"]; v != "" && !strings.Contains(name, "expandable") {
		name += " (" + v + ")"
	}
	return name
}
