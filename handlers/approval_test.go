package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// newApprovalLifecycle is a lifecycle whose endpoint needs approval for test.write.
func newApprovalLifecycle(t *testing.T) (*lifecycle, *script) {
	t.Helper()
	sc := okScript()
	l := newLifecycleWith(t, sc, func(e *proxmox.EndpointConfig) { e.Approval.Verbs = []string{"test.write"} })
	return l, sc
}

// decision is a command.approve or command.reject of target by actor.
func decision(verb, id, actor string, target events.Command) events.Command {
	return events.Command{ID: id, Source: "/test/approver", Type: "proxbus." + verb, Verb: verb, Actor: actor,
		Data: json.RawMessage(fmt.Sprintf(`{"command_id":%q,"command_source":%q}`, target.ID, target.Source))}
}

// decide delivers a decision once and returns its result.
func (l *lifecycle) decide(t *testing.T, verb, id, actor string, target events.Command) events.Result {
	t.Helper()
	return l.decideWithReason(t, verb, id, actor, "", target)
}

// TestApprovalWaitsThenRuns pins contract §4b: a command whose endpoint lists its verb waits,
// announcing "awaiting approval", spending no attempt, holding no guest lease and writing
// nothing, until another actor approves it; its own requester cannot; then it runs once and its
// journal entry names the approver.
func TestApprovalWaitsThenRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, sc := newApprovalLifecycle(t)
	locates := 0
	sc.locate = func() error { locates++; return nil }
	cmd := testCommand("needs-approval")
	cmd.Actor = "alice"
	for n := uint64(1); n <= 3; n++ {
		d := l.deliver(cmd, n)
		if d.Action != events.Redeliver || d.Delay != DefaultApprovalPoll {
			t.Fatalf("delivery %d: %+v, want a redelivery after %s", n, d, DefaultApprovalPoll)
		}
	}
	steps := l.stream.stepsOf(cmd.Ref())
	if len(steps) != 1 || steps[0].Status != events.StepWaiting || steps[0].Detail != "awaiting approval" {
		t.Errorf("steps %+v, want one waiting step: awaiting approval", steps)
	}
	if locates != 1 {
		t.Errorf("the guest was looked up %d times while waiting, want once", locates)
	}
	if w, _ := sc.counts(); w != 0 || l.failures(t, cmd) != 0 || len(l.journal.entries) != 0 {
		t.Fatalf("while waiting: writes %d, failures %d, journal %v; want none", w, l.failures(t, cmd), l.journal.entries)
	}
	other := store.ClaimRequest{Command: store.CommandKey{Source: "/other", ID: "other"}, Owner: "other",
		Guards: store.Guards{Resource: &store.ResourceKey{EndpointID: 1, Kind: store.KindGuest, ID: "100"}}}
	if c, err := l.store.Claim(ctx, other); err != nil || c.State != store.Claimed {
		t.Fatalf("the waiting command holds guest 100: %v %v", c.State, err)
	} else if err := l.store.Release(ctx, c.Lease); err != nil {
		t.Fatal(err)
	}
	pending, err := l.store.PendingApprovals(ctx)
	if err != nil || len(pending) != 1 || pending[0].Requester != "alice" || pending[0].Verb != "test.write" {
		t.Fatalf("pending %+v, %v", pending, err)
	}

	if res := l.decide(t, "command.approve", "self", "alice", cmd); res.Status != 403 || res.Reason != ReasonApproverIsRequester {
		t.Errorf("self approval: %d %s, want 403 %s", res.Status, res.Reason, ReasonApproverIsRequester)
	}
	if res := l.decide(t, "command.approve", "unknown", "bob", testCommand("nobody")); res.Status != 200 || !strings.Contains(res.Detail, "kept") {
		t.Errorf("a command not seen yet: %d %s %q, want 200 saying the decision is kept", res.Status, res.Reason, res.Detail)
	}
	if res := l.decide(t, "command.approve", "by-bob", "bob", cmd); res.Status != 200 || res.Result != ResultOK {
		t.Fatalf("approval: %+v", res)
	}
	if res := l.decide(t, "command.reject", "late-reject", "carol", cmd); res.Status != 409 || res.Reason != ReasonNotAwaitingApproval || !strings.Contains(res.Detail, "approved by bob") {
		t.Errorf("a rejection after the approval: %d %s %q", res.Status, res.Reason, res.Detail)
	}
	if d := l.deliver(cmd, 4); d.Action != events.Ack {
		t.Fatalf("after approval: %+v, want ack", d)
	}
	if res := l.stream.resultsOf(cmd.Ref()); len(res) != 1 || res[0].Status != 200 {
		t.Fatalf("results %+v, want one 200", res)
	}
	if w, _ := sc.counts(); w != 1 {
		t.Errorf("writes = %d, want 1", w)
	}
	var entry string
	for _, c := range l.journal.entries {
		entry = c
	}
	if !strings.Contains(entry, "- approved_by: bob\n") || !strings.Contains(entry, "- actor: alice\n") {
		t.Errorf("journal entry lacks the approver:\n%s", entry)
	}
}

