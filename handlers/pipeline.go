package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// Publisher publishes the events of commands and returns once the stream has stored them.
// data is an events.Step, events.Result or events.JournalRepaired of the command o names; the
// publisher builds the event from both (its id, subject and data's command fields come from
// o) and returns an error wrapping events.ErrEncode, publishing nothing, when it cannot.
// Publishing the same event again stores it once and succeeds.
type Publisher interface {
	Publish(ctx context.Context, o events.Origin, data events.Payload) error
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

// EndpointStates is implemented by a [ProxmoxClients] whose endpoints change at run time
// (endpoints read from NetBox). The gate asks it about an endpoint Get has no client for:
// transient, its commands wait (an endpoint known but unusable, one not read yet); else they
// are refused 403 endpoint_not_found. detail names the endpoint and what to do.
type EndpointStates interface {
	Why(id int64) (detail string, transient bool)
}

// History reads back what the events stream already holds of a command, so that a later
// delivery continues where an earlier one stopped.
type History interface {
	// LastStep returns the newest step event of the command whose event ref is ref; false
	// when it has none.
	LastStep(ctx context.Context, ref string) (events.Step, bool, error)
	// HasResult reports whether the events stream holds a result event of the command whose
	// event ref is ref.
	HasResult(ctx context.Context, ref string) (bool, error)
}

// Defaults of [Settings], applied by [Settings.WithDefaults].
const (
	DefaultMaxAttempts       = 5
	DefaultBusyDelay         = time.Second
	DefaultGuardWait         = 30 * time.Second
	DefaultGuestWaiters      = 2
	DefaultMaxWait           = 30 * time.Second
	DefaultConfirmFor        = 30 * time.Second
	DefaultJournalRetries    = 2
	DefaultJournalRetryDelay = 200 * time.Millisecond
)

// Settings tunes a [Pipeline]. The zero value of every field means its default (the
// Default… constants); a negative value is refused by [New] with an error wrapping
// config.ErrInvalid that names the field.
type Settings struct {
	// MaxAttempts is how many failed attempts a command may have before it is answered 503
	// attempts_exhausted and dead-lettered, provided it sent no write. Waiting spends no
	// attempt.
	MaxAttempts int
	// BusyDelay is how long a command waits before it looks again at a busy guest or node, a
	// full endpoint or a twin in flight.
	BusyDelay time.Duration
	// GuardWait is how long one delivery of a command whose guest, node or endpoint slots are
	// busy waits in the process for them before it is redelivered (after BusyDelay, doubled
	// with each delivery up to MaxWait). It is woken
	// the moment the guard is given back ([Pipeline.WatchGuards]).
	GuardWait time.Duration
	// GuestWaiters is how many commands of this process may wait in it at once for a busy
	// guest or node; more are redelivered, as after GuardWait. Each holds a
	// consumer worker while it waits. Per endpoint, as many as its max_parallel may wait for a
	// slot. proxbus serve sets it to a quarter of --concurrency.
	GuestWaiters int
	// MaxWait bounds the growing pause of a command waiting for an unreachable dependency, and
	// of one whose attempt failed.
	MaxWait time.Duration
	// ConfirmFor is how long a verb's Confirm looks for an interrupted write's effect whose task
	// may still run before it answers that the write cannot be confirmed.
	ConfirmFor time.Duration
	// CommandMaxAge is how old a command may be when it would first start (contract §4 step
	// 0): measured from its time attribute, else from its arrival in the stream; an older one is
	// answered 410 command_expired and does nothing.
	CommandMaxAge time.Duration
	// ApprovalPoll is how often a command awaiting approval looks whether it was decided.
	ApprovalPoll time.Duration
	// JournalRetries is how often a failed terminal journal update is retried.
	JournalRetries int
	// JournalRetryDelay is the pause before each retry.
	JournalRetryDelay time.Duration
}

// WithDefaults returns a copy of s with every zero field set to its default. It never changes
// a field that is set, even to a value [New] refuses.
func (s Settings) WithDefaults() Settings {
	config.Default(&s.MaxAttempts, DefaultMaxAttempts)
	config.Default(&s.BusyDelay, DefaultBusyDelay)
	config.Default(&s.GuardWait, DefaultGuardWait)
	config.Default(&s.GuestWaiters, DefaultGuestWaiters)
	config.Default(&s.MaxWait, DefaultMaxWait)
	config.Default(&s.ConfirmFor, DefaultConfirmFor)
	config.Default(&s.CommandMaxAge, DefaultCommandMaxAge)
	config.Default(&s.ApprovalPoll, DefaultApprovalPoll)
	config.Default(&s.JournalRetries, DefaultJournalRetries)
	config.Default(&s.JournalRetryDelay, DefaultJournalRetryDelay)
	return s
}

// validate reports settings that cannot work.
func (s Settings) validate() error {
	return config.NonNegative("handlers",
		config.Named("MaxAttempts", s.MaxAttempts),
		config.Named("BusyDelay", s.BusyDelay),
		config.Named("GuardWait", s.GuardWait),
		config.Named("GuestWaiters", s.GuestWaiters),
		config.Named("MaxWait", s.MaxWait),
		config.Named("ConfirmFor", s.ConfirmFor),
		config.Named("CommandMaxAge", s.CommandMaxAge),
		config.Named("ApprovalPoll", s.ApprovalPoll),
		config.Named("JournalRetries", s.JournalRetries),
		config.Named("JournalRetryDelay", s.JournalRetryDelay),
	)
}

// Config wires a [Pipeline]: its [Settings] and what it runs on. Every dependency is
// required; Instance, Logger and Now have the defaults given.
type Config struct {
	Settings
	Registry  *Registry
	Store     *store.Store
	Endpoints EndpointLookup
	Journal   JournalWriter
	Proxmox   ProxmoxClients
	Publisher Publisher
	History   History
	// Schedules keeps the message schedules of schedule.add and schedule.remove (contract
	// §11); without it those verbs answer 503 schedules_unavailable.
	Schedules Schedules
	// Instance names this process in lease owners and logs (default "proxbus").
	Instance string
	// Logger receives the pipeline's logs (default: discard).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// After is the clock's timer (default time.After): every pause of the pipeline waits on it.
	After func(d time.Duration) <-chan time.Time
	// Opener opens sealed secrets (contract §8); nil: proxbus holds no key, and a sealed
	// secret is refused as invalid.
	Opener SecretOpener
	// RequireSealedSecrets refuses a plain secret with 422 secret_not_sealed.
	RequireSealedSecrets bool
}

// Pipeline executes commands. It is safe for concurrent use by the consumer's workers.
type Pipeline struct {
	cfg   Config
	waits *waitRoom
	// crashAt, set by tests only, is called at every crash point (crashpoint.go) with its name;
	// it stops the command there by panicking with a crashSignal.
	crashAt func(point string)
	// observe, set by tests only, sees every move a delivery makes.
	observe func(Transition)

	runMu   sync.Mutex
	running map[string]*run // commands of cancellable verbs running here, by store.WatchName
}

// New checks cfg and fills in defaults. A missing dependency or a negative setting is an
// error wrapping config.ErrInvalid that names the field.
func New(cfg Config) (*Pipeline, error) {
	for _, dep := range []struct {
		name    string
		missing bool
	}{
		{"Registry", cfg.Registry == nil},
		{"Store", cfg.Store == nil},
		{"Endpoints", cfg.Endpoints == nil},
		{"Journal", cfg.Journal == nil},
		{"Proxmox", cfg.Proxmox == nil},
		{"Publisher", cfg.Publisher == nil},
		{"History", cfg.History == nil},
	} {
		if dep.missing {
			return nil, fmt.Errorf("handlers: %w: %s is required", config.ErrInvalid, dep.name)
		}
	}
	cfg.Settings = cfg.Settings.WithDefaults()
	if err := cfg.Settings.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Instance == "" {
		cfg.Instance = "proxbus"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	return &Pipeline{cfg: cfg, waits: newWaitRoom(cfg.GuestWaiters), running: map[string]*run{}}, nil
}

// sleep pauses for d on the pipeline's clock.
func (p *Pipeline) sleep(d time.Duration) { <-p.cfg.After(d) }

// Handle runs one delivery of a command through the pipeline and says what to do with the
// message. It publishes the command's result before it answers Ack or DeadLetter. A command
// that waits (contract §4: a busy guest or endpoint, a twin in flight, a dependency down before
// any write) is answered Redeliver without spending an attempt; a failed attempt is counted in
// the store and, after MaxAttempts, answered 503 attempts_exhausted and DeadLetter, but only
// when no write may have been sent: a command that may have written is resumed and confirmed
// by reading instead. ctx is cancelled when the process starts to drain: a command that has
// reached the write-ahead journal entry is completed regardless (contract §4, cancellation).
func (p *Pipeline) Handle(ctx context.Context, cmd events.Command, d events.Delivery) (disp events.Disposition) {
	r := &run{
		p:        p,
		cmd:      cmd,
		delivery: d,
		attempt:  1,
		origin:   events.OriginOf(cmd),
		log:      p.cfg.Logger.With("command_id", cmd.ID, "command_source", cmd.Source, "verb", cmd.Verb, "delivery", d.Number),
	}
	r.origin.Delivery, r.origin.Actor = d.StreamSeq, r.actor()
	defer func() {
		if v := recover(); v != nil {
			if c, ok := v.(crashSignal); ok { // a test stopped the command: nothing more runs
				disp = events.Disposition{Action: events.Redeliver, Reason: "crashed at " + c.point}
				return
			}
			r.log.Error("pipeline panicked", "panic", fmt.Sprint(v))
			disp = r.failed(context.WithoutCancel(ctx), "panic", fmt.Errorf("internal error: %v", v)).disp
		}
	}()
	defer r.cleanUp()
	return r.drive(ctx, r.receive)
}
