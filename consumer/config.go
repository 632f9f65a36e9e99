package consumer

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/config"
)

// Defaults applied by [Config.WithDefaults].
const (
	DefaultDurable     = "proxbus"
	DefaultConcurrency = 8
	DefaultAckWait     = 30 * time.Second
	DefaultFetchWait   = 1 * time.Second
	// DefaultFetchBatch is FetchBatch when MaxAckPending is at most Concurrency (one replica,
	// the default): no message requested ahead can then wait for a worker, and the iterator
	// renews its pull request only after 32 messages.
	DefaultFetchBatch = 64
	// DefaultSharedFetchBatch is FetchBatch when MaxAckPending is above Concurrency (replicas
	// sharing the durable), where a message requested ahead may wait for a worker: it keeps
	// a pull request open while messages are handled (the iterator asks for more when fewer
	// than half are outstanding) and few messages waiting.
	DefaultSharedFetchBatch = 4
	DefaultReplicas         = 1
	DefaultDuplicateWindow  = 2 * time.Minute
	DefaultEventsMaxAge     = 7 * 24 * time.Hour
	DefaultDLQMaxAge        = 30 * 24 * time.Hour
)

// Config configures provisioning and the consumer. The zero value of every field means its
// documented default (the Default… constants; [Config.WithDefaults] returns the effective
// values). A negative number or duration, or a Heartbeat not shorter than AckWait, is refused
// by [New] and [ProvisionWith] with an error wrapping config.ErrInvalid that names the field.
type Config struct {
	// Subjects names every subject and stream; its Prefix must be set.
	Subjects events.Subjects
	// Durable is the durable consumer's name, shared by every replica. Default "proxbus".
	Durable string
	// Concurrency is how many messages this process handles at once: at most this many
	// Handle calls run at the same time. Default 8.
	Concurrency int
	// MaxAckPending is the consumer's MaxAckPending, shared by all replicas of the durable.
	// Default Concurrency. With N replicas set it to N*Concurrency, or the replicas together
	// never have more than Concurrency commands in flight (see FetchBatch for what a value
	// above Concurrency means for one replica).
	MaxAckPending int
	// FetchBatch is how many messages the consumer keeps requested ahead of its workers
	// (each pull request asks for this many; the server sends no more than MaxAckPending
	// allows). A message is taken from the iterator only when a worker is free; with
	// MaxAckPending at most Concurrency none ever waits for one, and the default is
	// [DefaultFetchBatch]. With MaxAckPending above Concurrency up to FetchBatch delivered
	// messages may wait for a worker of this replica without heartbeats (their AckWait runs),
	// so it is kept small there: default [DefaultSharedFetchBatch].
	FetchBatch int
	// FetchWait is how long the consumer waits for a message before it checks its health
	// again; a pull request lasts max(FetchWait, 1s). Default 1s.
	FetchWait time.Duration
	// AckWait is the consumer's ack wait. Default 30s.
	AckWait time.Duration
	// Heartbeat is the InProgress interval while a message is being handled; it must be
	// shorter than AckWait. Default AckWait/3.
	Heartbeat time.Duration
	// Replicas is the streams' replica count. Default 1.
	Replicas int
	// DuplicateWindow is the Nats-Msg-Id dedupe window of the commands, events and DLQ
	// streams. Default 2m.
	DuplicateWindow time.Duration
	// EventsMaxAge is the events stream's MaxAge. Default 7 days.
	EventsMaxAge time.Duration
	// DLQMaxAge is the dead-letter stream's MaxAge. Default 30 days.
	DLQMaxAge time.Duration
	// Instance identifies this process in logs.
	Instance string
	// Logger receives the consumer's logs. Default slog.Default().
	Logger *slog.Logger
	// Middleware wraps the handler, the first outermost (tracing, metrics). Each sees every
	// delivery of a decodable command and the disposition the consumer applies: a handler's
	// panic has become a Redeliver. Nil entries are skipped.
	Middleware []Middleware
	// DeadLettered, when set, is called once a dead-letter copy has been newly stored (not for
	// a copy another replica, or an earlier delivery, already stored) with the verb of the
	// message's subject ("" when it names none) and the reason. It must be fast and safe for
	// concurrent use.
	DeadLettered func(verb, reason string)
}

// WithDefaults returns a copy of c with every zero field set to its default. It never changes
// a field that is set, even to a value [New] refuses.
func (c Config) WithDefaults() Config {
	config.Default(&c.Durable, DefaultDurable)
	config.Default(&c.Concurrency, DefaultConcurrency)
	config.Default(&c.MaxAckPending, c.Concurrency)
	if c.FetchBatch == 0 {
		c.FetchBatch = DefaultFetchBatch
		if c.MaxAckPending > c.Concurrency {
			c.FetchBatch = DefaultSharedFetchBatch
		}
	}
	config.Default(&c.FetchWait, DefaultFetchWait)
	config.Default(&c.AckWait, DefaultAckWait)
	config.Default(&c.Heartbeat, c.AckWait/3)
	config.Default(&c.Replicas, DefaultReplicas)
	config.Default(&c.DuplicateWindow, DefaultDuplicateWindow)
	config.Default(&c.EventsMaxAge, DefaultEventsMaxAge)
	config.Default(&c.DLQMaxAge, DefaultDLQMaxAge)
	config.Default(&c.Logger, slog.Default())
	return c
}

// validate reports a configuration that cannot work; c has defaults applied.
func (c Config) validate() error {
	if c.Subjects.Prefix == "" {
		return fmt.Errorf("consumer: %w: Subjects.Prefix is empty", config.ErrInvalid)
	}
	if err := config.NonNegative("consumer",
		config.Named("Concurrency", c.Concurrency),
		config.Named("MaxAckPending", c.MaxAckPending),
		config.Named("FetchBatch", c.FetchBatch),
		config.Named("FetchWait", c.FetchWait),
		config.Named("AckWait", c.AckWait),
		config.Named("Heartbeat", c.Heartbeat),
		config.Named("Replicas", c.Replicas),
		config.Named("DuplicateWindow", c.DuplicateWindow),
		config.Named("EventsMaxAge", c.EventsMaxAge),
		config.Named("DLQMaxAge", c.DLQMaxAge),
	); err != nil {
		return err
	}
	if c.Heartbeat >= c.AckWait {
		return fmt.Errorf("consumer: %w: Heartbeat %s must be shorter than AckWait %s", config.ErrInvalid, c.Heartbeat, c.AckWait)
	}
	return nil
}

// pullExpiry is how long each pull request of the message iterator lasts: FetchWait, but at
// least the second nats.go requires. Missed server heartbeats are noticed within it.
func (c Config) pullExpiry() time.Duration { return max(c.FetchWait, time.Second) }
