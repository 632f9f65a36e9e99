package consumer

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Publisher publishes messages to JetStream and waits for the stream's acknowledgement, so an
// event is stored before Publish returns. Deduplication is by the message's Nats-Msg-Id
// header: republishing the same event within the duplicate window stores it once and still
// succeeds. Safe for concurrent use.
type Publisher struct {
	js    jetstream.JetStream
	hooks []PublishHook
}

// NewPublisher returns a Publisher on js. Each hook sees every message once the stream has
// stored it (metrics); nil hooks are skipped.
func NewPublisher(js jetstream.JetStream, hooks ...PublishHook) *Publisher {
	p := &Publisher{js: js}
	for _, h := range hooks {
		if h != nil {
			p.hooks = append(p.hooks, h)
		}
	}
	return p
}

// Publish stores m on the stream that owns its subject and returns nil once the stream
// acknowledged it (a duplicate counts as stored). It returns the JetStream error, wrapped
// with the subject, when no stream took it (no stream, timeout, ctx done, payload too big).
func (p *Publisher) Publish(ctx context.Context, m *nats.Msg) error {
	_, err := p.publish(ctx, m, nil)
	return err
}

// PublishEvent is [Publisher.Publish] for a message built from ev (see [Publication.Event]):
// the hooks receive ev with the message.
func (p *Publisher) PublishEvent(ctx context.Context, m *nats.Msg, ev any) error {
	_, err := p.publish(ctx, m, ev)
	return err
}

// PublishAck is [Publisher.Publish] returning the stream's acknowledgement (stream name,
// sequence, and whether the message was a duplicate).
func (p *Publisher) PublishAck(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	return p.publish(ctx, m, nil)
}

func (p *Publisher) publish(ctx context.Context, m *nats.Msg, ev any) (*jetstream.PubAck, error) {
	if m == nil {
		return nil, fmt.Errorf("publish: nil message")
	}
	ack, err := p.js.PublishMsg(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", m.Subject, err)
	}
	for _, h := range p.hooks {
		h.Published(ctx, Publication{Msg: m, Event: ev, Duplicate: ack.Duplicate})
	}
	return ack, nil
}
