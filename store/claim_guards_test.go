package store_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxbus/proxbus/store"
)

var (
	guest100 = store.GuestResource(1, 100)
	node1    = store.NodeResource(1, "pve1")
)

// command returns a distinct command per id.
func command(id string) store.CommandKey {
	return store.CommandKey{Source: "/netbox/webhook/7", ID: id}
}

// withResource is a claim of c by owner (no Idempotency-Key) holding the lease on k.
func withResource(c store.CommandKey, owner string, k store.ResourceKey) store.ClaimRequest {
	r := req(c, nil, "fp1", owner)
	r.Guards.Resource = &k
	return r
}

// withSlot is a claim of c by owner (no Idempotency-Key) holding one of the max slots of
// endpoint.
func withSlot(c store.CommandKey, owner string, endpoint int64, max int) store.ClaimRequest {
	r := req(c, nil, "fp1", owner)
	r.Guards.Slot = &store.SlotRequest{EndpointID: endpoint, Max: max}
	return r
}

// slotCount returns how many holders the endpoint's slot set has in Redis.
func (e *env) slotCount(t *testing.T, endpoint int64) int64 {
	t.Helper()
	n, err := e.redis.Client.ZCard(context.Background(), fmt.Sprintf("%s:slots:%d", e.redis.Prefix, endpoint)).Result()
	if err != nil {
		t.Fatalf("zcard: %v", err)
	}
	return n
}

// slotHolders returns the members of the endpoint's slot set in Redis.
func (e *env) slotHolders(t *testing.T, endpoint int64) []string {
	t.Helper()
	m, err := e.redis.Client.ZRange(context.Background(), fmt.Sprintf("%s:slots:%d", e.redis.Prefix, endpoint), 0, -1).Result()
	if err != nil {
		t.Fatalf("zrange: %v", err)
	}
	return m
}

// lockKey is the Redis key of k's lease.
func (e *env) lockKey(k store.ResourceKey) string {
	return fmt.Sprintf("%s:lock:%d:%s:%s", e.redis.Prefix, k.EndpointID, k.Kind, k.ID)
}

// wantLockHolder fails the test unless k's lease in Redis names l's owner and token.
func (e *env) wantLockHolder(t *testing.T, k store.ResourceKey, l store.Lease) {
	t.Helper()
	got, err := e.redis.Client.HMGet(context.Background(), e.lockKey(k), "owner", "token").Result()
	if err != nil {
		t.Fatalf("hmget %s: %v", k, err)
	}
	if got[0] != l.Owner || got[1] != strconv.FormatInt(l.Token, 10) {
		t.Fatalf("lease on %s held by %v/%v, want %s/%d", k, got[0], got[1], l.Owner, l.Token)
	}
}

// guarded is req with the guest-100 lease and a slot of endpoint 1 (max slots).
func guarded(c store.CommandKey, idem *store.IdemScope, owner string, slots int) store.ClaimRequest {
	r := req(c, idem, "fp1", owner)
	k := guest100
	r.Guards = store.Guards{Resource: &k, Slot: &store.SlotRequest{EndpointID: 1, Max: slots}}
	return r
}

// TestClaimGuardBusyChangesNothing pins that a claim whose guard is held elsewhere answers
// GuardBusy naming the guard and writes nothing: no identity, no Idempotency-Key record, no
// guard.
func TestClaimGuardBusyChangesNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		hold  store.ClaimRequest // holds the guard
		ask   store.ClaimRequest
		guard string
	}{
		{"resource", guarded(cmdA, nil, "a", 4), guarded(cmdB, scope, "b", 4), store.GuardResource},
		{"slot", func() store.ClaimRequest {
			r := req(cmdA, nil, "fp1", "a")
			r.Guards.Slot = &store.SlotRequest{EndpointID: 1, Max: 1}
			return r
		}(), func() store.ClaimRequest {
			r := req(cmdB, scope, "fp1", "b")
			r.Guards.Slot = &store.SlotRequest{EndpointID: 1, Max: 1}
			return r
		}(), store.GuardSlot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			e.mustClaim(t, tt.hold, store.Claimed)
			got := e.mustClaim(t, tt.ask, store.GuardBusy)
			if got.BusyGuard != tt.guard || got.Lease != (store.Lease{}) {
				t.Fatalf("busy guard %q lease %+v, want %q and no lease", got.BusyGuard, got.Lease, tt.guard)
			}
			n, err := e.redis.Client.Exists(context.Background(),
				e.redis.Prefix+":cmd:"+cmdB.Hash(), idemKeyName(e.redis.Prefix, *scope)).Result()
			if err != nil || n != 0 {
				t.Fatalf("keys written by a refused claim: %d (%v)", n, err)
			}
			// the key is free for another command without guards
			e.mustClaim(t, req(cmdC, scope, "fp1", "c"), store.Claimed)
		})
	}
}

