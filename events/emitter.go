package events

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/internal/redact"
)

// Origin identifies the command an event belongs to.
type Origin struct {
	// ID and Source are the command's CloudEvents id and source; Verb is its verb.
	ID, Source, Verb string
	// TraceParent, when a well-formed W3C traceparent, is carried into every event as the
	// traceparent extension; anything else is dropped.
	TraceParent string
	// Actor is who asked (the command's actor, or the pipeline's default); "" when unknown.
	// EndpointID is the command's endpoint; nil when it has none. Both are carried into every
	// step and result, so observers can tell whose commands touch which cluster.
	Actor      string
	EndpointID *int64
	// Producer is the verified producer key of a signed command (contract §8a); "" when the
	// command is not signed. It is carried into every step and result.
	Producer string
	// Delivery is the commands-stream sequence of the message the event answers (0 unknown):
	// a replayed result is identified by it, so each duplicate of a command gets its replay
	// while a redelivery of one message publishes it once.
	Delivery uint64
}

// OriginOf returns the origin of a decoded command.
func OriginOf(c Command) Origin {
	o := Origin{ID: c.ID, Source: c.Source, Verb: c.Verb, TraceParent: c.TraceParent, Actor: c.Actor, Producer: c.Producer}
	if c.HasEndpointID {
		o.EndpointID = &c.EndpointID
	}
	return o
}

// Emitter builds the events proxbus publishes. Every event is a structured-mode CloudEvent
// (Content-Type application/cloudevents+json) with source Source, a deterministic id, and
// Nats-Msg-Id set to that id, on the event subject of Ref(origin.Source, origin.ID).
//
// Free text (Detail) is passed through [redact.Text] and Output through [redact.JSON] when it
// holds a secret-named key, so a secret that slipped through cannot leave in an event.
type Emitter struct {
	// Subjects names the subjects events are published on.
	Subjects Subjects
	// Source is the CloudEvents source of every event, "urn:proxbus:<instance id>".
	Source string
	// Now is the clock for event times; nil means time.Now.
	Now func() time.Time
}

// NewEmitter returns an emitter for instance ("" means "proxbus").
func NewEmitter(s Subjects, instance string) Emitter {
	if instance == "" {
		instance = "proxbus"
	}
	return Emitter{Subjects: s, Source: "urn:proxbus:" + instance}
}

func (e Emitter) now() time.Time {
	if e.Now != nil {
		return e.Now().UTC()
	}
	return time.Now().UTC()
}

// Payload is the data of an event proxbus publishes about a command: a [Step], a [Result]
// or a [JournalRepaired]. No other type implements it.
type Payload interface{ payload() }

func (Step) payload()            {}
func (Result) payload()          {}
func (JournalRepaired) payload() {}

// Event builds the event of p about the command o names and returns p as the event carries
// it (command fields filled from o, free text redacted), for observers of its publication:
//   - a Step: event "<command id>.step.<seq>" of type proxbus.<verb>.step on Step(ref),
//     timed st.At (now when zero);
//   - a Result: event "<command id>.result" of type proxbus.<verb>.result on Result(ref),
//     timed now, its Output redacted when it names a secret; a replay (Replayed) is event
//     "<command id>.result.replay.<o.Delivery>", so the stream's duplicate window, which
//     drops a republished first-hand result, keeps each duplicate's replay;
//   - a JournalRepaired: event "<command id>.journal.repaired" of type
//     proxbus.journal.repaired on Journal(ref), timed now.
//
// It returns an error wrapping ErrEncode when o has no valid id, a result's status is not an
// HTTP status or its output is not JSON.
func (e Emitter) Event(o Origin, p Payload) (Payload, *nats.Msg, error) {
	switch p := p.(type) {
	case Step:
		return e.step(o, p)
	case Result:
		return e.result(o, p)
	case JournalRepaired:
		return e.journal(o, p)
	}
	return p, nil, fmt.Errorf("%w: %T is not an event payload", ErrEncode, p)
}

func (e Emitter) step(o Origin, st Step) (Payload, *nats.Msg, error) {
	st.CommandID, st.CommandSource, st.Verb = o.ID, o.Source, o.Verb
	st.Actor, st.EndpointID, st.Producer = o.Actor, o.EndpointID, o.Producer
	if st.At.IsZero() {
		st.At = e.now()
	}
	st.Detail = redact.Text(st.Detail)
	id := o.ID + ".step." + strconv.Itoa(st.Seq)
	msg, err := e.build(o, id, TypePrefix+verbOrUnknown(o.Verb)+".step", e.Subjects.Step(Ref(o.Source, o.ID)), st.At, st)
	return st, msg, err
}

func (e Emitter) result(o Origin, r Result) (Payload, *nats.Msg, error) {
	r.CommandID, r.CommandSource, r.Verb = o.ID, o.Source, o.Verb
	r.Actor, r.Producer = o.Actor, o.Producer
	if r.EndpointID == nil {
		r.EndpointID = o.EndpointID
	}
	if r.Status < 100 || r.Status > 599 {
		return r, nil, fmt.Errorf("%w: result status %d is not an HTTP status", ErrEncode, r.Status)
	}
	r.Detail = redact.Text(r.Detail)
	if len(r.Output) > 0 {
		if !json.Valid(r.Output) {
			return r, nil, fmt.Errorf("%w: result output is not JSON", ErrEncode)
		}
		if hasSecretKey(r.Output) {
			r.Output = redact.JSON(r.Output)
		}
	}
	id := o.ID + ".result"
	if r.Replayed {
		id += ".replay." + strconv.FormatUint(o.Delivery, 10)
	}
	msg, err := e.build(o, id, TypePrefix+verbOrUnknown(o.Verb)+".result", e.Subjects.Result(Ref(o.Source, o.ID)), e.now(), r)
	return r, msg, err
}

func (e Emitter) journal(o Origin, j JournalRepaired) (Payload, *nats.Msg, error) {
	j.CommandID = o.ID
	msg, err := e.build(o, o.ID+".journal.repaired", TypePrefix+"journal.repaired", e.Subjects.Journal(Ref(o.Source, o.ID)), e.now(), j)
	return j, msg, err
}

// build serialises one event with the SDK and wraps it in a message.
func (e Emitter) build(o Origin, id, typ, subject string, at time.Time, data any) (*nats.Msg, error) {
	if !validID(o.ID) {
		return nil, fmt.Errorf("%w: origin has no valid command id", ErrEncode)
	}
	payload, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEncode, err)
	}
	ev := event.New(event.CloudEventsVersionV1)
	ev.SetID(id)
	ev.SetSource(e.Source)
	ev.SetType(typ)
	ev.SetTime(at)
	ev.SetDataContentType(ContentTypeJSON)
	ev.DataEncoded = payload
	if validTraceParent(o.TraceParent) {
		ev.SetExtension(AttrTraceParent, o.TraceParent)
	}
	body, err := marshalEvent(ev)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(subject)
	msg.Header.Set(HeaderContentType, ContentTypeCE)
	msg.Header.Set(HeaderMsgID, id)
	msg.Data = body
	return msg, nil
}

func verbOrUnknown(verb string) string {
	if verb == "" {
		return "unknown"
	}
	return verb
}
