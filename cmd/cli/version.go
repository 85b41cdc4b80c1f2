package cli

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// version is set at link time (-ldflags "-X github.com/personaq/personaq/cmd/cli.version=v1.2.3");
// empty, it is read from the build information.
var version string

// Version describes this build: the release, or the module version and
// VCS revision Go recorded, and the Go and NATS client versions that
// matter when reporting a problem.
func Version() string {
	v, rev, dirty := version, "", false
	info, ok := debug.ReadBuildInfo()
	if ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	out := v
	if rev != "" && !strings.Contains(v, rev[:min(12, len(rev))]) {
		out += " " + rev[:min(12, len(rev))]
		if dirty {
			out += "-dirty"
		}
	}
	if ok {
		out += fmt.Sprintf(" (%s", info.GoVersion)
		for _, d := range info.Deps {
			if d.Path == "github.com/nats-io/nats.go" {
				out += ", nats.go " + d.Version
			}
		}
		out += ")"
	}
	return out
}
