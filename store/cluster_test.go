package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/testenv"
	"github.com/proxbus/proxbus/store"
)

// TestEveryScriptOnRedisCluster runs every operation of the store, each script with all of
// its keys, on a real Redis Cluster: Redis refuses a script whose keys span two slots
// (CROSSSLOT), so each passing call shows that a command's keys, the fencing counter and the
// repairs and approvals indexes share the slot of the prefix's hash tag. Each change also
// waits for the slot's replica (MinReplicas 1). WatchFreed reports a guard given back.
func TestEveryScriptOnRedisCluster(t *testing.T) {
	t.Parallel()
	rc := testenv.StartRedisCluster(t, testenv.ClusterOptions{Primaries: 3, ReplicasPerPrimary: 1})
	cc := redis.NewClusterClient(rc.ClusterOptions())
	t.Cleanup(func() { _ = cc.Close() })
	if _, err := store.New(cc, store.Options{Prefix: "proxbus-untagged"}); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("a prefix without a hash tag on a cluster: %v, want config.ErrInvalid", err)
	}
	s, err := store.New(cc, store.Options{MinReplicas: 1, ReplicaTimeout: 2 * time.Second, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Options().Prefix; got != "{proxbus}" {
		t.Fatalf("default prefix on a cluster = %q, want {proxbus}", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s on the cluster: %v", what, err)
		}
	}
	req := store.ClaimRequest{Command: cmdA, Owner: "o1", Fingerprint: "fp", Idem: scope,
		Guards: store.Guards{Resource: &store.ResourceKey{EndpointID: 1, Kind: "guest", ID: "100"}, Slot: &store.SlotRequest{EndpointID: 1, Max: 2}}}
	c, err := s.Claim(ctx, req)
	must("Claim", err)
	must("Renew", s.Renew(ctx, c.Lease))
	must("Suspend", s.Suspend(ctx, c.Lease, store.Progress{JournalID: 7, JournalURL: "http://nb/7"}))
	req.Owner = "o2"
	c, err = s.Claim(ctx, req)
	must("Claim (resumed)", err)
	if c.State != store.Resumed || !c.ProgressKnown {
		t.Fatalf("second claim: %v known=%v, want Resumed with its progress", c.State, c.ProgressKnown)
	}
	must("Yield", s.Yield(ctx, c.Lease))
	req.Owner = "o3"
	c, err = s.Claim(ctx, req)
	must("Claim (after yield)", err)
	busy, err := s.Claim(ctx, store.ClaimRequest{Command: cmdB, Owner: "b", Guards: store.Guards{Resource: req.Guards.Resource}})
	must("Claim B (busy)", err)
	names := watchFreed(t, s, cc)
	must("Complete", s.Complete(ctx, c.Lease, []byte(`{"r":1}`)))
	if got := reported(t, s, cc, names); !got[busy.BusyKey] {
		t.Errorf("WatchFreed on the cluster reported %v, want %q: Pub/Sub spans the cluster's nodes", got, busy.BusyKey)
	}
	must("UpdateResult", s.UpdateResult(ctx, cmdA, []byte(`{"r":2}`)))
	must("CompleteReplay", s.CompleteReplay(ctx, cmdB, []byte(`{"r":3}`)))
	c, err = s.Claim(ctx, store.ClaimRequest{Command: cmdC, Owner: "o4"})
	must("Claim C", err)
	must("Release", s.Release(ctx, c.Lease))
	_, err = s.RecordFailure(ctx, cmdC)
	must("RecordFailure", err)
	_, _, err = s.FinishUnstarted(ctx, cmdC, []byte(`{"r":4}`))
	must("FinishUnstarted", err)
	must("SaveRepair", s.SaveRepair(ctx, store.Repair{Command: cmdA, EndpointID: 1, JournalID: 7, Kind: "success", Verb: "vm.start"}))
	_, err = s.Repair(ctx, cmdA)
	must("Repair", err)
	if reps, err := s.PendingRepairs(ctx); err != nil || len(reps) != 1 {
		t.Fatalf("PendingRepairs: %d, %v", len(reps), err)
	}
	r, ok, err := s.ClaimDueRepair(ctx, time.Minute)
	must("ClaimDueRepair", err)
	if !ok {
		t.Fatal("ClaimDueRepair found no due repair")
	}
	must("RescheduleRepair", s.RescheduleRepair(ctx, r, time.Now().Add(time.Minute), "NetBox 503"))
	must("DeleteRepair", s.DeleteRepair(ctx, cmdA))
	_, err = s.RequestApproval(ctx, store.Approval{Command: cmdB, Verb: "vm.delete", EndpointID: 1, Requester: "alice"})
	must("RequestApproval", err)
	if aps, err := s.PendingApprovals(ctx); err != nil || len(aps) != 1 {
		t.Fatalf("PendingApprovals: %d, %v", len(aps), err)
	}
	_, err = s.Decide(ctx, cmdB, store.DecisionApproved, "bob", "")
	must("Decide", err)
	must("DropApproval", s.DropApproval(ctx, cmdB))
}
