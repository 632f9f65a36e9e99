// Package repair finishes the terminal journal updates NetBox did not take when their command
// ended (contract §6). [Run] claims each due repair for one replica at a time, applies it, and
// reschedules it with a capped exponential delay while NetBox still refuses, until the update
// is taken; a repair is never dropped.
package repair

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/store"
)

// Defaults of [Config].
const (
	DefaultInterval    = 2 * time.Second
	DefaultLease       = 30 * time.Second
	DefaultBaseBackoff = 2 * time.Second
	DefaultMaxBackoff  = 5 * time.Minute
)

// Store is the part of the store [Run] uses (*store.Store).
type Store interface {
	// ClaimDueRepair leases the oldest due repair for lease; ok is false when none is due.
	ClaimDueRepair(ctx context.Context, lease time.Duration) (rep store.Repair, ok bool, err error)
	// RescheduleRepair makes rep due again at next, recording lastErr and one more attempt.
	RescheduleRepair(ctx context.Context, rep store.Repair, next time.Time, lastErr string) error
}

// Applier applies one repair: the journal update, the stored result and the journal event.
// It returns an error when the update is still pending.
type Applier interface {
	ApplyRepair(ctx context.Context, rep store.Repair) error
}

// Config tunes [Run]. The zero value of a field means its Default… constant; a negative
// one is an error wrapping config.ErrInvalid.
type Config struct {
	// Interval is the pause between scans for due repairs.
	Interval time.Duration
	// Lease is how long one replica holds a repair while applying it.
	Lease time.Duration
	// BaseBackoff and MaxBackoff bound the delay before a failed repair is tried again:
	// BaseBackoff doubled per failed attempt, at most MaxBackoff.
	BaseBackoff, MaxBackoff time.Duration
	// Logger receives the repairer's logs (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	config.Default(&c.Interval, DefaultInterval)
	config.Default(&c.Lease, DefaultLease)
	config.Default(&c.BaseBackoff, DefaultBaseBackoff)
	config.Default(&c.MaxBackoff, DefaultMaxBackoff)
	config.Default(&c.Logger, slog.Default())
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports a negative duration, naming the field.
func (c Config) Validate() error {
	return config.NonNegative("repair",
		config.Named("Interval", c.Interval),
		config.Named("Lease", c.Lease),
		config.Named("BaseBackoff", c.BaseBackoff),
		config.Named("MaxBackoff", c.MaxBackoff),
	)
}

// Run applies due repairs until ctx is cancelled, then returns nil. Every due repair is
// applied before the next pause of cfg.Interval. An invalid cfg returns its error at once.
func Run(ctx context.Context, st Store, a Applier, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.WithDefaults()
	log := cfg.Logger.With("component", "repairer")
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		for repairOne(ctx, st, a, cfg, log) {
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Backoff is the delay before a repair that failed attempts times before is tried again.
func (c Config) Backoff(attempts int) time.Duration {
	c = c.WithDefaults()
	d := c.BaseBackoff << min(max(attempts, 0), 20)
	if d > c.MaxBackoff || d <= 0 {
		return c.MaxBackoff
	}
	return d
}

// repairOne handles one due repair; it reports whether there may be more.
func repairOne(ctx context.Context, st Store, a Applier, cfg Config, log *slog.Logger) bool {
	if ctx.Err() != nil {
		return false
	}
	rep, ok, err := st.ClaimDueRepair(ctx, cfg.Lease)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			log.Warn("store: due repairs unreadable", "err", err)
		}
		return false
	}
	if !ok {
		return false
	}
	if err := a.ApplyRepair(ctx, rep); err != nil {
		delay := cfg.Backoff(rep.Attempts)
		log.Warn("journal repair failed; rescheduled", "command_id", rep.Command.ID, "attempts", rep.Attempts+1, "next_in", delay, "err", err)
		if rerr := st.RescheduleRepair(ctx, rep, cfg.Now().Add(delay), err.Error()); rerr != nil {
			log.Warn("store: repair not rescheduled", "err", rerr)
		}
		return true
	}
	log.Info("journal entry repaired", "command_id", rep.Command.ID, "journal_entry_url", rep.JournalURL)
	return true
}
