package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/store"
)

// errNotCancelled: the command was not cancelled (it had started, finished, or is unknown); the
// message says which and what to do.
var errNotCancelled = errors.New("not cancelled")

// cmdCancel cancels a command that has not started yet (contract §10): it finds the command in
// the commands stream, then stores the outcome 410 command_cancelled under its identity, so
// that the replica that next takes it publishes that result and does nothing. A command that
// has started is finished, not cancelled; a read is not cancelled (it changes nothing). Without
// --nats-url and --redis-url it works on a running `proxbus dev`.
func cmdCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("cancel", stderr)
	natsURL := addNATSURLFlag(fs)
	natsSec := addNATSSecurityFlags(fs, app.InboxAdmin)
	subjectPrefix := addSubjectPrefixFlag(fs, "subject prefix")
	redisURL := fs.str("redis-url", app.DefaultRedisURL, "Redis URL of the store the replicas use")
	keyPrefix := addRedisKeyPrefixFlag(fs)
	source := fs.str("source", "urn:proxbus:cli", "the command's source (proxbus send's default)")
	actor := fs.str("actor", "", "who cancels it, recorded in the result's detail")
	id, err := fs.parseWithArg(args)
	if err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("%w: proxbus cancel ID [--source S]: the command id is required (proxbus send prints it)", errUsage)
	}
	fs.natsFromDev(stderr, natsURL, subjectPrefix)
	fs.redisFromDev(stderr, redisURL, keyPrefix)

	nc, js, err := app.ConnectClient(*natsURL, natsSec.security())
	if err != nil {
		return err
	}
	defer nc.Close()
	st, closeStore, err := openStore(*redisURL, *keyPrefix)
	if err != nil {
		return err
	}
	defer closeStore()

	follow := "proxbus events --id " + id
	subjects := events.NewSubjects(*subjectPrefix)
	cmd, err := app.FindQueued(ctx, js, subjects, *source, id)
	switch {
	case errors.Is(err, app.ErrNotQueued):
		return notQueued(ctx, st, *source, id, follow)
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
	if *actor != "" {
		detail = "cancelled by " + *actor + " with proxbus cancel before it started; nothing was done"
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
		return fmt.Errorf("%w: %s id=%s has started; a started command is finished, not cancelled (follow it: %s)", errNotCancelled, cmd.Verb, id, follow)
	}
	fmt.Fprintf(stdout, "cancelled %s id=%s: the replica that takes it answers 410 %s and does nothing\nfollow: %s\n",
		cmd.Verb, id, handlers.ReasonCommandCancelled, follow)
	return nil
}

// notQueued explains why a command that is not in the commands stream was not cancelled.
func notQueued(ctx context.Context, st *store.Store, source, id, follow string) error {
	state, _, err := st.Record(ctx, store.CommandKey{Source: source, ID: id})
	if err != nil {
		return err
	}
	switch state {
	case store.Finished:
		return fmt.Errorf("%w: %s had already finished (its result: %s)", errNotCancelled, id, follow)
	case store.Running:
		return fmt.Errorf("%w: %s has started; a started command is finished, not cancelled (follow it: %s)", errNotCancelled, id, follow)
	}
	return fmt.Errorf("%w: no queued command %s from source %s: check the id, and --source when another producer sent it (%s shows what happened to it)",
		errNotCancelled, id, source, follow)
}

// isRead reports whether verb is a read verb of the pipeline.
func isRead(verb string) bool {
	v, ok := handlers.NewRegistry(handlers.Builtin()...).Lookup(verb)
	return ok && v.VerbAccess() == handlers.Read
}
