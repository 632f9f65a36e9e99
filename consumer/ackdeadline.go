package consumer

import (
	"context"
	"sync/atomic"
	"time"
)

// ackDeadline hands out the context of every DoubleAck a Consumer sends: one context shared
// by the acks, without values or cancellation, whose deadline lies between timeout/2 and
// timeout after each call that returns it. Sharing it spares each ack a timer of its own
// (context.WithTimeout, or nats.go's default timeout when the context has no deadline); with
// one message in flight, adding and removing that timer on every ack cost measurably
// (docs/benchmarks.md § 5). The zero value is not usable: set timeout.
type ackDeadline struct {
	timeout time.Duration
	// now is the clock (time.Now when nil).
	now func() time.Time
	cur atomic.Pointer[sharedDeadline]
}

// sharedDeadline is one context handed out until renewAt.
type sharedDeadline struct {
	ctx     context.Context
	cancel  context.CancelFunc
	renewAt time.Time
}

// context returns the shared context, replacing it by a new one, with a deadline timeout from
// now, once it has less than timeout/2 left. A replaced context is not cancelled (acks may
// still wait on it): its timer ends at its deadline.
func (a *ackDeadline) context() context.Context {
	now := time.Now()
	if a.now != nil {
		now = a.now()
	}
	if d := a.cur.Load(); d != nil && now.Before(d.renewAt) {
		return d.ctx
	}
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(a.timeout))
	// Concurrent renewals each store their own; the contexts lost are left to their timers.
	a.cur.Store(&sharedDeadline{ctx: ctx, cancel: cancel, renewAt: now.Add(a.timeout / 2)})
	return ctx
}

// release cancels the current context; call it when no ack can still be waiting on it.
func (a *ackDeadline) release() {
	if d := a.cur.Swap(nil); d != nil {
		d.cancel()
	}
}