// TestApprovalRejected: a rejected command is answered 403 approval_rejected, journaled with
// who rejected it, and writes nothing.
func TestApprovalRejected(t *testing.T) {
	t.Parallel()
	l, sc := newApprovalLifecycle(t)
	cmd := testCommand("to-reject")
	cmd.Actor = "alice"
	if d := l.deliver(cmd, 1); d.Action != events.Redeliver {
		t.Fatalf("delivery 1: %+v", d)
	}
	if res := l.decide(t, "command.reject", "by-carol", "carol", cmd); res.Status != 200 {
		t.Fatalf("rejection: %+v", res)
	}
	for n := uint64(2); n <= 3; n++ {
		if d := l.deliver(cmd, n); d.Action != events.Ack {
			t.Fatalf("delivery %d: %+v, want ack", n, d)
		}
	}
	res := l.stream.resultsOf(cmd.Ref())
	if len(res) != 2 || res[0].Status != 403 || res[0].Reason != ReasonApprovalRejected || !res[1].Replayed {
		t.Fatalf("results %+v, want 403 approval_rejected and its replay", res)
	}
	if w, _ := sc.counts(); w != 0 {
		t.Errorf("writes = %d, want 0", w)
	}
	if len(l.journal.entries) != 1 {
		t.Fatalf("journal %v, want one entry", l.journal.entries)
	}
	for _, c := range l.journal.entries {
		if !strings.Contains(c, "- rejected_by: carol\n") || !strings.Contains(c, "approval_rejected") {
			t.Errorf("journal entry:\n%s", c)
		}
	}
}

// TestApprovalExpires: a command still awaiting approval when it expires is answered 410 and
// leaves the pending list.
func TestApprovalExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, sc := newApprovalLifecycle(t)
	cmd := testCommand("expires-waiting")
	cmd.Actor, cmd.Time = "alice", l.clock.Now()
	if d := l.deliver(cmd, 1); d.Action != events.Redeliver {
		t.Fatalf("delivery 1: %+v", d)
	}
	if pending, _ := l.store.PendingApprovals(ctx); len(pending) != 1 || !pending[0].Expires.Equal(cmd.Time.Add(DefaultCommandMaxAge)) {
		t.Fatalf("pending %+v, want one that expires with the command", pending)
	}
	l.clock.Advance(DefaultCommandMaxAge + time.Second)
	if d := l.deliver(cmd, 2); d.Action != events.Ack {
		t.Fatalf("delivery 2: %+v", d)
	}
	wantOnlyResult(t, l, sc, cmd, 410, ReasonCommandExpired)
	if pending, _ := l.store.PendingApprovals(ctx); len(pending) != 0 {
		t.Errorf("pending %+v after the expiry, want none", pending)
	}
	if res := l.decide(t, "command.approve", "too-late", "bob", cmd); res.Status != 409 || res.Reason != ReasonNotAwaitingApproval {
		t.Errorf("approving an expired command: %d %s, want 409 %s", res.Status, res.Reason, ReasonNotAwaitingApproval)
	}
}

// decideWithReason delivers a decision with a reason once and returns its result.
func (l *lifecycle) decideWithReason(t *testing.T, verb, id, actor, reason string, target events.Command) events.Result {
	t.Helper()
	cmd := decision(verb, id, actor, target)
	if reason != "" {
		cmd.Data = json.RawMessage(fmt.Sprintf(`{"command_id":%q,"command_source":%q,"reason":%q}`, target.ID, target.Source, reason))
	}
	if d := l.deliver(cmd, 1); d.Action != events.Ack {
		t.Fatalf("%s %s: %+v, want ack", verb, id, d)
	}
	res := l.stream.resultsOf(cmd.Ref())
	if len(res) == 0 {
		t.Fatalf("%s %s: no result", verb, id)
	}
	return res[len(res)-1]
}

