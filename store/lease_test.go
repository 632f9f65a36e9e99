package store_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/proxbus/proxbus/store"
)

// takeover claims cmdA (with the key) as "old", suspends it with progress and has "new"
// resume it. It returns both leases.
func takeover(t *testing.T, e *env) (old, cur store.Lease) {
	t.Helper()
	ctx := context.Background()
	c := e.mustClaim(t, req(cmdA, scope, "fp1", "old"), store.Claimed)
	if err := e.s.Suspend(ctx, c.Lease, store.Progress{JournalID: 9, Dispatched: true}); err != nil {
		t.Fatalf("suspend: %v", err)
	}
	n := e.mustClaim(t, req(cmdA, scope, "fp1", "new"), store.Resumed)
	if want := (store.Progress{JournalID: 9, Dispatched: true}); !reflect.DeepEqual(n.Progress, want) || !n.ProgressKnown {
		t.Fatalf("resumed progress %+v (known %v), want %+v", n.Progress, n.ProgressKnown, want)
	}
	return c.Lease, n.Lease
}

// TestFencing pins that an owner who was taken over can change nothing: every lease operation
// returns ErrLeaseLost and the new owner's record stays intact and completable.
func TestFencing(t *testing.T) {
	t.Parallel()
	ops := []struct {
		name string
		op   func(ctx context.Context, s *store.Store, old store.Lease) error
	}{
		{"complete", func(ctx context.Context, s *store.Store, l store.Lease) error {
			return s.Complete(ctx, l, []byte("stale"))
		}},
		{"suspend", func(ctx context.Context, s *store.Store, l store.Lease) error {
			return s.Suspend(ctx, l, store.Progress{JournalID: 1, JournalURL: "stale"})
		}},
		{"yield", func(ctx context.Context, s *store.Store, l store.Lease) error { return s.Yield(ctx, l) }},
		{"release", func(ctx context.Context, s *store.Store, l store.Lease) error { return s.Release(ctx, l) }},
		{"renew", func(ctx context.Context, s *store.Store, l store.Lease) error { return s.Renew(ctx, l) }},
	}
	for _, tt := range ops {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newEnv(t, nil)
			old, cur := takeover(t, e)
			wantErr(t, tt.name, tt.op(ctx, e.s, old), store.ErrLeaseLost)

			// the new owner still holds a live lease; the stale owner recorded nothing: when the
			// new owner stops without suspending, its successor knows no progress (it must look
			// for the journal entry itself)
			e.mustClaim(t, req(cmdA, scope, "fp1", "third"), store.Busy)
			e.mustClaim(t, req(cmdB, scope, "fp1", "other"), store.IdemInFlight)
			e.clk.Advance(store.DefaultLeaseTTL + time.Millisecond)
			again := e.mustClaim(t, req(cmdA, scope, "fp1", "new"), store.Resumed)
			if !reflect.DeepEqual(again.Progress, store.Progress{}) || again.ProgressKnown {
				t.Fatalf("progress %+v (known %v), want none", again.Progress, again.ProgressKnown)
			}
			if err := e.s.Complete(ctx, again.Lease, []byte("fresh")); err != nil {
				t.Fatalf("complete by the current owner: %v", err)
			}
			wantErr(t, "complete by the previous lease", e.s.Complete(ctx, cur, []byte("stale")), store.ErrLeaseLost)
			got := e.mustClaim(t, req(cmdA, scope, "fp1", "late"), store.Done)
			if string(got.Result) != "fresh" {
				t.Fatalf("result %q, want fresh", got.Result)
			}
		})
	}
}

// TestCompleteThenDone pins that a completed command is Done with its result, that its key
// replays the result, and that a retried Complete with the same lease is accepted.
func TestCompleteThenDone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	l := e.mustComplete(t, req(cmdA, scope, "fp1", "o1"), "v1")
	if err := e.s.Complete(ctx, l, []byte("v1")); err != nil {
		t.Fatalf("repeated complete: %v", err)
	}
	got := e.mustClaim(t, req(cmdA, scope, "fp1", "o2"), store.Done)
	if string(got.Result) != "v1" {
		t.Fatalf("result %q, want v1", got.Result)
	}
	res, err := e.s.Result(ctx, cmdA)
	if err != nil || string(res) != "v1" {
		t.Fatalf("Result = %q, %v; want v1", res, err)
	}
	replay := e.mustClaim(t, req(cmdB, scope, "fp1", "o3"), store.IdemReplay)
	if string(replay.Result) != "v1" {
		t.Fatalf("replay %q, want v1", replay.Result)
	}
	wantErr(t, "release of a done command", e.s.Release(ctx, l), store.ErrLeaseLost)
	e.mustClaim(t, req(cmdA, nil, "fp1", "o4"), store.Done)
}

