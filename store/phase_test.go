package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/proxbus/proxbus/store"
)

// phases is the phases of an inspection's history, in order.
func phases(in store.Inspection) []string {
	var out []string
	for _, v := range in.History {
		out = append(out, v.Phase)
	}
	return out
}

// TestRecordKeepsItsPhases pins that every move of a command's record (claim, suspend with and
// without a write that may have left, yield, complete) sets its phase and appends to its
// history in the same script, and that the history keeps the newest 16 entries.
func TestRecordKeepsItsPhases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	inspect := func(t *testing.T, wantPhase string, wantHistory ...string) {
		t.Helper()
		in, err := e.s.Inspect(ctx, cmdA)
		if err != nil {
			t.Fatal(err)
		}
		if in.Phase != wantPhase || !slices.Equal(phases(in), wantHistory) {
			t.Fatalf("phase %q, history %v; want %q, %v", in.Phase, phases(in), wantPhase, wantHistory)
		}
	}
	c := e.mustClaim(t, req(cmdA, nil, "fp1", "a"), store.Claimed)
	inspect(t, "running", "running")
	if err := e.s.Suspend(ctx, c.Lease, store.Progress{JournalID: 3}); err != nil {
		t.Fatal(err)
	}
	inspect(t, "waiting", "running", "waiting")
	c = e.mustClaim(t, req(cmdA, nil, "fp1", "b"), store.Resumed)
	if err := e.s.Dispatching(ctx, c.Lease, store.Progress{JournalID: 3}, "stop_vm"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Suspend(ctx, c.Lease, store.Progress{JournalID: 3, Dispatched: true, Sent: []string{"stop_vm"}}); err != nil {
		t.Fatal(err)
	}
	inspect(t, "confirming", "running", "waiting", "running", "confirming")
	c = e.mustClaim(t, req(cmdA, nil, "fp1", "c"), store.Resumed)
	inspect(t, "confirming", "running", "waiting", "running", "confirming", "confirming")
	if err := e.s.Complete(ctx, c.Lease, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	inspect(t, "ended", "running", "waiting", "running", "confirming", "confirming", "ended")

	// bounded: many waits keep the newest 16
	d := e.mustClaim(t, req(cmdB, nil, "fp1", "x0"), store.Claimed)
	for i := range 20 {
		if err := e.s.Yield(ctx, d.Lease); err != nil {
			t.Fatal(err)
		}
		d = e.mustClaim(t, req(cmdB, nil, "fp1", "x"+string(rune('a'+i))), store.Resumed)
	}
	in, err := e.s.Inspect(ctx, cmdB)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.History) != 16 || in.Phase != "running" || in.History[15].Phase != "running" || in.History[14].Phase != "waiting" {
		t.Fatalf("history of %d entries ending %v, phase %q; want the newest 16, ending waiting, running", len(in.History), phases(in)[max(0, len(in.History)-2):], in.Phase)
	}
}
