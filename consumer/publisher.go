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
// data as the stored event carries it (its command fields filled, its free text redacted) and
// whether the stream already held the event (a replay). It must be fast, safe for concurrent
// use, and must not modify data.
type PublishHook func(ctx context.Context, data events.Payload, duplicate bool)

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

// Publish builds the event of data about the command o names ([events.Emitter.Event]), stores
// it on the stream that owns its subject and returns nil once the stream acknowledged it (a
// duplicate counts as stored). It returns an error wrapping [events.ErrEncode], and stores
// nothing, when data cannot be encoded; and the JetStream error, wrapped with the subject,
// when no stream took the event (no stream, timeout, ctx done, payload too big).
func (p *Publisher) Publish(ctx context.Context, o events.Origin, data events.Payload) error {
	data, m, err := p.em.Event(o, data)
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