// TestCompleteRecreatesExpiredKey pins that a completion whose running key record has
// expired still opens the window for that key, and leaves a key another command took alone.
func TestCompleteRecreatesExpiredKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	a := e.mustClaim(t, req(cmdA, scope, "fp1", "o1"), store.Claimed)
	if err := e.redis.Client.Del(ctx, idemKeyName(e.redis.Prefix, *scope)).Err(); err != nil {
		t.Fatalf("del: %v", err)
	}
	if err := e.s.Complete(ctx, a.Lease, []byte("a")); err != nil {
		t.Fatalf("complete: %v", err)
	}
	got := e.mustClaim(t, req(cmdB, scope, "fp1", "o2"), store.IdemReplay)
	if string(got.Result) != "a" || got.OriginalCommand != cmdA {
		t.Fatalf("replay %q of %+v, want a of cmdA", got.Result, got.OriginalCommand)
	}

	// cmdC's key expires on the lease clock; cmdB takes it over; cmdC completing late keeps its
	// own identity result but does not overwrite cmdB's key record.
	other := &store.IdemScope{EndpointID: 1, Verb: "vm.start", Resource: "100", Key: "k2"}
	c := e.mustClaim(t, req(cmdC, other, "fp1", "o3"), store.Claimed)
	e.clk.Advance(store.DefaultLeaseTTL + time.Millisecond)
	// cmdC stopped without suspending: it may have begun, so the twin waits
	e.mustClaim(t, req(cmdB, other, "fp1", "o4"), store.IdemInFlight)
	// cmdC's owner suspends before its journal entry (nothing begun): the key is free
	if err := e.s.Suspend(ctx, c.Lease, store.Progress{}); err != nil {
		t.Fatalf("suspend cmdC: %v", err)
	}
	b := e.mustClaim(t, req(cmdB, other, "fp1", "o4"), store.Claimed)
	if err := e.s.Complete(ctx, c.Lease, []byte("c")); err != nil {
		t.Fatalf("late complete of cmdC: %v", err)
	}
	inflight := e.mustClaim(t, req(store.CommandKey{Source: "s", ID: "d"}, other, "fp1", "o5"), store.IdemInFlight)
	if inflight.OriginalCommand != cmdB {
		t.Fatalf("key owner %+v, want cmdB", inflight.OriginalCommand)
	}
	if err := e.s.Complete(ctx, b.Lease, []byte("b")); err != nil {
		t.Fatalf("complete of cmdB: %v", err)
	}
	replay := e.mustClaim(t, req(store.CommandKey{Source: "s", ID: "d"}, other, "fp1", "o5"), store.IdemReplay)
	if string(replay.Result) != "b" {
		t.Fatalf("replay %q, want b", replay.Result)
	}
}

// TestCompleteReplay pins when a replayed result is recorded for a command's identity.
func TestCompleteReplay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(t *testing.T, e *env)
		wantErr error
		want    string // stored result afterwards, "" for none
	}{
		{name: "absent identity is recorded", want: "replayed"},
		{
			name:  "done identity keeps its result",
			setup: func(t *testing.T, e *env) { e.mustComplete(t, req(cmdB, nil, "fp", "o1"), "original") },
			want:  "original",
		},
		{
			name:    "live claim is not overwritten",
			setup:   func(t *testing.T, e *env) { e.mustClaim(t, req(cmdB, nil, "fp", "o1"), store.Claimed) },
			wantErr: store.ErrLeaseLost,
		},
		{
			name: "expired claim is replaced",
			setup: func(t *testing.T, e *env) {
				e.mustClaim(t, req(cmdB, nil, "fp", "o1"), store.Claimed)
				e.clk.Advance(store.DefaultLeaseTTL + time.Millisecond)
			},
			want: "replayed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newEnv(t, nil)
			if tt.setup != nil {
				tt.setup(t, e)
			}
			wantErr(t, "complete replay", e.s.CompleteReplay(ctx, cmdB, []byte("replayed")), tt.wantErr)
			res, err := e.s.Result(ctx, cmdB)
			if tt.want == "" {
				wantErr(t, "result", err, store.ErrNotFound)
				return
			}
			if err != nil || string(res) != tt.want {
				t.Fatalf("result %q, %v; want %q", res, err, tt.want)
			}
			got := e.mustClaim(t, req(cmdB, scope, "fp", "o9"), store.Done)
			if string(got.Result) != tt.want {
				t.Fatalf("claim result %q, want %q", got.Result, tt.want)
			}
		})
	}
}

