package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
)

// TestValidate pins which schedules schedule.add refuses, and the field each refusal names.
func TestValidate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	ok := events.Schedule{Name: "nightly", Verb: "vm.backup", EndpointID: 1}
	with := func(f func(*events.Schedule)) events.Schedule { sc := ok; f(&sc); return sc }
	tests := []struct {
		name  string
		sc    events.Schedule
		field string // "" valid
	}{
		{"cron", with(func(s *events.Schedule) { s.Cron = "0 0 2 * * *" }), ""},
		{"cron in a zone", with(func(s *events.Schedule) { s.Cron, s.TZ = "0 0 2 * * *", "Europe/Berlin" }), ""},
		{"every", with(func(s *events.Schedule) { s.Every = 6 * time.Hour }), ""},
		{"at", with(func(s *events.Schedule) { s.At = now.Add(time.Hour) }), ""},
		{"none", ok, "cron"},
		{"two", with(func(s *events.Schedule) { s.Cron, s.Every = "@daily", time.Hour }), "cron"},
		{"a bad name", with(func(s *events.Schedule) { s.Name, s.Every = "a.b", time.Hour }), "name"},
		{"a bad cron", with(func(s *events.Schedule) { s.Cron = "0 2 * * *" }), "cron"},
		{"an unknown zone", with(func(s *events.Schedule) { s.Cron, s.TZ = "@daily", "Mars/Olympus" }), "tz"},
		{"a zone without cron", with(func(s *events.Schedule) { s.Every, s.TZ = time.Hour, "Europe/Berlin" }), "tz"},
		{"every half a second", with(func(s *events.Schedule) { s.Every = 500 * time.Millisecond }), "every"},
		{"every 1.5 s", with(func(s *events.Schedule) { s.Every = 1500 * time.Millisecond }), "every"},
		{"at in the past", with(func(s *events.Schedule) { s.At = now.Add(-time.Second) }), "at"},
		{"a window of two days", with(func(s *events.Schedule) { s.Every, s.Window = time.Hour, 48*time.Hour }), "window"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Validate(tc.sc, now)
			var fe *FieldError
			switch {
			case tc.field == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
				t.Errorf("Validate = %v, want a FieldError on %s", err, tc.field)
			}
		})
	}
}

// TestNextFiring pins the next firing schedule list shows: an @every schedule keeps the phase
// nats-server gives it (the time it was stored, rounded to the second), an @at schedule fires
// no more once past.
func TestNextFiring(t *testing.T) {
	t.Parallel()
	made := time.Date(2026, 12, 2, 3, 0, 0, 400e6, time.UTC)
	tests := []struct {
		name   string
		sc     events.Schedule
		now    time.Time
		want   time.Time
		wantOK bool
	}{
		{"every before its first firing", events.Schedule{Every: time.Hour}, made, time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC), true},
		{"every after some firings", events.Schedule{Every: time.Hour}, made.Add(150 * time.Minute), time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC), true},
		{"at ahead", events.Schedule{At: made.Add(time.Hour).Truncate(time.Second)}, made, made.Add(time.Hour).Truncate(time.Second), true},
		{"at past", events.Schedule{At: made.Add(-time.Hour)}, made, made.Add(-time.Hour), false},
		{"cron in a zone", events.Schedule{Cron: "0 0 2 * * *", TZ: "Europe/Berlin"}, made, time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := NextFiring(tc.sc, made, tc.now)
			if ok != tc.wantOK || !got.Equal(tc.want) {
				t.Errorf("NextFiring = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestFiringTime pins the firing time a fired command's id and expiry are made from: the time
// its schedule was due, not the time nats-server stored it, so a firing made late (no stream
// leader at its time) keeps its due time and is answered 410 once its window passed; an
// @every schedule (which nats-server re-phases after a late firing) and a schedule that did
// not say its pattern use the stored second.
func TestFiringTime(t *testing.T) {
	t.Parallel()
	stored := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name   string
		f      events.Firing
		stored string
		want   string
	}{
		{"cron on time", events.Firing{Pattern: "0 0 2 * * *", TZ: "Europe/Berlin"}, "2026-12-02T01:00:00.31Z", "2026-12-02T01:00:00Z"},
		{"cron three hours late", events.Firing{Pattern: "0 0 2 * * *", TZ: "Europe/Berlin"}, "2026-12-02T04:13:07.5Z", "2026-12-02T01:00:00Z"},
		{"cron the second 02:30 of a fall-back night", events.Firing{Pattern: "0 30 2 * * *", TZ: "Europe/Berlin"}, "2026-10-25T01:30:00.2Z", "2026-10-25T01:30:00Z"},
		{"cron every second", events.Firing{Pattern: "* * * * * *"}, "2026-12-02T04:13:07.5Z", "2026-12-02T04:13:07Z"},
		{"@daily", events.Firing{Pattern: "@daily"}, "2026-12-02T00:00:01.5Z", "2026-12-02T00:00:00Z"},
		{"@at late", events.Firing{Pattern: "@at 2026-12-24T02:00:00Z"}, "2026-12-24T02:40:00.1Z", "2026-12-24T02:00:00Z"},
		{"@every", events.Firing{Pattern: "@every 1h"}, "2026-12-02T04:13:07.5Z", "2026-12-02T04:13:07Z"},
		{"no pattern", events.Firing{}, "2026-12-02T04:13:07.5Z", "2026-12-02T04:13:07Z"},
		{"a pattern that does not parse", events.Firing{Pattern: "0 0 2 * *"}, "2026-12-02T04:13:07.5Z", "2026-12-02T04:13:07Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := FiringTime(tc.f, stored(tc.stored)); !got.Equal(stored(tc.want)) {
				t.Errorf("FiringTime = %s, want %s", got.Format(time.RFC3339), tc.want)
			}
		})
	}
}
