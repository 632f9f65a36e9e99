package console

import (
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
)

// t0 is the time the tests' commands start.
var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// wire is an event as a replica publishes it and the console reads it back.
type wire struct {
	seq uint64
	ev  events.Received
}

// emit builds the event of payload p about command id (source "/test", verb, endpoint 1,
// actor alice) published by instance at time at, as the events stream holds it.
func emit(t *testing.T, instance, id, verb string, at time.Time, p events.Payload) events.Received {
	t.Helper()
	em := events.NewEmitter(events.NewSubjects(""), instance)
	em.Now = func() time.Time { return at }
	ep := int64(1)
	_, msg, err := em.Event(events.Origin{ID: id, Source: "/test", Verb: verb, Actor: "alice", EndpointID: &ep}, p)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.ParseEvent(msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// step is a step event of command id at t0+ms.
func step(t *testing.T, id string, seq int, name string, status events.StepStatus, ms int) events.Received {
	t.Helper()
	at := t0.Add(time.Duration(ms) * time.Millisecond)
	return emit(t, "r1", id, "vm.start", at, events.Step{Seq: seq, Step: name, Status: status, Attempt: 1, At: at})
}

// result is the result event of command id at t0+ms.
func result(t *testing.T, id string, status int, word string, replayed bool, ms int) events.Received {
	t.Helper()
	return emit(t, "r1", id, "vm.start", t0.Add(time.Duration(ms)*time.Millisecond), events.Result{Status: status, Result: word, Replayed: replayed})
}

// applyAll applies evs to ix with consecutive stream sequences after the newest applied.
func applyAll(ix *index, evs ...events.Received) {
	for _, ev := range evs {
		ix.mu.RLock()
		seq := ix.lastSeq + 1
		ix.mu.RUnlock()
		ix.apply(seq, ev)
	}
}
