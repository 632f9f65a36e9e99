package consumer

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamConfigs returns the configurations [Provision] applies, in order: the commands stream
// (WorkQueue, file, Nats-Msg-Id dedupe over DuplicateWindow), the events stream (Limits,
// file, MaxAge EventsMaxAge) and the dead-letter stream (Limits, file, MaxAge DLQMaxAge), as
// contract §1 specifies. Defaults are applied to cfg first.
func StreamConfigs(cfg Config) []jetstream.StreamConfig {
	cfg = cfg.WithDefaults()
	s := cfg.Subjects
	return []jetstream.StreamConfig{
		{
			Name:        s.CommandsStream(),
			Description: "proxbus commands (CloudEvents), consumed once by the proxbus durable",
			Subjects:    []string{s.CommandsFilter()},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
			Duplicates:  cfg.DuplicateWindow,
		},
		{
			Name:        s.EventsStream(),
			Description: "proxbus step, result and journal events",
			Subjects:    []string{s.EventsFilter()},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
			MaxAge:      cfg.EventsMaxAge,
			Duplicates:  cfg.DuplicateWindow,
		},
		{
			Name:        s.DLQStream(),
			Description: "proxbus dead letters, secrets redacted",
			Subjects:    []string{s.DLQFilter()},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
			MaxAge:      cfg.DLQMaxAge,
			Duplicates:  cfg.DuplicateWindow,
		},
	}
}

// ConsumerConfig returns the durable pull consumer's configuration: explicit acks, deliver
// all, AckWait, MaxAckPending, filtered on the command subjects, MaxDeliver -1 (unlimited:
// deliveries are not attempts, see the package doc) and no BackOff (a BackOff would replace
// AckWait and naks ignore it; redeliveries use NakWithDelay instead). Defaults are applied to
// cfg first.
func ConsumerConfig(cfg Config) jetstream.ConsumerConfig {
	cfg = cfg.WithDefaults()
	return jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		Description:   "proxbus command processors",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: cfg.MaxAckPending,
		FilterSubject: cfg.Subjects.CommandsFilter(),
	}
}

// Provision creates or updates the three streams of contract §1 and the durable pull consumer.
// It is idempotent: running it twice, or against an older configuration, converges on
// [StreamConfigs] and [ConsumerConfig]; a durable created with a delivery limit loses it. It returns ErrInvalidConfig (wrapped) for an unusable
// cfg, or the first JetStream error, wrapped with the stream or consumer name; a change the
// server refuses (e.g. a different retention policy on an existing stream) is such an error.
func Provision(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	for _, sc := range StreamConfigs(cfg) {
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("provision stream %s: %w", sc.Name, err)
		}
	}
	cc := ConsumerConfig(cfg)
	if _, err := js.CreateOrUpdateConsumer(ctx, cfg.Subjects.CommandsStream(), cc); err != nil {
		return fmt.Errorf("provision consumer %s on %s: %w", cc.Durable, cfg.Subjects.CommandsStream(), err)
	}
	return nil
}
