// Command proxbus drives Proxmox VE from NATS JetStream: `proxbus serve` runs the processor,
// `proxbus dev` runs everything on embedded defaults, and the other subcommands publish
// commands, tail events and manage dead letters and streams (contract §10). The command line
// is built with alecthomas/kong from the structs of cli.go.
package main

import (
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/lmittmann/tint"
)

// version is set with -ldflags "-X main.version=…"; otherwise the build info is used.
var version = ""

// versionString is the version: -X main.version, else the module version of the build
// (`go install …@v1.2.3`), with the VCS revision and time the binary was built from
// (`go build` and `go install ./cmd/proxbus` in a checkout), "+dirty" when it had changes.
func versionString() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	return buildVersion(bi)
}

// buildVersion is [versionString] from bi.
func buildVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	var rev, at string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	if rev == "" {
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if strings.Contains(v, rev) { // Go 1.24+: a pseudo-version that names the commit already
		if at == "" {
			return v
		}
		return fmt.Sprintf("%s (%s)", v, at)
	}
	if dirty {
		rev += "+dirty"
	}
	if at != "" {
		return fmt.Sprintf("%s (commit %s, %s)", v, rev, at)
	}
	return fmt.Sprintf("%s (commit %s)", v, rev)
}

// logHandler is tint on a terminal and JSON otherwise, unless format says which.
func logHandler(w io.Writer, format, level string) (slog.Handler, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w: --log-level %q", errUsage, level)
	}
	switch format {
	case "", "auto":
		if isTerminal(w) {
			return tint.NewTextHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly}), nil
		}
		return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl}), nil
	case "json":
		return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl}), nil
	case "text":
		return tint.NewTextHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly, NoColor: true}), nil
	default:
		return nil, fmt.Errorf("%w: --log-format must be auto, json or text", errUsage)
	}
}
