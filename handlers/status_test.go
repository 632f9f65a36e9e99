package handlers

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/store"
)

// TestStatusOf pins how proxbus status tells a command's state (contract §4) from its record,
// its approval and its events: each state from what makes it so, and nothing known → false.
func TestStatusOf(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	stored := func(res events.Result) []byte {
		raw, err := json.Marshal(record{Result: res})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	waiting := []events.Step{{Seq: 1, Step: "claim", Status: events.StepWaiting, Detail: "another command holds guest 100", At: now}}
	pending := &store.Approval{Decision: store.DecisionPending, RequestedAt: now.Add(-time.Minute)}
	live := now.Add(20 * time.Second)
	tests := []struct {
		name     string
		rec      store.Inspection
		approval *store.Approval
		steps    []events.Step
		result   *events.Result
		want     State
		known    bool
	}{
		{name: "nothing known"},
		{name: "an early decision alone", approval: &store.Approval{Decision: store.DecisionApproved, Early: true}},
		{name: "seen", steps: []events.Step{{Seq: 1, Step: "gate", Status: events.StepDone}}, want: StateReceived, known: true},
		{name: "waits for its guest", steps: waiting, want: StateWaiting, known: true},
		{name: "awaits approval", approval: pending, steps: waiting, want: StateAwaitingApproval, known: true},
		{name: "held, nothing sent", rec: store.Inspection{State: store.Running, Owner: "r1", LeaseUntil: live}, want: StateRunning, known: true},
		{name: "held, writing", rec: store.Inspection{State: store.Running, Owner: "r1", LeaseUntil: live,
			Progress: store.Progress{Dispatched: true, Sent: []string{"start_vm"}}}, want: StateRunning, known: true},
		{name: "owner died after a write", rec: store.Inspection{State: store.Running, Owner: "r1", LeaseUntil: now.Add(-time.Second),
			Progress: store.Progress{Dispatched: true, Sent: []string{"start_vm"}}}, want: StateConfirming, known: true},
		{name: "suspended before any write", rec: store.Inspection{State: store.Running, Suspended: true}, steps: waiting, want: StateWaiting, known: true},
		{name: "done, from the events", result: &events.Result{Status: 201, Result: ResultCreated}, want: StateDone, known: true},
		{name: "done, from the store", rec: store.Inspection{State: store.Finished, Result: stored(events.Result{Status: 200, Result: ResultOK})},
			want: StateDone, known: true},
		{name: "expired", result: &events.Result{Status: 410, Reason: ReasonCommandExpired}, want: StateExpired, known: true},
		{name: "cancelled", result: &events.Result{Status: 410, Reason: ReasonCommandCancelled}, want: StateCancelled, known: true},
		{name: "rejected", result: &events.Result{Status: 403, Reason: ReasonApprovalRejected}, want: StateRejected, known: true},
		{name: "refused", result: &events.Result{Status: 409, Reason: ReasonVMRunning}, want: StateFailed, known: true},
		{name: "unconfirmed", result: &events.Result{Status: 502, Reason: ReasonProxmoxWriteUnconfirmed}, want: StateFailed, known: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, known := StatusOf(now, tc.rec, tc.approval, tc.steps, tc.result)
			if known != tc.known || (known && got.State != tc.want) {
				t.Fatalf("StatusOf = %s (known %v), want %s (known %v)", got.State, known, tc.want, tc.known)
			}
			if known && got.State.Final() != (got.Result != nil) {
				t.Errorf("state %s final %v with result %v", got.State, got.State.Final(), got.Result)
			}
		})
	}
}
