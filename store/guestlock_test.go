package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/store"
)

var (
	guest100 = store.GuestResource(1, 100)
	node1    = store.NodeResource(1, "pve1")
)

// mustAcquire acquires k for owner and fails the test unless ok is want.
func (e *env) mustAcquire(t *testing.T, k store.ResourceKey, owner string, want bool) store.ResourceLease {
	t.Helper()
	l, ok, err := e.s.AcquireResource(context.Background(), k, owner)
	if err != nil {
		t.Fatalf("acquire %s for %s: %v", k, owner, err)
	}
	if ok != want {
		t.Fatalf("acquire %s for %s: ok=%v (holder %s/%d), want %v", k, owner, ok, l.Owner, l.Token, want)
	}
	return l
}

// TestAcquireResourceExclusive pins mutual exclusion: 20 owners racing for one resource yield
// exactly one holder, and every loser is told who holds it.
func TestAcquireResourceExclusive(t *testing.T) {
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
			leases := make([]store.ResourceLease, n)
			oks := make([]bool, n)
			errs := make([]error, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					leases[i], oks[i], errs[i] = e.s.AcquireResource(context.Background(), tt.key, fmt.Sprintf("owner-%d", i))
				})
			}
			close(start)
			wg.Wait()
			winner := -1
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("acquire %d: %v", i, errs[i])
				}
				if oks[i] {
					if winner >= 0 {
						t.Fatalf("owners %d and %d both hold %s", winner, i, tt.key)
					}
					winner = i
				}
			}
			if winner < 0 {
				t.Fatalf("nobody holds %s", tt.key)
			}
			w := leases[winner]
			if w.Owner != fmt.Sprintf("owner-%d", winner) || w.Token <= 0 || w.Key != tt.key {
				t.Fatalf("winner lease %+v", w)
			}
			for i := range n {
				if !oks[i] && (leases[i].Owner != w.Owner || leases[i].Token != w.Token) {
					t.Errorf("loser %d told holder %s/%d, want %s/%d", i, leases[i].Owner, leases[i].Token, w.Owner, w.Token)
				}
			}
		})
	}
}

// TestResourcesIndependent pins that leases are per (endpoint, kind, id).
func TestResourcesIndependent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.mustAcquire(t, guest100, "o1", true)
	tests := []struct {
		key  store.ResourceKey
		want bool
	}{
		{store.GuestResource(1, 100), false},
		{store.GuestResource(1, 101), true},
		{store.GuestResource(2, 100), true},
		{store.ResourceKey{EndpointID: 1, Kind: store.KindNode, ID: "100"}, true},
	}
	for i, tt := range tests {
		e.mustAcquire(t, tt.key, fmt.Sprintf("other-%d", i), tt.want)
	}
}

// TestAcquireResourceReentrant pins that the holder acquiring again keeps its token and
// extends its deadline.
func TestAcquireResourceReentrant(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ttl := e.s.Options().LeaseTTL
	l := e.mustAcquire(t, guest100, "o1", true)
	e.clk.Advance(ttl - time.Second)
	again := e.mustAcquire(t, guest100, "o1", true)
	if again != l {
		t.Fatalf("re-acquire %+v, want %+v", again, l)
	}
	e.clk.Advance(ttl - time.Second) // past the first deadline, within the extended one
	if got := e.mustAcquire(t, guest100, "o2", false); got.Owner != "o1" {
		t.Fatalf("holder %s, want o1", got.Owner)
	}
}

// TestRenewResource pins that renewal keeps the lease past its first deadline, that an
// expired lease is taken over with a greater token, and that the old owner then gets
// ErrLeaseLost from renew and release without disturbing the new holder.
func TestRenewResource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	ttl := e.s.Options().LeaseTTL
	old := e.mustAcquire(t, guest100, "o1", true)

	for range 3 { // three renewals carry the lease over three TTLs
		e.clk.Advance(ttl - time.Second)
		wantErr(t, "renew", e.s.RenewResource(ctx, old), nil)
		e.mustAcquire(t, guest100, "o2", false)
	}

	e.clk.Advance(ttl) // the holder stopped renewing: a dead replica
	nl := e.mustAcquire(t, guest100, "o2", true)
	if nl.Token <= old.Token || nl.Owner != "o2" {
		t.Fatalf("takeover lease %+v, want owner o2 and token > %d", nl, old.Token)
	}
	wantErr(t, "old renew", e.s.RenewResource(ctx, old), store.ErrLeaseLost)
	wantErr(t, "old release", e.s.ReleaseResource(ctx, old), store.ErrLeaseLost)
	// same owner name, stale token: still not the holder
	wantErr(t, "stale token renew", e.s.RenewResource(ctx, store.ResourceLease{Key: guest100, Owner: "o2", Token: old.Token}), store.ErrLeaseLost)
	if got := e.mustAcquire(t, guest100, "o3", false); got != nl {
		t.Fatalf("holder %+v, want %+v", got, nl)
	}
	wantErr(t, "new renew", e.s.RenewResource(ctx, nl), nil)
}

