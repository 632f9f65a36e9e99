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

	if _, err := e.s.Decide(ctx, cmdA, store.DecisionApproved, "alice", ""); !errors.Is(err, store.ErrSelfApproval) {
		t.Errorf("self approval: %v, want ErrSelfApproval", err)
	}
	a, err := e.s.Decide(ctx, cmdA, store.DecisionApproved, "bob", "change CHG-7")
	if err != nil || a.Decision != store.DecisionApproved || a.Decider != "bob" || !a.DecidedAt.Equal(e.clk.Now()) || a.Reason != "change CHG-7" || a.Early {
		t.Fatalf("Decide = %+v, %v", a, err)
	}
	if a, err := e.s.Decide(ctx, cmdA, store.DecisionApproved, "bob", "change CHG-7"); err != nil || a.Decision != store.DecisionApproved {
		t.Errorf("the same decision again: %+v, %v; want it accepted", a, err)
	}
	if a, err := e.s.Decide(ctx, cmdA, store.DecisionRejected, "carol", ""); !errors.Is(err, store.ErrDecided) || a.Decider != "bob" {
		t.Errorf("a second decision: %+v, %v; want ErrDecided naming bob", a, err)
	}
	if got, err := e.s.Approval(ctx, cmdA); err != nil || got.Decision != store.DecisionApproved || got.Summary != "guest 100 on pve1" || got.Reason != "change CHG-7" {
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

// TestEarlyDecisions pins that a decision arriving before its command is kept (contract §4b):
// Decide on a command that has not asked records it early (not listed as pending); the
// command's RequestApproval then finds it decided, with the decider and reason, unless the
// decider is the command's own requester, whose decision is void (the approval is pending).
// A command that has finished cannot be decided on (ErrFinished).
func TestEarlyDecisions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	tests := []struct {
		name      string
		cmd       store.CommandKey
		decision  store.Decision
		decider   string
		requester string
		want      store.Decision
	}{
		{"approved before it arrived", store.CommandKey{Source: "/t", ID: "early-approved"}, store.DecisionApproved, "bob", "alice", store.DecisionApproved},
		{"rejected before it arrived", store.CommandKey{Source: "/t", ID: "early-rejected"}, store.DecisionRejected, "bob", "alice", store.DecisionRejected},
		{"approved by its own requester", store.CommandKey{Source: "/t", ID: "early-self"}, store.DecisionApproved, "alice", "alice", store.DecisionPending},
	}
	for _, tc := range tests {
		early, err := e.s.Decide(ctx, tc.cmd, tc.decision, tc.decider, "ticket 42")
		if err != nil || !early.Early || early.Decision != tc.decision || early.Decider != tc.decider || early.Command != tc.cmd {
			t.Fatalf("%s: Decide = %+v, %v; want an early %s", tc.name, early, err, tc.decision)
		}
		if pending, _ := e.s.PendingApprovals(ctx); len(pending) != 0 {
			t.Fatalf("%s: an early decision is listed as pending: %+v", tc.name, pending)
		}
		a, err := e.s.RequestApproval(ctx, store.Approval{Command: tc.cmd, Verb: "vm.delete", EndpointID: 1, Requester: tc.requester, Summary: "s"})
		if err != nil || a.Decision != tc.want || a.Early || a.Requester != tc.requester || a.Verb != "vm.delete" {
			t.Fatalf("%s: RequestApproval = %+v, %v; want %s", tc.name, a, err, tc.want)
		}
		if tc.want != store.DecisionPending && (a.Decider != tc.decider || a.Reason != "ticket 42") {
			t.Errorf("%s: decider %q reason %q", tc.name, a.Decider, a.Reason)
		}
		if again, _ := e.s.Approval(ctx, tc.cmd); again.Decision != tc.want {
			t.Errorf("%s: stored decision %s, want %s", tc.name, again.Decision, tc.want)
		}
	}
	if pending, _ := e.s.PendingApprovals(ctx); len(pending) != 1 || pending[0].Command.ID != "early-self" {
		t.Errorf("pending = %+v, want the voided self-approval's command only", pending)
	}

	finished := store.CommandKey{Source: "/t", ID: "finished"}
	if state, _, err := e.s.FinishUnstarted(ctx, finished, []byte(`{}`)); err != nil || state != store.Absent {
		t.Fatalf("FinishUnstarted: %v %v", state, err)
	}
	if _, err := e.s.Decide(ctx, finished, store.DecisionApproved, "bob", ""); !errors.Is(err, store.ErrFinished) {
		t.Errorf("deciding on a finished command: %v, want ErrFinished", err)
	}
}
