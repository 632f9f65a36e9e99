package store_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/proxbus/proxbus/store"
)

// TestClaimPaths pins every outcome of Claim, in the order the contract checks them.
func TestClaimPaths(t *testing.T) {
	t.Parallel()
	expired := store.DefaultLeaseTTL + time.Millisecond
	progress := store.Progress{JournalID: 42, JournalURL: "https://netbox/api/extras/journal-entries/42/", Dispatched: true}

	tests := []struct {
		name  string
		setup func(t *testing.T, e *env)
		req   store.ClaimRequest
		want  store.Claim // Lease is checked for being set on Claimed/Resumed only
		after func(t *testing.T, e *env, got store.Claim)
	}{
		{
			name: "new command without key is claimed",
			req:  req(cmdA, nil, "fp1", "o1"),
			want: store.Claim{State: store.Claimed},
		},
		{
			name: "new command with key is claimed",
			req:  req(cmdA, scope, "fp1", "o1"),
			want: store.Claim{State: store.Claimed},
			after: func(t *testing.T, e *env, _ store.Claim) {
				// the key now belongs to cmdA: another command waits
				got := e.mustClaim(t, req(cmdB, scope, "fp1", "o2"), store.IdemInFlight)
				if got.OriginalCommand != cmdA {
					t.Fatalf("original %+v, want %+v", got.OriginalCommand, cmdA)
				}
			},
		},
		{
			name:  "done identity returns its result",
			setup: func(t *testing.T, e *env) { e.mustComplete(t, req(cmdA, nil, "fp1", "o1"), `{"status":201}`) },
			req:   req(cmdA, nil, "fp1", "o2"),
			want:  store.Claim{State: store.Done, Result: []byte(`{"status":201}`)},
		},
		{
			name:  "done identity wins over the idempotency record",
			setup: func(t *testing.T, e *env) { e.mustComplete(t, req(cmdA, scope, "fp1", "o1"), "first") },
			req:   req(cmdA, scope, "other-fingerprint", "o2"),
			want:  store.Claim{State: store.Done, Result: []byte("first")},
		},
		{
			name:  "live lease of another owner is busy",
			setup: func(t *testing.T, e *env) { e.mustClaim(t, req(cmdA, nil, "fp1", "o1"), store.Claimed) },
			req:   req(cmdA, nil, "fp1", "o2"),
			want:  store.Claim{State: store.Busy},
		},
		{
			name: "suspended command is resumed with the recorded progress",
			setup: func(t *testing.T, e *env) {
				c := e.mustClaim(t, req(cmdA, scope, "fp1", "o1"), store.Claimed)
				if err := e.s.Suspend(context.Background(), c.Lease, progress); err != nil {
					t.Fatalf("suspend: %v", err)
				}
			},
			req:  req(cmdA, scope, "fp1", "o2"),
			want: store.Claim{State: store.Resumed, Progress: progress, ProgressKnown: true},
		},
		{
			// o1 suspended with progress; o1b resumed with it, then crashed: o1's progress is
			// not handed on, since o1b may have gone further
			name: "expired lease of a crashed owner is resumed without known progress",
			setup: func(t *testing.T, e *env) {
				c := e.mustClaim(t, req(cmdA, scope, "fp1", "o1"), store.Claimed)
				if err := e.s.Suspend(context.Background(), c.Lease, progress); err != nil {
					t.Fatalf("suspend: %v", err)
				}
				e.mustClaim(t, req(cmdA, scope, "fp1", "o1b"), store.Resumed)
				e.clk.Advance(expired)
			},
			req:  req(cmdA, scope, "fp1", "o2"),
			want: store.Claim{State: store.Resumed},
		},
		{
			name: "same owner claiming again resumes",
			setup: func(t *testing.T, e *env) {
				e.mustClaim(t, req(cmdA, nil, "fp1", "o1"), store.Claimed)
			},
			req:  req(cmdA, nil, "fp1", "o1"),
			want: store.Claim{State: store.Resumed},
		},
		{
			name:  "key of another command with another fingerprint is reused",
			setup: func(t *testing.T, e *env) { e.mustComplete(t, req(cmdA, scope, "fp1", "o1"), "first") },
			req:   req(cmdB, scope, "fp2", "o2"),
			want:  store.Claim{State: store.IdemReused, OriginalCommand: cmdA},
			after: noRecordFor(cmdB),
		},
		{
			name:  "key of another running command with another fingerprint is reused",
			setup: func(t *testing.T, e *env) { e.mustClaim(t, req(cmdA, scope, "fp1", "o1"), store.Claimed) },
			req:   req(cmdB, scope, "fp2", "o2"),
			want:  store.Claim{State: store.IdemReused, OriginalCommand: cmdA},
			after: noRecordFor(cmdB),
		},
		{
			name:  "key of another done command with the same fingerprint replays",
			setup: func(t *testing.T, e *env) { e.mustComplete(t, req(cmdA, scope, "fp1", "o1"), `{"status":201}`) },
			req:   req(cmdB, scope, "fp1", "o2"),
			want:  store.Claim{State: store.IdemReplay, Result: []byte(`{"status":201}`), OriginalCommand: cmdA},
			after: noRecordFor(cmdB),
		},
		{
			name: "a done key replays whatever the lease clock says",
			setup: func(t *testing.T, e *env) {
				e.mustComplete(t, req(cmdA, scope, "fp1", "o1"), "first")
				e.clk.Advance(time.Hour)
			},
			req:  req(cmdB, scope, "fp1", "o2"),
			want: store.Claim{State: store.IdemReplay, Result: []byte("first"), OriginalCommand: cmdA},
		},
		{
			name:  "key of another running command with the same fingerprint is in flight",
			setup: func(t *testing.T, e *env) { e.mustClaim(t, req(cmdA, scope, "fp1", "o1"), store.Claimed) },
			req:   req(cmdB, scope, "fp1", "o2"),
			want:  store.Claim{State: store.IdemInFlight, OriginalCommand: cmdA},
			after: noRecordFor(cmdB),
		},
		{
			name: "key of a command that crashed is in flight (it may have begun)",
			setup: func(t *testing.T, e *env) {
				e.mustClaim(t, req(cmdA, scope, "fp1", "o1"), store.Claimed)
				e.clk.Advance(expired)
			},
			req:   req(cmdB, scope, "fp1", "o2"),
			want:  store.Claim{State: store.IdemInFlight, OriginalCommand: cmdA},
			after: noRecordFor(cmdB),
		},
		{
			name: "key of a command suspended before it began is taken over",
			setup: func(t *testing.T, e *env) {
				c := e.mustClaim(t, req(cmdA, scope, "fp1", "o1"), store.Claimed)
				if err := e.s.Suspend(context.Background(), c.Lease, store.Progress{}); err != nil {
					t.Fatalf("suspend: %v", err)
				}
				e.clk.Advance(expired) // the key record keeps its lease until then
			},
			req:  req(cmdB, scope, "fp1", "o2"),
			want: store.Claim{State: store.Claimed},
			after: func(t *testing.T, e *env, _ store.Claim) {
				got := e.mustClaim(t, req(cmdC, scope, "fp1", "o3"), store.IdemInFlight)
				if got.OriginalCommand != cmdB {
					t.Fatalf("original %+v, want the new owner %+v", got.OriginalCommand, cmdB)
				}
				// the crashed command resumes but now waits for the key's new owner
				e.mustClaim(t, req(cmdA, scope, "fp1", "o4"), store.IdemInFlight)
			},
		},
		{
			name: "expired key is taken over even with another fingerprint",
			setup: func(t *testing.T, e *env) {
				c := e.mustClaim(t, req(cmdA, scope, "fp1", "o1"), store.Claimed)
				if err := e.s.Suspend(context.Background(), c.Lease, store.Progress{}); err != nil {
					t.Fatalf("suspend: %v", err)
				}
				e.clk.Advance(expired)
			},
			req:  req(cmdB, scope, "fp2", "o2"),
			want: store.Claim{State: store.Claimed},
		},
		{
			name: "another command's key does not affect a command without a key",
			setup: func(t *testing.T, e *env) {
				e.mustClaim(t, req(cmdA, scope, "fp1", "o1"), store.Claimed)
			},
			req:  req(cmdB, nil, "fp1", "o2"),
			want: store.Claim{State: store.Claimed},
		},
		{
			name: "same key in another scope is independent",
			setup: func(t *testing.T, e *env) {
				e.mustClaim(t, req(cmdA, scope, "fp1", "o1"), store.Claimed)
			},
			req:  req(cmdB, &store.IdemScope{EndpointID: 2, Verb: scope.Verb, Resource: scope.Resource, Key: scope.Key}, "fp2", "o2"),
			want: store.Claim{State: store.Claimed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			if tt.setup != nil {
				tt.setup(t, e)
			}
			got, err := e.s.Claim(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("claim: %v", err)
			}
			assertClaim(t, tt.req, got, tt.want)
			if tt.after != nil {
				tt.after(t, e, got)
			}
		})
	}
}

