package handlers

import (
	"context"
	"fmt"
	"strings"

	"github.com/proxbus/proxbus/events"
)

// State is where a command is in its life (contract §4). A command starts in StateReceived at
// each delivery; [Transitions] is every way it may move; the five end states never change.
//
//	received ──claimed──────────────▶ running ──concluded──▶ done | failed | cancelled
//	   │  │ └──approval_pending──▶ awaiting_approval         │  └──answer_lost / resumed_after_write──▶ confirming
//	   │  └──waits──▶ waiting ──woken/redelivered──▶ received  └──waits──▶ waiting        confirming ──concluded──▶ …
//	   └──answered / expired──▶ done | failed | expired | cancelled | rejected
type State string

// The states of a command.
const (
	// StateReceived: a delivery holds the command and has not yet waited, asked for approval
	// or claimed it. Every delivery starts here.
	StateReceived State = "received"
	// StateWaiting: it waits, spending no attempt: for its guest or node, a slot of its
	// endpoint, an Idempotency-Key twin, or a dependency that is down before any write.
	StateWaiting State = "waiting"
	// StateAwaitingApproval: its endpoint lists its verb; no second person has decided yet.
	StateAwaitingApproval State = "awaiting_approval"
	// StateRunning: a delivery holds its claim and works on it.
	StateRunning State = "running"
	// StateConfirming: a write of it may have left without an answer (the answer was lost, or
	// an earlier owner stopped after the write's mark): it is confirmed by reading, never sent
	// again.
	StateConfirming State = "confirming"
	// StateDone: answered with a 2xx result.
	StateDone State = "done"
	// StateExpired: answered 410 command_expired; nothing was done.
	StateExpired State = "expired"
	// StateCancelled: answered 410 command_cancelled.
	StateCancelled State = "cancelled"
	// StateRejected: a second person rejected it (403 approval_rejected); nothing was done.
	StateRejected State = "rejected"
	// StateFailed: answered with any other status of 400 or more.
	StateFailed State = "failed"
)

// Final reports whether s is an end state.
func (s State) Final() bool {
	switch s {
	case StateDone, StateExpired, StateCancelled, StateRejected, StateFailed:
		return true
	}
	return false
}

// Event is what moves a command from one [State] to another.
type Event string

// The events of a command's life.
const (
	// EventRedelivered: JetStream delivers the command again after a wait, a crash or a lost
	// lease; the delivery starts in StateReceived.
	EventRedelivered Event = "redelivered"
	// EventExpired: its expires time or the command max age passed before it started.
	EventExpired Event = "expired"
	// EventAnswered: its outcome was reached without running it: a gate or validation
	// refusal, a read, a dry run, a control verb, a preflight refusal, a rejection, a stored or
	// Idempotency-Key outcome answered again, an object that cannot be located.
	EventAnswered Event = "answered"
	// EventWaits: it must wait without spending an attempt: a busy guard, another delivery of
	// it running, a dependency down before any write, its result not yet published.
	EventWaits Event = "waits"
	// EventWoken: the guard it waited for in the process was given back; it claims again.
	EventWoken Event = "woken"
	// EventApprovalPending: its endpoint needs a second person, who has not decided.
	EventApprovalPending Event = "approval_pending"
	// EventClaimed: it holds the command's lease and guards (store claim).
	EventClaimed Event = "claimed"
	// EventResumedAfterWrite: it was claimed from an earlier owner whose write may have left.
	EventResumedAfterWrite Event = "resumed_after_write"
	// EventMarked: a Proxmox write is about to leave (store dispatching mark).
	EventMarked Event = "marked"
	// EventAnswerLost: the answer to a write that left was lost.
	EventAnswerLost Event = "answer_lost"
	// EventInterrupted: the dispatch stopped without an outcome; the command is suspended and
	// redelivered (confirmed by reading if a write may have left).
	EventInterrupted Event = "interrupted"
	// EventAttemptFailed: an attempt failed before any write; it is counted.
	EventAttemptFailed Event = "attempt_failed"
	// EventExhausted: MaxAttempts attempts failed before any write.
	EventExhausted Event = "attempts_exhausted"
	// EventConcluded: the holder reached the command's outcome (a cancelled task included) and
	// stored it.
	EventConcluded Event = "concluded"
)

// Transition is one row of the command state table: on Event, a command in From moves to To.
type Transition struct {
	From State
	On   Event
	To   State
	// By is who may make the move.
	By string
	// Persists is what the store (or the events stream) keeps of it: one fenced script, or
	// nothing beyond a step event.
	Persists string
}

// Who may move a command, in [Transition.By].
const (
	byDelivery = "the delivery"
	byHolder   = "the lease holder"
	byStream   = "JetStream"
)

