// Package schedule is the arithmetic of proxbus's scheduled commands (contract §11): which
// schedules nats-server accepts and when they fire, computed as nats-server computes it
// (server/cron.go, server/scheduler.go). The schedules themselves are JetStream message
// schedules kept by the consumer package; this package touches no network.
package schedule

import (
	"fmt"
	"time"
	_ "time/tzdata" // a schedule's time zone is checked even where the system has no zone data

	"github.com/proxbus/proxbus/events"
)

// Limits of a schedule.
const (
	// MinEvery is the shortest interval nats-server fires at.
	MinEvery = time.Second
	// MinWindow and MaxWindow bound a schedule's window.
	MinWindow = time.Second
	MaxWindow = 24 * time.Hour
)

// FieldError is a schedule that cannot be made: Field names the schedule.add field (and the
// CLI flag) at fault, Problem says what to do.
type FieldError struct {
	Field, Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Validate checks sc's name, pattern, time zone and window at now (an @at time must be in the
// future), as nats-server would accept them and more strictly; it returns a [*FieldError].
func Validate(sc events.Schedule, now time.Time) error {
	if !events.ValidScheduleName(sc.Name) {
		return &FieldError{"name", "1–64 of A–Z, a–z, 0–9, '_' and '-'"}
	}
	n := 0
	for _, set := range []bool{sc.Cron != "", sc.Every != 0, !sc.At.IsZero()} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return &FieldError{"cron", "give exactly one of cron, every and at"}
	case sc.TZ != "" && sc.Cron == "":
		return &FieldError{"tz", "a time zone goes with cron only (every and at are absolute)"}
	case sc.Every != 0 && (sc.Every < MinEvery || sc.Every%time.Second != 0):
		return &FieldError{"every", "a whole number of seconds, at least 1s (e.g. 6h)"}
	case !sc.At.IsZero() && !sc.At.After(now):
		return &FieldError{"at", "a time in the future (RFC 3339, e.g. 2026-12-24T02:00:00Z)"}
	case !sc.At.IsZero() && !sc.At.Equal(sc.At.Truncate(time.Second)):
		return &FieldError{"at", "whole seconds"}
	case sc.Window != 0 && (sc.Window < MinWindow || sc.Window > MaxWindow):
		return &FieldError{"window", fmt.Sprintf("between %s and %s", MinWindow, MaxWindow)}
	}
	if sc.Cron != "" {
		c, err := ParseCron(sc.Cron)
		if err != nil {
			return &FieldError{"cron", err.Error() + "; e.g. '0 0 2 * * *' is 02:00:00 every day"}
		}
		loc, err := location(sc.TZ)
		if err != nil {
			return &FieldError{"tz", "an IANA time zone name (e.g. Europe/Berlin)"}
		}
		if _, err := c.Next(now, loc); err != nil {
			return &FieldError{"cron", err.Error()}
		}
	}
	return nil
}

// location is the time zone tz, UTC when "".
func location(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	return time.LoadLocation(tz)
}

// NextFiring is the first firing of sc after now, and false when it fires no more (an @at
// in the past) or its pattern is invalid. made is when the schedule was stored: an @every
// schedule fires at made (rounded to the second) plus whole intervals, as nats-server fires it.
func NextFiring(sc events.Schedule, made, now time.Time) (time.Time, bool) {
	switch {
	case !sc.At.IsZero():
		return sc.At, sc.At.After(now)
	case sc.Every > 0:
		next := made.UTC().Round(time.Second).Add(sc.Every)
		if next.After(now) {
			return next, true
		}
		k := now.Sub(next)/sc.Every + 1
		return next.Add(k * sc.Every), true
	}
	c, err := ParseCron(sc.Cron)
	if err != nil {
		return time.Time{}, false
	}
	loc, err := location(sc.TZ)
	if err != nil {
		return time.Time{}, false
	}
	t, err := c.Next(now, loc)
	return t.UTC(), err == nil
}

// FiringTime is the time the schedule that fired f was due when the commands stream stored
// its command at stored: an @at schedule's time; for a cron schedule its latest firing at or
// before stored (nats-server fires it then, or late when the stream had no leader at that
// time); otherwise (@every, or a schedule that did not say its pattern) stored truncated to
// the second nats-server fires on.
func FiringTime(f events.Firing, stored time.Time) time.Time {
	fallback := stored.UTC().Truncate(time.Second)
	sc := events.Schedule{TZ: f.TZ}
	if f.Pattern == "" || sc.SetPattern(f.Pattern) != nil {
		return fallback
	}
	switch {
	case !sc.At.IsZero():
		return sc.At
	case sc.Cron == "":
		return fallback
	}
	c, err := ParseCron(sc.Cron)
	if err != nil {
		return fallback
	}
	loc, err := location(sc.TZ)
	if err != nil {
		return fallback
	}
	at, err := c.Prev(stored, loc)
	if err != nil {
		return fallback
	}
	return at.UTC()
}
