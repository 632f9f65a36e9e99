package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// simCmd is `proxbus sim pve|netbox`: one simulator on its own until interrupted.
type simCmd struct {
	PVE    simOneCmd `cmd:"" name:"pve" help:"The Proxmox VE API simulator."`
	NetBox simOneCmd `cmd:"" name:"netbox" help:"The NetBox API simulator."`
}

// simOneCmd is one simulator's flags.
type simOneCmd struct {
	Addr     string `name:"addr" default:"127.0.0.1:0" help:"Listen address."`
	Scenario string `name:"scenario" default:"demo" help:"demo, or empty for an empty cluster."`
	// TaskDuration applies to sim pve only.
	TaskDuration time.Duration `name:"task-duration" default:"0s" help:"sim pve: how long each simulated task runs (0: 50ms), e.g. 30s to watch a progress bar."`
}

// cmdSim runs `proxbus sim args`.
func cmdSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runSub(ctx, []string{"sim"}, args, nil, stdout, stderr)
}

// Run runs the simulator until interrupted.
func (c *simOneCmd) Run(e *cliEnv) error {
	ctx, stdout, stderr := e.ctx, e.stdout, e.stderr
	which := strings.Fields(e.command)[1]
	if err := e.problems(e.durationIn("task-duration", c.TaskDuration, 0, maxTaskDuration)); err != nil {
		return err
	}
	if which != "pve" && c.TaskDuration != 0 {
		return fmt.Errorf("%w: --task-duration is for sim pve (NetBox has no tasks)", errUsage)
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
		srv = simpve.New(simpve.Options{Scenario: c.Scenario, Logger: log, TaskDuration: c.TaskDuration})
	} else {
		srv = simnetbox.New(simnetbox.Options{Scenario: c.Scenario, Logger: log})
	}
	url, err := srv.Start(c.Addr)
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintf(stdout, "%s\nready\n", url)
	<-ctx.Done()
	return nil
}
