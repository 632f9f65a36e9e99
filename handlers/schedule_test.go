package handlers

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/store"
)

// fakeSchedules keeps schedules in memory, as consumer.Schedules keeps them in JetStream.
type fakeSchedules struct {
	mu sync.Mutex
	m  map[string]events.Schedule
}

func (f *fakeSchedules) Add(_ context.Context, sc events.Schedule) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]events.Schedule{}
	}
	f.m[sc.Name] = sc
	return nil
}

func (f *fakeSchedules) Remove(_ context.Context, name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.m[name]
	delete(f.m, name)
	return ok, nil
}

func (f *fakeSchedules) get(name string) (events.Schedule, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sc, ok := f.m[name]
	return sc, ok
}

// scheduleCommand is a schedule.add (or schedule.remove) command by alice with data.
func scheduleCommand(verb, id, data string) events.Command {
	return events.Command{ID: id, Source: "/test/scheduler", Type: "proxbus." + verb, Verb: verb, Actor: "alice", Data: json.RawMessage(data)}
}

// control delivers a control command once and returns its result.
func (l *lifecycle) control(t *testing.T, cmd events.Command) events.Result {
	t.Helper()
	if d := l.deliver(cmd, 1); d.Action != events.Ack {
		t.Fatalf("%s %s: %+v, want ack", cmd.Verb, cmd.ID, d)
	}
	res := l.stream.resultsOf(cmd.Ref())
	if len(res) != 1 {
		t.Fatalf("%s %s: results %+v, want one", cmd.Verb, cmd.ID, res)
	}
	return res[0]
}

// firing is the command schedule name fires at at, as the consumer hands it to the pipeline
// (decoded with its Firing, then completed by Fired).
func firing(name string, at time.Time, data string) events.Command {
	c := events.Command{ID: name, Source: events.ScheduleSource(name), Type: "proxbus.test.write", Verb: "test.write",
		EndpointID: 1, HasEndpointID: true, Actor: "alice", Data: json.RawMessage(data),
		Firing: &events.Firing{Name: name, Window: events.DefaultScheduleWindow, Next: at.Add(24 * time.Hour)}}
	return c.Fired(at.Add(300 * time.Millisecond))
}

// TestScheduleAdd pins schedule.add (contract §11): a schedule is checked as the command it
// fires would be, at the time it is made (its verb, its endpoint's gate, its data), may hold
// no secret until sealed secrets exist (422 secret_not_sealed naming the field, never its
// value), never fires a command.* verb, and names the field at fault.
func TestScheduleAdd(t *testing.T) {
	t.Parallel()
	l := newLifecycle(t, okScript())
	tests := []struct {
		name, data string
		status     int
		reason     string
		fields     []string
	}{
		{"nightly in Berlin", `{"name":"nightly","cron":"0 0 2 * * *","tz":"Europe/Berlin","verb":"test.write","endpoint_id":1,"data":{}}`, 201, "", nil},
		{"every 6 h with a window", `{"name":"often","every":"6h","window":"1h","verb":"test.write","endpoint_id":1}`, 201, "", nil},
		{"an approval", `{"name":"approve","every":"1h","verb":"command.approve","endpoint_id":1,"data":{"command_id":"a","command_source":"b"}}`,
			422, ReasonScheduleVerbNotAllowed, []string{"verb"}},
		{"a schedule of schedules", `{"name":"meta","every":"1h","verb":"schedule.remove","endpoint_id":1,"data":{"name":"nightly"}}`,
			422, ReasonScheduleVerbNotAllowed, []string{"verb"}},
		{"a secret", `{"name":"pbs","every":"1h","verb":"test.write","endpoint_id":1,"data":{"nested":{"password":"hunter2-canary"}}}`,
			422, ReasonSecretNotSealed, []string{"data.nested.password"}},
		{"data the verb refuses", `{"name":"bad","every":"1h","verb":"test.write","endpoint_id":1,"data":{"unknown":1}}`,
			422, ReasonInvalidBody, []string{"data"}},
		{"an endpoint not configured", `{"name":"far","every":"1h","verb":"test.write","endpoint_id":2}`,
			403, ReasonEndpointNotFound, []string{"endpoint_id"}},
		{"two patterns", `{"name":"two","every":"1h","cron":"@daily","verb":"test.write","endpoint_id":1}`, 422, ReasonInvalidBody, []string{"cron"}},
		{"an unknown zone", `{"name":"tz","cron":"@daily","tz":"Mars/Olympus","verb":"test.write","endpoint_id":1}`, 422, ReasonInvalidBody, []string{"tz"}},
		{"a time in the past", `{"name":"past","at":"2020-01-01T00:00:00Z","verb":"test.write","endpoint_id":1}`, 422, ReasonInvalidBody, []string{"at"}},
		{"an unknown verb", `{"name":"x","every":"1h","verb":"vm.explode","endpoint_id":1}`, 422, ReasonInvalidBody, []string{"verb"}},
		{"a dotted name", `{"name":"a.b","every":"1h","verb":"test.write","endpoint_id":1}`, 422, ReasonInvalidBody, []string{"name"}},
	}
	for i, tc := range tests {
		res := l.control(t, scheduleCommand("schedule.add", "add-"+string(rune('a'+i)), tc.data))
		if res.Status != tc.status || res.Reason != tc.reason || !slices.Equal(res.Fields, tc.fields) {
			t.Errorf("%s: %d %s %v (%s), want %d %s %v", tc.name, res.Status, res.Reason, res.Fields, res.Detail, tc.status, tc.reason, tc.fields)
		}
		if strings.Contains(res.Detail, "hunter2-canary") {
			t.Errorf("%s: the result echoes the secret", tc.name)
		}
	}
	sc, ok := l.schedules.get("nightly")
	if !ok || sc.Cron != "0 0 2 * * *" || sc.TZ != "Europe/Berlin" || sc.Actor != "alice" || sc.EndpointID != 1 {
		t.Errorf("the nightly schedule = %+v, %v", sc, ok)
	}
	if sc, _ := l.schedules.get("often"); sc.Every != 6*time.Hour || sc.Window != time.Hour {
		t.Errorf("the often schedule = %+v", sc)
	}
	for _, name := range []string{"approve", "pbs", "bad", "far"} {
		if _, ok := l.schedules.get(name); ok {
			t.Errorf("the refused schedule %s was stored", name)
		}
	}
}

