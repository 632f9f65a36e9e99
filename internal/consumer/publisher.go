package consumer

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// Publisher builds proxbus's events with an [events.Emitter], stores them on JetStream and
// waits for the stream's acknowledgement, so an event is stored before Publish returns.
// Deduplication is by the Nats-Msg-Id header, the event's deterministic id: republishing the
// same event within the duplicate window stores it once and still succeeds. Safe for
// concurrent use.
type Publisher struct {
	js    jetstream.JetStream
	em    events.Emitter
	hooks []PublishHook
}

// PublishHook is called by a [Publisher] once the stream stored an event, with the event's
// data as the stored event carries it (an [events.Step], [events.Result] or
// [events.JournalRepaired], its command fields filled and its free text redacted) and
// whether the stream already held the event (a replay). It must be fast, safe for concurrent
// use, and must not modify data.
type PublishHook func(ctx context.Context, data any, duplicate bool)

// NewPublisher returns a Publisher storing on js the events em builds. Each hook sees every
// event once the stream has stored it (metrics); nil hooks are skipped.
func NewPublisher(js jetstream.JetStream, em events.Emitter, hooks ...PublishHook) *Publisher {
	p := &Publisher{js: js, em: em}
	for _, h := range hooks {
		if h != nil {
			p.hooks = append(p.hooks, h)
		}
	}
	return p
}

// Publish builds the event of data, an [events.Step], [events.Result] or
// [events.JournalRepaired] of the command o names, stores it on the stream that owns its
// subject and returns nil once the stream acknowledged it (a duplicate counts as stored). It
// returns an error wrapping [events.ErrEncode], and stores nothing, when data is of another
// type or cannot be encoded; and the JetStream error, wrapped with the subject, when no stream
// took the event (no stream, timeout, ctx done, payload too big).
func (p *Publisher) Publish(ctx context.Context, o events.Origin, data any) error {
	var (
		m   *nats.Msg
		err error
	)
	switch d := data.(type) {
	case events.Step:
		data, m, err = p.em.Step(o, d)
	case events.Result:
		data, m, err = p.em.Result(o, d)
	case events.JournalRepaired:
		data, m, err = p.em.Journal(o, d)
	default:
		err = fmt.Errorf("%w: %T is not the data of a proxbus event", events.ErrEncode, data)
	}
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	ack, err := p.store(ctx, m)
	if err != nil {
		return err
	}
	for _, h := range p.hooks {
		h(ctx, data, ack.Duplicate)
	}
	return nil
}

// store stores m as it is (a dead-letter copy, an event) and returns the stream's
// acknowledgement; no hook sees it.
func (p *Publisher) store(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	ack, err := p.js.PublishMsg(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", m.Subject, err)
	}
	return ack, nil
}
