package store_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxbus/proxbus/store"
)

// mustSlot acquires a slot and fails the test unless ok is want.
func (e *env) mustSlot(t *testing.T, endpoint int64, max int, holder string, want bool) store.Slot {
	t.Helper()
	sl, ok, err := e.s.AcquireSlot(context.Background(), endpoint, max, holder)
	if err != nil {
		t.Fatalf("acquire slot %d/%s: %v", endpoint, holder, err)
	}
	if ok != want {
		t.Fatalf("acquire slot %d/%s: ok=%v, want %v", endpoint, holder, ok, want)
	}
	if ok && (sl.EndpointID != endpoint || sl.Holder != holder) {
		t.Fatalf("slot %+v", sl)
	}
	return sl
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

// TestSlotsNeverExceedMax pins the limit: 50 acquirers racing for max slots get exactly max.
func TestSlotsNeverExceedMax(t *testing.T) {
	t.Parallel()
	const n = 50
	for _, max := range []int{1, 5, 8} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			var got atomic.Int64
			errs := make([]error, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					_, ok, err := e.s.AcquireSlot(context.Background(), 1, max, fmt.Sprintf("h-%d", i))
					errs[i] = err
					if ok {
						got.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("acquire %d: %v", i, err)
				}
			}
			if got.Load() != int64(max) || e.slotCount(t, 1) != int64(max) {
				t.Fatalf("%d acquired, %d in Redis, want %d", got.Load(), e.slotCount(t, 1), max)
			}
		})
	}
}

// TestSlotsChurn pins the limit while 50 holders repeatedly acquire and release: the number
// of holders inside their critical section never exceeds max.
func TestSlotsChurn(t *testing.T) {
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
				sl, ok, err := e.s.AcquireSlot(ctx, 1, max, fmt.Sprintf("h-%d-%d", i, r))
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					continue // delayed, not failed
				}
				cur := inside.Add(1)
				for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
				}
				inside.Add(-1)
				if err := e.s.ReleaseSlot(ctx, sl); err != nil {
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
		t.Fatalf("%d holders left after all released", c)
	}
}

// TestSlotsExpiry pins that a holder that stops renewing is dropped after LeaseTTL, that a
// renewing holder keeps its slot, and that the dropped holder gets ErrLeaseLost.
func TestSlotsExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	ttl := e.s.Options().LeaseTTL
	live := e.mustSlot(t, 1, 2, "live", true)
	dead := e.mustSlot(t, 1, 2, "dead", true)
	e.mustSlot(t, 1, 2, "new", false)

	e.clk.Advance(ttl - time.Second)
	wantErr(t, "renew live", e.s.RenewSlot(ctx, live), nil)
	e.mustSlot(t, 1, 2, "new", false) // dead's deadline has not passed yet
	e.clk.Advance(2 * time.Second)
	e.mustSlot(t, 1, 2, "new", true) // dead's has: dropped
	e.mustSlot(t, 1, 2, "newer", false)
	wantErr(t, "renew dead", e.s.RenewSlot(ctx, dead), store.ErrLeaseLost)
	wantErr(t, "renew live again", e.s.RenewSlot(ctx, live), nil)
	if c := e.slotCount(t, 1); c != 2 {
		t.Fatalf("%d holders, want 2", c)
	}
}

// TestSlotsRelease pins that release frees a place at once, is idempotent, and only removes
// its own holder; and that a holder acquiring again does not take a second place.
func TestSlotsRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	a := e.mustSlot(t, 1, 2, "a", true)
	e.mustSlot(t, 1, 2, "a", true) // again: same place
	e.mustSlot(t, 1, 2, "b", true)
	e.mustSlot(t, 1, 2, "c", false)
	wantErr(t, "release unknown", e.s.ReleaseSlot(ctx, store.Slot{EndpointID: 1, Holder: "c"}), nil)
	e.mustSlot(t, 1, 2, "c", false)
	wantErr(t, "release a", e.s.ReleaseSlot(ctx, a), nil)
	wantErr(t, "release a again", e.s.ReleaseSlot(ctx, a), nil)
	wantErr(t, "renew released", e.s.RenewSlot(ctx, a), store.ErrLeaseLost)
	e.mustSlot(t, 1, 2, "c", true)
	e.mustSlot(t, 1, 2, "a", false)
	if c := e.slotCount(t, 1); c != 2 {
		t.Fatalf("%d holders, want 2", c)
	}
}

// TestSlotsPerEndpoint pins that each endpoint has its own limit.
func TestSlotsPerEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	tests := []struct {
		endpoint int64
		holder   string
		want     bool
	}{
		{1, "a", true},
		{1, "b", false},
		{2, "b", true},
		{2, "c", false},
		{3, "c", true},
	}
	for _, tt := range tests {
		e.mustSlot(t, tt.endpoint, 1, tt.holder, tt.want)
	}
}

// TestSlotsInvalid pins ErrInvalid, before Redis is touched, for a limit below 1 or an empty
// holder.
func TestSlotsInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	tests := []struct {
		name   string
		max    int
		holder string
	}{
		{"zero max", 0, "a"},
		{"negative max", -1, "a"},
		{"no holder", 2, ""},
	}
	for _, tt := range tests {
		_, ok, err := e.s.AcquireSlot(ctx, 1, tt.max, tt.holder)
		if ok {
			t.Errorf("%s: acquired", tt.name)
		}
		wantErr(t, tt.name, err, store.ErrInvalid)
	}
	wantErr(t, "renew no holder", e.s.RenewSlot(ctx, store.Slot{EndpointID: 1}), store.ErrInvalid)
	if keys, err := e.redis.Client.Keys(ctx, e.redis.Prefix+":*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("keys %v (%v), want none", keys, err)
	}
}