// TestScheduledFirings pins what the pipeline does with the commands schedules fire (contract
// §11): a firing of a schedule schedule.add made runs once and is recorded as the schedule's
// last; a command fired by a schedule schedule.add did not make as it is (a forged schedule
// under the schedule subjects, or one whose data was changed behind proxbus's back) is 403 and
// does nothing; a firing whose window passed while its guest was busy, or that nats-server
// made hours late, is 410 and never runs late; after schedule.remove, a firing still queued
// is 403.
func TestScheduledFirings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := &script{}
	sc.dispatch = []func(ctx context.Context, x *Exec) (Outcome, error){
		func(ctx context.Context, x *Exec) (Outcome, error) { return ok(ctx, x, sc) },
		func(ctx context.Context, x *Exec) (Outcome, error) { return ok(ctx, x, sc) },
	}
	l := newLifecycle(t, sc)
	if res := l.control(t, scheduleCommand("schedule.add", "add-nightly", `{"name":"nightly","cron":"0 0 2 * * *","verb":"test.write","endpoint_id":1,"data":{}}`)); res.Status != 201 {
		t.Fatalf("schedule.add: %+v", res)
	}
	night := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	l.clock.Advance(night.Add(time.Second).Sub(l.clock.Now()))

	first := firing("nightly", night, `{}`)
	if first.ID != "nightly.20261202T020000Z" {
		t.Fatalf("firing id %s", first.ID)
	}
	if d := l.deliver(first, 1); d.Action != events.Ack {
		t.Fatalf("the firing: %+v", d)
	}
	if d := l.deliver(first, 2); d.Action != events.Ack { // a redelivery of the same firing
		t.Fatalf("the firing again: %+v", d)
	}
	if res := l.stream.resultsOf(first.Ref()); len(res) != 2 || res[0].Status != 200 || res[0].Replayed || !res[1].Replayed {
		t.Fatalf("results of the firing %+v, want 200 then its replay", res)
	}
	if w, _ := sc.counts(); w != 1 {
		t.Fatalf("writes = %d, want 1: a firing runs once", w)
	}
	rec, found, err := l.store.LookupSchedule(ctx, "nightly")
	if err != nil || !found || rec.LastID != first.ID || !rec.LastAt.Equal(night) || !rec.Next.Equal(night.Add(24*time.Hour)) {
		t.Errorf("the schedule's record %+v, %v, %v; want its last firing %s", rec, found, err, first.ID)
	}

	for _, forged := range []events.Command{firing("ghost", night, `{}`), firing("nightly", night.Add(time.Hour), `{"vm":100}`)} {
		if d := l.deliver(forged, 1); d.Action != events.Ack {
			t.Fatalf("forged %s: %+v", forged.ID, d)
		}
		if res := l.stream.resultsOf(forged.Ref()); len(res) != 1 || res[0].Status != 403 || res[0].Reason != ReasonScheduleNotProxbus {
			t.Errorf("forged %s: results %+v, want 403 %s", forged.ID, res, ReasonScheduleNotProxbus)
		}
	}

	// the next night, the guest is busy past the window
	holder := store.ClaimRequest{Command: store.CommandKey{Source: "/other", ID: "holder"}, Owner: "other",
		Guards: store.Guards{Resource: &store.ResourceKey{EndpointID: 1, Kind: store.KindGuest, ID: "100"}}}
	claim, err := l.store.Claim(ctx, holder)
	if err != nil || claim.State != store.Claimed {
		t.Fatalf("holder claim %v %v", claim.State, err)
	}
	next := firing("nightly", night.Add(24*time.Hour), `{}`)
	l.clock.Advance(night.Add(24*time.Hour + time.Second).Sub(l.clock.Now()))
	if d := l.deliver(next, 1); d.Action != events.Redeliver {
		t.Fatalf("the busy night: %+v, want a redelivery (waiting)", d)
	}
	l.clock.Advance(events.DefaultScheduleWindow)
	if d := l.deliver(next, 2); d.Action != events.Ack {
		t.Fatalf("past the window: %+v, want ack", d)
	}
	if err := l.store.Complete(ctx, claim.Lease, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if d := l.deliver(next, 3); d.Action != events.Ack {
		t.Fatalf("after the guest was freed: %+v", d)
	}
	if res := l.stream.resultsOf(next.Ref()); len(res) == 0 || res[0].Status != 410 || res[0].Reason != ReasonCommandExpired {
		t.Errorf("the late firing: results %+v, want 410 %s", res, ReasonCommandExpired)
	}
	if w, _ := sc.counts(); w != 1 {
		t.Errorf("writes = %d, want 1: the late firing never ran", w)
	}

	// a firing nats-server made three hours late (no stream leader at 02:00) keeps its due
	// time (internal/schedule.FiringTime), so it is past its window
	late := firing("nightly", night.Add(48*time.Hour), `{}`)
	l.clock.Advance(night.Add(48*time.Hour + 3*time.Hour).Sub(l.clock.Now()))
	if d := l.deliver(late, 1); d.Action != events.Ack {
		t.Fatalf("a late firing: %+v", d)
	}
	if res := l.stream.resultsOf(late.Ref()); len(res) != 1 || res[0].Status != 410 || res[0].Reason != ReasonCommandExpired {
		t.Errorf("a firing three hours late: %+v, want 410 %s", res, ReasonCommandExpired)
	}

	if res := l.control(t, scheduleCommand("schedule.remove", "rm-1", `{"name":"nightly"}`)); res.Status != 200 {
		t.Fatalf("schedule.remove: %+v", res)
	}
	if _, ok := l.schedules.get("nightly"); ok {
		t.Error("the schedule is still stored after schedule.remove")
	}
	if res := l.control(t, scheduleCommand("schedule.remove", "rm-2", `{"name":"nightly"}`)); res.Status != 404 || res.Reason != ReasonScheduleNotFound {
		t.Errorf("schedule.remove again: %d %s, want 404 %s", res.Status, res.Reason, ReasonScheduleNotFound)
	}
	queued := firing("nightly", night.Add(72*time.Hour), `{}`)
	l.clock.Advance(night.Add(72*time.Hour + time.Second).Sub(l.clock.Now()))
	if d := l.deliver(queued, 1); d.Action != events.Ack {
		t.Fatalf("a firing queued before the removal: %+v", d)
	}
	if res := l.stream.resultsOf(queued.Ref()); len(res) != 1 || res[0].Status != 403 {
		t.Errorf("a firing queued before the removal: %+v, want 403", res)
	}
	if w, _ := sc.counts(); w != 1 {
		t.Errorf("writes = %d, want 1", w)
	}
}
