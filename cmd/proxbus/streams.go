package main

import (
	"errors"
	"fmt"
	"github.com/proxbus/proxbus/internal/app"
	"time"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
)

// streamsCmd is `proxbus streams apply`: it applies the stream and consumer configuration (what serve does at start) and
// prints each setting it changed (old → new), or "created" or "unchanged" per object. It
// never lowers the durable's MaxAckPending or a stream's replica count that were not given
// (flag or environment): it refuses, naming the server's value and the flag to pass. Without
// --nats-url it works on a running `proxbus dev` (see [cliEnv.natsFromDev]).
type streamsCmd struct {
	Apply streamsApplyCmd `cmd:"" help:"Create or update the streams and the consumer (what serve does at start)."`
}

// streamsApplyCmd is `proxbus streams apply`.
type streamsApplyCmd struct {
	Concurrency    int           `name:"concurrency" default:"${concurrency}" help:"Commands one replica processes at once (the default of --max-ack-pending)."`
	MaxAckPending  int           `name:"max-ack-pending" default:"0" help:"Commands in flight across all replicas, the durable's MaxAckPending (0: --concurrency; with N replicas use N×concurrency)."`
	StreamReplicas int           `name:"stream-replicas" default:"${stream_replicas}" help:"Replica count of the streams (3 on a clustered broker)."`
	AckWait        time.Duration `name:"ack-wait" default:"${ack_wait}" help:"The consumer's AckWait (as serve's --ack-wait)."`
	natsFlags
}

// Run applies the configuration.
func (c *streamsApplyCmd) Run(e *cliEnv) error {
	ctx, stdout := e.ctx, e.stdout
	if err := e.problems(e.intIn("concurrency", c.Concurrency, 1, maxConcurrency), e.intIn("stream-replicas", c.StreamReplicas, 1, maxStreamReplicas),
		e.intIn("max-ack-pending", c.MaxAckPending, 0, maxMaxAckPending), e.durationIn("ack-wait", c.AckWait, minAckWait, maxAckWait)); err != nil {
		return err
	}
	client, err := e.connectNATS(&c.natsFlags, app.InboxService)
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, js := client.ctx, client.js
	if err := consumer.CheckServerVersion(js.Conn().ConnectedServerVersion()); err != nil {
		return err
	}
	cfg := consumer.Config{
		Subjects: events.NewSubjects(c.SubjectPrefix), Concurrency: c.Concurrency, MaxAckPending: c.MaxAckPending,
		Replicas: c.StreamReplicas, AckWait: c.AckWait,
	}.WithDefaults()
	opts := consumer.ProvisionOptions{MaxAckPending: consumer.RefuseLower, Replicas: consumer.RefuseLower}
	if e.explicit("max-ack-pending") {
		opts.MaxAckPending = consumer.AllowLower
	}
	if e.explicit("stream-replicas") {
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
