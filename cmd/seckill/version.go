package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// printVersion writes the module version and the VCS revision, time and
// modified flag stamped into the binary ("unknown" without them: go run,
// or a build outside a checkout).
func printVersion(w io.Writer) error {
	version, revision, when, modified := "unknown", "unknown", "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	_, err := fmt.Fprintf(w, "seckill %s\n  revision: %s\n  time:     %s\n  modified: %s\n  go:       %s %s/%s\n",
		version, revision, when, modified, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
