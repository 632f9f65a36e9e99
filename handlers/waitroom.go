package handlers

import (
	"context"
	"sync"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/store"
)

// waitRoom is where the commands of this process that found a guard busy (their guest or node
// held by another command, their endpoint's max_parallel slots taken) wait for it to be given
// back instead of being redelivered. A command waiting here is woken the moment the holder
// completes, releases or suspends, on any replica ([Pipeline.WatchGuards]); it costs no
// redelivery and no second Proxmox read, but holds one of the consumer's workers. So that
// waiting cannot take every worker, the room is bounded: as many waiters per endpoint's slots
// as its max_parallel, and GuestWaiters for guests and nodes together (the waiters of one guest
// wait in turn, the longest first). A command that finds no room is redelivered instead, after a pause that doubles with
// its deliveries (BusyDelay, 2 × BusyDelay, … up to MaxWait). A waiting
// command cancelled (or expired) by another process is woken too, and answers at once.
type waitRoom struct {
	mu        sync.Mutex
	queues    map[string][]*waiter // per guard, the longest waiting first
	commands  map[string]*waiter   // per command (its store.WatchName)
	guests    int                  // waiters for a guest or node
	maxGuests int
}

// waiter is one command in the wait room.
type waiter struct {
	guard, command string
	slot           bool
	// woken is closed when the waiter is woken; by is then the name it was woken by.
	woken chan struct{}
	by    string
}

func newWaitRoom(maxGuests int) *waitRoom {
	return &waitRoom{queues: map[string][]*waiter{}, commands: map[string]*waiter{}, maxGuests: maxGuests}
}

// enter reserves a place for the command named command to wait for the guard named guard,
// where at most limit may wait for it; slot says whether it is an endpoint's slots (else a
// guest or node). It reports false when there is no room. The caller must leave.
func (w *waitRoom) enter(guard, command string, slot bool, limit int) (*waiter, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queues[guard]) >= limit || (!slot && w.guests >= w.maxGuests) {
		return nil, false
	}
	wt := &waiter{guard: guard, command: command, slot: slot, woken: make(chan struct{})}
	w.queues[guard] = append(w.queues[guard], wt)
	w.commands[command] = wt
	if !slot {
		w.guests++
	}
	return wt, true
}

// leave gives back the place enter reserved, woken or not.
func (w *waitRoom) leave(wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dequeue(wt)
	if w.commands[wt.command] == wt {
		delete(w.commands, wt.command)
	}
	if !wt.slot {
		w.guests--
	}
}

// wake wakes the longest waiting command waiting for the guard name, or the command name.
func (w *waitRoom) wake(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt := w.commands[name]
	if queue := w.queues[name]; len(queue) > 0 {
		wt = queue[0]
	}
	if wt == nil || wt.by != "" {
		return
	}
	wt.by = name
	close(wt.woken)
	w.dequeue(wt)
}

// wokenBy is the name wt was woken by ("" when it was not).
func (w *waitRoom) wokenBy(wt *waiter) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return wt.by
}

// dequeue takes wt out of its guard's queue, if it is still there.
func (w *waitRoom) dequeue(wt *waiter) {
	queue := w.queues[wt.guard]
	for i, q := range queue {
		if q == wt {
			queue = append(queue[:i:i], queue[i+1:]...)
			break
		}
	}
	if len(queue) == 0 {
		delete(w.queues, wt.guard)
	} else {
		w.queues[wt.guard] = queue
	}
}

// WatchGuards wakes the commands waiting in this process for a busy guest, node or endpoint
// slot the moment the guard is given back, by a command on any replica, and tells a running
// command of this process that its cancellation was requested, until ctx ends. Without it
// waiters look again only after GuardWait, and started commands are not cancelled.
func (p *Pipeline) WatchGuards(ctx context.Context) {
	p.cfg.Store.WatchFreed(ctx, func(name string) {
		p.waits.wake(name)
		p.announced(ctx, name)
	})
}

