package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/netbox"
	"github.com/proxbus/proxbus/proxmox"
	"github.com/proxbus/proxbus/store"
)

// Publisher publishes a prepared event and returns once the stream has stored it. ev is the
// value m was built from (an events.Step, events.Result or events.JournalRepaired), for
// observers of the publication that would otherwise decode m.
type Publisher interface {
	PublishEvent(ctx context.Context, m *nats.Msg, ev any) error
}

// EndpointLookup answers the gate's question about a ProxmoxEndpoint (a cache in front of NetBox).
type EndpointLookup interface {
	Endpoint(ctx context.Context, id int64) (netbox.Endpoint, error)
}

// JournalWriter writes and finds NetBox journal entries and finds the NetBox VM a guest's entries
// go on.
type JournalWriter interface {
	CreateJournalEntry(ctx context.Context, e netbox.JournalEntry) (netbox.JournalRef, error)
	UpdateJournalEntry(ctx context.Context, id int64, kind netbox.Kind, comments string) error
	VMsByProxmoxID(ctx context.Context, vmid int64) ([]netbox.VM, error)
	// FindJournalEntry finds a command's write-ahead entry on an object: the newest entry
	// whose command_id bullet is commandID, or an error wrapping netbox.ErrNotFound. A crashed
	// command is resumed from it.
	FindJournalEntry(ctx context.Context, objectType string, objectID int64, commandID string) (netbox.JournalRef, error)
}

// ProxmoxClients returns the Proxmox client of an endpoint from the endpoints file.
type ProxmoxClients interface {
	Get(id int64) (*proxmox.Client, bool)
}

// Action is what the consumer does with a message after [Pipeline.Handle].
type Action int

const (
	// Done: the result was published; ack the message.
	Done Action = iota
	// Retry: nothing final happened; redeliver after Delay (0: the consumer's backoff).
	Retry
	// Poison: dead-letter the message with Reason and terminate it (its result, when one could
	// be built, was published).
	Poison
)

// Decision is the pipeline's answer to one delivery.
type Decision struct {
	Action Action
	Delay  time.Duration
	Reason string
}

// Attempt describes the delivery being handled.
type Attempt struct {
	Delivered  uint64
	MaxDeliver int
}

// Last reports whether this is the last delivery JetStream will make.
func (a Attempt) Last() bool { return a.MaxDeliver > 0 && a.Delivered >= uint64(a.MaxDeliver) }

// Config wires a [Pipeline]. Every dependency is required except where a default is given.
type Config struct {
	Registry  *Registry
	Store     *store.Store
	Endpoints EndpointLookup
	Journal   JournalWriter
	Proxmox   ProxmoxClients
	Publisher Publisher
	Emitter   events.Emitter
	// Instance names this process in lease owners and logs.
	Instance string
	Logger   *slog.Logger
	// JournalRetries is how often a failed terminal journal update is retried (default 2).
	JournalRetries int
	// JournalRetryDelay is the pause before each retry (default 200ms).
	JournalRetryDelay time.Duration
	// BusyDelay is the redelivery delay for a command whose twin is in flight (default 1s).
	BusyDelay time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Pipeline executes commands. It is safe for concurrent use by the consumer's workers.
type Pipeline struct{ cfg Config }

// ErrMisconfigured is returned by [New] when a required dependency is missing.
var ErrMisconfigured = errors.New("handlers: missing dependency")

// New checks cfg and fills in defaults.
func New(cfg Config) (*Pipeline, error) {
	switch {
	case cfg.Registry == nil:
		return nil, fmt.Errorf("%w: Registry", ErrMisconfigured)
	case cfg.Store == nil:
		return nil, fmt.Errorf("%w: Store", ErrMisconfigured)
	case cfg.Endpoints == nil:
		return nil, fmt.Errorf("%w: Endpoints", ErrMisconfigured)
	case cfg.Journal == nil:
		return nil, fmt.Errorf("%w: Journal", ErrMisconfigured)
	case cfg.Proxmox == nil:
		return nil, fmt.Errorf("%w: Proxmox", ErrMisconfigured)
	case cfg.Publisher == nil:
		return nil, fmt.Errorf("%w: Publisher", ErrMisconfigured)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Instance == "" {
		cfg.Instance = "proxbus"
	}
	if cfg.JournalRetries == 0 {
		cfg.JournalRetries = 2
	}
	if cfg.JournalRetryDelay == 0 {
		cfg.JournalRetryDelay = 200 * time.Millisecond
	}
	if cfg.BusyDelay == 0 {
		cfg.BusyDelay = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Pipeline{cfg: cfg}, nil
}

// Handle runs one delivery of a command through the pipeline and says what to do with the
// message. It publishes the command's result before it answers Done or Poison. ctx is cancelled
// when the process starts to drain: a command that has reached the write-ahead journal entry is
// completed regardless (contract §4, cancellation).
func (p *Pipeline) Handle(ctx context.Context, cmd events.Command, at Attempt) Decision {
	r := &run{
		p:      p,
		cmd:    cmd,
		at:     at,
		origin: events.OriginOf(cmd),
		seq:    int(max(at.Delivered, 1)-1) * 1000,
		log:    p.cfg.Logger.With("command_id", cmd.ID, "command_source", cmd.Source, "verb", cmd.Verb, "delivered", at.Delivered),
	}
	verb, ok := p.cfg.Registry.Lookup(cmd.Verb)
	if !ok {
		r.log.Warn("unknown verb")
		if d := r.answer(ctx, Outcome{Status: 400, Result: ResultRefused, Reason: ReasonInvalidCommand, Detail: "unknown verb"}, noJournal); d.Action != Done {
			return d
		}
		return Decision{Action: Poison, Reason: "unknown_verb"}
	}
	r.verb = verb
	return r.handle(ctx)
}
