package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/store"
)

func repairFor(c store.CommandKey, journalID int64) store.Repair {
	return store.Repair{
		Command: c, EndpointID: 1, JournalID: journalID,
		JournalURL: "https://netbox.example/api/extras/journal-entries/1/", Kind: "success",
		Comments: "- verb: storage.pbs.create\n- result: created", Ref: c.ID, Verb: "storage.pbs.create",
	}
}

// TestRepairLifecycle pins save, read, ordered listing, claiming of due repairs with a lease,
// rescheduling and deletion.
func TestRepairLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	now := e.clk.Now()

	later := repairFor(cmdA, 1)
	later.NextAt = now.Add(2 * time.Second)
	due := repairFor(cmdB, 2)
	due.NextAt = now.Add(-time.Second)
	due.Attempts = 2
	due.LastError = "netbox: 503"
	zero := repairFor(cmdC, 123456789012345) // NextAt zero → due now
	for _, r := range []store.Repair{later, due, zero} {
		if err := e.s.SaveRepair(ctx, r); err != nil {
			t.Fatalf("save %+v: %v", r.Command, err)
		}
	}

	got, err := e.s.Repair(ctx, cmdB)
	if err != nil {
		t.Fatalf("repair: %v", err)
	}
	want := due
	want.CreatedAt = now
	assertRepair(t, got, want)
	_, err = e.s.Repair(ctx, store.CommandKey{Source: "s", ID: "none"})
	wantErr(t, "unknown repair", err, store.ErrNotFound)

	pending, err := e.s.PendingRepairs(ctx)
	if err != nil {
		t.Fatalf("pending: %v", err)
	}
	assertOrder(t, pending, cmdB, cmdC, cmdA)
	if pending[1].JournalID != 123456789012345 || !pending[1].NextAt.Equal(now) {
		t.Fatalf("zero-NextAt repair %+v, want journal 123456789012345 due now", pending[1])
	}

	// the two due repairs come out earliest first, each leased for a minute
	for _, c := range []store.CommandKey{cmdB, cmdC} {
		r, ok, err := e.s.ClaimDueRepair(ctx, time.Minute)
		if err != nil || !ok || r.Command != c {
			t.Fatalf("claim due: %+v, %v, %v; want %+v", r.Command, ok, err, c)
		}
		if !r.NextAt.Equal(now.Add(time.Minute)) {
			t.Fatalf("leased NextAt %v, want %v", r.NextAt, now.Add(time.Minute))
		}
	}
	if r, ok, err := e.s.ClaimDueRepair(ctx, time.Minute); err != nil || ok {
		t.Fatalf("nothing due: got %+v, %v, %v", r.Command, ok, err)
	}

	// a failed attempt is rescheduled with one more attempt and its error
	next := now.Add(10 * time.Second)
	if err := e.s.RescheduleRepair(ctx, due, next, "netbox: 502"); err != nil {
		t.Fatalf("reschedule: %v", err)
	}
	got, err = e.s.Repair(ctx, cmdB)
	if err != nil {
		t.Fatalf("repair: %v", err)
	}
	want.Attempts, want.LastError, want.NextAt = 3, "netbox: 502", next
	assertRepair(t, got, want)

	// cmdA becomes due after 2 s; cmdB only after its reschedule; cmdC after its lease
	e.clk.Advance(3 * time.Second)
	if r, ok, err := e.s.ClaimDueRepair(ctx, time.Minute); err != nil || !ok || r.Command != cmdA {
		t.Fatalf("claim due after 3s: %+v, %v, %v; want cmdA", r.Command, ok, err)
	}
	e.clk.Advance(time.Minute)
	if r, ok, err := e.s.ClaimDueRepair(ctx, time.Minute); err != nil || !ok || r.Command != cmdB {
		t.Fatalf("claim due after the lease: %+v, %v, %v; want cmdB", r.Command, ok, err)
	}

	for range 2 { // idempotent
		if err := e.s.DeleteRepair(ctx, cmdB); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	_, err = e.s.Repair(ctx, cmdB)
	wantErr(t, "deleted repair", err, store.ErrNotFound)
	wantErr(t, "reschedule deleted", e.s.RescheduleRepair(ctx, due, next, "x"), store.ErrNotFound)
	pending, err = e.s.PendingRepairs(ctx)
	if err != nil {
		t.Fatalf("pending: %v", err)
	}
	assertOrder(t, pending, cmdC, cmdA)

	// a saved repair replaces the previous one for the same command
	replaced := repairFor(cmdA, 77)
	replaced.NextAt = e.clk.Now()
	if err := e.s.SaveRepair(ctx, replaced); err != nil {
		t.Fatalf("save: %v", err)
	}
	got, err = e.s.Repair(ctx, cmdA)
	if err != nil || got.JournalID != 77 || got.Attempts != 0 || got.LastError != "" {
		t.Fatalf("replaced repair %+v, %v", got, err)
	}
}

// TestClaimDueRepairConcurrent pins that one due repair goes to exactly one of several
// replicas claiming at once.
func TestClaimDueRepairConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	if err := e.s.SaveRepair(ctx, repairFor(cmdA, 1)); err != nil {
		t.Fatalf("save: %v", err)
	}
	const claimers = 8
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		got   int
		errs  []error
		start = make(chan struct{})
	)
	for range claimers {
		wg.Go(func() {
			<-start
			_, ok, err := e.s.ClaimDueRepair(ctx, time.Minute)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if ok {
				got++
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 || got != 1 {
		t.Fatalf("%d claimers got the repair (errors %v), want exactly 1", got, errs)
	}
}

// TestSaveRepairInvalid pins that a repair needs its command.
func TestSaveRepairInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	wantErr(t, "save", e.s.SaveRepair(context.Background(), store.Repair{Kind: "info"}), store.ErrInvalid)
}

func assertRepair(t *testing.T, got, want store.Repair) {
	t.Helper()
	if !got.CreatedAt.Equal(want.CreatedAt) || !got.NextAt.Equal(want.NextAt) {
		t.Errorf("times created %v next %v, want %v and %v", got.CreatedAt, got.NextAt, want.CreatedAt, want.NextAt)
	}
	got.CreatedAt, got.NextAt, want.CreatedAt, want.NextAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if got != want {
		t.Errorf("repair\n got %+v\nwant %+v", got, want)
	}
}

func assertOrder(t *testing.T, rs []store.Repair, want ...store.CommandKey) {
	t.Helper()
	if len(rs) != len(want) {
		t.Fatalf("%d repairs, want %d", len(rs), len(want))
	}
	for i := range rs {
		if rs[i].Command != want[i] {
			t.Fatalf("repair %d is %+v, want %+v", i, rs[i].Command, want[i])
		}
	}
}
