package store

import "time"

// Defaults applied by [New] to zero (or negative) [Options] fields.
const (
	DefaultPrefix    = "proxbus"
	DefaultDedupeTTL = 24 * time.Hour
	DefaultWindow    = 60 * time.Second
	DefaultLeaseTTL  = 30 * time.Second
)

// Options configures a [Store]. Zero fields take the documented defaults.
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
	// Now is the clock used for leases and repair schedules; default time.Now.
	Now func() time.Time
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.DedupeTTL <= 0 {
		o.DedupeTTL = DefaultDedupeTTL
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
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
