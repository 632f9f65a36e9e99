package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// guestVerb is a write verb on the guest its body's vmid names, run by sc.
func guestVerb(sc *script) Verb {
	return Spec[int64]{
		Name: "test.write", Access: Write,
		Decode:    func(f *Fields) int64 { return f.Int("vmid", true, 0, 100, 999) },
		Resource:  func(vmid int64) string { return strconv.FormatInt(vmid, 10) },
		Exclusive: func(vmid int64) (string, string) { return store.KindGuest, strconv.FormatInt(vmid, 10) },
		Dispatch:  func(ctx context.Context, x *Exec, _ int64) (Outcome, error) { return ok(ctx, x, sc) },
	}
}

// waitRoomEnv is a pipeline on guestVerb whose endpoint 1 has maxParallel slots, waking its
// waiters from Redis (WatchGuards runs for the test's life), with GuardWait long enough that
// only a wake ends a wait within a test.
type waitRoomEnv struct {
	*lifecycle
	sc *script
}

func newWaitRoomEnv(t *testing.T, maxParallel, guestWaiters int) *waitRoomEnv {
	t.Helper()
	sc := &script{}
	l := newLifecycleWith(t, sc, func(ep *proxmox.EndpointConfig) { ep.MaxParallel = maxParallel })
	cfg := l.p.cfg
	cfg.Registry = NewRegistry(guestVerb(sc))
	cfg.GuardWait, cfg.GuestWaiters = 10*time.Minute, guestWaiters
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	followTable(t, p)
	l.p = p
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.WatchGuards(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	e := &waitRoomEnv{lifecycle: l, sc: sc}
	e.awaitWatching(t)
	return e
}

// awaitWatching returns once WatchGuards is subscribed: a guard given back before then would
// wake nobody.
func (e *waitRoomEnv) awaitWatching(t *testing.T) {
	t.Helper()
	probe := e.store.Options().Prefix + ":lock:probe"
	wt, _ := e.p.waits.enter(probe, "probe-command", true, 1)
	defer e.p.waits.leave(wt)
	for range 3000 {
		if err := e.redis.Publish(context.Background(), probe, "").Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wt.woken:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("WatchGuards never subscribed")
}

func guestCommand(id string, vmid int) events.Command {
	cmd := testCommand(id)
	cmd.Data = json.RawMessage(fmt.Sprintf(`{"vmid":%d}`, vmid))
	return cmd
}

// hold claims guest vmid (when > 0) and a slot of endpoint 1 (when slots > 0) for another
// command, and returns its lease.
func (e *waitRoomEnv) hold(t *testing.T, id string, vmid, slots int) store.Lease {
	t.Helper()
	req := store.ClaimRequest{Command: store.CommandKey{Source: "/other", ID: id}, Owner: "other/" + id}
	if vmid > 0 {
		key := store.GuestResource(1, vmid)
		req.Guards.Resource = &key
	}
	if slots > 0 {
		req.Guards.Slot = &store.SlotRequest{EndpointID: 1, Max: slots}
	}
	c, err := e.store.Claim(context.Background(), req)
	if err != nil || c.State != store.Claimed {
		t.Fatalf("holder %s: %v %v", id, c.State, err)
	}
	return c.Lease
}

// start delivers cmd (delivery 1) in the background and waits until it has said it waits; the
// returned channel yields its disposition.
func (e *waitRoomEnv) start(t *testing.T, ctx context.Context, cmd events.Command) <-chan events.Disposition {
	t.Helper()
	done := make(chan events.Disposition, 1)
	go func() { done <- e.p.Handle(ctx, cmd, events.Delivery{Number: 1}) }()
	deadline := time.Now().Add(30 * time.Second)
	for len(e.stream.stepsOf(cmd.Ref())) == 0 {
		select {
		case d := <-done:
			t.Fatalf("%s ended without waiting: %+v", cmd.ID, d)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never said it waits", cmd.ID)
		}
		time.Sleep(time.Millisecond)
	}
	if s := e.stream.stepsOf(cmd.Ref())[0]; s.Status != events.StepWaiting || s.Step != "claim" {
		t.Fatalf("%s: first step %+v, want claim waiting", cmd.ID, s)
	}
	return done
}

// await returns the disposition done yields; a delivery that never ends fails the test.
func await(t *testing.T, id string, done <-chan events.Disposition) events.Disposition {
	t.Helper()
	select {
	case d := <-done:
		return d
	case <-time.After(time.Minute):
		t.Fatalf("%s still waits: it was not woken", id)
		return events.Disposition{}
	}
}

// wantAnsweredUnrun checks that the delivery done ends acked with one 410 result of reason and
// no write.
func (e *waitRoomEnv) wantAnsweredUnrun(t *testing.T, cmd events.Command, done <-chan events.Disposition, reason string) {
	t.Helper()
	if d := await(t, cmd.ID, done); d.Action != events.Ack {
		t.Fatalf("disposition %+v, want ack", d)
	}
	if res := e.stream.resultsOf(cmd.Ref()); len(res) != 1 || res[0].Status != 410 || res[0].Reason != reason {
		t.Errorf("results %+v, want one 410 %s", res, reason)
	}
	if w, _ := e.sc.counts(); w != 0 {
		t.Errorf("writes = %d, want 0", w)
	}
}

// TestWaitRoomWakesWhenGuardIsGivenBack: a command whose guest, or whose endpoint's only slot,
// is held by another command waits in the process and runs within the same delivery the moment
// the holder completes or releases it: one delivery, no attempt spent, one write, and one
// waiting step.
func TestWaitRoomWakesWhenGuardIsGivenBack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		vmid, slots int // the holder's guards
		give        func(*store.Store, store.Lease) error
	}{
		{"guest released", 100, 0, func(s *store.Store, l store.Lease) error { return s.Release(context.Background(), l) }},
		{"guest completed", 100, 0, func(s *store.Store, l store.Lease) error {
			return s.Complete(context.Background(), l, []byte(`{}`))
		}},
		{"slot completed", 200, 1, func(s *store.Store, l store.Lease) error {
			return s.Complete(context.Background(), l, []byte(`{}`))
		}},
		{"slot suspended", 200, 1, func(s *store.Store, l store.Lease) error {
			return s.Suspend(context.Background(), l, store.Progress{})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			maxParallel := 4
			if tt.slots > 0 {
				maxParallel = tt.slots
			}
			e := newWaitRoomEnv(t, maxParallel, 2)
			holder := e.hold(t, "holder", tt.vmid, tt.slots)
			cmd := guestCommand("waits", 100)
			done := e.start(t, context.Background(), cmd)
			if w, _ := e.sc.counts(); w != 0 {
				t.Fatalf("%d writes while the guard is held", w)
			}
			if err := tt.give(e.store, holder); err != nil {
				t.Fatal(err)
			}
			if d := await(t, cmd.ID, done); d.Action != events.Ack {
				t.Fatalf("disposition %+v, want ack within the first delivery", d)
			}
			if w, _ := e.sc.counts(); w != 1 {
				t.Errorf("writes = %d, want 1", w)
			}
			if f := e.failures(t, cmd); f != 0 {
				t.Errorf("failed attempts = %d, want 0", f)
			}
			waiting := 0
			for _, s := range e.stream.stepsOf(cmd.Ref()) {
				if s.Status == events.StepWaiting {
					waiting++
				}
			}
			if res := e.stream.resultsOf(cmd.Ref()); waiting != 1 || len(res) != 1 || res[0].Status != 200 {
				t.Errorf("%d waiting steps and results %+v, want one waiting step and one 200", waiting, res)
			}
		})
	}
}

