package handlers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/schedule"
	"github.com/proxbus/proxbus/seal"
	"github.com/proxbus/proxbus/store"
)

// Reasons of the schedule verbs and of scheduled commands (contract §11).
const (
	// ReasonScheduleNotFound (404): schedule.remove of a schedule that does not exist.
	ReasonScheduleNotFound = "schedule_not_found"
	// ReasonSchedulesUnavailable (503): this process was started without schedules.
	ReasonSchedulesUnavailable = "schedules_unavailable"
	// ReasonScheduleVerbNotAllowed (422): a schedule may not fire this verb.
	ReasonScheduleVerbNotAllowed = "schedule_verb_not_allowed"
	// ReasonScheduleNotProxbus (403): a command fired by a message schedule that
	// schedule.add did not make (or that was removed or replaced since).
	ReasonScheduleNotProxbus = "schedule_not_made_by_proxbus"
)

// Schedules keeps the message schedules of contract §11 (consumer.Schedules on JetStream).
type Schedules interface {
	// Add stores sc, replacing the schedule of its name.
	Add(ctx context.Context, sc events.Schedule) error
	// Remove deletes the schedule named name and reports whether there was one.
	Remove(ctx context.Context, name string) (bool, error)
}

// ScheduleInput is the data of schedule.add: {name, cron|every|at, tz?, verb, endpoint_id,
// data, window?}; every and window are Go durations ("6h", "15m"), at is RFC 3339.
type ScheduleInput struct {
	Name       string          `json:"name"`
	Cron       string          `json:"cron,omitempty"`
	TZ         string          `json:"tz,omitempty"`
	Every      string          `json:"every,omitempty"`
	At         string          `json:"at,omitempty"`
	Verb       string          `json:"verb"`
	EndpointID int64           `json:"endpoint_id"`
	Data       json.RawMessage `json:"data,omitempty"`
	Window     string          `json:"window,omitempty"`
}

// ScheduleOutput is the output of schedule.add and schedule.remove.
type ScheduleOutput struct {
	Name string `json:"name"`
	// Next is the schedule's first firing (schedule.add).
	Next *time.Time `json:"next,omitempty"`
	// Removed says whether schedule.remove found the schedule.
	Removed bool `json:"removed,omitempty"`
}

// ScheduleRemoveInput is the data of schedule.remove: {name}.
type ScheduleRemoveInput struct {
	Name string `json:"name"`
}

// ScheduleAdd makes or replaces a scheduled command (contract §11). The schedule is checked
// as the command it fires would be at the time it is made: its verb exists and is not a
// command.* or schedule.* verb, its endpoint passes the gate (a write verb needs
// allow_writes), its data is valid for the verb and holds no secret field (422
// secret_not_sealed), its pattern is one nats-server accepts. Then it is recorded in the store
// (what it may fire, checked at each firing) and stored as a message schedule.
func ScheduleAdd() Verb {
	return Spec[ScheduleInput]{
		Name:     "schedule.add",
		Access:   Control,
		Decode:   decodeSchedule,
		Resource: func(in ScheduleInput) string { return in.Name },
		Dispatch: func(ctx context.Context, x *Exec, in ScheduleInput) (Outcome, error) { return x.r.addSchedule(ctx, in) },
	}
}

// ScheduleRemove removes a schedule: it fires no more, and a firing of it still queued is
// refused (403 schedule_not_made_by_proxbus). A schedule that does not exist is 404
// schedule_not_found.
func ScheduleRemove() Verb {
	return Spec[ScheduleRemoveInput]{
		Name:   "schedule.remove",
		Access: Control,
		Decode: func(f *Fields) ScheduleRemoveInput {
			return ScheduleRemoveInput{Name: f.String("name", true, events.ValidScheduleName)}
		},
		Resource: func(in ScheduleRemoveInput) string { return in.Name },
		Dispatch: func(ctx context.Context, x *Exec, in ScheduleRemoveInput) (Outcome, error) {
			return x.r.removeSchedule(ctx, in.Name)
		},
	}
}

