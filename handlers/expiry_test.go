package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// okScript is a script whose every dispatch writes once and answers 200 ok.
func okScript() *script {
	sc := &script{}
	sc.dispatch = []func(ctx context.Context, x *Exec) (Outcome, error){func(ctx context.Context, x *Exec) (Outcome, error) { return ok(ctx, x, sc) }}
	return sc
}

// wantOnlyResult fails the test unless the command's one first-hand result has status and
// reason, and nothing was written or journaled.
func wantOnlyResult(t *testing.T, l *lifecycle, sc *script, cmd events.Command, status int, reason string) events.Result {
	t.Helper()
	res := l.stream.resultsOf(cmd.Ref())
	if len(res) == 0 || res[0].Status != status || res[0].Reason != reason || res[0].Replayed {
		t.Fatalf("results %+v, want a first-hand %d %s", res, status, reason)
	}
	for _, r := range res[1:] {
		if !r.Replayed || r.Status != status || r.Reason != reason {
			t.Errorf("later result %+v, want a replay of the first", r)
		}
	}
	if w, _ := sc.counts(); w != 0 {
		t.Errorf("writes = %d, want 0", w)
	}
	if res[0].JournalFinalized != nil {
		t.Errorf("journal_finalized %v on a result without a journal entry (contract §3)", *res[0].JournalFinalized)
	}
	if len(l.journal.entries) != 0 {
		t.Errorf("journal entries %v, want none", l.journal.entries)
	}
	return res[0]
}

// TestExpiry pins contract §4 step 0: a command past its expires time, or older than the
// command max age (from its time attribute, else its arrival in the stream), is answered 410
// command_expired and does nothing, however often it is delivered; a younger one runs.
func TestExpiry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC) // newLifecycle's clock
	tests := []struct {
		name    string
		cmd     func(events.Command) events.Command
		stored  time.Time
		expired string // the detail's telling words; "" when the command must run
	}{
		{"expires passed", func(c events.Command) events.Command { c.Expires = now.Add(-time.Second); return c }, time.Time{}, "expires attribute"},
		{"older than the max age by its time", func(c events.Command) events.Command { c.Time = now.Add(-16 * time.Minute); return c }, time.Time{}, "time attribute"},
		{"older than the max age by its arrival", func(c events.Command) events.Command { return c }, now.Add(-16 * time.Minute), "arrival in the stream"},
		{"expires ahead and young", func(c events.Command) events.Command {
			c.Expires, c.Time = now.Add(time.Minute), now.Add(-14*time.Minute)
			return c
		}, now.Add(-14 * time.Minute), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sc := okScript()
			l := newLifecycle(t, sc)
			cmd := tt.cmd(testCommand("expiry"))
			for n := uint64(1); n <= 2; n++ {
				if d := l.p.Handle(context.Background(), cmd, events.Delivery{Number: n, Stored: tt.stored}); d.Action != events.Ack {
					t.Fatalf("delivery %d: %+v, want ack", n, d)
				}
			}
			if tt.expired == "" {
				if res := l.stream.resultsOf(cmd.Ref()); len(res) != 2 || res[0].Status != 200 || !res[1].Replayed {
					t.Fatalf("results %+v, want 200 and its replay", res)
				}
				return
			}
			res := wantOnlyResult(t, l, sc, cmd, 410, ReasonCommandExpired)
			if res.Result != ResultRefused || !strings.Contains(res.Detail, tt.expired) || !strings.Contains(res.Detail, "nothing was done") {
				t.Errorf("result %q detail %q, want refused and a detail naming %q", res.Result, res.Detail, tt.expired)
			}
		})
	}
}