// TestWaitRoomIsBounded: waiting in the process holds a consumer worker, so it is bounded:
// GuestWaiters for busy guests together, max_parallel per endpoint's slots.
// A command that finds no room is redelivered after BusyDelay, spending no attempt.
func TestWaitRoomIsBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		maxParallel   int
		holders       [][2]int // vmid, slots of each holder
		waiters, late events.Command
	}{
		{"second waiter for one guest", 4, [][2]int{{100, 0}}, guestCommand("first", 100), guestCommand("second", 100)},
		{"guest waiters full", 4, [][2]int{{100, 0}, {101, 0}}, guestCommand("first", 100), guestCommand("second", 101)},
		{"slot waiters full", 1, [][2]int{{0, 1}}, guestCommand("first", 100), guestCommand("second", 101)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newWaitRoomEnv(t, tt.maxParallel, 1)
			for i, h := range tt.holders {
				e.hold(t, fmt.Sprintf("holder%d", i), h[0], h[1])
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			first := e.start(t, ctx, tt.waiters)
			if d := e.deliver(tt.late, 1); d.Action != events.Redeliver || d.Delay != DefaultBusyDelay {
				t.Errorf("the command finding no room: %+v, want a redelivery after %s", d, DefaultBusyDelay)
			}
			if f := e.failures(t, tt.late); f != 0 {
				t.Errorf("failed attempts = %d, want 0", f)
			}
			cancel()
			if d := await(t, tt.waiters.ID, first); d.Action != events.Redeliver || d.Delay != 0 {
				t.Errorf("the waiter when the process drains: %+v, want a redelivery at once", d)
			}
		})
	}
}