// TestRenewExpiredNotTakenOver pins that a late renewal succeeds while nobody took the lease.
func TestRenewExpiredNotTakenOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	ttl := e.s.Options().LeaseTTL
	l := e.mustAcquire(t, guest100, "o1", true)
	e.clk.Advance(ttl + time.Second)
	wantErr(t, "late renew", e.s.RenewResource(ctx, l), nil)
	e.mustAcquire(t, guest100, "o2", false)
}

// TestReleaseResource pins that release frees the resource at once, is idempotent, and
// never frees another owner's lease.
func TestReleaseResource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	l1 := e.mustAcquire(t, guest100, "o1", true)
	// a forged lease (other owner, or the holder's name with another token) releases nothing
	for _, forged := range []store.ResourceLease{
		{Key: guest100, Owner: "o2", Token: l1.Token},
		{Key: guest100, Owner: "o1", Token: l1.Token + 1},
	} {
		wantErr(t, "forged release", e.s.ReleaseResource(ctx, forged), store.ErrLeaseLost)
		e.mustAcquire(t, guest100, "o3", false)
	}
	wantErr(t, "release", e.s.ReleaseResource(ctx, l1), nil)
	wantErr(t, "release again", e.s.ReleaseResource(ctx, l1), nil)
	wantErr(t, "renew after release", e.s.RenewResource(ctx, l1), store.ErrLeaseLost)
	l2 := e.mustAcquire(t, guest100, "o2", true)
	if l2.Token <= l1.Token {
		t.Fatalf("token %d after release, want > %d", l2.Token, l1.Token)
	}
	wantErr(t, "old release while o2 holds", e.s.ReleaseResource(ctx, l1), store.ErrLeaseLost)
	e.mustAcquire(t, guest100, "o3", false)
	if n, err := e.redis.Client.Exists(ctx, e.redis.Prefix+":lock:1:guest:100").Result(); err != nil || n != 1 {
		t.Fatalf("lock key exists=%d (%v), want 1", n, err)
	}
	wantErr(t, "release o2", e.s.ReleaseResource(ctx, l2), nil)
	if n, err := e.redis.Client.Exists(ctx, e.redis.Prefix+":lock:1:guest:100").Result(); err != nil || n != 0 {
		t.Fatalf("lock key exists=%d (%v) after release, want 0", n, err)
	}
}

// TestResourceInvalid pins ErrInvalid, before Redis is touched, for incomplete requests.
func TestResourceInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	tests := []struct {
		name  string
		key   store.ResourceKey
		owner string
	}{
		{"no kind", store.ResourceKey{EndpointID: 1, ID: "100"}, "o1"},
		{"no id", store.ResourceKey{EndpointID: 1, Kind: store.KindGuest}, "o1"},
		{"colon in kind", store.ResourceKey{EndpointID: 1, Kind: "guest:x", ID: "100"}, "o1"},
		{"no owner", guest100, ""},
	}
	for _, tt := range tests {
		_, ok, err := e.s.AcquireResource(ctx, tt.key, tt.owner)
		if ok {
			t.Errorf("%s: acquired", tt.name)
		}
		wantErr(t, tt.name, err, store.ErrInvalid)
	}
	wantErr(t, "renew invalid", e.s.RenewResource(ctx, store.ResourceLease{Owner: "o1", Token: 1}), store.ErrInvalid)
	wantErr(t, "release invalid", e.s.ReleaseResource(ctx, store.ResourceLease{Owner: "o1", Token: 1}), store.ErrInvalid)
	if keys, err := e.redis.Client.Keys(ctx, e.redis.Prefix+":*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("keys %v (%v), want none", keys, err)
	}
}

// TestResourceKeyString pins the log form of resource keys.
func TestResourceKeyString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  store.ResourceKey
		want string
	}{
		{store.GuestResource(3, 105), "3/guest/105"},
		{store.NodeResource(1, "pve2"), "1/node/pve2"},
	}
	for _, tt := range tests {
		if got := tt.key.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}