// TestGuardsGivenBack pins that Complete, Release and Suspend each give both guards back in
// the same step, so the next command on the guest gets them at once.
func TestGuardsGivenBack(t *testing.T) {
	t.Parallel()
	ops := []struct {
		name string
		op   func(ctx context.Context, s *store.Store, l store.Lease) error
	}{
		{"complete", func(ctx context.Context, s *store.Store, l store.Lease) error { return s.Complete(ctx, l, []byte("r")) }},
		{"release", func(ctx context.Context, s *store.Store, l store.Lease) error { return s.Release(ctx, l) }},
		{"suspend", func(ctx context.Context, s *store.Store, l store.Lease) error {
			return s.Suspend(ctx, l, store.Progress{JournalID: 1})
		}},
	}
	for _, tt := range ops {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			ctx := context.Background()
			a := e.mustClaim(t, guarded(cmdA, nil, "a", 1), store.Claimed)
			if a.Lease.Guards.Resource == nil || a.Lease.Guards.Slot == nil {
				t.Fatalf("lease guards %+v, want both", a.Lease.Guards)
			}
			e.mustClaim(t, guarded(cmdB, nil, "b", 1), store.GuardBusy)
			if err := tt.op(ctx, e.s, a.Lease); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if n := e.slotCount(t, 1); n != 0 {
				t.Fatalf("%d slots held after %s, want 0", n, tt.name)
			}
			b := e.mustClaim(t, guarded(cmdB, nil, "b", 1), store.Claimed)
			if b.Lease.Token <= a.Lease.Token {
				t.Fatalf("token %d not above %d", b.Lease.Token, a.Lease.Token)
			}
			// a late operation of the old lease never frees the new holder's guards
			_ = e.s.Release(ctx, a.Lease)
			e.mustClaim(t, guarded(cmdC, nil, "c", 1), store.GuardBusy)
		})
	}
}

// TestRenewKeepsGuards pins that one Renew extends the claim and both guards, and that
// without renewal an expired guard is taken over by the next command once the holder's record
// no longer says it may have written (here: it suspended before any dispatch).
func TestRenewKeepsGuards(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	a := e.mustClaim(t, guarded(cmdA, scope, "a", 1), store.Claimed)
	e.clk.Advance(20 * time.Second)
	if err := e.s.Renew(ctx, a.Lease); err != nil {
		t.Fatalf("renew: %v", err)
	}
	e.clk.Advance(20 * time.Second) // past the first deadline, inside the renewed one
	e.mustClaim(t, guarded(cmdB, nil, "b", 1), store.GuardBusy)
	e.clk.Advance(11 * time.Second)
	e.mustClaim(t, guarded(cmdB, nil, "b", 1), store.GuardBusy) // a's record is running: it may have written
	e.markSuspended(t, cmdA)
	e.mustClaim(t, guarded(cmdB, nil, "b", 1), store.Claimed)
	wantErr(t, "renew of a lease whose guard was taken", e.s.Renew(ctx, a.Lease), store.ErrGuardLost)
}