// TestRelease pins that a released claim starts fresh and frees its key, and that releasing
// twice is harmless.
func TestRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	c := e.mustClaim(t, req(cmdA, scope, "fp1", "o1"), store.Claimed)
	if err := e.s.Release(ctx, c.Lease); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := e.s.Release(ctx, c.Lease); err != nil {
		t.Fatalf("second release: %v", err)
	}
	wantErr(t, "renew after release", e.s.Renew(ctx, c.Lease), store.ErrLeaseLost)
	// the key is free for another command with another fingerprint
	b := e.mustClaim(t, req(cmdB, scope, "fp2", "o2"), store.Claimed)
	// and the released command starts fresh: Claimed, not Resumed
	e.mustClaim(t, req(cmdA, nil, "fp1", "o3"), store.Claimed)
	wantErr(t, "old lease after fresh claim", e.s.Release(ctx, c.Lease), store.ErrLeaseLost)
	if err := e.s.Release(ctx, b.Lease); err != nil {
		t.Fatalf("release b: %v", err)
	}
}

// TestRenew pins that renewing extends the lease (and the key record's) past the original
// deadline, and that without renewal the claim can be taken over.
func TestRenew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	c := e.mustClaim(t, req(cmdA, scope, "fp1", "o1"), store.Claimed)
	e.clk.Advance(20 * time.Second)
	if err := e.s.Renew(ctx, c.Lease); err != nil {
		t.Fatalf("renew: %v", err)
	}
	e.clk.Advance(20 * time.Second) // 40 s after the claim, 20 s after the renewal
	e.mustClaim(t, req(cmdA, scope, "fp1", "o2"), store.Busy)
	e.mustClaim(t, req(cmdB, scope, "fp1", "o3"), store.IdemInFlight)
	e.clk.Advance(11 * time.Second) // 31 s after the renewal
	// cmdA's owner stopped without suspending: the twin keeps waiting, cmdA's own
	// redelivery resumes it without known progress
	e.mustClaim(t, req(cmdB, scope, "fp1", "o3"), store.IdemInFlight)
	if got := e.mustClaim(t, req(cmdA, scope, "fp1", "o2"), store.Resumed); got.ProgressKnown {
		t.Fatalf("progress known after a crash: %+v", got.Progress)
	}
}

// TestUpdateResult pins that a repaired result replaces the stored one for later replays of
// both the command and its key, and that only done commands can be updated.
func TestUpdateResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	wantErr(t, "unknown command", e.s.UpdateResult(ctx, cmdA, []byte("x")), store.ErrNotFound)
	c := e.mustClaim(t, req(cmdA, scope, "fp1", "o1"), store.Claimed)
	wantErr(t, "running command", e.s.UpdateResult(ctx, cmdA, []byte("x")), store.ErrNotFound)
	if err := e.s.Complete(ctx, c.Lease, []byte(`{"journal_finalized":false}`)); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if err := e.s.UpdateResult(ctx, cmdA, []byte(`{"journal_finalized":true}`)); err != nil {
		t.Fatalf("update: %v", err)
	}
	res, err := e.s.Result(ctx, cmdA)
	if err != nil || string(res) != `{"journal_finalized":true}` {
		t.Fatalf("result %q, %v", res, err)
	}
	replay := e.mustClaim(t, req(cmdB, scope, "fp1", "o2"), store.IdemReplay)
	if string(replay.Result) != `{"journal_finalized":true}` {
		t.Fatalf("replay %q", replay.Result)
	}
	// a command without a key can be updated too
	e.mustComplete(t, req(cmdC, nil, "fp", "o3"), "old")
	if err := e.s.UpdateResult(ctx, cmdC, []byte("new")); err != nil {
		t.Fatalf("update without key: %v", err)
	}
	if res, _ := e.s.Result(ctx, cmdC); string(res) != "new" {
		t.Fatalf("result %q, want new", res)
	}
}

// TestSuspend pins that a suspended command is resumed at once by the next claim, with exactly
// the progress given (a later suspension replaces it: the dispatch marker may go back to
// false), while its Idempotency-Key still makes a twin wait, and that a stale owner cannot
// suspend.
func TestSuspend(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	first := e.mustClaim(t, req(cmdA, scope, "fp1", "first"), store.Claimed).Lease
	owner := first
	for i, p := range []store.Progress{
		{JournalID: 4, JournalURL: "u4", Dispatched: true},
		{JournalID: 4, JournalURL: "u4", Dispatched: false},
	} {
		if err := e.s.Suspend(ctx, owner, p); err != nil {
			t.Fatalf("suspend %+v: %v", p, err)
		}
		e.mustClaim(t, req(cmdB, scope, "fp1", "twin"), store.IdemInFlight)
		again := e.mustClaim(t, req(cmdA, scope, "fp1", fmt.Sprintf("next-%d", i)), store.Resumed)
		if !reflect.DeepEqual(again.Progress, p) || !again.ProgressKnown {
			t.Errorf("resumed progress %+v (known %v), want %+v", again.Progress, again.ProgressKnown, p)
		}
		owner = again.Lease
	}
	wantErr(t, "stale suspend", e.s.Suspend(ctx, first, store.Progress{}), store.ErrLeaseLost)
}
