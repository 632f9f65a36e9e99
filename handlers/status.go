package handlers

import (
	"cmp"
	"encoding/json"
	"strings"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/store"
)

// stateOfResult is the end state a result puts a command in.
func stateOfResult(res events.Result) State {
	switch {
	case res.Status < 300:
		return StateDone
	case res.Reason == ReasonCommandExpired:
		return StateExpired
	case res.Reason == ReasonCommandCancelled:
		return StateCancelled
	case res.Reason == ReasonApprovalRejected:
		return StateRejected
	}
	return StateFailed
}

// CommandStatus is what proxbus status shows of one command: its state, since when, and what
// it went through.
type CommandStatus struct {
	State State `json:"state"`
	// Since is when the command reached State, as far as its events and records tell (zero when
	// unknown).
	Since time.Time `json:"since,omitzero"`
	// Why says what the state is waiting for or how it ended, in a few words.
	Why string `json:"why,omitempty"`
	// Owner is the replica's delivery holding a running or confirming command.
	Owner string `json:"owner,omitempty"`
	// Sent lists the Proxmox writes marked as leaving (their steps), in order.
	Sent []string `json:"sent,omitempty"`
	// Approval is the command's approval, when its endpoint needs one.
	Approval *store.Approval `json:"approval,omitempty"`
	// History is the phases its record went through, oldest first (the newest 16), each
	// written by the store step that made the move.
	History []store.PhaseVisit `json:"history,omitempty"`
	// Steps are its step events, in order; Result its first-hand result, once answered.
	Steps  []events.Step  `json:"steps"`
	Result *events.Result `json:"result,omitempty"`
}

// StatusOf tells a command's state at now from what is known of it: its identity record in
// the store (rec), its approval (nil when none), and its step and result events. A result, in
// the events or stored, ends it; a record held under a live lease is running; one whose owner
// stopped or gave it back after a write may have left is confirming (its next delivery
// confirms by reading), before any write waiting; a pending approval is awaiting_approval; a
// newest step that waits is waiting; any step at all is received. It reports false when
// nothing is known of the command.
func StatusOf(now time.Time, rec store.Inspection, approval *store.Approval, steps []events.Step, result *events.Result) (CommandStatus, bool) {
	st := CommandStatus{Approval: approval, Steps: steps, Result: result, History: rec.History}
	if st.Steps == nil {
		st.Steps = []events.Step{}
	}
	if result == nil && rec.State == store.Finished {
		var stored record
		if json.Unmarshal(rec.Result, &stored) == nil {
			r := stored.Result
			result = &r
			st.Result = result
		}
	}
	var last events.Step
	if len(steps) > 0 {
		last = steps[len(steps)-1]
		st.Since = last.At
	}
	held := rec.State == store.Running && !rec.Suspended && rec.LeaseUntil.After(now)
	switch {
	case result != nil:
		st.State, st.Why = stateOfResult(*result), strings.TrimSpace(result.Result+" "+result.Reason)
	case held:
		st.State, st.Owner, st.Sent = StateRunning, rec.Owner, rec.Progress.Sent
		if len(rec.Progress.Sent) > 0 {
			st.Why = "sent to Proxmox: " + strings.Join(rec.Progress.Sent, ", ")
		}
	case rec.State == store.Running && (rec.Progress.Dispatched || rec.Phase == string(StateConfirming)):
		st.State, st.Sent = StateConfirming, rec.Progress.Sent
		st.Why = "a write may have left and its owner stopped; the next delivery confirms it by reading, never sends it again"
	case rec.State == store.Running:
		st.State, st.Why = StateWaiting, cmp.Or(last.Detail, "its owner stopped before any write; the next delivery runs it")
	case approval != nil && approval.Decision == store.DecisionPending:
		st.State, st.Since, st.Why = StateAwaitingApproval, approval.RequestedAt, "awaiting approval"
	case last.Status == events.StepWaiting || last.Status == events.StepRetrying:
		st.State, st.Why = StateWaiting, last.Detail
	case len(steps) > 0 || (approval != nil && !approval.Early):
		st.State = StateReceived
	default:
		return st, false
	}
	return st, true
}