// TestClaimGuardsInvalid pins that a claim with an invalid guard (or without an owner) is
// refused with ErrInvalid before Redis is touched, and that the command can then be claimed.
func TestClaimGuardsInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	tests := []struct {
		name  string
		owner string
		g     store.Guards
	}{
		{"no kind", "a", store.Guards{Resource: &store.ResourceKey{EndpointID: 1, ID: "100"}}},
		{"no id", "a", store.Guards{Resource: &store.ResourceKey{EndpointID: 1, Kind: store.KindGuest}}},
		{"colon in kind", "a", store.Guards{Resource: &store.ResourceKey{EndpointID: 1, Kind: "guest:x", ID: "100"}}},
		{"zero slot max", "a", store.Guards{Slot: &store.SlotRequest{EndpointID: 1, Max: 0}}},
		{"negative slot max", "a", store.Guards{Slot: &store.SlotRequest{EndpointID: 1, Max: -1}}},
		{"no owner", "", store.Guards{Resource: &guest100, Slot: &store.SlotRequest{EndpointID: 1, Max: 1}}},
	}
	for _, tt := range tests {
		r := req(cmdA, scope, "fp1", tt.owner)
		r.Guards = tt.g
		got, err := e.s.Claim(ctx, r)
		wantErr(t, tt.name, err, store.ErrInvalid)
		if got.State != 0 {
			t.Errorf("%s: state %v, want none", tt.name, got.State)
		}
	}
	if keys, err := e.redis.Client.Keys(ctx, e.redis.Prefix+":*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("keys %v (%v) after refused claims, want none", keys, err)
	}
	e.mustClaim(t, req(cmdA, scope, "fp1", "a"), store.Claimed)
}

// TestClaimResourceExclusive pins mutual exclusion through the claim: 20 commands of
// different owners racing for one guest or node yield exactly one Claimed holding the lease;
// every other claim is GuardBusy naming the resource.
func TestClaimResourceExclusive(t *testing.T) {
	t.Parallel()
	const n = 20
	tests := []struct {
		name string
		key  store.ResourceKey
	}{
		{"guest", guest100},
		{"node", node1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			claims := e.raceClaims(t, n, func(i int) store.ClaimRequest {
				return withResource(command(fmt.Sprintf("cmd-%d", i)), fmt.Sprintf("owner-%d", i), tt.key)
			})
			winner := -1
			for i := range n {
				switch c := claims[i]; {
				case c.State == store.Claimed && winner < 0:
					winner = i
				case c.State == store.Claimed:
					t.Fatalf("owners %d and %d both hold %s", winner, i, tt.key)
				case c.State != store.GuardBusy || c.BusyGuard != store.GuardResource:
					t.Fatalf("claim %d: %v (guard %q), want guard_busy on the resource", i, c.State, c.BusyGuard)
				}
			}
			if winner < 0 {
				t.Fatalf("nobody holds %s", tt.key)
			}
			w := claims[winner].Lease
			if w.Guards.Resource == nil || *w.Guards.Resource != tt.key || w.Token <= 0 {
				t.Fatalf("winner lease %+v", w)
			}
			e.wantLockHolder(t, tt.key, w)
		})
	}
}

// TestClaimResourcesIndependent pins that resource leases are per (endpoint, kind, id): a held
// guest blocks only commands on that same guest.
func TestClaimResourcesIndependent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.mustClaim(t, withResource(command("holder"), "holder", guest100), store.Claimed)
	tests := []struct {
		name string
		key  store.ResourceKey
		want store.ClaimState
	}{
		{"same guest", store.GuestResource(1, 100), store.GuardBusy},
		{"other guest", store.GuestResource(1, 101), store.Claimed},
		{"same vmid on another endpoint", store.GuestResource(2, 100), store.Claimed},
		{"node named like the vmid", store.ResourceKey{EndpointID: 1, Kind: store.KindNode, ID: "100"}, store.Claimed},
	}
	for i, tt := range tests {
		got := e.mustClaim(t, withResource(command(fmt.Sprintf("cmd-%d", i)), fmt.Sprintf("other-%d", i), tt.key), tt.want)
		if tt.want == store.Claimed {
			e.wantLockHolder(t, tt.key, got.Lease)
		}
	}
}

