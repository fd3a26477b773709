// Package version holds the build stamp printed by `opx version`.
package version

import "runtime/debug"

// Version and Commit are set at link time by the release target
// (-ldflags "-X github.com/semianalysis/opx/internal/version.Version=...").
var (
	Version = "dev"
	Commit  = ""
)

// String is "opx <version> (<commit>)".
func String() string {
	commit := Commit
	if commit == "" {
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, s := range info.Settings {
				if s.Key == "vcs.revision" {
					commit = s.Value
				}
			}
		}
	}
	if commit == "" {
		commit = "unknown commit"
	}
	return "opx " + Version + " (" + commit + ")"
}
