// Package buildinfo says which build of proxbus is running: its version and the commit it was
// built from, for `proxbus version` and the proxbus_build_info metric.
//
// A build in a git clone carries both in the binary's build information (Go's VCS stamping; not
// in a git worktree, whose .git is a file). A version and commit given with -ldflags
// "-X github.com/proxbus/proxbus/internal/buildinfo.version=… -X ….commit=…", as
// deploy/package's release build does, take precedence.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// version and commit are set with -ldflags "-X github.com/proxbus/proxbus/internal/buildinfo.version=…"
// (and ….commit=…, 12 hex digits and "+dirty" for a modified tree); each, when set, replaces
// what the build information says.
var version, commit = "", ""

// Info is what a binary says about its build.
type Info struct {
	// Version is the module version (`go install …@v1.2.3`, or a pseudo-version naming the
	// commit for a build in a checkout), the -X version, or "devel".
	Version string
	// Commit is the VCS revision (12 hex digits, "+dirty" for a modified tree), "" when
	// the build recorded none.
	Commit string
	// Time is the commit's time (RFC 3339), "" when unknown.
	Time string
}

// Read returns the running binary's [Info].
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{}
	}
	i := FromBuildInfo(bi)
	if version != "" {
		i.Version = version
	}
	if commit != "" {
		i.Commit = commit
	}
	return i
}

// FromBuildInfo is [Read] from bi, without the -X version.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	i := Info{Version: bi.Main.Version}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Commit = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if i.Version == "" || i.Version == "(devel)" {
		i.Version = "devel"
	}
	if len(i.Commit) > 12 {
		i.Commit = i.Commit[:12]
	}
	if dirty && i.Commit != "" {
		i.Commit += "+dirty"
	}
	return i
}

// String is the version line of `proxbus version`: the version, with the commit unless the
// version names it already (a Go pseudo-version), and the commit's time.
func (i Info) String() string {
	rev, _, _ := strings.Cut(i.Commit, "+")
	switch {
	case i.Commit == "":
		return i.Version
	case strings.Contains(i.Version, rev):
		if i.Time == "" {
			return i.Version
		}
		return fmt.Sprintf("%s (%s)", i.Version, i.Time)
	case i.Time != "":
		return fmt.Sprintf("%s (commit %s, %s)", i.Version, i.Commit, i.Time)
	default:
		return fmt.Sprintf("%s (commit %s)", i.Version, i.Commit)
	}
}
