package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// Event is one event of a command read back from the events stream: a step, its result, or a
// journal repair (contract §3).
type Event struct {
	// Subject is the event's NATS subject (proxbus.evt.<ref>.step, .result, .journal).
	Subject string
	// Received is the event's CloudEvents attributes and raw data.
	Received events.Received
	// Step is set for a step event.
	Step *Step
	// Result is set for a result event.
	Result *Result
}

// Follow yields the events of the command source+id stored in the events stream, from its
// first, until its result (included) or until the caller stops. An error ends the sequence:
// ctx ended (its error), or the events stream cannot be read. Events that do not parse are
// skipped.
//
//	for ev, err := range c.Follow(ctx, sent.Source, sent.ID) {
//		if err != nil { … }
//		if ev.Step != nil && ev.Step.Progress != nil { … }
//	}
func (c *Client) Follow(ctx context.Context, source, id string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		msgs, err := c.eventMessages(ctx, c.subjects.Follow(events.Ref(source, id)), jetstream.DeliverAllPolicy)
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer msgs.Stop()
		stopped := false
		err = deliverEvents(ctx, msgs, func(subject string, r events.Received) bool {
			ev := Event{Subject: subject, Received: r}
			switch {
			case strings.HasSuffix(subject, ".step"):
				var st Step
				if json.Unmarshal(r.Data, &st) == nil {
					ev.Step = &st
				}
			case strings.HasSuffix(subject, ".result"):
				var res Result
				if json.Unmarshal(r.Data, &res) == nil {
					ev.Result = &res
				}
			}
			if !yield(ev, nil) {
				stopped = true
				return false
			}
			return ev.Result == nil
		})
		if err != nil && !stopped {
			yield(Event{}, err)
		}
	}
}

// Tail delivers the events matching filter (a subject filter under proxbus.evt.>; "" is every
// event), starting with new ones unless fromStart, until fn returns false or ctx ends (then it
// returns ctx's error). Events that do not parse are skipped.
func (c *Client) Tail(ctx context.Context, filter string, fromStart bool, fn func(subject string, ev events.Received) bool) error {
	if filter == "" {
		filter = c.subjects.EventsFilter()
	}
	policy := jetstream.DeliverNewPolicy
	if fromStart {
		policy = jetstream.DeliverAllPolicy
	}
	msgs, err := c.eventMessages(ctx, filter, policy)
	if err != nil {
		return err
	}
	defer msgs.Stop()
	return deliverEvents(ctx, msgs, fn)
}

// followFromNow starts the consumer of the command's events stored after the events stream's
// current last one. A re-sent finished command's replay is among them: replays have an event
// id of their own (contract §3).
func (c *Client) followFromNow(ctx context.Context, ref string) (jetstream.MessagesContext, error) {
	name := c.subjects.EventsStream()
	s, err := c.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: stream %s not found", ErrStreamsMissing, name)
	}
	if err != nil {
		return nil, fmt.Errorf("follow events: %w", err)
	}
	return c.consume(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.subjects.Follow(ref)}, DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq: s.CachedInfo().State.LastSeq + 1,
	})
}

// eventMessages starts an ordered consumer of the events matching filter with policy.
func (c *Client) eventMessages(ctx context.Context, filter string, policy jetstream.DeliverPolicy) (jetstream.MessagesContext, error) {
	return c.consume(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: policy})
}

// consume starts an ordered consumer of the events stream: the server-side consumer exists
// when it returns, so every event stored from cfg's start on is delivered.
func (c *Client) consume(ctx context.Context, cfg jetstream.OrderedConsumerConfig) (jetstream.MessagesContext, error) {
	oc, err := c.js.OrderedConsumer(ctx, c.subjects.EventsStream(), cfg)
	if err != nil {
		return nil, fmt.Errorf("follow events: %w", err)
	}
	msgs, err := oc.Messages()
	if err != nil {
		return nil, fmt.Errorf("follow events: %w", err)
	}
	return msgs, nil
}

// deliverEvents passes each event of msgs to fn until fn returns false or ctx ends (then it
// returns ctx's error); unparsable events are skipped.
func deliverEvents(ctx context.Context, msgs jetstream.MessagesContext, fn func(string, events.Received) bool) error {
	stop := context.AfterFunc(ctx, msgs.Stop)
	defer stop()
	for {
		m, err := msgs.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("follow events: %w", err)
		}
		ev, err := events.ParseEvent(m.Data())
		if err != nil {
			continue
		}
		if !fn(m.Subject(), ev) {
			return nil
		}
	}
}