// TestWaitingCommandExpires: a command waiting for a busy guest never started; once past its
// max age it is answered 410 and does not run when the guest is freed.
func TestWaitingCommandExpires(t *testing.T) {
	t.Parallel()
	sc := okScript()
	l := newLifecycle(t, sc)
	holder := store.ClaimRequest{Command: store.CommandKey{Source: "/other", ID: "holder"}, Owner: "other",
		Guards: store.Guards{Resource: &store.ResourceKey{EndpointID: 1, Kind: store.KindGuest, ID: "100"}}}
	claim, err := l.store.Claim(context.Background(), holder)
	if err != nil || claim.State != store.Claimed {
		t.Fatalf("holder claim %v %v", claim.State, err)
	}
	cmd := testCommand("waits-then-expires")
	cmd.Time = l.clock.Now()
	if d := l.deliver(cmd, 1); d.Action != events.Redeliver {
		t.Fatalf("delivery 1: %+v, want a redelivery (waiting)", d)
	}
	l.clock.Advance(DefaultCommandMaxAge + time.Second)
	if d := l.deliver(cmd, 2); d.Action != events.Ack {
		t.Fatalf("delivery 2: %+v, want ack", d)
	}
	if err := l.store.Complete(context.Background(), claim.Lease, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if d := l.deliver(cmd, 3); d.Action != events.Ack {
		t.Fatalf("delivery 3: %+v, want ack", d)
	}
	wantOnlyResult(t, l, sc, cmd, 410, ReasonCommandExpired)
}

// TestStartedCommandIsFinishedPastExpiry: a command whose write-ahead entry was written is
// finished even when its expiry passes while it waits for Proxmox.
func TestStartedCommandIsFinishedPastExpiry(t *testing.T) {
	t.Parallel()
	sc := &script{}
	sc.dispatch = []func(ctx context.Context, x *Exec) (Outcome, error){unreachable,
		func(ctx context.Context, x *Exec) (Outcome, error) { return ok(ctx, x, sc) }}
	l := newLifecycle(t, sc)
	cmd := testCommand("started")
	cmd.Expires = l.clock.Now().Add(time.Minute)
	if d := l.deliver(cmd, 1); d.Action != events.Redeliver {
		t.Fatalf("delivery 1: %+v, want a redelivery (Proxmox unreachable)", d)
	}
	l.clock.Advance(time.Hour)
	if d := l.deliver(cmd, 2); d.Action != events.Ack {
		t.Fatalf("delivery 2: %+v, want ack", d)
	}
	if res := l.stream.resultsOf(cmd.Ref()); len(res) != 1 || res[0].Status != 200 {
		t.Fatalf("results %+v, want one 200: a started command is finished", res)
	}
	if w, _ := sc.counts(); w != 1 {
		t.Errorf("writes = %d, want 1", w)
	}
}

// TestCancel pins `proxbus cancel` (contract §10): a command not started yet is answered 410
// command_cancelled and does nothing, whether it was queued, waiting for a busy guest, or
// would have been refused by the gate; a finished or started command is not cancelled.
func TestCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("queued", func(t *testing.T) {
		t.Parallel()
		sc := okScript()
		l := newLifecycle(t, sc)
		cmd := testCommand("queued")
		state, _, err := Cancel(ctx, l.store, cmd, "cancelled by alice")
		if err != nil || state != store.Absent {
			t.Fatalf("Cancel = %v %v, want Absent (cancelled)", state, err)
		}
		for n := uint64(1); n <= 2; n++ {
			if d := l.deliver(cmd, n); d.Action != events.Ack {
				t.Fatalf("delivery %d: %+v, want ack", n, d)
			}
		}
		if res := wantOnlyResult(t, l, sc, cmd, 410, ReasonCommandCancelled); res.Detail != "cancelled by alice" || res.EndpointID == nil || *res.EndpointID != 1 {
			t.Errorf("result %+v, want the detail given and the command's endpoint", res)
		}
	})
	t.Run("waiting for a busy guest", func(t *testing.T) {
		t.Parallel()
		sc := okScript()
		l := newLifecycle(t, sc)
		holder := store.ClaimRequest{Command: store.CommandKey{Source: "/other", ID: "holder"}, Owner: "other",
			Guards: store.Guards{Resource: &store.ResourceKey{EndpointID: 1, Kind: store.KindGuest, ID: "100"}}}
		if c, err := l.store.Claim(ctx, holder); err != nil || c.State != store.Claimed {
			t.Fatalf("holder claim %v %v", c.State, err)
		}
		cmd := testCommand("waiting")
		if d := l.deliver(cmd, 1); d.Action != events.Redeliver {
			t.Fatalf("delivery 1: %+v, want a redelivery (waiting)", d)
		}
		if state, _, err := Cancel(ctx, l.store, cmd, "cancelled"); err != nil || state != store.Absent {
			t.Fatalf("Cancel = %v %v", state, err)
		}
		if d := l.deliver(cmd, 2); d.Action != events.Ack {
			t.Fatalf("delivery 2: %+v, want ack while the guest is still busy", d)
		}
		wantOnlyResult(t, l, sc, cmd, 410, ReasonCommandCancelled)
	})
	t.Run("refused by the gate", func(t *testing.T) {
		t.Parallel()
		sc := okScript()
		l := newLifecycle(t, sc)
		cmd := testCommand("gated")
		cmd.EndpointID = 2 // not in the endpoints file: the gate would answer 403
		if state, _, err := Cancel(ctx, l.store, cmd, "cancelled"); err != nil || state != store.Absent {
			t.Fatalf("Cancel = %v %v", state, err)
		}
		if d := l.deliver(cmd, 1); d.Action != events.Ack {
			t.Fatalf("delivery 1: %+v, want ack", d)
		}
		wantOnlyResult(t, l, sc, cmd, 410, ReasonCommandCancelled)
	})
	t.Run("finished", func(t *testing.T) {
		t.Parallel()
		sc := okScript()
		l := newLifecycle(t, sc)
		cmd := testCommand("finished")
		if d := l.deliver(cmd, 1); d.Action != events.Ack {
			t.Fatalf("delivery 1: %+v", d)
		}
		state, res, err := Cancel(ctx, l.store, cmd, "cancelled")
		if err != nil || state != store.Finished || res.Status != 200 {
			t.Fatalf("Cancel = %v %+v %v, want Finished with the 200 result", state, res, err)
		}
	})
	t.Run("started", func(t *testing.T) {
		t.Parallel()
		sc := &script{}
		sc.dispatch = []func(ctx context.Context, x *Exec) (Outcome, error){unreachable,
			func(ctx context.Context, x *Exec) (Outcome, error) { return ok(ctx, x, sc) }}
		l := newLifecycle(t, sc)
		cmd := testCommand("started")
		if d := l.deliver(cmd, 1); d.Action != events.Redeliver {
			t.Fatalf("delivery 1: %+v, want a redelivery", d)
		}
		if state, _, err := Cancel(ctx, l.store, cmd, "cancelled"); err != nil || state != store.Running {
			t.Fatalf("Cancel = %v %v, want Running (not cancelled)", state, err)
		}
		if d := l.deliver(cmd, 2); d.Action != events.Ack {
			t.Fatalf("delivery 2: %+v", d)
		}
		if res := l.stream.resultsOf(cmd.Ref()); len(res) != 1 || res[0].Status != 200 {
			t.Fatalf("results %+v, want the command's own 200", res)
		}
	})
}

