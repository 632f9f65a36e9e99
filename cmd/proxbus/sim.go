package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// cmdSim runs one simulator on its own until interrupted.
func cmdSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "pve" && args[0] != "netbox") {
		return fmt.Errorf("%w: proxbus sim pve|netbox [--addr HOST:PORT] [--scenario demo]", errUsage)
	}
	which := args[0]
	fs := newFlagSet("sim "+which, stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	scenario := fs.String("scenario", "demo", "demo, or empty for an empty cluster")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	h, err := logHandler(stderr, "auto", "info")
	if err != nil {
		return err
	}
	log := slog.New(h)
	type server interface {
		Start(addr string) (string, error)
		Close() error
	}
	var srv server
	if which == "pve" {
		srv = simpve.New(simpve.Options{Scenario: *scenario, Logger: log})
	} else {
		srv = simnetbox.New(simnetbox.Options{Scenario: *scenario, Logger: log})
	}
	url, err := srv.Start(*addr)
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintf(stdout, "%s\nready\n", url)
	<-ctx.Done()
	return nil
}
