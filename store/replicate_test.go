package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/proxbus/proxbus/store"
)

// TestTooFewReplicas: on a Redis with no replica, a store asking for one acknowledgement
// refuses its claims with ErrNotReplicated and gives them back, so nothing is done on an
// unreplicated claim and the command's redelivery claims it afresh; a change that is made
// on the primary (Complete) still reports the shortfall to its caller.
func TestTooFewReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *store.Options) { o.MinReplicas, o.ReplicaTimeout = 1, 20*time.Millisecond })
	plain, err := store.New(e.redis.Client, store.Options{Prefix: e.redis.Prefix, Now: e.clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := store.ClaimRequest{Command: cmdA, Owner: "owner-1", Fingerprint: "fp", Idem: scope,
		Guards: store.Guards{Resource: &store.ResourceKey{EndpointID: 1, Kind: "guest", ID: "100"}, Slot: &store.SlotRequest{EndpointID: 1, Max: 1}}}
	if _, err := e.s.Claim(ctx, req); !errors.Is(err, store.ErrNotReplicated) {
		t.Fatalf("claim without replicas: %v, want ErrNotReplicated", err)
	}
	// Given back: another owner claims it at once (identity, key, guest lease and slot free).
	req.Owner = "owner-2"
	c, err := plain.Claim(ctx, req)
	if err != nil || c.State != store.Claimed {
		t.Fatalf("claim after the refused one: %v, %v; want Claimed", c.State, err)
	}
	if err := e.s.Complete(ctx, c.Lease, []byte(`{"ok":true}`)); !errors.Is(err, store.ErrNotReplicated) {
		t.Errorf("complete without replicas: %v, want ErrNotReplicated", err)
	}
	if res, err := plain.Result(ctx, cmdA); err != nil || string(res) != `{"ok":true}` {
		t.Errorf("the primary holds %q, %v", res, err)
	}
}
