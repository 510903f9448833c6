// Command genpresets writes cgtune's built-in model presets
// (presets/models/*.yaml) from the recorded dumps of Megatron-Bridge's
// perf recipes (presets/testdata/mbrecipes, tools/mbrecipes/dump.py):
//
//	go run ./tools/genpresets            # write presets/models
//	go run ./tools/genpresets -check     # exit 1 when they differ
//
// docs/mb-generator.md says how to regenerate for a new MB release.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"cgtune/internal/fileio"
	"cgtune/presets"
)

func main() {
	dumps := flag.String("dumps", "presets/testdata/mbrecipes", "folder of the recipe dumps and their index.yaml")
	out := flag.String("out", "presets/models", "folder of the model presets")
	check := flag.Bool("check", false, "compare with the files in -out instead of writing them; exit 1 when they differ")
	flag.Parse()
	files, err := generate(*dumps)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genpresets:", err)
		os.Exit(2)
	}
	if *check {
		if diff := compare(*out, files); len(diff) > 0 {
			for _, d := range diff {
				fmt.Fprintln(os.Stderr, "genpresets:", d)
			}
			os.Exit(1)
		}
		fmt.Printf("%d model presets in %s match the dumps\n", len(files), *out)
		return
	}
	if err := write(*out, files); err != nil {
		fmt.Fprintln(os.Stderr, "genpresets:", err)
		os.Exit(2)
	}
	fmt.Printf("wrote %d model presets to %s\n", len(files), *out)
}

// compare lists how out's model files differ from files.
func compare(out string, files map[string][]byte) []string {
	var diff []string
	have, _ := filepath.Glob(filepath.Join(out, "*.yaml"))
	for _, p := range have {
		if _, ok := files[filepath.Base(p)]; !ok {
			diff = append(diff, fmt.Sprintf("%s: no selected recipe generates it", p))
		}
	}
	for _, name := range slices.Sorted(mapKeys(files)) {
		p := filepath.Join(out, name)
		data, err := fileio.ReadFileLimited(p, presets.MaxYAMLBytes)
		switch {
		case err != nil:
			diff = append(diff, fmt.Sprintf("%s: %v", p, err))
		case !bytes.Equal(data, files[name]):
			diff = append(diff, fmt.Sprintf("%s differs from what the dumps generate (go run ./tools/genpresets)", p))
		}
	}
	return diff
}
