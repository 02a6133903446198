package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
	"github.com/vigildb/vigil"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise
// it is the release the source is (vigil.Version), or the module version
// when the binary was built from a published module.
var version = ""

// versionString is "vigil <release> [<commit>[+dirty]] <go> <os>/<arch>":
// the commit from the build's VCS stamp, when there is one.
func versionString() string {
	v, rev := version, ""
	if v == "" {
		v = vigil.Version
		if bi, ok := debug.ReadBuildInfo(); ok {
			if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				v = bi.Main.Version
			}
			rev = vcsRevision(bi)
		}
	}
	return fmt.Sprintf("vigil %s%s %s %s/%s", v, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// vcsRevision returns " <12-hex commit>[+dirty]" from the build info, or ""
// when the binary has no VCS stamp (go run, go test).
func vcsRevision(bi *debug.BuildInfo) string {
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	if rev == "" {
		return ""
	}
	return " " + rev[:min(12, len(rev))] + dirty
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of vigil",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), versionString())
		},
	}
}