// assertClaim compares everything but the token, which must be positive for a held lease.
func assertClaim(t *testing.T, r store.ClaimRequest, got, want store.Claim) {
	t.Helper()
	if got.State != want.State {
		t.Fatalf("state %v, want %v", got.State, want.State)
	}
	if string(got.Result) != string(want.Result) {
		t.Errorf("result %q, want %q", got.Result, want.Result)
	}
	if !reflect.DeepEqual(got.Progress, want.Progress) || got.ProgressKnown != want.ProgressKnown {
		t.Errorf("progress %+v (known %v), want %+v (known %v)", got.Progress, got.ProgressKnown, want.Progress, want.ProgressKnown)
	}
	if got.BusyGuard != want.BusyGuard {
		t.Errorf("busy guard %q, want %q", got.BusyGuard, want.BusyGuard)
	}
	if got.OriginalCommand != want.OriginalCommand {
		t.Errorf("original command %+v, want %+v", got.OriginalCommand, want.OriginalCommand)
	}
	held := got.State == store.Claimed || got.State == store.Resumed
	if held {
		l := got.Lease
		if l.Token <= 0 || l.Owner != r.Owner || l.Command != r.Command || l.Idem != r.Idem {
			t.Errorf("lease %+v does not match request %+v", l, r)
		}
	} else if got.Lease != (store.Lease{}) {
		t.Errorf("lease %+v for state %v, want none", got.Lease, got.State)
	}
}

