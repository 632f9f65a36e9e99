package events

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultScheduleWindow is how long after its firing time a scheduled command may still start
// when its schedule names no window (contract §11).
const DefaultScheduleWindow = 15 * time.Minute

// FiringTimeLayout is the layout of the firing time in a fired command's id,
// "<name>.20060102T150405Z" (contract §11).
const FiringTimeLayout = "20060102T150405Z"

// Headers of a schedule message besides the CloudEvents ones. The NATS ones are read by
// nats-server (server/stream.go, server/scheduler.go; ADR-51) and stripped from the messages it
// fires; HeaderScheduleWindow is proxbus's own and travels into every fired command.
const (
	HeaderSchedule         = "Nats-Schedule"
	HeaderScheduleTarget   = "Nats-Schedule-Target"
	HeaderScheduleTimeZone = "Nats-Schedule-Time-Zone"
	HeaderRollup           = "Nats-Rollup"
	HeaderScheduleWindow   = "Proxbus-Schedule-Window"
	// HeaderSchedulePattern and HeaderScheduleZone repeat the schedule's pattern and time
	// zone for the commands it fires (nats-server strips its own Nats-Schedule* headers), so
	// that a firing nats-server makes late keeps the firing time it was due at.
	HeaderSchedulePattern = "Proxbus-Schedule-Pattern"
	HeaderScheduleZone    = "Proxbus-Schedule-Time-Zone"
)

// ErrScheduleMessage matches the errors of [DecodeSchedule]: the message is not a schedule
// proxbus wrote.
var ErrScheduleMessage = errors.New("events: not a proxbus schedule")

var scheduleNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidScheduleName reports whether name may name a schedule: 1–64 ASCII letters, digits, '_'
// and '-', so it is one subject token and its firings' ids are "<name>.<time>".
func ValidScheduleName(name string) bool { return scheduleNameRE.MatchString(name) }

// ScheduleFilter is the subject filter of every schedule, "proxbus.schedule.>".
func (s Subjects) ScheduleFilter() string { return s.prefix() + ".schedule.>" }

// Schedule is a scheduled command (contract §11): a NATS message schedule on
// Subjects.Schedule(Name) whose message is the command it fires at each firing. Exactly one
// of Cron, Every and At is set; TZ goes with Cron only.
type Schedule struct {
	// Name names the schedule ([ValidScheduleName]).
	Name string
	// Cron is a 6-field cron expression (seconds first) or a predefined one (@daily, …),
	// evaluated in TZ (UTC when empty).
	Cron, TZ string
	// Every fires repeatedly at this interval (at least a second).
	Every time.Duration
	// At fires once, at this time (whole seconds).
	At time.Time
	// Verb, EndpointID and Data are the fired command's; Actor is who made the schedule,
	// the fired commands' actor.
	Verb       string
	EndpointID int64
	Data       []byte
	Actor      string
	// Window is how long after its firing a fired command may still start; 0 means
	// [DefaultScheduleWindow].
	Window time.Duration
}

// Pattern is the schedule's Nats-Schedule header value: "@at <RFC 3339>", "@every <d>" or the
// cron expression.
func (sc Schedule) Pattern() string {
	switch {
	case !sc.At.IsZero():
		return "@at " + sc.At.UTC().Format(time.RFC3339)
	case sc.Every > 0:
		return "@every " + sc.Every.String()
	default:
		return sc.Cron
	}
}

// SetPattern is the inverse of [Schedule.Pattern]: it sets Cron, Every or At from a
// Nats-Schedule value (and clears the others). It does not check a cron expression.
func (sc *Schedule) SetPattern(pattern string) error {
	sc.Cron, sc.Every, sc.At = "", 0, time.Time{}
	switch {
	case strings.HasPrefix(pattern, "@at "):
		t, err := time.Parse(time.RFC3339, pattern[len("@at "):])
		if err != nil {
			return err
		}
		sc.At = t.UTC()
	case strings.HasPrefix(pattern, "@every "):
		d, err := time.ParseDuration(pattern[len("@every "):])
		if err != nil {
			return err
		}
		sc.Every = d
	case pattern == "":
		return errors.New("no Nats-Schedule")
	default:
		sc.Cron = pattern
	}
	return nil
}

// EffectiveWindow is Window, or [DefaultScheduleWindow] when it is 0.
func (sc Schedule) EffectiveWindow() time.Duration { return sc.window() }

// window is Window or its default.
func (sc Schedule) window() time.Duration {
	if sc.Window > 0 {
		return sc.Window
	}
	return DefaultScheduleWindow
}

