package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/store"
)

// errNotCancelled: the command was not cancelled (it had started, finished, or is unknown); the
// message says which and what to do.
var errNotCancelled = errors.New("not cancelled")

// cancelCmd is `proxbus cancel ID` (contract §4 "Cancel", §10): it finds the command in the
// commands stream, then, when it has not started, stores the outcome 410 command_cancelled
// under its identity, so that the replica that next takes it publishes that result and does
// nothing. A started command whose verb can stop its Proxmox task (vm.backup, vm.migrate, vm.restore,
// vm.provision) has the replica running it stop the task (handlers.CancelCommand); any other
// started command is finished, not cancelled; a read is not cancelled (it changes nothing).
// Without --nats-url and --redis-url it works on a running `proxbus dev`.
type cancelCmd struct {
	ID     string `arg:"" optional:"" help:"The id of the command to cancel (proxbus send prints it)."`
	Source string `name:"source" default:"${default_source}" help:"The command's source (proxbus send's default)."`
	Actor  string `name:"actor" help:"Who cancels it, recorded in the result's detail."`
	Reason string `name:"reason" help:"Why, recorded in the result's detail."`
	natsFlags
	storeFlags
}

// Run cancels the command.
func (c *cancelCmd) Run(e *cliEnv) error {
	ctx, stdout := e.ctx, e.stdout
	id := c.ID
	if id == "" {
		return fmt.Errorf("%w: proxbus cancel ID [--source S]: the command id is required (proxbus send prints it)", errUsage)
	}
	e.redisFromDev(&c.RedisURL, &c.RedisKeyPrefix)
	client, err := e.connectNATS(&c.natsFlags, app.InboxAdmin)
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, js := client.ctx, client.js
	st, closeStore, err := openServedStore(ctx, e, &c.storeFlags)
	if err != nil {
		return err
	}
	defer closeStore()

	follow := "proxbus events --id " + id
	subjects := events.NewSubjects(c.SubjectPrefix)
	cmd, err := app.FindQueued(ctx, js, subjects, c.Source, id)
	switch {
	case errors.Is(err, app.ErrNotQueued):
		return c.notQueued(ctx, e, st, follow)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("%w: the commands stream %s does not exist, so nothing is queued (proxbus serve creates it; so does proxbus streams apply)",
			errNotCancelled, subjects.CommandsStream())
	case err != nil:
		return err
	}
	if cmd.Verb != "" && isRead(cmd.Verb) {
		return fmt.Errorf("%w: %s id=%s is a read: it changes nothing and runs as soon as a replica takes it", errNotCancelled, cmd.Verb, id)
	}
	detail := "cancelled with proxbus cancel before it started; nothing was done"
	if c.Actor != "" {
		detail = "cancelled by " + c.Actor + " with proxbus cancel before it started; nothing was done"
	}
	state, res, err := handlers.Cancel(ctx, st, cmd, detail)
	if err != nil {
		return err
	}
	switch {
	case state == store.Finished && res.Reason == handlers.ReasonCommandCancelled:
		fmt.Fprintf(stdout, "%s id=%s is already cancelled\nfollow: %s\n", cmd.Verb, id, follow)
		return nil
	case state == store.Finished:
		return fmt.Errorf("%w: %s id=%s had already finished: %d %s (%s)", errNotCancelled, cmd.Verb, id, res.Status, res.Result, follow)
	case state == store.Running:
		return c.cancelStarted(ctx, e, st, follow)
	}
	fmt.Fprintf(stdout, "cancelled %s id=%s: the replica that takes it answers 410 %s and does nothing\nfollow: %s\n",
		cmd.Verb, id, handlers.ReasonCommandCancelled, follow)
	return nil
}

// cancelStarted asks the replica running the command to stop its Proxmox task, where the
// command's verb can (handlers.CancelCommand), and says what was asked; otherwise the command is
// finished, not cancelled.
func (c *cancelCmd) cancelStarted(ctx context.Context, e *cliEnv, st *store.Store, follow string) error {
	by := cmp.Or(c.Actor, "proxbus cancel")
	out, err := handlers.CancelCommand(ctx, st, handlers.NewRegistry(handlers.Builtin()...), store.CommandKey{Source: c.Source, ID: c.ID}, by, c.Reason)
	if err != nil {
		return err
	}
	if out.Status >= 400 {
		return fmt.Errorf("%w: %s: %s (follow it: %s)", errNotCancelled, c.ID, out.Detail, follow)
	}
	fmt.Fprintf(e.stdout, "cancel requested for %s: %s\nfollow: %s\n", c.ID, out.Detail, follow)
	return nil
}

// notQueued explains why a command that is not in the commands stream was not cancelled, or
// cancels it when it has started (it is then still in the stream, unless its message was taken
// by a replica that holds it).
func (c *cancelCmd) notQueued(ctx context.Context, e *cliEnv, st *store.Store, follow string) error {
	id, source := c.ID, c.Source
	state, _, err := st.Record(ctx, store.CommandKey{Source: source, ID: id})
	if err != nil {
		return err
	}
	switch state {
	case store.Finished:
		return fmt.Errorf("%w: %s had already finished (its result: %s)", errNotCancelled, id, follow)
	case store.Running:
		return c.cancelStarted(ctx, e, st, follow)
	}
	return fmt.Errorf("%w: no queued command %s from source %s: check the id, and --source when another producer sent it (%s shows what happened to it)",
		errNotCancelled, id, source, follow)
}

// isRead reports whether verb is a read verb of the pipeline.
func isRead(verb string) bool {
	v, ok := handlers.NewRegistry(handlers.Builtin()...).Lookup(verb)
	return ok && v.VerbAccess() == handlers.Read
}
