package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"cgtune/presets"
)

// revision is the source revision cgtune was built from; run.sh sets it
// with -ldflags "-X main.revision=..." (git's commit, "-dirty" when the
// checkout had changes). Without it the revision Go stamps into the
// binary (debug.ReadBuildInfo, when built with VCS stamping) is used.
var revision = ""

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print cgtune's version and revision, the Go it was built with and the Megatron-Bridge versions it knows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionText())
			return err
		},
	}
}

// versionText is what cgtune version and cgtune --version print.
func versionText() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cgtune %s", version)
	if rev := buildRevision(); rev != "" {
		fmt.Fprintf(&b, " (revision %s)", rev)
	}
	fmt.Fprintf(&b, "\n%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	var mbs []string
	for _, v := range presets.MBridgeVersions {
		gen, _ := presets.ParseMBridge(v)
		mbs = append(mbs, fmt.Sprintf("%s (%s)", v, gen))
	}
	fmt.Fprintf(&b, "Megatron-Bridge: %s; default %s\n", strings.Join(mbs, ", "), presets.DefaultMBridge)
	return b.String()
}

// buildRevision is revision, else the VCS revision in the binary's build
// information ("" when it has none).
func buildRevision() string {
	if revision != "" {
		return revision
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && modified == "true" {
		rev += "-dirty"
	}
	return rev
}
