package store

import (
	"time"

	"github.com/proxbus/proxbus/internal/config"
)

// Defaults of [Options], applied by [Options.WithDefaults].
const (
	DefaultPrefix    = "proxbus"
	DefaultDedupeTTL = 24 * time.Hour
	DefaultWindow    = 60 * time.Second
	DefaultLeaseTTL  = 30 * time.Second
	// DefaultReplicaTimeout bounds the wait for replicas ([Options.MinReplicas]).
	DefaultReplicaTimeout = time.Second
)

// Options configures a [Store]. The zero value of every field means its documented default
// (the Default… constants); a negative duration is refused by [New] with an error wrapping
// config.ErrInvalid that names the field.
type Options struct {
	// Prefix starts every key name; default "proxbus".
	Prefix string
	// DedupeTTL is how long a command identity record (running or done) is kept; default 24h.
	DedupeTTL time.Duration
	// Window is how long a done Idempotency-Key record answers replays; default 60s.
	Window time.Duration
	// LeaseTTL is how long a running claim lives without renewal before another owner may take
	// it over; default 30s.
	LeaseTTL time.Duration
	// MinReplicas is how many replicas must acknowledge each change of the store (Redis's
	// WAIT, sent with the change on the same connection) before it counts as made; 0, the
	// default, waits for none. A change they do not acknowledge within ReplicaTimeout returns
	// an error wrapping [ErrNotReplicated] (default timeout DefaultReplicaTimeout).
	MinReplicas    int
	ReplicaTimeout time.Duration
	// Now is the clock used for leases and repair schedules; default time.Now.
	Now func() time.Time
}

// WithDefaults returns a copy of o with every zero field set to its default. It never changes
// a field that is set, even to a value [New] refuses.
func (o Options) WithDefaults() Options {
	config.Default(&o.Prefix, DefaultPrefix)
	config.Default(&o.DedupeTTL, DefaultDedupeTTL)
	config.Default(&o.Window, DefaultWindow)
	config.Default(&o.LeaseTTL, DefaultLeaseTTL)
	config.Default(&o.ReplicaTimeout, DefaultReplicaTimeout)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// validate reports options that cannot work.
func (o Options) validate() error {
	return config.NonNegative("store",
		config.Named("DedupeTTL", o.DedupeTTL),
		config.Named("Window", o.Window),
		config.Named("LeaseTTL", o.LeaseTTL),
		config.Named("ReplicaTimeout", o.ReplicaTimeout),
		config.Named("MinReplicas", o.MinReplicas),
	)
}

// millis converts a positive duration to whole milliseconds, rounding up so that a
// sub-millisecond TTL never becomes 0 (which PEXPIRE would treat as "delete now").
func millis(d time.Duration) int64 {
	ms := d.Milliseconds()
	if time.Duration(ms)*time.Millisecond < d {
		ms++
	}
	if ms < 1 {
		ms = 1
	}
	return ms
}