func decodeSchedule(f *Fields) ScheduleInput {
	in := ScheduleInput{
		Name:       f.String("name", true, events.ValidScheduleName),
		Cron:       f.String("cron", false, nil),
		TZ:         f.String("tz", false, nil),
		Every:      f.String("every", false, validDuration),
		At:         f.String("at", false, func(s string) bool { _, err := time.Parse(time.RFC3339, s); return err == nil }),
		Verb:       f.String("verb", true, validCommandToken),
		EndpointID: f.Int("endpoint_id", true, 0, 1, math.MaxInt64),
		Window:     f.String("window", false, validDuration),
	}
	if raw := f.Raw("data"); raw != nil {
		if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
			f.Fail("data")
		} else {
			var buf bytes.Buffer
			_ = json.Compact(&buf, t)
			in.Data = buf.Bytes()
		}
	}
	return in
}

func validDuration(s string) bool { _, err := time.ParseDuration(s); return err == nil }

// schedule is in as an events.Schedule made by actor (its fields were validated by decodeSchedule).
func (in ScheduleInput) schedule(actor string) events.Schedule {
	sc := events.Schedule{Name: in.Name, Cron: in.Cron, TZ: in.TZ, Verb: in.Verb, EndpointID: in.EndpointID, Data: in.Data, Actor: actor}
	sc.Every, _ = time.ParseDuration(in.Every)
	sc.Window, _ = time.ParseDuration(in.Window)
	if in.At != "" {
		at, _ := time.Parse(time.RFC3339, in.At)
		sc.At = at.UTC()
	}
	return sc
}

func (r *run) addSchedule(ctx context.Context, in ScheduleInput) (Outcome, error) {
	schedules := r.p.cfg.Schedules
	if schedules == nil {
		return Outcome{Status: 503, Result: ResultFailed, Reason: ReasonSchedulesUnavailable,
			Detail: "this proxbus process keeps no schedules (it was started without JetStream message schedules)"}, nil
	}
	now := r.p.cfg.Now()
	sc := in.schedule(r.actor())
	var fe *schedule.FieldError
	if err := schedule.Validate(sc, now); errors.As(err, &fe) {
		return *invalidBody([]string{fe.Field}, fe.Problem), nil
	} else if err != nil {
		return Outcome{}, err
	}
	target, ok := r.p.cfg.Registry.Lookup(in.Verb)
	switch {
	case !ok:
		return *invalidBody([]string{"verb"}, "unknown verb "+in.Verb), nil
	case target.VerbAccess() == Control:
		return Outcome{Status: 422, Result: ResultRefused, Reason: ReasonScheduleVerbNotAllowed, Fields: []string{"verb"},
			Detail: in.Verb + " acts on other commands or schedules: a schedule never fires a command.* or schedule.* verb"}, nil
	}
	if plain := seal.PlainSecrets(in.Data); len(plain) > 0 {
		for i, p := range plain {
			plain[i] = "data." + p
		}
		return Outcome{Status: 422, Result: ResultRefused, Reason: ReasonSecretNotSealed, Fields: plain,
			Detail: "a schedule's data is stored in the commands stream for as long as the schedule lives: seal its secret fields " +
				"to proxbus's key (proxbus schedule add, proxbus send and the Go client do it; docs/producers.md)"}, nil
	}
	if _, invalid := target.prepareSealed(in.Data, r.p.sealing()); invalid != nil {
		out := *invalid
		for i, f := range out.Fields {
			out.Fields[i] = "data." + f
		}
		if len(out.Fields) == 0 {
			out.Fields = []string{"data"}
		}
		out.Detail = strings.TrimSpace("the data is not valid for " + in.Verb + ". " + out.Detail)
		return out, nil
	}
	gate := &run{p: r.p, verb: target, log: r.log, cmd: events.Command{Verb: in.Verb, EndpointID: in.EndpointID, HasEndpointID: true}}
	if out, wait := gate.gate(ctx); out != nil {
		if wait {
			return Outcome{}, errors.Join(errTransient, errors.New(out.Detail))
		}
		refusal := *out
		refusal.Fields = []string{"endpoint_id"}
		refusal.Detail = strings.TrimSpace("the schedule's endpoint refuses " + in.Verb + ": " + refusal.Detail)
		return refusal, nil
	}
	rec := store.Schedule{Name: in.Name, Verb: in.Verb, EndpointID: in.EndpointID, DataSHA256: dataSHA256(in.Data), Actor: sc.Actor,
		MadeAt: now, Pattern: sc.Pattern(), TZ: sc.TZ, Window: sc.EffectiveWindow(), Data: in.Data}
	if err := r.p.cfg.Store.PutSchedule(ctx, rec); err != nil {
		return Outcome{}, errors.Join(errTransient, err)
	}
	if err := schedules.Add(ctx, sc); err != nil {
		return Outcome{}, errors.Join(errTransient, err)
	}
	out := ScheduleOutput{Name: in.Name}
	if next, ok := schedule.NextFiring(sc, now, now); ok {
		out.Next = &next
	}
	return Outcome{Status: 201, Result: ResultCreated, Output: out,
		Detail: fmt.Sprintf("schedule %s fires %s on endpoint %d (%s)", in.Name, in.Verb, in.EndpointID, sc.Pattern())}, nil
}