// Transitions is the command state table: every move a command may make. The pipeline makes
// no other (TestPipelineMovesAlongTheTable).
var Transitions = append([]Transition{
	{StateWaiting, EventRedelivered, StateReceived, byStream, "nothing"},
	{StateAwaitingApproval, EventRedelivered, StateReceived, byStream, "nothing"},
	{StateRunning, EventRedelivered, StateReceived, byStream, "nothing (the lease expired; the next claim resumes it)"},
	{StateConfirming, EventRedelivered, StateReceived, byStream, "nothing (the next claim resumes it)"},

	{StateReceived, EventWaits, StateWaiting, byDelivery, "a waiting or retrying step"},
	{StateWaiting, EventWoken, StateReceived, byDelivery, "nothing (woken in the process)"},
	{StateWaiting, EventWaits, StateWaiting, byDelivery, "nothing: the process drains while it waits in the process; it is redelivered at once"},
	{StateReceived, EventApprovalPending, StateAwaitingApproval, byDelivery, "the approval request with its plan (request script); an approval step"},
	{StateReceived, EventAttemptFailed, StateWaiting, byDelivery, "the failure count (record-failure script)"},
	{StateReceived, EventExhausted, StateFailed, byDelivery, "the result; dead-lettered"},
	{StateReceived, EventClaimed, StateRunning, byDelivery, "record state running, owner, lease, guards (claim script)"},

	{StateRunning, EventMarked, StateRunning, byHolder, "the write's step and time (dispatching script)"},
	{StateRunning, EventResumedAfterWrite, StateConfirming, byHolder, "nothing more (the claim kept the marks)"},
	{StateRunning, EventAnswerLost, StateConfirming, byHolder, "nothing more (the write's mark says it may have left)"},
	{StateRunning, EventWaits, StateWaiting, byHolder, "record state waiting, the claim given back (release, yield or suspend script)"},
	{StateRunning, EventInterrupted, StateConfirming, byHolder, "record state confirming, progress kept (suspend script)"},
	{StateRunning, EventAttemptFailed, StateWaiting, byHolder, "record state waiting (suspend script); the failure count"},
	{StateRunning, EventExhausted, StateFailed, byHolder, "the result (complete script); dead-lettered"},
	{StateRunning, EventAnswered, StateFailed, byHolder, "nothing: the claim is given back (release script); its object is gone now"},
	{StateConfirming, EventInterrupted, StateConfirming, byHolder, "record state confirming, progress kept (suspend script)"},
	{StateConfirming, EventWaits, StateWaiting, byHolder, "nothing (the outcome could not be stored; the next claim confirms it again)"},
},
	append(append(append(
		toEnds(StateReceived, EventExpired, byDelivery, "the result, for a write (finish-unstarted script)", StateExpired),
		toEnds(StateReceived, EventAnswered, byDelivery, "the result, for a write or control verb (finish-unstarted or complete script)",
			StateDone, StateFailed, StateExpired, StateCancelled, StateRejected)...),
		toEnds(StateRunning, EventConcluded, byHolder, "record state and result (complete script)", StateDone, StateFailed, StateCancelled)...),
		toEnds(StateConfirming, EventConcluded, byHolder, "record state and result (complete script)", StateDone, StateFailed, StateCancelled)...)...,
)

// toEnds is one row per state in to.
func toEnds(from State, on Event, by, persists string, to ...State) []Transition {
	rows := make([]Transition, len(to))
	for i, s := range to {
		rows[i] = Transition{From: from, On: on, To: s, By: by, Persists: persists}
	}
	return rows
}

// allowed reports whether the table has the move from on to.
func allowed(from State, on Event, to State) bool {
	for _, t := range Transitions {
		if t.From == from && t.On == on && t.To == to {
			return true
		}
	}
	return false
}

// stage is one step of a delivery's work in the state it is in; it returns the move it makes.
type stage func(ctx context.Context) move

// move is what a stage decides: the event, the state it leads to, and either the stage that
// goes on in that state (next) or, when next is nil, what becomes of the message (disp).
type move struct {
	on   Event
	to   State
	next stage
	disp events.Disposition
}

// then is m going on with next in its state instead of ending the delivery.
func (m move) then(next stage) move {
	m.next = next
	return m
}

// because is m made on event on when it reaches an end state; a wait (the store or the
// events stream unavailable on the way) stays a wait.
func (m move) because(on Event) move {
	if m.to.Final() {
		m.on = on
	}
	return m
}

// drive makes the delivery's moves, from StateReceived, until one ends it, and returns that
// move's disposition. A move the table does not have is logged as an error and observed (it
// is a bug: TestPipelineMovesAlongTheTable fails on it).
func (r *run) drive(ctx context.Context, first stage) events.Disposition {
	r.state = StateReceived
	m := first(ctx)
	for {
		if !allowed(r.state, m.on, m.to) {
			r.log.Error("a move the command state table does not have", "from", r.state, "event", m.on, "to", m.to)
		}
		if r.p.observe != nil {
			r.p.observe(Transition{From: r.state, On: m.on, To: m.to})
		}
		r.state = m.to
		if m.next == nil {
			return m.disp
		}
		m = m.next(ctx)
	}
}

// String is "from --event--> to".
func (t Transition) String() string { return fmt.Sprintf("%s --%s--> %s", t.From, t.On, t.To) }

// becomes is m leading to state on event on instead.
func (m move) becomes(state State, on Event) move {
	m.to, m.on = state, on
	return m
}

// TableMarkdown is [Transitions] as a Markdown table, as docs/architecture.md shows it.
func TableMarkdown() string {
	var b strings.Builder
	b.WriteString("| from | event | to | by | what is kept |\n|---|---|---|---|---|\n")
	for _, t := range Transitions {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", t.From, t.On, t.To, t.By, t.Persists)
	}
	return b.String()
}