// TestReplayOncePerDuplicate: a redelivery of the message that finished a command (its ack
// was lost) publishes no second result; a duplicate publish of the command (another message)
// gets its replay (contract §3, §5).
func TestReplayOncePerDuplicate(t *testing.T) {
	t.Parallel()
	sc := okScript()
	l := newLifecycle(t, sc)
	cmd := testCommand("replays")
	deliver := func(n, seq uint64) {
		t.Helper()
		if d := l.p.Handle(context.Background(), cmd, events.Delivery{Number: n, StreamSeq: seq}); d.Action != events.Ack {
			t.Fatalf("delivery %d of message %d: %+v, want ack", n, seq, d)
		}
	}
	deliver(1, 7)
	deliver(2, 7) // the ack was lost: the same message again
	if res := l.stream.resultsOf(cmd.Ref()); len(res) != 1 || res[0].Replayed {
		t.Fatalf("results %+v, want only the first-hand one", res)
	}
	deliver(1, 9) // a duplicate publish
	if res := l.stream.resultsOf(cmd.Ref()); len(res) != 2 || !res[1].Replayed || res[1].Status != 200 {
		t.Fatalf("results %+v, want the first-hand one and a replay for the duplicate", res)
	}
	if w, _ := sc.counts(); w != 1 {
		t.Errorf("writes = %d, want 1", w)
	}
}

