// Command refit fits a framework profile again from the runs that
// `cgtune probe --framework` printed, with the Fit of this cgtune, and
// saves it in a profile cache: a profile measured on the GPU machine before
// a change to the fit can be compared again without the GPU.
//
//	refit --probe-output profile-dense.txt --profile old.json --cache DIR
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"cgtune/engine/megatron"
	"cgtune/internal/fileio"
	"cgtune/stepmodel"
)

func main() {
	text := flag.String("probe-output", "", "what cgtune probe --framework printed")
	old := flag.String("profile", "", "the profile file that probe saved")
	cache := flag.String("cache", "", "profile cache folder to save the re-fitted profile in")
	flag.Parse()
	if err := run(*text, *old, *cache); err != nil {
		fmt.Fprintln(os.Stderr, "refit:", err)
		os.Exit(1)
	}
}

func run(textPath, oldPath, cache string) error {
	if textPath == "" || oldPath == "" || cache == "" {
		return fmt.Errorf("give --probe-output, --profile and --cache")
	}
	text, err := fileio.ReadFileLimited(textPath, 256<<20)
	if err != nil {
		return err
	}
	data, err := fileio.ReadFileLimited(oldPath, 256<<20)
	if err != nil {
		return err
	}
	var old stepmodel.FrameworkProfile // any version: only its key, source, spreads and collectives are kept
	if err := json.Unmarshal(data, &old); err != nil {
		return fmt.Errorf("%s: %w", oldPath, err)
	}
	p, err := megatron.Refit(string(text), &old)
	if err != nil {
		return fmt.Errorf("%s: %w", textPath, err)
	}
	path, err := stepmodel.SaveProfile(cache, p)
	if err != nil {
		return err
	}
	fmt.Println("saved", path)
	return nil
}