// noRecordFor checks that no identity record was written for c: a later claim without a key
// is a fresh Claimed, not Resumed or Busy.
func noRecordFor(c store.CommandKey) func(t *testing.T, e *env, _ store.Claim) {
	return func(t *testing.T, e *env, _ store.Claim) {
		t.Helper()
		if _, err := e.s.Result(context.Background(), c); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("result of %+v: %v, want ErrNotFound", c, err)
		}
		e.mustClaim(t, req(c, nil, "fp", "later-owner"), store.Claimed)
	}
}

// TestClaimTokensIncrease pins that every claim gets a new, larger fencing token.
func TestClaimTokensIncrease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	first := e.mustClaim(t, req(cmdA, nil, "fp", "o1"), store.Claimed)
	e.clk.Advance(store.DefaultLeaseTTL + time.Millisecond)
	second := e.mustClaim(t, req(cmdA, nil, "fp", "o2"), store.Resumed)
	third := e.mustClaim(t, req(cmdB, nil, "fp", "o3"), store.Claimed)
	if !(first.Lease.Token < second.Lease.Token && second.Lease.Token < third.Lease.Token) {
		t.Fatalf("tokens %d, %d, %d are not increasing", first.Lease.Token, second.Lease.Token, third.Lease.Token)
	}
}

// TestClaimInvalid pins that a request without owner, source or id is refused before Redis.
func TestClaimInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, r := range []store.ClaimRequest{
		req(cmdA, nil, "fp", ""),
		req(store.CommandKey{ID: "x"}, nil, "fp", "o"),
		req(store.CommandKey{Source: "s"}, nil, "fp", "o"),
	} {
		_, err := e.s.Claim(context.Background(), r)
		wantErr(t, "claim", err, store.ErrInvalid)
	}
}

// TestClaimStateString pins the names used in logs.
func TestClaimStateString(t *testing.T) {
	t.Parallel()
	for state, want := range map[store.ClaimState]string{
		store.Claimed: "claimed", store.Resumed: "resumed", store.Busy: "busy", store.Done: "done",
		store.IdemReplay: "idem_replay", store.IdemInFlight: "idem_inflight", store.IdemReused: "idem_reused",
		store.ClaimState(0): "ClaimState(0)",
	} {
		if got := state.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(state), got, want)
		}
	}
}

// TestIdemTwinWaitsForAStartedCommand pins that a twin never starts over a key whose command
// may have begun its work (it stopped without suspending, or suspended after its journal entry
// or dispatch: it resumes on its own redelivery), while a key whose command suspended before
// beginning is taken over.
func TestIdemTwinWaitsForAStartedCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		suspend  bool
		progress store.Progress
		want     store.ClaimState
	}{
		{"crashed", false, store.Progress{}, store.IdemInFlight},
		{"suspended after dispatch", true, store.Progress{Dispatched: true}, store.IdemInFlight},
		{"suspended after the journal entry", true, store.Progress{JournalID: 3, JournalURL: "u"}, store.IdemInFlight},
		{"suspended before beginning", true, store.Progress{}, store.Claimed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			ctx := context.Background()
			c := e.mustClaim(t, req(cmdA, scope, "fp1", "dead"), store.Claimed)
			if tt.suspend {
				if err := e.s.Suspend(ctx, c.Lease, tt.progress); err != nil {
					t.Fatal(err)
				}
			}
			e.clk.Advance(store.DefaultLeaseTTL + time.Millisecond)
			e.mustClaim(t, req(cmdB, scope, "fp1", "twin"), tt.want)
		})
	}
}
