package handlers

import (
	"context"
	"errors"
	"time"

	"github.com/proxbus/proxbus/store"
)

// defaultMaxParallel bounds commands per endpoint when the endpoints file does not.
const defaultMaxParallel = 4

// guards are what a write command holds besides its claim while it runs: the exclusive lease
// on its guest or node (two commands on one guest never run at once, on any replica) and a
// slot of its endpoint (at most max_parallel commands per cluster, across replicas).
type guards struct {
	st       *store.Store
	resource *store.ResourceLease
	slot     *store.Slot
}

// acquireGuards takes the guards of the command, resource first. When one is held elsewhere
// the command is delayed, never failed: its claim is suspended (progress kept) and it is
// redelivered; on its last delivery it waits here, heartbeated, until it gets them (a holder
// finishes, or its lease expires) or the process drains.
func (r *run) acquireGuards(ctx context.Context, claim store.Claim) (guards, *Decision) {
	for {
		g, busy, err := r.tryGuards(ctx)
		switch {
		case err != nil:
			d := r.suspendAndRetry(ctx, claim, 0, "guard", err.Error())
			return guards{}, &d
		case busy == "":
			return g, nil
		case !r.at.Last() || ctx.Err() != nil:
			d := r.suspendAndRetry(ctx, claim, r.p.cfg.BusyDelay, "wait", busy)
			return guards{}, &d
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.p.cfg.BusyDelay):
		}
	}
}

// tryGuards takes both guards or none; busy says which one is held elsewhere.
func (r *run) tryGuards(ctx context.Context) (g guards, busy string, err error) {
	g.st = r.p.cfg.Store
	owner := r.owner()
	if key, ok := r.prep.exclusive(r.cmd.EndpointID); ok {
		lease, got, err := g.st.AcquireResource(ctx, key, owner)
		if err != nil {
			return guards{}, "", err
		}
		if !got {
			return guards{}, "another command holds " + key.String(), nil
		}
		g.resource = &lease
	}
	max := r.client.Endpoint().MaxParallel
	if max <= 0 {
		max = defaultMaxParallel
	}
	slot, got, err := g.st.AcquireSlot(ctx, r.cmd.EndpointID, max, owner)
	if err != nil || !got {
		g.release(ctx)
		if err != nil {
			return guards{}, "", err
		}
		return guards{}, "the endpoint already runs max_parallel commands", nil
	}
	g.slot = &slot
	return g, "", nil
}

// suspendAndRetry gives the command back for redelivery without losing its progress.
func (r *run) suspendAndRetry(ctx context.Context, claim store.Claim, delay time.Duration, stage, why string) Decision {
	if err := r.p.cfg.Store.Suspend(context.WithoutCancel(ctx), claim.Lease, claim.Progress); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		r.log.Warn("store: suspend failed", "err", err)
	}
	return r.retry(ctx, delay, stage, why)
}

// renew keeps the guards alive; a guard lost to expiry is logged (the claim's own fencing keeps
// the command's records safe).
func (g guards) renew(ctx context.Context, r *run) {
	if g.resource != nil {
		if err := g.st.RenewResource(ctx, *g.resource); err != nil {
			r.log.Warn("store: resource lease renewal failed", "resource", g.resource.Key.String(), "err", err)
		}
	}
	if g.slot != nil {
		if err := g.st.RenewSlot(ctx, *g.slot); err != nil {
			r.log.Warn("store: endpoint slot renewal failed", "err", err)
		}
	}
}

// release gives the guards back, slot first.
func (g guards) release(ctx context.Context) {
	// Errors are ignored: a guard that cannot be released expires after one lease lifetime.
	if g.slot != nil {
		_ = g.st.ReleaseSlot(ctx, *g.slot)
	}
	if g.resource != nil {
		_ = g.st.ReleaseResource(ctx, *g.resource)
	}
}