// EncodeSchedule produces the schedule message of sc on s.Schedule(sc.Name): the command it
// fires in binary mode (id = the name, source = [ScheduleSource], no Nats-Msg-Id), with
// Nats-Schedule, Nats-Schedule-Target (the verb's command subject), Nats-Schedule-Time-Zone
// (with TZ), Proxbus-Schedule-Window, and Nats-Rollup: sub, so it replaces the schedule of
// the same name. It does not check the pattern; it returns an error wrapping ErrEncode for an
// invalid name or a command that would not decode.
func EncodeSchedule(s Subjects, sc Schedule) (*nats.Msg, error) {
	if !ValidScheduleName(sc.Name) {
		return nil, fmt.Errorf("%w: schedule name %q", ErrEncode, sc.Name)
	}
	c := Command{ID: sc.Name, Source: ScheduleSource(sc.Name), Verb: sc.Verb, Actor: sc.Actor, Data: sc.Data,
		EndpointID: sc.EndpointID, HasEndpointID: sc.EndpointID > 0}
	m, err := EncodeBinary(s, c)
	if err != nil {
		return nil, err
	}
	m.Subject = s.Schedule(sc.Name)
	m.Header.Del(HeaderMsgID)
	m.Header.Set(HeaderSchedule, sc.Pattern())
	m.Header.Set(HeaderScheduleTarget, s.Command(sc.Verb))
	if sc.TZ != "" {
		m.Header.Set(HeaderScheduleTimeZone, sc.TZ)
	}
	m.Header.Set(HeaderScheduleWindow, sc.window().String())
	m.Header.Set(HeaderSchedulePattern, sc.Pattern())
	if sc.TZ != "" {
		m.Header.Set(HeaderScheduleZone, sc.TZ)
	}
	m.Header.Set(HeaderRollup, "sub")
	return m, nil
}

// DecodeSchedule is the inverse of [EncodeSchedule]: the schedule a message stored on
// subject holds. It returns an error wrapping [ErrScheduleMessage] when the message is not one.
func DecodeSchedule(s Subjects, subject string, h nats.Header, body []byte) (Schedule, error) {
	name, ok := strings.CutPrefix(subject, s.Schedule(""))
	if !ok || !ValidScheduleName(name) {
		return Schedule{}, fmt.Errorf("%w: subject %s", ErrScheduleMessage, subject)
	}
	verb, ok := s.VerbOf(h.Get(HeaderScheduleTarget))
	if !ok {
		return Schedule{}, fmt.Errorf("%w: %s has no command target", ErrScheduleMessage, subject)
	}
	sc := Schedule{Name: name, TZ: h.Get(HeaderScheduleTimeZone)}
	if err := sc.SetPattern(h.Get(HeaderSchedule)); err != nil {
		return Schedule{}, fmt.Errorf("%w: %s: %w", ErrScheduleMessage, subject, err)
	}
	sc.Window, _ = time.ParseDuration(h.Get(HeaderScheduleWindow))
	hc := nats.Header{}
	for k, vs := range h {
		if !strings.HasPrefix(strings.ToLower(k), strings.ToLower(headerSchedulePrefix)) {
			hc[k] = vs
		}
	}
	c, err := Decode(s.Command(verb), hc, body, s)
	if err != nil {
		return Schedule{}, fmt.Errorf("%w: %s: %w", ErrScheduleMessage, subject, err)
	}
	sc.Verb, sc.EndpointID, sc.Data, sc.Actor = c.Verb, c.EndpointID, c.Data, c.Actor
	sc.Window = max(sc.Window, 0)
	return sc, nil
}

// Firing says which schedule fired a command: set by [Decode] on a command nats-server fired
// from a proxbus schedule; [Command.Fired] completes it.
type Firing struct {
	// Name is the schedule's name; Pattern and TZ its Nats-Schedule and time zone ("" when
	// the schedule did not say).
	Name, Pattern, TZ string
	// At is the firing time, whole seconds in UTC (zero until [Command.Fired]).
	At time.Time
	// Next is the schedule's next firing (Nats-Schedule-Next), zero when it fires no more.
	Next time.Time
	// Window is the schedule's window.
	Window time.Duration
}

// FiringID is the id of the command schedule name fires at at, "<name>.<at as
// 20060102T150405Z>" (contract §11).
func FiringID(name string, at time.Time) string {
	return name + "." + at.UTC().Format(FiringTimeLayout)
}

// Fired completes a command fired by a schedule (c.Firing set) with its firing time at (the
// time the schedule was due, internal/schedule.FiringTime; truncated to the second): the id
// is [FiringID], time is the firing time and expires the firing time plus the window. Every
// delivery of one firing, and a second copy nats-server might make of it, gets the same id, so
// the command identity (contract §5) runs it once; a firing made late (no stream leader at its
// time) keeps its due time, so it is answered 410 once its window has passed. Other commands
// are returned unchanged.
func (c Command) Fired(at time.Time) Command {
	if c.Firing == nil {
		return c
	}
	f := *c.Firing
	f.At = at.UTC().Truncate(time.Second)
	c.Firing = &f
	c.ID = FiringID(f.Name, f.At)
	c.Time = f.At
	c.Expires = f.At.Add(f.Window)
	return c
}

// firing reads the Firing of a command fired by schedule name from its headers.
func (hs *headerScan) firing(name string) *Firing {
	f := &Firing{Name: name, Pattern: hs.pattern, TZ: hs.zone, Window: DefaultScheduleWindow}
	if d, err := time.ParseDuration(hs.window); err == nil && d > 0 {
		f.Window = d
	}
	if t, err := time.Parse(time.RFC3339Nano, hs.next); err == nil {
		f.Next = t.UTC()
	}
	return f
}