// TestStartedCommandNotLocatedIsUnconfirmed: a command that stopped after its write may
// have been sent, and whose object can no longer be located on its next delivery (a guest
// deleted by that very write), is not answered the locate's refusal (404 would say nothing
// happened): it ends 502 proxmox_write_unconfirmed and its journal entry is finalized.
func TestStartedCommandNotLocatedIsUnconfirmed(t *testing.T) {
	t.Parallel()
	sc := &script{}
	sc.dispatch = []func(ctx context.Context, x *Exec) (Outcome, error){func(ctx context.Context, x *Exec) (Outcome, error) {
		if _, err := x.Write(ctx, "write", "", sc.send(nil)); err != nil {
			return Outcome{}, err
		}
		// Proxmox stops answering while the task is waited for
		return Outcome{}, &proxmox.TransportError{Method: "GET", Path: "/nodes/pve1/tasks/x/status", Err: errors.New("connection refused")}
	}}
	l := newLifecycle(t, sc)
	cmd := testCommand("gone")
	if d := l.deliver(cmd, 1); d.Action != events.Redeliver {
		t.Fatalf("delivery 1: %+v, want a redelivery (the write may have been sent)", d)
	}
	sc.mu.Lock()
	sc.locate = func() error { return fmt.Errorf("resolve: %w", proxmox.ErrVMNotFound) }
	sc.mu.Unlock()
	if d := l.deliver(cmd, 2); d.Action != events.Ack {
		t.Fatalf("delivery 2: %+v, want ack", d)
	}
	res := l.stream.resultsOf(cmd.Ref())
	if len(res) != 1 || res[0].Status != 502 || res[0].Reason != ReasonProxmoxWriteUnconfirmed || !res[0].Finalized() {
		t.Fatalf("results %+v, want one 502 proxmox_write_unconfirmed with its journal entry finalized", res)
	}
	if n := l.journal.inProgress(); n != 0 {
		t.Errorf("%d journal entries still in_progress", n)
	}
	if w, _ := sc.counts(); w != 1 {
		t.Errorf("writes = %d, want 1", w)
	}
}

// TestStartedCommandNotLocatedNothingSent: a command whose owner died after its write-ahead
// entry but before marking any write, and whose guest is gone when it resumes, sent nothing:
// it is answered the locate's refusal (404 vm_not_found: the guest is gone, and this command
// did nothing), its journal entry finalized with it, never left in_progress.
func TestStartedCommandNotLocatedNothingSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := okScript()
	sc.locate = func() error { return fmt.Errorf("resolve: %w", proxmox.ErrVMNotFound) }
	l := newLifecycle(t, sc)
	cmd := testCommand("gone-unsent")
	claim, err := l.store.Claim(ctx, store.ClaimRequest{Command: store.CommandKey{Source: cmd.Source, ID: cmd.ID}, Owner: "dead/1/1"})
	if err != nil || claim.State != store.Claimed {
		t.Fatalf("claim %v %v", claim.State, err)
	}
	if _, err := l.journal.CreateJournalEntry(ctx, netbox.JournalEntry{Comments: "- result: in_progress\n- command_id: gone-unsent\n"}); err != nil {
		t.Fatal(err)
	}
	l.clock.Advance(31 * time.Second)
	if d := l.deliver(cmd, 2); d.Action != events.Ack {
		t.Fatalf("delivery 2: %+v, want ack", d)
	}
	res := l.stream.resultsOf(cmd.Ref())
	if len(res) != 1 || res[0].Status != 404 || res[0].Reason != ReasonVMNotFound || !res[0].Finalized() {
		t.Fatalf("results %+v, want one 404 vm_not_found with its journal entry finalized", res)
	}
	if n := l.journal.inProgress(); n != 0 {
		t.Errorf("%d journal entries still in_progress", n)
	}
	if w, _ := sc.counts(); w != 0 {
		t.Errorf("writes = %d, want 0", w)
	}
}