func (r *run) removeSchedule(ctx context.Context, name string) (Outcome, error) {
	schedules := r.p.cfg.Schedules
	if schedules == nil {
		return Outcome{Status: 503, Result: ResultFailed, Reason: ReasonSchedulesUnavailable,
			Detail: "this proxbus process keeps no schedules"}, nil
	}
	found, err := schedules.Remove(ctx, name)
	if err != nil {
		return Outcome{}, errors.Join(errTransient, err)
	}
	if err := r.p.cfg.Store.DropSchedule(ctx, name); err != nil {
		return Outcome{}, errors.Join(errTransient, err)
	}
	if !found {
		return Outcome{Status: 404, Result: ResultRefused, Reason: ReasonScheduleNotFound, Fields: []string{"name"},
			Detail: "no schedule " + name + " (proxbus schedule list shows them)"}, nil
	}
	return Outcome{Status: 200, Result: ResultOK, Output: ScheduleOutput{Name: name, Removed: true}}, nil
}

// scheduled checks a command a schedule fired (contract §11) against what schedule.add
// recorded of that schedule: the same verb, endpoint and data, else it is answered 403
// schedule_not_made_by_proxbus and does nothing. It records the firing as the schedule's last.
// Otherwise it goes on with next.
func (r *run) scheduled(ctx context.Context, next stage) move {
	f := r.cmd.Firing
	rec, ok, err := r.p.cfg.Store.LookupSchedule(ctx, f.Name)
	if err != nil {
		r.log.Warn("schedule lookup failed; the command waits", "schedule", f.Name, "err", err)
		return r.redeliver(time.Second)
	}
	if !ok || rec.Verb != r.cmd.Verb || rec.EndpointID != r.cmd.EndpointID || rec.DataSHA256 != dataSHA256(r.cmd.Data) {
		r.log.Warn("command fired by a schedule proxbus did not make; refused", "schedule", f.Name)
		return r.answer(ctx, Outcome{Status: 403, Result: ResultRefused, Reason: ReasonScheduleNotProxbus,
			Detail: "fired by message schedule " + f.Name + ", which schedule.add did not make as it is (or which was removed or replaced since)"}, noJournal)
	}
	if err := r.p.cfg.Store.RecordFiring(ctx, f.Name, r.cmd.ID, f.At, f.Next); err != nil {
		r.log.Warn("schedule: firing not recorded", "schedule", f.Name, "err", err)
	}
	return next(ctx)
}

// dataSHA256 is the hex SHA-256 of a schedule's (compact) data.
func dataSHA256(data []byte) string {
	sum := sha256.Sum256(bytes.TrimSpace(data))
	return hex.EncodeToString(sum[:])
}