// claim takes the command and its guards (contract §4 step 3) and goes on with claimed. A
// guard held elsewhere is waited for: in the process while there is room in the wait room and
// GuardWait has not passed (waiting is not failing: it spends no attempt), else by a
// redelivery after a pause that doubles with the deliveries up to MaxWait.
func (r *run) claim(ctx context.Context, req store.ClaimRequest, claimed func(context.Context, store.Claim) move) move {
	claim, err := r.p.cfg.Store.Claim(ctx, req)
	taken := err == nil && (claim.State == store.Claimed || claim.State == store.Resumed)
	if r.wokenFor != "" && !taken && claim.BusyKey != r.wokenFor {
		r.p.waits.wake(r.wokenFor) // it did not take the guard it was woken for: the next may
	}
	r.wokenFor = ""
	switch {
	case err != nil:
		return r.storeDown(ctx, err)
	case taken:
		r.reach(crashStored, "claim")
		return move{on: EventClaimed, to: StateRunning}.then(func(ctx context.Context) move { return claimed(ctx, claim) })
	case claim.State != store.GuardBusy:
		return r.unclaimed(ctx, claim)
	}
	if r.guardWait == nil {
		r.guardWait = r.p.cfg.After(r.p.cfg.GuardWait)
	}
	return r.awaitGuard(ctx, claim, func(ctx context.Context) move { return r.claim(ctx, req, claimed) })
}

// awaitGuard waits in the process until the busy guard claim names is given back or
// GuardWait passes, then claims again (again). Without room in the wait room, or once
// GuardWait has passed, it answers a redelivery after a pause that doubles with the
// deliveries; a process that starts to drain stops waiting and lets another replica take the
// command. A command that expires while it waits is answered 410 when it expires; one past its
// expiry that waits has started, and is finished.
func (r *run) awaitGuard(ctx context.Context, claim store.Claim, again stage) move {
	detail := r.busyGuard(claim)
	slot := claim.BusyGuard == store.GuardSlot
	limit := r.p.cfg.GuestWaiters
	if slot {
		limit = r.maxParallel()
	}
	var wt *waiter
	ok := !r.guardWaitOver()
	if ok {
		wt, ok = r.p.waits.enter(claim.BusyKey, r.p.cfg.Store.WatchName(r.key()), slot, limit)
	}
	if !ok {
		return r.wait(ctx, "claim", events.StepWaiting, detail, r.waitDelay())
	}
	return move{on: EventWaits, to: StateWaiting}.then(func(ctx context.Context) move {
		defer r.p.waits.leave(wt)
		r.note(ctx, "claim", events.StepWaiting, detail)
		var expires <-chan time.Time
		if d := r.deadline(); !d.IsZero() && d.After(r.p.cfg.Now()) {
			expires = r.p.cfg.After(d.Sub(r.p.cfg.Now()) + time.Millisecond) // wake up to expire
		}
		select {
		case <-ctx.Done():
			return r.redeliver(0)
		case <-r.guardWait:
			r.guardOver = true
		case <-expires:
		case <-wt.woken:
		}
		woken := ""
		if by := r.p.waits.wokenBy(wt); by == claim.BusyKey {
			woken = by
		}
		r.waited = true
		return move{on: EventWoken, to: StateReceived}.then(func(ctx context.Context) move {
			resume := func(ctx context.Context) move {
				r.wokenFor = woken
				return again(ctx)
			}
			if why := r.expiry(); why != "" {
				m := r.expire(ctx, why, resume)
				if m.next == nil && woken != "" {
					r.p.waits.wake(woken)
				}
				return m
			}
			return resume(ctx)
		})
	})
}

// guardWaitOver reports whether this delivery's GuardWait in the wait room has passed.
func (r *run) guardWaitOver() bool {
	if !r.guardOver {
		select {
		case <-r.guardWait:
			r.guardOver = true
		default:
		}
	}
	return r.guardOver
}