// TestWaitRoomDrainLeavesNothingClaimed: a waiting command of a process that starts to drain
// stops waiting and is redelivered at once, with nothing claimed, so another replica runs it.
func TestWaitRoomDrainLeavesNothingClaimed(t *testing.T) {
	t.Parallel()
	e := newWaitRoomEnv(t, 4, 2)
	e.hold(t, "holder", 100, 0)
	cmd := guestCommand("drained", 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := e.start(t, ctx, cmd)
	cancel()
	if d := await(t, cmd.ID, done); d.Action != events.Redeliver || d.Delay != 0 {
		t.Fatalf("disposition %+v, want a redelivery at once", d)
	}
	state, _, err := e.store.Record(context.Background(), store.CommandKey{Source: cmd.Source, ID: cmd.ID})
	if err != nil || state != store.Absent {
		t.Errorf("record %v %v, want absent: nothing claimed", state, err)
	}
	if w, _ := e.sc.counts(); w != 0 {
		t.Errorf("writes = %d, want 0", w)
	}
}

// TestWaitRoomExpiry: a command that expires while it waits is answered 410 command_expired
// when it is woken, and does nothing.
func TestWaitRoomExpiry(t *testing.T) {
	t.Parallel()
	e := newWaitRoomEnv(t, 4, 2)
	holder := e.hold(t, "holder", 100, 0)
	cmd := guestCommand("expires", 100)
	cmd.Expires = e.clock.Now().Add(time.Minute)
	done := e.start(t, context.Background(), cmd)
	e.clock.Advance(2 * time.Minute)
	if err := e.store.Release(context.Background(), holder); err != nil {
		t.Fatal(err)
	}
	e.wantAnsweredUnrun(t, cmd, done, ReasonCommandExpired)
}

// TestWaitRoomPassesWakeOn: a command woken for a freed slot that then finds its guest busy
// does not keep the wake: the next command waiting for the slot gets it and runs, so the slot
// does not stand idle.
func TestWaitRoomPassesWakeOn(t *testing.T) {
	t.Parallel()
	e := newWaitRoomEnv(t, 2, 2)
	slotHolder := e.hold(t, "slot-holder", 0, 2)
	e.hold(t, "other-slot-holder", 0, 2)
	first, second := guestCommand("first", 100), guestCommand("second", 101)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	firstDone := e.start(t, ctx, first)
	secondDone := e.start(t, ctx, second)
	e.hold(t, "guest-holder", 100, 0) // first's guest is taken while it waits for the slot
	if err := e.store.Release(context.Background(), slotHolder); err != nil {
		t.Fatal(err)
	}
	if d := await(t, second.ID, secondDone); d.Action != events.Ack {
		t.Fatalf("second: %+v, want ack", d)
	}
	select {
	case d := <-firstDone:
		t.Fatalf("first ended %+v while its guest is held", d)
	default:
	}
	cancel()
	await(t, first.ID, firstDone)
}

// TestWaitRoomCancel: a command waiting in the process that `proxbus cancel` cancels answers
// 410 command_cancelled at once, while its guest is still held, and does nothing.
func TestWaitRoomCancel(t *testing.T) {
	t.Parallel()
	e := newWaitRoomEnv(t, 4, 2)
	e.hold(t, "holder", 100, 0)
	cmd := guestCommand("cancelled", 100)
	done := e.start(t, context.Background(), cmd)
	if state, _, err := Cancel(context.Background(), e.store, cmd, "cancelled by alice"); err != nil || state != store.Absent {
		t.Fatalf("cancel: %v %v", state, err)
	}
	e.wantAnsweredUnrun(t, cmd, done, ReasonCommandCancelled)
}

// TestWaitRoomExpiresOnTime: a command whose guest stays busy past its expires time is answered
// 410 command_expired when it expires, not when the guard is given back or GuardWait passes.
func TestWaitRoomExpiresOnTime(t *testing.T) {
	t.Parallel()
	e := newWaitRoomEnv(t, 4, 2)
	cfg := e.p.cfg
	cfg.Now = time.Now // the expires time below passes in real time
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	followTable(t, p)
	e.p = p
	e.hold(t, "holder", 100, 0)
	cmd := guestCommand("expires", 100)
	cmd.Expires = time.Now().Add(300 * time.Millisecond)
	done := e.start(t, context.Background(), cmd)
	e.wantAnsweredUnrun(t, cmd, done, ReasonCommandExpired)
}

// TestWaitRoomGuestWaitersTakeTurns: two commands waiting for one guest run in turn, the
// longest waiting first, each woken when the one before it completes, each within its first
// delivery.
func TestWaitRoomGuestWaitersTakeTurns(t *testing.T) {
	t.Parallel()
	e := newWaitRoomEnv(t, 4, 2)
	holder := e.hold(t, "holder", 100, 0)
	first, second := guestCommand("first", 100), guestCommand("second", 100)
	firstDone := e.start(t, context.Background(), first)
	secondDone := e.start(t, context.Background(), second)
	if err := e.store.Release(context.Background(), holder); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd  events.Command
		done <-chan events.Disposition
	}{{first, firstDone}, {second, secondDone}} {
		if d := await(t, c.cmd.ID, c.done); d.Action != events.Ack {
			t.Fatalf("%s: %+v, want ack", c.cmd.ID, d)
		}
	}
	firstEntry, err1 := e.journal.FindJournalEntry(context.Background(), "", 0, first.ID)
	secondEntry, err2 := e.journal.FindJournalEntry(context.Background(), "", 0, second.ID)
	if err1 != nil || err2 != nil || secondEntry.ID < firstEntry.ID {
		t.Errorf("journal entries first %d (%v), second %d (%v): want the first to start first", firstEntry.ID, err1, secondEntry.ID, err2)
	}
	if w, _ := e.sc.counts(); w != 2 {
		t.Errorf("writes = %d, want 2", w)
	}
}