// TestClaimSameOwnerReclaims pins that an owner claiming its own command again (within its
// lease, or after it expired with nobody else taking over) is Resumed and keeps its guards:
// the lease moves to the new token with a new deadline, and the slot is not taken twice.
func TestClaimSameOwnerReclaims(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		after time.Duration // from the first claim to the second
	}{
		{"within its lease", store.DefaultLeaseTTL - time.Second},
		{"after its lease expired", store.DefaultLeaseTTL + time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newEnv(t, nil)
			first := e.mustClaim(t, guarded(cmdA, nil, "o1", 1), store.Claimed)
			e.clk.Advance(tt.after)
			again := e.mustClaim(t, guarded(cmdA, nil, "o1", 1), store.Resumed)
			if again.Lease.Token <= first.Lease.Token {
				t.Fatalf("token %d, want above %d", again.Lease.Token, first.Lease.Token)
			}
			e.wantLockHolder(t, guest100, again.Lease)
			if h := e.slotHolders(t, 1); len(h) != 1 || h[0] != "o1" {
				t.Fatalf("slot holders %v, want [o1]", h)
			}
			e.clk.Advance(store.DefaultLeaseTTL - time.Second) // past the first deadline
			e.mustClaim(t, guarded(cmdB, nil, "o2", 1), store.GuardBusy)
			wantErr(t, "renew with the first token", e.s.Renew(ctx, first.Lease), store.ErrLeaseLost)
			wantErr(t, "renew", e.s.Renew(ctx, again.Lease), nil)
			wantErr(t, "complete", e.s.Complete(ctx, again.Lease, []byte("r")), nil)
			e.mustClaim(t, guarded(cmdB, nil, "o2", 1), store.Claimed)
		})
	}
}

// markSuspended marks c's record suspended before any dispatch, as a suspend whose own lease
// had already expired would have left it.
func (e *env) markSuspended(t *testing.T, c store.CommandKey) {
	t.Helper()
	if err := e.redis.Client.HSet(context.Background(), e.redis.Prefix+":cmd:"+c.Hash(), "suspended", "1", "dispatched", "0").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestMayHaveWrittenKeepsTheGuest pins that a command that may have written keeps its guest
// (but not its endpoint slot) until its own redelivery resumed it: after a crash (its lease
// expired, its record running), after Yield (progress unknown) and after a suspend that
// followed a dispatch. Another command on the guest waits instead of changing what the
// resumed command will read to confirm its write. Once its record is gone the guest is free.
func TestMayHaveWrittenKeepsTheGuest(t *testing.T) {
	t.Parallel()
	ops := []struct {
		name string
		op   func(ctx context.Context, e *env, l store.Lease) error
	}{
		{"crash", func(_ context.Context, e *env, _ store.Lease) error {
			e.clk.Advance(store.DefaultLeaseTTL + time.Millisecond)
			return nil
		}},
		{"yield", func(ctx context.Context, e *env, l store.Lease) error { return e.s.Yield(ctx, l) }},
		{"suspend after a dispatch", func(ctx context.Context, e *env, l store.Lease) error {
			return e.s.Suspend(ctx, l, store.Progress{JournalID: 1, Dispatched: true})
		}},
	}
	for _, tt := range ops {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newEnv(t, nil)
			a := e.mustClaim(t, guarded(cmdA, nil, "a1", 1), store.Claimed)
			if err := tt.op(ctx, e, a.Lease); err != nil {
				t.Fatal(err)
			}
			e.clk.Advance(store.DefaultLeaseTTL + time.Millisecond)
			e.mustClaim(t, guarded(cmdB, nil, "b", 1), store.GuardBusy)
			resumed := e.mustClaim(t, guarded(cmdA, nil, "a2", 1), store.Resumed)
			e.wantLockHolder(t, guest100, resumed.Lease)
			if err := e.s.Complete(ctx, resumed.Lease, []byte("r")); err != nil {
				t.Fatal(err)
			}
			e.mustClaim(t, guarded(cmdB, nil, "b", 1), store.Claimed)
		})
	}
	t.Run("holder's record gone", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, nil)
		e.mustClaim(t, withResource(cmdA, "a1", guest100), store.Claimed)
		e.clk.Advance(store.DefaultLeaseTTL + time.Millisecond)
		if err := e.redis.Client.Del(context.Background(), e.redis.Prefix+":cmd:"+cmdA.Hash()).Err(); err != nil {
			t.Fatal(err)
		}
		e.mustClaim(t, withResource(cmdB, "b", guest100), store.Claimed)
	})
}

