package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
)

// cmdStreams applies the stream and consumer configuration (what serve does at start) and
// prints each setting it changed (old → new), or "created" or "unchanged" per object. It
// never lowers the durable's MaxAckPending or a stream's replica count that were not given
// (flag or environment): it refuses, naming the server's value and the flag to pass. Without
// --nats-url it works on a running `proxbus dev` (see [flagSet.natsFromDev]).
func cmdStreams(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "apply" {
		return fmt.Errorf("%w: proxbus streams apply", errUsage)
	}
	fs := newFlagSet("streams apply", stderr)
	natsURL := addNATSURLFlag(fs)
	natsSec := addNATSSecurityFlags(fs, app.InboxService)
	prefix := addSubjectPrefixFlag(fs, "subject prefix")
	concurrency := fs.intIn("concurrency", consumer.DefaultConcurrency, 1, maxConcurrency, "commands one replica processes at once (the default of --max-ack-pending)")
	maxAckPending := addMaxAckPendingFlag(fs)
	replicas := fs.intIn("stream-replicas", consumer.DefaultReplicas, 1, maxStreamReplicas, "replica count of the streams (3 on a clustered broker)")
	ackWait := fs.durationIn("ack-wait", consumer.DefaultAckWait, minAckWait, maxAckWait, "the consumer's AckWait (as serve's --ack-wait)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: streams apply takes no arguments (got %v)", errUsage, fs.Args())
	}
	if err := fs.problems(); err != nil {
		return err
	}
	fs.natsFromDev(stderr, natsURL, prefix)
	nc, js, err := app.ConnectClient(*natsURL, natsSec.security())
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg := consumer.Config{
		Subjects: events.NewSubjects(*prefix), Concurrency: *concurrency, MaxAckPending: *maxAckPending,
		Replicas: *replicas, AckWait: *ackWait,
	}.WithDefaults()
	opts := consumer.ProvisionOptions{MaxAckPending: consumer.RefuseLower, Replicas: consumer.RefuseLower}
	if fs.explicit("max-ack-pending") {
		opts.MaxAckPending = consumer.AllowLower
	}
	if fs.explicit("stream-replicas") {
		opts.Replicas = consumer.AllowLower
	}
	changes, err := consumer.ProvisionWith(ctx, js, cfg, opts)
	for _, c := range changes {
		fmt.Fprintln(stdout, c)
	}
	if errors.Is(err, consumer.ErrWouldLower) {
		return lowerHint(err)
	}
	return err
}

// lowerHint rewrites ProvisionWith's refusals into one usage error per setting naming the
// flag that keeps the server's value and the one that lowers it.
func lowerHint(err error) error {
	var hints []error
	var walk func(error)
	walk = func(err error) {
		var le *consumer.LowerError
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if !errors.As(err, &le) {
			hints = append(hints, err)
			return
		}
		flagName := "--stream-replicas"
		if le.Setting == "MaxAckPending" {
			flagName = "--max-ack-pending"
		}
		hints = append(hints, fmt.Errorf("%w; pass %s %d to keep it, or %s %d to lower it", le, flagName, le.Current, flagName, le.Requested))
	}
	walk(err)
	return &flagErrors{errs: hints}
}
