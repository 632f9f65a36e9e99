package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/proxbus/proxbus/store"
)

// TestApprovals pins the approval records of contract §4b: one per command, decided once by
// someone other than the requester, listed while pending, idempotent for a redelivered
// decision.
func TestApprovals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	req := store.Approval{Command: cmdA, Verb: "vm.delete", EndpointID: 1, Requester: "alice", Summary: "guest 100 on pve1"}
	first, err := e.s.RequestApproval(ctx, req)
	if err != nil || first.Decision != store.DecisionPending || first.Requester != "alice" || !first.RequestedAt.Equal(e.clk.Now()) {
		t.Fatalf("RequestApproval = %+v, %v", first, err)
	}
	e.clk.Advance(time.Second)
	again, err := e.s.RequestApproval(ctx, store.Approval{Command: cmdA, Verb: "vm.delete", Requester: "mallory"})
	if err != nil || again.Requester != "alice" || !again.RequestedAt.Equal(first.RequestedAt) {
		t.Fatalf("a second request replaced the first: %+v, %v", again, err)
	}
	if _, err := e.s.RequestApproval(ctx, store.Approval{Command: cmdB, Verb: "node.reboot", Requester: "carol"}); err != nil {
		t.Fatal(err)
	}
	pending, err := e.s.PendingApprovals(ctx)
	if err != nil || len(pending) != 2 || pending[0].Command != cmdA || pending[1].Command != cmdB {
		t.Fatalf("pending = %+v, %v; want A then B", pending, err)
	}

	if _, err := e.s.Decide(ctx, cmdA, store.DecisionApproved, "alice"); !errors.Is(err, store.ErrSelfApproval) {
		t.Errorf("self approval: %v, want ErrSelfApproval", err)
	}
	if _, err := e.s.Decide(ctx, cmdC, store.DecisionApproved, "bob"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown command: %v, want ErrNotFound", err)
	}
	a, err := e.s.Decide(ctx, cmdA, store.DecisionApproved, "bob")
	if err != nil || a.Decision != store.DecisionApproved || a.Decider != "bob" || !a.DecidedAt.Equal(e.clk.Now()) {
		t.Fatalf("Decide = %+v, %v", a, err)
	}
	if a, err := e.s.Decide(ctx, cmdA, store.DecisionApproved, "bob"); err != nil || a.Decision != store.DecisionApproved {
		t.Errorf("the same decision again: %+v, %v; want it accepted", a, err)
	}
	if a, err := e.s.Decide(ctx, cmdA, store.DecisionRejected, "carol"); !errors.Is(err, store.ErrDecided) || a.Decider != "bob" {
		t.Errorf("a second decision: %+v, %v; want ErrDecided naming bob", a, err)
	}
	if got, err := e.s.Approval(ctx, cmdA); err != nil || got.Decision != store.DecisionApproved || got.Summary != "guest 100 on pve1" {
		t.Errorf("Approval = %+v, %v", got, err)
	}
	if pending, _ := e.s.PendingApprovals(ctx); len(pending) != 1 || pending[0].Command != cmdB {
		t.Errorf("pending after the decision = %+v, want only B", pending)
	}
	if err := e.s.DropApproval(ctx, cmdB); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Approval(ctx, cmdB); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("dropped approval: %v, want ErrNotFound", err)
	}
	if pending, _ := e.s.PendingApprovals(ctx); len(pending) != 0 {
		t.Errorf("pending after the drop = %+v", pending)
	}
}