// TestClaimTakesOverExpiredGuards pins that the guards of a holder that stopped renewing are
// taken by the next claim with a new, greater token, and that the expired holder's later
// operations fail as the lease API defines (ErrLeaseLost when its command was taken over too,
// ErrGuardLost from Renew when only its guards were) without touching the new holder's guards.
func TestClaimTakesOverExpiredGuards(t *testing.T) {
	t.Parallel()
	ops := []struct {
		name string
		op   func(ctx context.Context, s *store.Store, l store.Lease) error
	}{
		{"renew", func(ctx context.Context, s *store.Store, l store.Lease) error { return s.Renew(ctx, l) }},
		{"complete", func(ctx context.Context, s *store.Store, l store.Lease) error {
			return s.Complete(ctx, l, []byte("stale"))
		}},
		{"release", func(ctx context.Context, s *store.Store, l store.Lease) error { return s.Release(ctx, l) }},
		{"suspend", func(ctx context.Context, s *store.Store, l store.Lease) error {
			return s.Suspend(ctx, l, store.Progress{})
		}},
	}
	both := func(c store.CommandKey, owner string) store.ClaimRequest { return guarded(c, nil, owner, 1) }
	slot := func(c store.CommandKey, owner string) store.ClaimRequest { return withSlot(c, owner, 1, 1) }
	cases := []struct {
		name  string
		claim func(c store.CommandKey, owner string) store.ClaimRequest // every claim of the case
		next  store.CommandKey                                          // the command the new holder claims
		state store.ClaimState
		want  map[string]error // per op; absent: nil
	}{
		{"same command redelivered", both, cmdA, store.Resumed, map[string]error{
			"renew": store.ErrLeaseLost, "complete": store.ErrLeaseLost, "release": store.ErrLeaseLost, "suspend": store.ErrLeaseLost,
		}},
		// the stale holder still owns its own command record: only Renew reports the loss (a
		// guest lease is not taken by another command: TestMayHaveWrittenKeepsTheGuest)
		{"another command, slot only", slot, cmdB, store.Claimed, map[string]error{"renew": store.ErrGuardLost}},
	}
	for _, c := range cases {
		for _, op := range ops {
			t.Run(c.name+"/"+op.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				e := newEnv(t, nil)
				stale := e.mustClaim(t, c.claim(cmdA, "stale"), store.Claimed).Lease
				e.clk.Advance(store.DefaultLeaseTTL + time.Millisecond)
				cur := e.mustClaim(t, c.claim(c.next, "new"), c.state).Lease
				if cur.Token <= stale.Token {
					t.Fatalf("takeover token %d, want above %d", cur.Token, stale.Token)
				}
				wantGuards := func(when string) {
					t.Helper()
					if cur.Guards.Resource != nil {
						e.wantLockHolder(t, guest100, cur)
					}
					if h := e.slotHolders(t, 1); cur.Guards.Slot != nil && (len(h) != 1 || h[0] != "new") {
						t.Fatalf("slot holders %v %s, want [new]", h, when)
					}
				}
				wantGuards("after the takeover")

				wantErr(t, "stale "+op.name, op.op(ctx, e.s, stale), c.want[op.name])
				wantGuards("after the stale " + op.name)
				e.mustClaim(t, c.claim(cmdC, "third"), store.GuardBusy)
				wantErr(t, "renew by the new holder", e.s.Renew(ctx, cur), nil)
				wantErr(t, "complete by the new holder", e.s.Complete(ctx, cur, []byte("r")), nil)
				e.mustClaim(t, c.claim(cmdC, "third"), store.Claimed)
			})
		}
	}
}

// TestRenewLateKeepsGuards pins that a Renew after the deadline still succeeds while nobody
// took the guards over (and keeps them from the next command), and that it takes the
// resource lease again when its key expired away in Redis.
func TestRenewLateKeepsGuards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	a := e.mustClaim(t, guarded(cmdA, nil, "a", 1), store.Claimed).Lease
	e.clk.Advance(store.DefaultLeaseTTL + time.Second)
	wantErr(t, "late renew", e.s.Renew(ctx, a), nil)
	e.mustClaim(t, guarded(cmdB, nil, "b", 1), store.GuardBusy)

	if err := e.redis.Client.Del(ctx, e.lockKey(guest100)).Err(); err != nil {
		t.Fatalf("del: %v", err)
	}
	wantErr(t, "renew after the lease key expired", e.s.Renew(ctx, a), nil)
	e.wantLockHolder(t, guest100, a)
	e.mustClaim(t, withResource(cmdB, "b", guest100), store.GuardBusy)
}

