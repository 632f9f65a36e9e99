package events

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestFired pins the identity of a scheduled command's firing (contract §11): id
// "<name>.<firing time>", source urn:proxbus:schedule:<name>, time the firing time (to the
// second, in UTC) and expires the firing time plus the window, so two deliveries of one
// firing are one command and two firings are two.
func TestFired(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	base := Command{ID: "nightly", Source: ScheduleSource("nightly"), Verb: "vm.backup"}
	tests := []struct {
		name        string
		window      time.Duration
		stored      time.Time
		wantID      string
		wantExpires time.Time
	}{
		{"default window", DefaultScheduleWindow, time.Date(2026, 12, 2, 2, 0, 0, 412e6, time.UTC),
			"nightly.20261202T020000Z", time.Date(2026, 12, 2, 2, 15, 0, 0, time.UTC)},
		{"an hour's window", time.Hour, time.Date(2026, 12, 2, 2, 0, 0, 999e6, time.UTC),
			"nightly.20261202T020000Z", time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)},
		{"a stored time in another zone", DefaultScheduleWindow, time.Date(2026, 3, 29, 3, 0, 1, 0, berlin),
			"nightly.20260329T010001Z", time.Date(2026, 3, 29, 1, 15, 1, 0, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := base
			c.Firing = &Firing{Name: "nightly", Window: tc.window}
			got := c.Fired(tc.stored)
			if got.ID != tc.wantID || !got.Expires.Equal(tc.wantExpires) || !got.Time.Equal(got.Firing.At) {
				t.Errorf("Fired = id %s, time %v, expires %v; want id %s, expires %v", got.ID, got.Time, got.Expires, tc.wantID, tc.wantExpires)
			}
			if c.ID != "nightly" || c.Firing.At != (time.Time{}) {
				t.Error("Fired changed the command it was called on")
			}
		})
	}
	if got := base.Fired(time.Now()); got.ID != base.ID || !got.Expires.IsZero() {
		t.Errorf("Fired of a command no schedule fired = %+v, want it unchanged", got)
	}
}

// TestScheduleRoundTrip pins that the schedule message proxbus stores reads back as the
// schedule, carries what nats-server needs (pattern, target, time zone, roll-up) and no
// Nats-Msg-Id (nats-server strips it from what it fires, and a duplicate window would swallow a
// re-added schedule), and that what nats-server fires from it decodes as a firing of it.
func TestScheduleRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []Schedule{
		{Name: "nightly", Cron: "0 0 2 * * *", TZ: "Europe/Berlin", Verb: "vm.backup", EndpointID: 1,
			Data: []byte(`{"vm":100,"storage":"pbs"}`), Actor: "alice", Window: 30 * time.Minute},
		{Name: "often", Every: 6 * time.Hour, Verb: "vm.start", EndpointID: 2, Data: []byte(`{"vm":"web1"}`), Window: DefaultScheduleWindow},
		{Name: "once", At: time.Date(2026, 12, 24, 2, 0, 0, 0, time.UTC), Verb: "node.reboot", EndpointID: 1, Data: []byte(`{"node":"pve1"}`), Window: DefaultScheduleWindow},
	}
	for _, sc := range tests {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			m, err := EncodeSchedule(testSubjects, sc)
			if err != nil {
				t.Fatal(err)
			}
			if m.Subject != "proxbus.schedule."+sc.Name || m.Header.Get(HeaderScheduleTarget) != "proxbus.cmd."+sc.Verb ||
				m.Header.Get(HeaderRollup) != "sub" || m.Header.Get(HeaderMsgID) != "" || m.Header.Get(HeaderScheduleTimeZone) != sc.TZ {
				t.Errorf("schedule message %s %v", m.Subject, m.Header)
			}
			got, err := DecodeSchedule(testSubjects, m.Subject, m.Header, m.Data)
			if err != nil {
				t.Fatal(err)
			}
			if got.Pattern() != sc.Pattern() || got.TZ != sc.TZ || got.Verb != sc.Verb || got.EndpointID != sc.EndpointID ||
				string(got.Data) != string(sc.Data) || got.Actor != sc.Actor || got.Window != sc.Window {
				t.Errorf("DecodeSchedule = %+v, want %+v", got, sc)
			}
			// What nats-server fires (server/scheduler.go): the Nats-Schedule* headers
			// removed, Nats-Scheduler and Nats-Schedule-Next added, on the target subject.
			fired := nats.Header{}
			for k, vs := range m.Header {
				if k != HeaderSchedule && k != HeaderScheduleTarget && k != HeaderScheduleTimeZone && k != HeaderRollup {
					fired[k] = vs
				}
			}
			fired.Set(HeaderScheduler, m.Subject)
			fired.Set(headerScheduleNext, "2026-12-03T02:00:00Z")
			c, err := Decode(m.Header.Get(HeaderScheduleTarget), fired, m.Data, testSubjects)
			if err != nil {
				t.Fatalf("the fired command: %v", err)
			}
			if c.Firing == nil || c.Firing.Name != sc.Name || c.Firing.Window != sc.Window || c.Actor != sc.Actor || c.EndpointID != sc.EndpointID ||
				c.Firing.Pattern != sc.Pattern() || c.Firing.TZ != sc.TZ {
				t.Errorf("fired command = %+v (firing %+v)", c, c.Firing)
			}
		})
	}
	if _, err := EncodeSchedule(testSubjects, Schedule{Name: "a.b", Every: time.Hour, Verb: "vm.start"}); !errors.Is(err, ErrEncode) {
		t.Errorf("a dotted name: err %v, want ErrEncode", err)
	}
	if _, err := DecodeSchedule(testSubjects, "proxbus.schedule.x", nats.Header{}, nil); !errors.Is(err, ErrScheduleMessage) {
		t.Errorf("a message without target: err %v, want ErrScheduleMessage", err)
	}
}
