package main

import (
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
)

// TestCheckSchedule pins the soak's verdict on the schedule's firings: a firing with two
// first-hand results (run twice) or none fails, a gap between firings is counted, and a
// schedule that stopped firing before the faults ended fails.
func TestCheckSchedule(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Date(2026, 12, 2, 4, 0, s, 0, time.UTC) }
	res := func(event string, replayed bool) resultEv {
		return resultEv{eventID: event, res: events.Result{Status: 200, Result: "ok", Replayed: replayed}}
	}
	c := &collected{results: map[string][]resultEv{
		events.FiringID(soakSchedule, at(0)): {res("a", false), res("a", false)}, // one result published twice: one answer
		events.FiringID(soakSchedule, at(1)): {res("b", false), res("b2", true)},
		events.FiringID(soakSchedule, at(4)): {res("c", false), res("c2", false)}, // run twice
		"planned-1":                          {res("d", false)},
	}}
	rep := checkSchedule(c)
	if rep.firings != 3 || len(rep.notOne) != 1 || rep.gaps != 1 || rep.longest != 3*time.Second || rep.answered["200 ok"] != 3 {
		t.Errorf("report %+v", rep)
	}
	if !rep.failed(at(2)) {
		t.Error("a firing run twice passed")
	}
	delete(c.results, events.FiringID(soakSchedule, at(4)))
	rep = checkSchedule(c)
	if rep.failed(at(1)) || !rep.failed(at(2)) {
		t.Errorf("failed(until) = %v at its last firing, %v after it; want false, true", rep.failed(at(1)), rep.failed(at(2)))
	}
}
