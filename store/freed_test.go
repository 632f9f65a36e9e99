package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/store"
)

// watchFreed runs s.WatchFreed for the test's life and returns the names it reports, once it
// is subscribed (it publishes a probe until the probe comes back).
func watchFreed(t *testing.T, s *store.Store, rdb redis.UniversalClient) <-chan string {
	t.Helper()
	names := make(chan string, 64)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.WatchFreed(ctx, func(name string) { names <- name }) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	probe := s.Options().Prefix + ":lock:probe"
	for range 3000 {
		if err := rdb.Publish(context.Background(), probe, "").Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-names:
			if n == probe {
				for len(names) > 0 { // further probes
					<-names
				}
				return names
			}
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("WatchFreed never subscribed")
	return nil
}

// reported returns the names reported after the ones already read, up to an end marker this
// publishes after them (Pub/Sub keeps the order of one connection's messages).
func reported(t *testing.T, s *store.Store, rdb redis.UniversalClient, names <-chan string) map[string]bool {
	t.Helper()
	end := s.Options().Prefix + ":lock:end"
	if err := rdb.Publish(context.Background(), end, "").Err(); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for {
		select {
		case n := <-names:
			if n == end {
				return got
			}
			got[n] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("the end marker never came; got %v", got)
		}
	}
}

// TestWatchFreed: giving a guard back — Complete, Release, Suspend — reports it under the name
// a claim that found it busy was given (Claim.BusyKey), and only a guard actually given back;
// FinishUnstarted reports WatchName of the command.
func TestWatchFreed(t *testing.T) {
	t.Parallel()
	guest := store.ResourceKey{EndpointID: 1, Kind: store.KindGuest, ID: "100"}
	held := func(owner string) store.ClaimRequest {
		return store.ClaimRequest{Command: cmdA, Owner: owner,
			Guards: store.Guards{Resource: &guest, Slot: &store.SlotRequest{EndpointID: 1, Max: 1}}}
	}
	tests := []struct {
		name string
		// give gives the holder's guards back (or not); it reports which of the lock and slots
		// names must be reported.
		give      func(s *store.Store, l store.Lease) (lock, slots bool)
		wantCmdOf *store.CommandKey
	}{
		{"complete", func(s *store.Store, l store.Lease) (bool, bool) {
			_ = s.Complete(context.Background(), l, []byte(`{}`))
			return true, true
		}, nil},
		{"release", func(s *store.Store, l store.Lease) (bool, bool) {
			_ = s.Release(context.Background(), l)
			return true, true
		}, nil},
		{"suspend before a write", func(s *store.Store, l store.Lease) (bool, bool) {
			_ = s.Suspend(context.Background(), l, store.Progress{JournalID: 7})
			return true, true
		}, nil},
		{"suspend after a write keeps the guest", func(s *store.Store, l store.Lease) (bool, bool) {
			_ = s.Suspend(context.Background(), l, store.Progress{JournalID: 7, Dispatched: true})
			return false, true
		}, nil},
		{"release by another owner gives nothing back", func(s *store.Store, l store.Lease) (bool, bool) {
			l.Owner = "stranger"
			_ = s.Release(context.Background(), l)
			return false, false
		}, nil},
		{"finish unstarted", func(s *store.Store, l store.Lease) (bool, bool) {
			_, _, _ = s.FinishUnstarted(context.Background(), cmdC, []byte(`{}`))
			return false, false
		}, &cmdC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			names := watchFreed(t, e.s, e.redis.Client)
			holder := e.mustClaim(t, held("holder"), store.Claimed)
			onGuest := e.mustClaim(t, store.ClaimRequest{Command: cmdB, Owner: "b", Guards: store.Guards{Resource: &guest}}, store.GuardBusy)
			other := store.ResourceKey{EndpointID: 1, Kind: store.KindGuest, ID: "200"}
			onSlot := e.mustClaim(t, store.ClaimRequest{Command: cmdB, Owner: "b",
				Guards: store.Guards{Resource: &other, Slot: &store.SlotRequest{EndpointID: 1, Max: 1}}}, store.GuardBusy)
			if onGuest.BusyKey == "" || onSlot.BusyKey == "" || onGuest.BusyKey == onSlot.BusyKey {
				t.Fatalf("busy keys %q and %q, want two names", onGuest.BusyKey, onSlot.BusyKey)
			}
			reported(t, e.s, e.redis.Client, names) // nothing so far
			lock, slots := tt.give(e.s, holder.Lease)
			want := map[string]bool{}
			if lock {
				want[onGuest.BusyKey] = true
			}
			if slots {
				want[onSlot.BusyKey] = true
			}
			if tt.wantCmdOf != nil {
				want[e.s.WatchName(*tt.wantCmdOf)] = true
			}
			if got := reported(t, e.s, e.redis.Client, names); !equalSets(got, want) {
				t.Errorf("reported %v, want %v", got, want)
			}
		})
	}
}

func equalSets(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
