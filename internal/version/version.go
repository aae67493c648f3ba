// Package version tells which build of vkcounter is running: the module
// version and the VCS revision Go stamps into the binary, or the version a
// release build sets with -ldflags.
package version

import (
	"fmt"
	"runtime/debug"
)

// Stamp, when set at link time
// (-ldflags "-X github.com/vkcounter/vkcounter/internal/version.Stamp=v1.2.3"),
// is the version reported instead of the module version; container builds,
// which have no VCS metadata, use it.
var Stamp string

// Info is what the binary knows about its own build.
type Info struct {
	Version   string // Stamp, or the main module's version ("(devel)" for a local build)
	Revision  string // VCS revision, empty if unknown
	Time      string // VCS commit time (RFC 3339), empty if unknown
	Modified  bool   // built from a work tree with uncommitted changes
	GoVersion string // the Go toolchain that built it
}

// Get reads the build information of the running binary.
func Get() Info {
	info := Info{Version: "(devel)"}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		info.GoVersion = bi.GoVersion
		if bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.time":
				info.Time = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if Stamp != "" {
		info.Version = Stamp
	}
	return info
}

// String is one line: version, revision (with "+dirty" when modified),
// commit time and Go version, leaving out what is unknown.
func (i Info) String() string {
	s := "vkcounter " + i.Version
	if i.Revision != "" {
		rev := i.Revision
		if i.Modified {
			rev += "+dirty"
		}
		s += " revision " + rev
	}
	if i.Time != "" {
		s += " built from a commit of " + i.Time
	}
	if i.GoVersion != "" {
		s += fmt.Sprintf(" (%s)", i.GoVersion)
	}
	return s
}
