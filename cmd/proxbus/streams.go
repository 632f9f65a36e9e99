package main

import (
	"context"
	"fmt"
	"io"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
)

// cmdStreams applies the stream and consumer configuration (what serve does at start).
func cmdStreams(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "apply" {
		return fmt.Errorf("%w: proxbus streams apply", errUsage)
	}
	fs := newFlagSet("streams apply", stderr)
	natsURL := fs.str("nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	natsSec := addNATSSecurityFlags(fs)
	prefix := fs.str("subject-prefix", "proxbus", "subject prefix")
	concurrency := fs.integer("concurrency", 8, "MaxAckPending of the consumer")
	replicas := fs.integer("stream-replicas", 1, "replica count of the streams (3 on a clustered broker)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	nc, js, err := app.ConnectClient(*natsURL, natsSec.security())
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg := consumer.Config{Subjects: events.NewSubjects(*prefix), Concurrency: *concurrency, Replicas: *replicas}.WithDefaults()
	if err := consumer.Provision(ctx, js, cfg); err != nil {
		return err
	}
	for _, sc := range consumer.StreamConfigs(cfg) {
		fmt.Fprintf(stdout, "stream %s: %v (replicas %d)\n", sc.Name, sc.Subjects, sc.Replicas)
	}
	fmt.Fprintf(stdout, "consumer %s on %s\n", cfg.Durable, cfg.Subjects.CommandsStream())
	return nil
}