// claimCounter counts the scripts a Redis client runs.
type claimCounter struct{ n atomic.Int64 }

func (c *claimCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *claimCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" || cmd.Name() == "eval" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *claimCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if cmd.Name() == "evalsha" || cmd.Name() == "eval" {
				c.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// TestWaitRoomStartedCommandPastExpiryWaits: a command that had started (a replica died after
// claiming it) is finished even past its expires time; when its endpoint's slot is busy it
// waits for the slot like any other, without claiming again and again, and runs when the slot
// is given back.
func TestWaitRoomStartedCommandPastExpiryWaits(t *testing.T) {
	t.Parallel()
	e := newWaitRoomEnv(t, 1, 2)
	cmd := guestCommand("started", 100)
	cmd.Expires = e.clock.Now().Add(time.Minute)
	key := store.CommandKey{Source: cmd.Source, ID: cmd.ID}
	if c, err := e.store.Claim(context.Background(), store.ClaimRequest{Command: key, Owner: "dead/1/1"}); err != nil || c.State != store.Claimed {
		t.Fatalf("the dead replica's claim: %v %v", c.State, err)
	}
	e.clock.Advance(2 * time.Minute) // its lease and the command's expires time have passed
	holder := e.hold(t, "holder", 0, 1)
	var scripts claimCounter
	e.redis.AddHook(&scripts)
	done := make(chan events.Disposition, 1)
	go func() { done <- e.p.Handle(context.Background(), cmd, events.Delivery{Number: 2}) }()
	time.Sleep(300 * time.Millisecond)
	if n := scripts.n.Load(); n > 5 {
		t.Errorf("%d scripts run in 300 ms while the slot is held: the waiting command claims again and again", n)
	}
	if err := e.store.Release(context.Background(), holder); err != nil {
		t.Fatal(err)
	}
	if d := await(t, cmd.ID, done); d.Action != events.Ack {
		t.Fatalf("disposition %+v, want ack", d)
	}
	if res := e.stream.resultsOf(cmd.Ref()); len(res) != 1 || res[0].Status != 200 {
		t.Errorf("results %+v, want one 200: a started command is finished, not expired", res)
	}
}