// onlyJournalEntry returns the one journal entry the test wrote, failing the test otherwise.
func (l *lifecycle) onlyJournalEntry(t *testing.T) string {
	t.Helper()
	if len(l.journal.entries) != 1 {
		t.Fatalf("journal %v, want one entry", l.journal.entries)
	}
	for _, c := range l.journal.entries {
		return c
	}
	return ""
}

// TestApprovalAfterPreflight pins contract §4b's order: a command that needs approval but that
// its verb refuses by reading alone (here 409 vm_running) is refused at once, journaled, with no
// approval asked and nothing written; one the preflight lets through publishes its waiting step
// with the dry-run plan, which the pending approval keeps too.
func TestApprovalAfterPreflight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, sc := newApprovalLifecycle(t)
	sc.refusal = &Outcome{Status: 409, Result: ResultRefused, Reason: ReasonVMRunning, Detail: "guest 100 is running"}
	refused := testCommand("refused-first")
	refused.Actor = "alice"
	if d := l.deliver(refused, 1); d.Action != events.Ack {
		t.Fatalf("delivery 1: %+v, want the refusal answered", d)
	}
	res := l.stream.resultsOf(refused.Ref())
	if len(res) != 1 || res[0].Status != 409 || res[0].Reason != ReasonVMRunning || !res[0].Finalized() {
		t.Fatalf("results %+v, want one 409 vm_running, journaled", res)
	}
	if pending, _ := l.store.PendingApprovals(ctx); len(pending) != 0 {
		t.Errorf("pending %+v: approval was asked for a command bound to be refused", pending)
	}
	if w, _ := sc.counts(); w != 0 || !strings.Contains(l.onlyJournalEntry(t), "vm_running") {
		t.Errorf("writes %d, journal %v", w, l.journal.entries)
	}

	sc.mu.Lock()
	sc.refusal = nil
	sc.mu.Unlock()
	asks := testCommand("asks-with-plan")
	asks.Actor = "alice"
	if d := l.deliver(asks, 1); d.Action != events.Redeliver {
		t.Fatalf("delivery 1: %+v, want it to wait", d)
	}
	steps := l.stream.stepsOf(asks.Ref())
	if len(steps) != 1 || steps[0].Detail != awaitingApproval || !strings.Contains(string(steps[0].Plan), `"complete":true`) {
		t.Fatalf("steps %+v, want one waiting step carrying the plan", steps)
	}
	pending, err := l.store.PendingApprovals(ctx)
	if err != nil || len(pending) != 1 || !strings.Contains(string(pending[0].Plan), `"status":200`) {
		t.Fatalf("pending %+v, %v; want the plan kept", pending, err)
	}
}

// TestDecisionBeforeTheCommand pins "a decision is kept even when it arrives before the
// command does" (contract §4b): approved (or rejected) with a reason before its first
// delivery, the command runs (or is answered 403) on that delivery, without waiting, and the
// journal names the decider and the reason.
func TestDecisionBeforeTheCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		verb, decider string
		status        int
		reason        string
		writes        int
	}{
		{"command.approve", "bob", 200, "", 1},
		{"command.reject", "carol", 403, ReasonApprovalRejected, 0},
	}
	for _, tc := range tests {
		t.Run(tc.verb, func(t *testing.T) {
			t.Parallel()
			l, sc := newApprovalLifecycle(t)
			cmd := testCommand("decided-early")
			cmd.Actor = "alice"
			if res := l.decideWithReason(t, tc.verb, "early", tc.decider, "CHG-42", cmd); res.Status != 200 {
				t.Fatalf("early decision: %+v", res)
			}
			if d := l.deliver(cmd, 1); d.Action != events.Ack {
				t.Fatalf("delivery 1: %+v, want the decision to take effect", d)
			}
			res := l.stream.resultsOf(cmd.Ref())
			if len(res) != 1 || res[0].Status != tc.status || res[0].Reason != tc.reason {
				t.Fatalf("results %+v, want one %d %s", res, tc.status, tc.reason)
			}
			if w, _ := sc.counts(); w != tc.writes {
				t.Errorf("writes = %d, want %d", w, tc.writes)
			}
			entry := l.onlyJournalEntry(t)
			if !strings.Contains(entry, "_by: "+tc.decider+"\n") || !strings.Contains(entry, "_reason: CHG-42\n") {
				t.Errorf("journal entry lacks the decider or the reason:\n%s", entry)
			}
		})
	}
}