// TestClaimSlotsNeverExceedMax pins the limit: 50 commands racing for max slots of one
// endpoint yield exactly max Claimed; every other claim is GuardBusy naming the slot.
func TestClaimSlotsNeverExceedMax(t *testing.T) {
	t.Parallel()
	const n = 50
	for _, max := range []int{1, 5, 8} {
		t.Run(strconv.Itoa(max), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			claims := e.raceClaims(t, n, func(i int) store.ClaimRequest {
				return withSlot(command(fmt.Sprintf("cmd-%d", i)), fmt.Sprintf("h-%d", i), 1, max)
			})
			counts := map[string]int{}
			for _, c := range claims {
				counts[c.State.String()+"/"+c.BusyGuard]++
			}
			want := map[string]int{"claimed/": max}
			if max < n {
				want["guard_busy/slot"] = n - max
			}
			if fmt.Sprint(counts) != fmt.Sprint(want) || e.slotCount(t, 1) != int64(max) {
				t.Fatalf("outcomes %v with %d slots held, want %v and %d", counts, e.slotCount(t, 1), want, max)
			}
		})
	}
}

// TestClaimSlotsChurn pins the limit while 50 workers repeatedly claim commands and give their
// slot back (Complete or Release): the number of holders inside their critical section never
// exceeds max, every round finishes, and no slot is left held.
func TestClaimSlotsChurn(t *testing.T) {
	t.Parallel()
	const n, rounds, max = 50, 5, 4
	ctx := context.Background()
	e := newEnv(t, nil)
	var inside, peak, done atomic.Int64
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for r := 0; r < rounds; {
				id := fmt.Sprintf("h-%d-%d", i, r)
				c, err := e.s.Claim(ctx, withSlot(command(id), id, 1, max))
				if err != nil {
					errs <- err
					return
				}
				if c.State == store.GuardBusy {
					continue // delayed, not failed
				}
				if c.State != store.Claimed {
					errs <- fmt.Errorf("claim %s: %v", id, c.State)
					return
				}
				cur := inside.Add(1)
				for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
				}
				inside.Add(-1)
				if r%2 == 0 {
					err = e.s.Complete(ctx, c.Lease, []byte("r"))
				} else {
					err = e.s.Release(ctx, c.Lease)
				}
				if err != nil {
					errs <- err
					return
				}
				done.Add(1)
				r++
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("churn: %v", err)
	}
	if peak.Load() > max || peak.Load() < 1 || done.Load() != n*rounds {
		t.Fatalf("peak %d (max %d), %d rounds done of %d", peak.Load(), max, done.Load(), n*rounds)
	}
	if c := e.slotCount(t, 1); c != 0 {
		t.Fatalf("%d holders left after all gave back", c)
	}
}

// TestClaimSlotExpiry pins that the slot of a holder that stops renewing is given to the next
// claim once its deadline passed, that a renewing holder keeps its slot, and that the dropped
// holder's Renew reports ErrGuardLost.
func TestClaimSlotExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	ttl := e.s.Options().LeaseTTL
	slot := func(owner string, want store.ClaimState) store.Lease {
		t.Helper()
		return e.mustClaim(t, withSlot(command(owner), owner, 1, 2), want).Lease
	}
	live := slot("live", store.Claimed)
	dead := slot("dead", store.Claimed)
	slot("new", store.GuardBusy)

	e.clk.Advance(ttl - time.Second)
	wantErr(t, "renew live", e.s.Renew(ctx, live), nil)
	slot("new", store.GuardBusy) // dead's deadline has not passed yet
	e.clk.Advance(2 * time.Second)
	slot("new", store.Claimed) // dead's has: its slot is taken
	slot("newer", store.GuardBusy)
	wantErr(t, "renew dead", e.s.Renew(ctx, dead), store.ErrGuardLost)
	wantErr(t, "renew live again", e.s.Renew(ctx, live), nil)
	if h := e.slotHolders(t, 1); fmt.Sprint(h) != "[live new]" && fmt.Sprint(h) != "[new live]" {
		t.Fatalf("slot holders %v, want live and new", h)
	}
}

