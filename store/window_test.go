package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/proxbus/proxbus/store"
)

// TestIdemWindowExpiry pins that a done key record answers replays for Window and then
// expires in Redis, after which the same key executes again. It waits on real Redis TTLs, so
// it is skipped on the embedded fallback (whose clock does not run by itself).
func TestIdemWindowExpiry(t *testing.T) {
	t.Parallel()
	const window = 300 * time.Millisecond
	ctx := context.Background()
	e := newEnv(t, func(o *store.Options) { o.Window = window })
	if e.redis.Embedded {
		t.Skip("embedded Redis: key expiry does not advance in real time")
	}
	key := idemKeyName(e.redis.Prefix, *scope)
	e.mustComplete(t, req(cmdA, scope, "fp1", "o1"), "first")

	ttl, err := e.redis.Client.PTTL(ctx, key).Result()
	if err != nil || ttl <= 0 || ttl > window {
		t.Fatalf("key TTL %v (%v), want in (0, %v]", ttl, err, window)
	}
	waitGone(t, e, key)

	got := e.mustClaim(t, req(cmdB, scope, "fp2", "o2"), store.Claimed)
	if got.Lease.Idem == nil || *got.Lease.Idem != *scope {
		t.Fatalf("lease scope %+v", got.Lease.Idem)
	}
	// the first command's own identity is kept for DedupeTTL, beyond the window
	e.mustClaim(t, req(cmdA, scope, "fp1", "o3"), store.Done)
}

// waitGone polls until key no longer exists (bounded, so a broken TTL fails the test).
func waitGone(t *testing.T, e *env, key string) {
	t.Helper()
	ctx := context.Background()
	for range 200 {
		n, err := e.redis.Client.Exists(ctx, key).Result()
		if err != nil {
			t.Fatalf("exists: %v", err)
		}
		if n == 0 {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("%s still exists after its TTL", key)
}