// TestDecisionInTimeBeatsExpiry pins that a decision taken before the command's deadline takes
// effect even when the command's next delivery comes after it (a NATS leader election, a Redis
// failover): approved, it runs; rejected, it is answered 403 approval_rejected, journaled;
// neither becomes 410 command_expired. A command still pending at its deadline expires (see
// TestApprovalExpires).
func TestDecisionInTimeBeatsExpiry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		verb   string
		status int
		reason string
		writes int
	}{
		{"command.approve", 200, "", 1},
		{"command.reject", 403, ReasonApprovalRejected, 0},
	}
	for _, tc := range tests {
		t.Run(tc.verb, func(t *testing.T) {
			t.Parallel()
			l, sc := newApprovalLifecycle(t)
			cmd := testCommand("decided-in-time")
			cmd.Actor, cmd.Time = "alice", l.clock.Now()
			if d := l.deliver(cmd, 1); d.Action != events.Redeliver {
				t.Fatalf("delivery 1: %+v", d)
			}
			l.clock.Advance(DefaultCommandMaxAge - 31*time.Second)
			if res := l.decide(t, tc.verb, "in-time", "bob", cmd); res.Status != 200 {
				t.Fatalf("decision: %+v", res)
			}
			l.clock.Advance(time.Minute) // the redelivery comes 29 s after the deadline
			if d := l.deliver(cmd, 2); d.Action != events.Ack {
				t.Fatalf("delivery 2: %+v", d)
			}
			res := l.stream.resultsOf(cmd.Ref())
			if len(res) != 1 || res[0].Status != tc.status || res[0].Reason != tc.reason {
				t.Fatalf("results %+v, want one %d %q", res, tc.status, tc.reason)
			}
			if w, _ := sc.counts(); w != tc.writes || !res[0].Finalized() {
				t.Errorf("writes = %d (want %d), journal finalized %v", w, tc.writes, res[0].Finalized())
			}
		})
	}
}

// downEndpoints is a NetBox that does not answer the gate's endpoint lookup.
type downEndpoints struct{}

func (downEndpoints) Endpoint(context.Context, int64) (netbox.Endpoint, error) {
	return netbox.Endpoint{}, fmt.Errorf("%w: connection refused", netbox.ErrUnavailable)
}

// TestApprovalPauseStaysShort pins that waiting for approval does not grow a command's pause:
// after many approval polls (each a delivery), a dependency that is down for a moment (here
// NetBox at the gate) is waited for with a pause of at most ApprovalPoll, not the MaxWait its
// delivery count would give, so that a decision taken meanwhile takes effect within seconds.
func TestApprovalPauseStaysShort(t *testing.T) {
	t.Parallel()
	l, _ := newApprovalLifecycle(t)
	cmd := testCommand("polled-often")
	cmd.Actor = "alice"
	for n := uint64(1); n <= 20; n++ {
		if d := l.deliver(cmd, n); d.Action != events.Redeliver || d.Delay != DefaultApprovalPoll {
			t.Fatalf("delivery %d: %+v", n, d)
		}
	}
	l.p.cfg.Endpoints = downEndpoints{}
	if d := l.deliver(cmd, 21); d.Action != events.Redeliver || d.Delay > DefaultApprovalPoll {
		t.Fatalf("NetBox down at delivery 21: %+v, want a redelivery within %s", d, DefaultApprovalPoll)
	}
}

// TestCheckApprovalVerbs: an endpoint's approval list may name write verbs only; anything else
// is refused with the closest write verbs.
func TestCheckApprovalVerbs(t *testing.T) {
	t.Parallel()
	r := NewRegistry(Builtin()...)
	if err := r.CheckApprovalVerbs([]string{"node.reboot", "vm.stop"}); err != nil {
		t.Errorf("write verbs refused: %v", err)
	}
	err := r.CheckApprovalVerbs([]string{"vm.list", "node.rebot", "command.approve"})
	if !errors.Is(err, ErrApprovalVerb) {
		t.Fatalf("err = %v, want ErrApprovalVerb", err)
	}
	for _, want := range []string{`"vm.list"`, `"node.rebot" (did you mean node.reboot`, `"command.approve"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
}