// TestClaimSlotRelease pins that Release frees a slot at once and only its own (a repeated
// Release changes nothing), and that a holder claiming its command again does not take a
// second slot.
func TestClaimSlotRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	slot := func(owner string, want store.ClaimState) store.Lease {
		t.Helper()
		return e.mustClaim(t, withSlot(command(owner), owner, 1, 2), want).Lease
	}
	slot("a", store.Claimed)
	a := slot("a", store.Resumed) // again: same slot, new token
	slot("b", store.Claimed)
	slot("c", store.GuardBusy)
	wantErr(t, "release a", e.s.Release(ctx, a), nil)
	slot("c", store.Claimed)
	wantErr(t, "release a again", e.s.Release(ctx, a), nil)
	wantErr(t, "renew released", e.s.Renew(ctx, a), store.ErrLeaseLost)
	slot("d", store.GuardBusy)
	if h := e.slotHolders(t, 1); fmt.Sprint(h) != "[b c]" && fmt.Sprint(h) != "[c b]" {
		t.Fatalf("slot holders %v, want b and c", h)
	}
}

// TestClaimSlotsPerEndpoint pins that each endpoint has its own limit.
func TestClaimSlotsPerEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	tests := []struct {
		endpoint int64
		owner    string
		want     store.ClaimState
	}{
		{1, "a", store.Claimed},
		{1, "b", store.GuardBusy},
		{2, "b", store.Claimed},
		{2, "c", store.GuardBusy},
		{3, "c", store.Claimed},
	}
	for _, tt := range tests {
		id := fmt.Sprintf("%s-%d", tt.owner, tt.endpoint)
		e.mustClaim(t, withSlot(command(id), tt.owner, tt.endpoint, 1), tt.want)
	}
	for ep := int64(1); ep <= 3; ep++ {
		if n := e.slotCount(t, ep); n != 1 {
			t.Errorf("endpoint %d: %d slots held, want 1", ep, n)
		}
	}
}

// TestResourceKey pins the constructors and the log form of resource keys.
func TestResourceKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		got, want store.ResourceKey
		str       string
	}{
		{store.GuestResource(3, 105), store.ResourceKey{EndpointID: 3, Kind: store.KindGuest, ID: "105"}, "3/guest/105"},
		{store.NodeResource(1, "pve2"), store.ResourceKey{EndpointID: 1, Kind: store.KindNode, ID: "pve2"}, "1/node/pve2"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("key %+v, want %+v", tt.got, tt.want)
		}
		if s := tt.got.String(); s != tt.str {
			t.Errorf("String() = %q, want %q", s, tt.str)
		}
	}
}

// TestYieldKeepsProgressUnknown pins that a yielded claim ends at once and is resumed like a
// crashed one (no known progress), so the next owner still looks for the journal entry, and
// that a twin keeps waiting for it.
func TestYieldKeepsProgressUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	a := e.mustClaim(t, req(cmdA, scope, "fp1", "a"), store.Claimed)
	if err := e.s.Yield(ctx, a.Lease); err != nil {
		t.Fatalf("yield: %v", err)
	}
	wantErr(t, "second yield", e.s.Yield(ctx, store.Lease{Command: cmdA, Owner: "x", Token: 1}), store.ErrLeaseLost)
	e.clk.Advance(store.DefaultLeaseTTL + time.Millisecond)
	e.mustClaim(t, req(cmdB, scope, "fp1", "twin"), store.IdemInFlight)
	got := e.mustClaim(t, req(cmdA, scope, "fp1", "b"), store.Resumed)
	if got.ProgressKnown || !reflect.DeepEqual(got.Progress, store.Progress{}) {
		t.Fatalf("progress %+v (known %v), want none", got.Progress, got.ProgressKnown)
	}
}
