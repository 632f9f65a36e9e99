// Command proxbus drives Proxmox VE from NATS JetStream: `proxbus serve` runs the processor,
// `proxbus dev` runs everything on embedded defaults, and the other subcommands publish
// commands, tail events and manage dead letters and streams (contract §10). The command line
// is built with alecthomas/kong from the structs of cli.go.
package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/lmittmann/tint"

	"github.com/proxbus/proxbus/internal/buildinfo"
)

// versionString is the version line of `proxbus version` (internal/buildinfo).
func versionString() string { return buildinfo.Read().String() }

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
